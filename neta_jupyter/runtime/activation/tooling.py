"""Running one tool call: the registry's tools, caller-declared virtual tools, and their files."""

from __future__ import annotations

import asyncio
import mimetypes
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ...events import AttachmentData, EventType, ToolData
from ...providers.base import ToolCall
from ...store import AttachmentRecord, RecordStore, new_id
from ...tools import RunSuspended, Tool, ToolContext
from ...tools.filenames import safe_name
from ...tools.registry import json_arguments
from ...tools.values import ToolError, ToolFile, ToolResult
from ..context.attachments import attachment_data
from ..data.values import VirtualTool
from ..log.emitter import RunEmitter
from .process import ProcessLog, ProcessReporter

if TYPE_CHECKING:
    from ..data.runs import Run

DEFAULT_VIRTUAL_RECEIPT = '{"status":"success"}'

Outcome = tuple[str, bool]
"""What a call that ended gives: the output for the model, and whether it succeeded."""

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def answer_virtual(tool: VirtualTool, arguments: str) -> str:
    """Check the arguments against the declared schema's shape and return the mock."""
    value = json_arguments(tool.name, arguments)
    for key in tool.parameters.get("required", []):
        if key not in value:
            raise ToolError(f"missing required argument {key!r} for {tool.name}")
    for key, spec in tool.parameters.get("properties", {}).items():
        expected = _JSON_TYPES.get(spec.get("type", "")) if isinstance(spec, dict) else None
        if key in value and expected is not None and not isinstance(value[key], expected):
            raise ToolError(f"argument {key!r} of {tool.name} must be {spec['type']}")
    return DEFAULT_VIRTUAL_RECEIPT if tool.mock_response is None else tool.mock_response


class ToolRunner:
    """Executes calls for one run and publishes their TOOL_* and ATTACHMENT_* events."""

    def __init__(
        self,
        run: Run,
        emitter: RunEmitter,
        records: RecordStore,
        *,
        attachments_dir: Path,
        max_event_output: int,
        data_dir: Path | None = None,
    ) -> None:
        self._run = run
        self._emitter = emitter
        self._records = records
        self._attachments_dir = attachments_dir
        self._max_output = max_event_output
        # By default the attachments folder sits in the data dir (RuntimeConfig.attachments_dir).
        self._process_log = ProcessLog(data_dir or attachments_dir.parent, emitter.redactor)
        self._process: dict[str, ProcessReporter] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._origins: dict[str, dict[str, Any]] = {}
        """The MCP server of each call of an MCP tool under way, for its history entry."""

    async def run_virtual(self, call: ToolCall, tool: VirtualTool) -> Outcome:
        """Answer a virtual tool call; returns (output for the model, ok)."""
        self.start(call)
        try:
            output = answer_virtual(tool, call.arguments)
        except ToolError as exc:
            return self._failed(call, str(exc), 0)
        self._emitter.emit(
            EventType.TOOL_COMPLETED,
            ToolData(tool_call_id=call.id, tool_name=call.name, output=output, duration_ms=0),
        )
        return output, True

    async def run_tool(
        self, call: ToolCall, tool: Tool, ctx: ToolContext, *, started: bool = False
    ) -> Outcome:
        """Execute a registry tool; ``started``: its card is open (it suspended the run before).

        A tool that suspends the run raises :class:`RunSuspended` through this.
        """

        def report(title: str) -> None:
            self._emitter.emit(
                EventType.TOOL_RUNNING,
                ToolData(tool_call_id=call.id, tool_name=call.name, title=title),
            )

        ctx.report = report
        if not started:
            self.start(call, tool)
            ctx.report(f"Running {call.name}")
            await self._emitter.flush()
        began = time.monotonic()
        result = await self._execute(call, tool, ctx)
        if isinstance(result, str):
            return self._failed(call, result, _ms_since(began))
        duration = _ms_since(began)
        images = [await self._store_file(f, call.id) for f in result.images]
        files = [await self._store_file(f, call.id) for f in result.files]
        sent = {r.attachment_id for (r, _), f in zip(files, result.files, strict=True) if f.sent}
        shown, truncated, ref = await self._shown_output(result, call.id)
        self._emitter.emit(
            EventType.TOOL_COMPLETED,
            ToolData(
                tool_call_id=call.id,
                tool_name=call.name,
                output=shown,
                duration_ms=duration,
                truncated=truncated or None,
                output_ref=ref,
                images=[a.virtual_path for a, _ in images] or None,
            ),
        )
        for record, change in images + files:
            kind = EventType.ATTACHMENT_SENT if record.attachment_id in sent else None
            self._emitter.emit(
                kind or EventType.ATTACHMENT_CHANGED, self._attachment_data(record, change)
            )
        self._remember(
            call,
            durationMs=duration,
            outputRef=ref,
            images=[a.virtual_path for a, _ in images] or None,
        )
        return result.output, True

    def take_meta(self, call_id: str) -> dict[str, Any] | None:
        """What the call's events said, for its history entry (once; None for no such call)."""
        return self._meta.pop(call_id, None)

    def _remember(self, call: ToolCall, **fields: Any) -> None:
        meta = self._origins.pop(call.id, {}) | {k: v for k, v in fields.items() if v is not None}
        if (process := self._process.pop(call.id, None)) is not None:
            dumped = [
                e.model_dump(mode="json", by_alias=True, exclude_none=True)
                for e in process.sampled()
            ]
            meta |= {"process": dumped or None, "processLogs": process.references or None}
        self._meta[call.id] = {k: v for k, v in meta.items() if v is not None}

    async def _execute(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> ToolResult | str:
        """The tool's result, or why it failed; its process operations end with the call."""
        process = ProcessReporter(
            self._emitter,
            self._process_log,
            session_id=self._run.session_id,
            tool_call_id=call.id,
        )
        ctx.process = process
        self._process[call.id] = process
        if tool.mcp_server:
            self._origins[call.id] = {"mcpServer": tool.mcp_server, "mcpTool": tool.mcp_tool}
        try:
            result = await tool.run(call.arguments, ctx)
        except asyncio.CancelledError:
            _close_output(ctx)
            process.close("cancelled")
            raise
        except RunSuspended:
            # Its operations stay open: the call runs again when the run resumes.
            _close_output(ctx)
            raise
        except ToolError as exc:
            _close_output(ctx)
            return _with_process_log(str(exc), process.close("failed"))
        except Exception as exc:  # a tool's own bug must not end the run: the model hears of it
            _close_output(ctx)
            return _with_process_log(f"{type(exc).__name__}: {exc}", process.close("failed"))
        _close_output(ctx)
        result.output = _with_process_log(result.output, process.close("completed"))
        return result

    def fail_without_running(self, call: ToolCall, message: str) -> Outcome:
        """A call that may not run (denied, unknown tool): reported like a failure."""
        return self._failed(call, message, 0)

    # --- helpers

    def start(self, call: ToolCall, tool: Tool | None = None) -> None:
        """TOOL_START with the complete arguments (and the MCP server of an MCP tool)."""
        self._emitter.emit(
            EventType.TOOL_START,
            ToolData(
                tool_call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                mcp_server=tool.mcp_server if tool else None,
                mcp_tool=tool.mcp_tool if tool else None,
            ),
        )

    def _failed(self, call: ToolCall, message: str, duration: int) -> Outcome:
        self._remember(call, durationMs=duration, errorMessage=message)
        self._emitter.emit(
            EventType.TOOL_FAILED,
            ToolData(
                tool_call_id=call.id,
                tool_name=call.name,
                error_message=message,
                duration_ms=duration,
            ),
        )
        return f"Error: {message}", False

    async def _shown_output(self, result: ToolResult, call_id: str) -> tuple[str, bool, str | None]:
        """Output for the event: whole, or cut with the full text stored as an attachment."""
        if len(result.output) <= self._max_output:
            return result.output, False, None
        full = ToolFile(f"{call_id}-output.txt", result.output.encode(), "text/plain")
        record, change = await self._store_file(full, call_id)
        self._emitter.emit(EventType.ATTACHMENT_CHANGED, self._attachment_data(record, change))
        cut = result.output[: self._max_output]
        note = f"\n… [output truncated: {len(result.output)} characters in all, see the attachment]"
        return cut + note, True, record.virtual_path

    async def _store_file(self, file: ToolFile, call_id: str) -> tuple[AttachmentRecord, str]:
        run = self._run
        name = safe_name(file.name, f"{call_id}-file")
        virtual_path = f"{run.session_id}/{run.request_id}/{name}"
        existing = await self._records.get_attachment(virtual_path)
        attachment_id = existing.attachment_id if existing else new_id("att")
        disk = self._attachments_dir / run.session_id / run.request_id / name
        # Files are downloaded as they are: secrets are cut from them like from every event.
        content = self._emitter.redactor.data(file.content)

        def write() -> None:
            disk.parent.mkdir(parents=True, exist_ok=True)
            disk.write_bytes(content)

        await asyncio.to_thread(write)
        record = AttachmentRecord(
            attachment_id,
            run.principal,
            run.session_id,
            run.request_id,
            virtual_path,
            name,
            file.content_type or _guess_type(name),
            len(content),
            str(disk),
        )
        await self._records.add_attachment(record)
        return record, "UPDATED" if existing else "CREATED"

    def _attachment_data(self, record: AttachmentRecord, change: str) -> AttachmentData:
        return attachment_data(
            record,
            source="AGENT_GENERATED",
            updated=change == "UPDATED",
            message_id=self._run.state.last_assistant,  # the reply whose call made it
        )


def _with_process_log(text: str, references: list[str]) -> str:
    """The text with the JSONL logs of its process events (paths under the data dir)."""
    return f"{text}\n[process log: {', '.join(references)}]" if references else text


@runtime_checkable
class _StreamsOutput(Protocol):
    """A scope that batches its call's partial output (:class:`~.scope.CallScope`)."""

    def close_output(self) -> None:
        """Let the rest out."""


def _close_output(ctx: ToolContext) -> None:
    """What the call streamed goes out before the event that ends its card."""
    if isinstance(ctx.scope, _StreamsOutput):
        ctx.scope.close_output()


def _ms_since(began: float) -> int:
    return int((time.monotonic() - began) * 1000)


def _guess_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"
