"""Runs embedded in the kernel: the same runtime, on the kernel's own event loop.

Used where no Jupyter server with the extension started the kernel (VS Code, plain IPython,
``jupyter execute``). The event log is a SQLite file in a per-kernel temporary directory unless
``NETA_DATA_DIR`` names a lasting one. Settings come from the environment: ``NETA_MODEL`` (default
model), ``NETA_DEMO_PACE`` (seconds between the demo model's tokens).
"""

from __future__ import annotations

import atexit
import base64
import json
import mimetypes
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..events import TERMINAL_EVENT_TYPES
from ..runtime import RunApiError
from ..runtime.settings import NetaSettings, build_runtime
from ..store import RunRecord, SessionRecord, Store
from .host import PRINCIPAL, HostError, Mode, RunOptions, Started
from .inprocess import InProcessKernelBridge

_MAX_INLINE_IMAGE = 5_000_000


def _summary(run: RunRecord, last_seq: int) -> dict[str, Any]:
    return {
        "requestId": run.request_id,
        "sessionId": run.session_id,
        "status": run.status,
        "model": run.model,
        "prompt": run.prompt,
        "created": run.created,
        "lastSeq": last_seq,
        "step": run.state.get("step", 0),
        "recoverable": bool(run.state.get("recoverable")),
        "pendingAsk": run.state.get("ask"),
        "usage": run.state.get("usage") or {},
    }


def _session_json(session: SessionRecord) -> dict[str, Any]:
    return {
        "sessionId": session.session_id,
        "name": session.name,
        "created": session.created,
        "inputTokens": session.input_tokens,
        "outputTokens": session.output_tokens,
    }


class EmbeddedHost:
    """:class:`~neta_jupyter.kernel.host.Host` with the runtime inside this kernel."""

    def __init__(
        self,
        shell: Any,
        *,
        data_dir: str | Path | None = None,
        root_dir: str | Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        env = dict(os.environ if environ is None else environ)
        chosen = data_dir or env.get("NETA_DATA_DIR")
        self.data_dir = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="neta-kernel-"))
        if not chosen:
            atexit.register(shutil.rmtree, self.data_dir, ignore_errors=True)
        self.store = Store(self.data_dir / "neta.sqlite3")
        settings = NetaSettings(
            model=env.get("NETA_MODEL") or "demo",
            demo_pace=float(env.get("NETA_DEMO_PACE") or 0.015),
        )
        self.bridge = InProcessKernelBridge(shell)
        self.runtime = build_runtime(
            settings,
            self.store,
            root_dir=Path(root_dir or os.getcwd()),
            data_dir=self.data_dir,
            kernels=lambda _run: self.bridge,
        )

    @property
    def mode(self) -> Mode:
        """Always ``embedded``."""
        return "embedded"

    # --- actions

    async def start(self, options: RunOptions) -> Started:
        """Start a run on this kernel's loop."""
        try:
            run = await self.runtime.start(
                PRINCIPAL,
                options.prompt,
                session_name=options.session,
                model=options.model,
                tools=options.tools,
                max_steps=options.max_steps,
                approve=options.approve,
                notebook_path=options.notebook_path,
                thinking_level=options.thinking,
                kernel_variables=options.variables,
            )
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc
        return Started(run.request_id, run.session_id)

    async def resume(
        self,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
    ) -> None:
        """Continue a suspended run."""
        try:
            await self.runtime.resume(
                PRINCIPAL,
                request_id,
                approved=approved,
                ask_id=ask_id,
                always=always,
                answer=answer,
            )
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc

    async def terminate(self, request_id: str) -> None:
        """Cancel a run."""
        try:
            await self.runtime.terminate(PRINCIPAL, request_id)
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc

    async def retry(self, request_id: str) -> None:
        """Retry a recoverable failure."""
        try:
            await self.runtime.retry(PRINCIPAL, request_id)
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc

    async def compact(self, session: str, instructions: str | None = None) -> Started:
        """Compact the named session through the embedded runtime."""
        found = [s for s in self.store.records.sessions(PRINCIPAL) if s.name == session]
        if not found:
            raise HostError(f"no conversation named {session!r} yet", code="SESSION_NOT_FOUND")
        try:
            run = await self.runtime.compact_session(
                PRINCIPAL, found[0].session_id, instructions=instructions
            )
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc
        return Started(run.request_id, run.session_id)

    async def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the next step."""
        try:
            return await self.runtime.add_input(PRINCIPAL, request_id, content)
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc

    async def follow(self, request_id: str, after_seq: int = -1) -> AsyncIterator[dict[str, Any]]:
        """The log after ``after_seq`` up to the next terminal event."""
        run = self._run(request_id)
        if run.status in ("completed", "failed") and self.runtime.at_rest(request_id, after_seq):
            return
        stream = self.runtime.follow(request_id, after_seq)
        try:
            async for batch in stream:
                for _, kind, payload in batch:
                    yield json.loads(payload)
                    if kind in TERMINAL_EVENT_TYPES:
                        return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    # --- queries

    def _run(self, request_id: str) -> RunRecord:
        try:
            return self.runtime.get_run(PRINCIPAL, request_id)
        except RunApiError as exc:
            raise HostError(exc.message, code=exc.code) from exc

    def status(self, request_id: str) -> dict[str, Any]:
        """The run's summary."""
        return _summary(self._run(request_id), self.runtime.last_seq(request_id))

    def runs(self, session: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first."""
        records = self.store.records
        session_id = None
        if session is not None:
            found = [s for s in records.sessions(PRINCIPAL) if s.name == session]
            if not found:
                return []
            session_id = found[0].session_id
        runs = records.runs(principal=PRINCIPAL, session_id=session_id)
        return [_summary(r, self.runtime.last_seq(r.request_id)) for r in runs]

    def sessions(self) -> list[dict[str, Any]]:
        """Sessions, newest first."""
        return [_session_json(s) for s in self.store.records.sessions(PRINCIPAL)]

    def history(self, session: str) -> list[dict[str, Any]]:
        """The active path of the session tree."""
        records = self.store.records
        found = [s for s in records.sessions(PRINCIPAL) if s.name == session]
        if not found:
            return []
        return [
            {"entryId": e.entry_id, "role": e.role, "message": e.message, "requestId": e.request_id}
            for e in records.path(found[0].session_id, found[0].leaf_entry_id)
        ]

    def models(self) -> dict[str, Any]:
        """Configured models."""
        return {"default": self.runtime.config.default_model, "models": self.runtime.models.names()}

    def describe(self) -> dict[str, Any]:
        """Where runs go."""
        return {
            "mode": "embedded (no Jupyter server with neta_jupyter started this kernel)",
            "data dir": str(self.data_dir),
            "root dir": str(self.runtime.config.root_dir),
        }

    def image_source(self, virtual_path: str) -> str:
        """A data URL: there is no server to download from."""
        record = self.store.records.get_attachment(virtual_path)
        if record is None:
            return virtual_path
        path = Path(record.disk_path)
        if not path.is_file() or path.stat().st_size > _MAX_INLINE_IMAGE:
            return virtual_path
        content_type = record.content_type or mimetypes.guess_type(path.name)[0] or "image/png"
        return f"data:{content_type};base64,{base64.b64encode(path.read_bytes()).decode()}"

    async def aclose(self) -> None:
        """Suspend what runs and close the store."""
        await self.runtime.shutdown()
        self.store.close()
