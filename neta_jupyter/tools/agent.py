"""Tools that act on the run itself, carried out by the runtime: ask the user, keep a todo."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from .registry import ToolContext, ToolError, ToolResult, tool

RUNTIME_TOOL_NAMES = frozenset({"clarify", "todo"})


class TodoEntry(BaseModel):
    """One item of the todo list as the model writes it."""

    content: str = Field(min_length=1, description="what to do")
    status: Literal["pending", "in_progress", "completed"] = "pending"
    id: str | None = Field(default=None, description="stable id; omitted ids are numbered")


async def _runtime_only(ctx: ToolContext, **_: object) -> ToolResult:
    raise ToolError("this tool is carried out by the runtime, not called directly")


@tool(readonly=True, name="clarify")
async def clarify(
    ctx: ToolContext,
    question: Annotated[str, Field(min_length=1, description="one clear question")],
    options: Annotated[list[str], Field(description="suggested answers, may be empty")] = [],  # noqa: B006
) -> ToolResult:
    """Ask the user a question and wait for the answer.

    Use it when the request is ambiguous and a wrong guess would waste work; do not use it for
    things a tool can find out.
    """
    return await _runtime_only(ctx)


@tool(readonly=True, name="todo")
async def todo(
    ctx: ToolContext,
    items: Annotated[list[TodoEntry], Field(description="the whole list, in order")],
) -> ToolResult:
    """Write down the plan for a task of several steps as a todo list.

    Send the whole list each time and keep it updated as items are done; the user sees it live.
    Not for a question that one or two tool calls answer.
    """
    return await _runtime_only(ctx)
