"""The README stays a front page: short, with links that lead somewhere.

The documentation site's own links are checked by its build (``scripts/docs.sh`` runs Sphinx with
``-W -n``); the README is read on GitHub, outside that build, so its links are checked here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z]+:", target) and not target.startswith("#")
    ]


def test_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"the README has {len(lines)} lines: move reference text to docs/"


def test_readme_links_lead_to_files_in_the_repository() -> None:
    targets = relative_links(README.read_text())
    assert any(t.startswith("docs/") for t in targets), "the README links into the docs"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, missing


def test_readme_picture_is_the_one_the_browser_test_takes() -> None:
    text = README.read_text()
    assert "](docs/_static/widget-mid-run.png)" in text
    picture = ROOT / "docs" / "_static" / "widget-mid-run.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    taker = (ROOT / "tests" / "browser" / "test_docs_picture.py").read_text()
    assert '"widget-mid-run.png"' in taker
