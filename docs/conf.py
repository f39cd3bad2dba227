"""Sphinx configuration of neta_jupyter's documentation.

Pages are MyST markdown; the demo notebooks are rendered by myst-nb. The configuration reference,
the run API reference, the event catalogue and the executed notebooks are generated at build time
by ``_ext/neta_docs.py`` into ``_generated/`` (not committed).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

project = "neta_jupyter"
author = "neta_jupyter contributors"
copyright = "neta_jupyter contributors"

extensions = ["myst_nb", "neta_docs"]

# A reference that points nowhere is an error, not a silent dead link (the build runs with -W -n).
nitpicky = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
suppress_warnings = ["myst.header"]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "_ext"]

# The notebooks are executed once by neta_docs (with the demo model, offline, approvals
# automatic; the workspace notebook on a Jupyter server, its approvals given through the run API)
# into notebooks/; myst-nb renders what they saved.
nb_execution_mode = "off"
# The widget's transcript (markdown) stands for the widget: the page then needs no JavaScript
# from a CDN, and shows the run as a saved notebook does on GitHub.
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
nb_mime_priority_overrides = [
    ("html", "text/markdown", 5),
    ("html", "application/vnd.jupyter.widget-view+json", None),
]

html_theme = "pydata_sphinx_theme"
html_title = "neta_jupyter"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 4,
}
