"""A notebook or kernel tool as offered over MCP: the registry's tool, with a ``notebook``.

The argument names the notebook the call works on; the tool itself never sees it (the call's
context is bound to that notebook), while the call's events and permission rules do.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from pydantic import BaseModel, Field, create_model

from ..tools import Tool, ToolContext, ToolResult
from .catalogue import NOTEBOOK_ARGUMENT


@functools.lru_cache(maxsize=64)
def _model(base: type[BaseModel]) -> type[BaseModel]:
    path = (str, Field(min_length=1, description="the notebook's path"))
    fields: dict[str, Any] = {NOTEBOOK_ARGUMENT: path}
    extended: type[BaseModel] = create_model(
        f"{base.__name__}_with_notebook", __base__=base, **fields
    )
    return extended


def with_notebook(tool: Tool) -> Tool:
    """``tool`` taking a ``notebook`` argument that it passes over."""
    inner = tool.function

    async def function(ctx: ToolContext, **kwargs: Any) -> ToolResult | str:
        kwargs.pop(NOTEBOOK_ARGUMENT, None)
        return await inner(ctx, **kwargs)

    return dataclasses.replace(
        tool, function=function, arguments_model=_model(tool.arguments_model)
    )
