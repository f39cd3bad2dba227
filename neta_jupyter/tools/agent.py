"""Tools that act on their run through its scope: ask the user a question, keep a todo list."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..events import TodoItem
from .registry import ToolContext, tool
from .scope import RunScope
from .values import ToolResult


class TodoEntry(BaseModel):
    """One item of the todo list as the model writes it."""

    content: str = Field(min_length=1, description="what to do")
    status: Literal["pending", "in_progress", "completed"] = "pending"
    id: str | None = Field(default=None, description="stable id; omitted ids are numbered")


@tool(readonly=True, name="clarify")
async def clarify(
    ctx: ToolContext,
    scope: RunScope,
    question: Annotated[str, Field(min_length=1, description="one clear question")],
    options: Annotated[list[str], Field(description="suggested answers, may be empty")] = [],  # noqa: B006
) -> ToolResult:
    """Ask the user a question and wait for the answer.

    Use it when the request is ambiguous and a wrong guess would waste work; do not use it for
    things a tool can find out.
    """
    return ToolResult(await scope.ask(question, options))


@tool(readonly=True, name="escalate", crew_only=True)
async def escalate(
    ctx: ToolContext,
    scope: RunScope,
    reason: Annotated[str, Field(min_length=1, description="why a person must decide")],
    question: Annotated[str, Field(description="what they should decide or answer")] = "",
) -> ToolResult:
    """Hand a decision you must not make alone to the person steering the crew, and wait.

    Use it when the task cannot be done as described (data missing, instructions that
    contradict each other, a risky step); the answer comes back as this call's result.
    """
    text = f"{reason.strip()}\n\n{question.strip()}".strip()
    return ToolResult(await scope.ask(f"Escalated: {text}", []))


@tool(readonly=True, name="todo")
async def todo(
    ctx: ToolContext,
    scope: RunScope,
    items: Annotated[list[TodoEntry], Field(description="the whole list, in order")],
) -> ToolResult:
    """Write down the plan for a task of several steps as a todo list.

    Send the whole list each time and keep it updated as items are done; the user sees it live.
    Not for a question that one or two tool calls answer.
    """
    listed = [
        TodoItem(id=entry.id or str(i + 1), content=entry.content, status=entry.status)
        for i, entry in enumerate(items)
    ]
    await scope.set_todo(listed)
    done = sum(item.status == "completed" for item in listed)
    return ToolResult(f"todo list updated: {len(listed)} items, {done} done")
