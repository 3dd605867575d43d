"""``--netslo-mesh``: every node pair of the session's cluster (``netslo.studies.mesh``), in rounds of
disjoint pairs, judged per pair (Holm over the pairs), per zone and pool pair and over pairs by the
SLO file's objectives; one test (``netslo/gate/test_mesh.py``), deselected without the option.
mesh.json, mesh.md and mesh-heatmap.png go to the results directory, every pair also into
results.json (``mesh``), the verdict and matrix into summary.md, and the heatmap and matrix into
Allure. The options beside it choose the
nodes (``--netslo-mesh-select``, ``-limit``), the design (``-partners``), the requests per pair
(``-budget`` or ``-requests``) and the pool label (``-pool-label``); a bad value is one line."""

from __future__ import annotations

import pytest

from netslo.core.errors import SpecError
from netslo.core.units import duration, whole
from netslo.gate.plugin.deselection import deselect
from netslo.gate.plugin.hooks import GROUP, OPTIONS, RESULTS
from netslo.gate.plugin.report import _allure_on
from netslo.providers import POOL_LABEL
from netslo.studies.mesh import measure

SPEC = pytest.StashKey[measure.MeshSpec]()
MESH_TEST = "test_mesh_meets_objectives"


def pytest_addoption(parser):
    g = parser.getgroup(*GROUP)
    g.addoption("--netslo-mesh", action="store_true", default=False,
                help="measure every node pair of the cluster (netslo/gate/test_mesh.py); on netns size it with "
                     "--netslo-nodes and --netslo-zones")
    g.addoption("--netslo-mesh-select", default=None, metavar="LABEL=GLOB,...", help="mesh: only nodes whose labels match")
    g.addoption("--netslo-mesh-limit", default=None, metavar="N", help="mesh: at most N of the selected nodes (by name)")
    g.addoption("--netslo-mesh-partners", default=None, metavar="K",
                help="mesh: a sampled design of K partners per node, every zone and pool pair covered (default every pair)")
    g.addoption("--netslo-mesh-budget", default=None, metavar="DURATION",
                help="mesh: time for the probing (e.g. 10m); sets the requests per pair or names the least it needs")
    g.addoption("--netslo-mesh-requests", default=None, metavar="N", help=f"mesh: requests per pair (default {measure.REQUESTS})")
    g.addoption("--netslo-mesh-interval", default=None, metavar="DURATION",
                help="mesh: send period per pair (default: the SLO file's interval)")
    g.addoption("--netslo-mesh-pool-label", default=POOL_LABEL, metavar="LABEL",
                help=f"mesh: the node label naming a node's pool (default {POOL_LABEL})")


def _whole(config, option: str, lo: int) -> int | None:
    text = config.getoption(option)
    return None if text is None else whole(text, option, lo)


def spec_of(config) -> measure.MeshSpec:
    """The mesh the options ask for; SpecError (one line) for a bad value."""
    budget = config.getoption("--netslo-mesh-budget")
    if budget is not None and config.getoption("--netslo-mesh-requests") is not None:
        raise SpecError("--netslo-mesh-budget", budget, "either it or --netslo-mesh-requests, not both")
    return measure.MeshSpec(
        select=measure.parse_select(config.getoption("--netslo-mesh-select")),
        limit=_whole(config, "--netslo-mesh-limit", 2), partners=_whole(config, "--netslo-mesh-partners", 1),
        budget_s=None if budget is None else duration(budget, "--netslo-mesh-budget"),
        requests=_whole(config, "--netslo-mesh-requests", 1), pool_label=config.getoption("--netslo-mesh-pool-label"),
        interval_s=measure.parse_interval(config.getoption("--netslo-mesh-interval")))


def pytest_collection_modifyitems(session, config, items):
    """Without --netslo-mesh the mesh test is deselected; with it, its options are checked here (one
    line, before anything is brought up)."""
    ours = [i for i in items if getattr(i, "originalname", i.name) == MESH_TEST]
    if not config.getoption("--netslo-mesh") or OPTIONS not in config.stash:
        deselect(config, items, ours, "mesh test deselected (run it with --netslo-mesh)")
        return
    try:
        config.stash[SPEC] = spec_of(config)
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None


@pytest.fixture(scope="session")
def netslo_mesh(pytestconfig, netslo_cluster):
    """The mesh of the session's cluster (``measure.MeshResult``), measured once; its reports are
    written to the results directory (and Allure) before the test reads it."""
    from netslo.report import mesh as mesh_report  # matplotlib: only in a session that measures a mesh
    opts = pytestconfig.stash[OPTIONS]
    result = measure.run(netslo_cluster, pytestconfig.stash[SPEC], opts.slo)
    paths = mesh_report.write(result, opts.results_dir)
    text = paths[1].read_text()
    writer = pytestconfig.stash.get(RESULTS, None)
    if writer is not None:
        writer.sections["mesh"] = mesh_report.to_json(result)
        writer.summary_parts.append(text)   # summary.md: the verdict and the matrix
    if _allure_on(pytestconfig):
        import allure
        allure.attach.file(str(paths[2]), name="mesh heatmap", attachment_type=allure.attachment_type.PNG)
        allure.attach(text, name="mesh.md", attachment_type=allure.attachment_type.TEXT)
    return result
