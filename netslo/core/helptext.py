"""Option help for argparse (the offline CLIs and the pytest plugin's options)."""

from __future__ import annotations


def help_text(text: str) -> str:
    """argparse %-formats help strings: a literal % (e.g. a default of '1%') must be written %%."""
    return text.replace("%", "%%")
