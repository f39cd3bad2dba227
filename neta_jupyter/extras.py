"""The parts of neta_jupyter a plain install may lack, and what to install for each.

A plain ``pip install neta_jupyter`` brings everything but Redis. The collaboration stack is a
dependency too, yet someone may uninstall it or disable its server extension; so both are
imported only where they are used, and a missing one is reported with the command that brings it
(by the run API, the notebook tools, ``%neta`` and ``neta-jupyter doctor``), never by an
``ImportError`` that takes the server extension down.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["PARTS", "OptionalPart", "missing_module"]


@dataclass(frozen=True, slots=True)
class OptionalPart:
    """One optional part: the modules it needs and what it means to have it or not."""

    name: str
    """How the docs and ``doctor`` call it."""
    modules: tuple[str, ...]
    """Modules that must import for the part to work."""
    install: str
    """The command that installs it."""
    gives: str
    """What a user gets with it."""
    without: str
    """What a user gets without it."""

    def needed_for(self, feature: str, module: str) -> str:
        """The message for ``feature`` refused because ``module`` does not import."""
        return f"{feature} needs the {module} package, which is not installed: {self.install}"


REDIS = OptionalPart(
    name="redis",
    modules=("redis",),
    install="pip install 'neta_jupyter[redis]'",
    gives="runs stored in Redis (c.NetaApp.store_url = 'redis://...'), shared by several servers",
    without="runs are stored in the SQLite file (the default); a Redis store_url is refused",
)
COLLABORATION = OptionalPart(
    name="collaboration",
    modules=("jupyter_server_ydoc", "pycrdt"),
    install="pip install jupyter-collaboration",
    gives="notebook tools edit the notebook's live shared document: changes appear at once in "
    "every open view and merge with what the user types",
    without="notebook tools read and save the .ipynb file; a view that has the notebook open "
    "shows their changes only after it reloads the file",
)
PARTS = (REDIS, COLLABORATION)


def missing_module(part: OptionalPart) -> str | None:
    """The first of the part's modules that does not import (None: the part is present)."""
    for module in part.modules:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None
