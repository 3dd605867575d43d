"""Root conftest. When netslo is pip-installed its ``pytest11`` entry point loads the plugin early
(so ``--slo-file /abs/path`` parses before pytest picks its rootdir); otherwise load it from the tree."""

from importlib.metadata import entry_points

_installed = any(ep.name == "netslo" for ep in entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["netslo.plugin.hooks"]
