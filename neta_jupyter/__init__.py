"""neta_jupyter: an AI agent for Jupyter notebooks with a live, resumable event stream."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .server.app import NetaApp

    return [{"module": "neta_jupyter.server.app", "app": NetaApp}]


__all__ = ["__version__"]
