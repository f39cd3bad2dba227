"""What every notebook tool's call starts from: the run's notebook; a cell as the model names it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .registry import RunNotebook, ToolContext
from .values import ToolError

CellId = Annotated[
    str, Field(description="the cell's id, as the notebook map or read_notebook shows it")
]


def notebook_of(ctx: ToolContext) -> RunNotebook:
    """The run's notebook, or a clear failure."""
    if ctx.notebook is None:
        raise ToolError("this run has no notebook: notebook tools work in a notebook on a server")
    return ctx.notebook
