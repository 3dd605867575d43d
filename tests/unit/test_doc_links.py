"""Every relative link in README.md and docs/ resolves: the file exists, and a ``#fragment`` names a
heading of it as GitHub renders it (its slug: lower case, punctuation dropped, spaces to hyphens,
a repeated heading numbered -1, -2...)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def _unfenced(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def _prose(text: str) -> str:
    """``text`` without code blocks and inline code (links there are not links)."""
    return "\n".join(re.sub(r"`[^`]*`", "", line) for line in _unfenced(text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)        # a link in a heading: its text
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _unfenced(path.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def links(path: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(path.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]      # http:, https:, mailto: ...


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    broken = []
    for target in links(doc):
        file, _, fragment = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{fragment} in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_check_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n## Two words, here!\n[ok](#two-words-here) [bad](#nope) [gone](b.md)\n"
                                   "```\n[in code](c.md)\n```\n")
    assert links(tmp_path / "a.md") == ["#two-words-here", "#nope", "b.md"]
    assert anchors(tmp_path / "a.md") == {"top", "two-words-here"}
    assert slug("Reports: Allure, regression against a baseline") == "reports-allure-regression-against-a-baseline"
