"""Sphinx extension: write the generated pages before Sphinx reads the sources.

The configuration reference (traitlets), the run API reference (OpenAPI), the event catalogue
(JSON Schema) and the executed demo notebooks are produced from the package at every build, into
files git ignores (``docs/.gitignore``), so they always describe the code being documented.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen_config import config_reference
from gen_events import events_reference
from gen_openapi import api_reference
from run_notebooks import execute_all
from sphinx.application import Sphinx
from sphinx.util import logging

LOG = logging.getLogger(__name__)


def write_if_changed(path: Path, text: str) -> None:
    """Leave an unchanged page alone, so Sphinx does not rebuild it."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(app: Sphinx) -> None:
    """Write every generated page into the source tree."""
    source = Path(app.srcdir)
    reference = source / "reference"
    reference.mkdir(exist_ok=True)
    write_if_changed(reference / "config.md", config_reference())
    write_if_changed(reference / "api.md", api_reference(reference))
    write_if_changed(reference / "events.md", events_reference())
    execute_all(source.parent / "notebooks", source / "notebooks", LOG)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register with Sphinx."""
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
