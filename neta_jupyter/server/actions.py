"""Run actions shared by the REST handlers and the WebSocket: one body model, one call."""

from __future__ import annotations

from ..runtime import Runtime
from ..store import RunRecord
from .schemas import ResumeRequest, RunRequest


async def start_run(runtime: Runtime, principal: str, body: RunRequest) -> RunRecord:
    """Start a run from a validated request body."""
    return await runtime.start(
        principal,
        body.content,
        session_id=body.session_id,
        session_name=body.session_name,
        model=body.model,
        virtual_tools=[v.model_dump(by_alias=True) for v in body.virtual_tools],
        tools=body.tools,
        max_steps=body.max_steps,
        approve=body.approve,
        kernel_id=body.kernel_id,
        notebook_path=body.notebook_path,
        thinking_level=body.thinking_level,
        kernel_variables=body.kernel_variables,
    )


async def resume_run(runtime: Runtime, principal: str, body: ResumeRequest) -> RunRecord:
    """Resume a run (a permission decision, an answer, or after a shutdown)."""
    return await runtime.resume(
        principal,
        body.request_id,
        approved=body.approved,
        ask_id=body.ask_id,
        always=body.always,
        answer=body.answer,
    )
