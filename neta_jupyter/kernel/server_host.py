"""Runs on the Jupyter server: created over REST with this kernel's id, followed over SSE.

Actions and follows are async (``httpx.AsyncClient`` on the kernel's loop, so a cell is never
blocked); the small queries behind ``%neta status`` and friends are answered synchronously, which
is what a magic printing a table needs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from ..events import TERMINAL_EVENT_TYPES
from .discovery import ServerInfo
from .host import HostError, Mode, RunOptions, Started

_API = "neta/api/"
_TIMEOUT = httpx.Timeout(30.0, read=90.0)
"""Reads wait longer than the server's heartbeat interval (15 s by default)."""


def _error_of(response: httpx.Response) -> HostError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    message = str(body.get("message") or f"the server answered HTTP {response.status_code}")
    code = body.get("errCode") or body.get("code") or f"HTTP_{response.status_code}"
    return HostError(message, code=str(code))


def _unreachable(exc: httpx.HTTPError) -> HostError:
    return HostError(f"could not reach the Jupyter server: {exc}", code="UNREACHABLE")


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON body of a success; the server's error (seed-003 body) otherwise."""
    if response.status_code >= 400:
        raise _error_of(response)
    answer: dict[str, Any] = response.json()
    return answer


class ServerHost:
    """:class:`~neta_jupyter.kernel.host.Host` over the extension's run API."""

    def __init__(self, server: ServerInfo, kernel_id: str | None) -> None:
        self.server = server
        self.kernel_id = kernel_id
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._sync = httpx.Client(
            base_url=server.url, headers=server.headers, timeout=_TIMEOUT, trust_env=False
        )

    @property
    def mode(self) -> Mode:
        """Always ``server``."""
        return "server"

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(
                base_url=self.server.url,
                headers=self.server.headers,
                timeout=_TIMEOUT,
                trust_env=False,
            )
            self._client_loop = loop
        return self._client

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._http().post(_API + path, json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from exc
        return _answer(response)

    def _get(self, path: str, **params: str) -> dict[str, Any]:
        try:
            response = self._sync.get(_API + path, params=params)
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from exc
        return _answer(response)

    # --- actions

    def _run_body(self, options: RunOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "content": options.prompt,
            "sessionName": options.session,
            "approve": options.approve,
            "kernelId": self.kernel_id,
        }
        if options.model:
            body["model"] = options.model
        if options.max_steps is not None:
            body["maxSteps"] = options.max_steps
        if options.tools is not None:
            body["tools"] = options.tools
        if options.notebook_path:
            body["notebookPath"] = options.notebook_path
        if options.thinking:
            body["thinkingLevel"] = options.thinking
        if options.variables is not None:
            body["kernelVariables"] = options.variables
        return body

    async def start(self, options: RunOptions) -> Started:
        """``POST agent/run/async`` with this kernel's id."""
        answer = await self._post("agent/run/async", self._run_body(options))
        return Started(str(answer["requestId"]), str(answer["sessionId"]))

    def start_now(self, options: RunOptions) -> Started:
        """The same, synchronously: the run exists before the cell that asked for it returns.

        A later cell may keep the kernel busy for minutes; the run must not wait for it, and the
        widget needs the run's id to follow it on the server meanwhile.
        """
        try:
            response = self._sync.post(_API + "agent/run/async", json=self._run_body(options))
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from exc
        answer = _answer(response)
        return Started(str(answer["requestId"]), str(answer["sessionId"]))

    async def compact(self, session: str, instructions: str | None = None) -> Started:
        """``POST sessions/compact`` for the named session."""
        found = [s for s in self.sessions() if s.get("name") == session]
        if not found:
            raise HostError(f"no conversation named {session!r} yet", code="SESSION_NOT_FOUND")
        body: dict[str, Any] = {"sessionId": found[0]["sessionId"]}
        if instructions:
            body["instructions"] = instructions
        answer = await self._post("sessions/compact", body)
        return Started(str(answer["requestId"]), str(answer["sessionId"]))

    async def resume(
        self,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
    ) -> None:
        """``POST agent/run/resumeTask``."""
        body: dict[str, Any] = {"requestId": request_id, "always": always}
        for key, value in (("approved", approved), ("askId", ask_id), ("answer", answer)):
            if value is not None:
                body[key] = value
        await self._post("agent/run/resumeTask", body)

    async def terminate(self, request_id: str) -> None:
        """``POST agent/run/terminateTask``."""
        await self._post("agent/run/terminateTask", {"requestId": request_id})

    async def retry(self, request_id: str) -> None:
        """``POST agent/run/retryTask``."""
        await self._post("agent/run/retryTask", {"requestId": request_id})

    async def add_input(self, request_id: str, content: str) -> str:
        """``POST agent/run/addSupplementaryInput``."""
        body = {"requestId": request_id, "content": content}
        answer = await self._post("agent/run/addSupplementaryInput", body)
        return str(answer.get("inputId", ""))

    async def follow(self, request_id: str, after_seq: int = -1) -> AsyncIterator[dict[str, Any]]:
        """One SSE segment: replay after ``after_seq``, then live, up to a terminal event."""
        params = {"requestId": request_id}
        if after_seq >= 0:
            params["lastEventId"] = str(after_seq)
        async with aconnect_sse(
            self._http(), "GET", _API + "agent/run/stream", params=params
        ) as source:
            response = source.response
            if response.status_code == 204:
                return
            if response.status_code >= 400:
                await response.aread()
                raise _error_of(response)
            async for sse in source.aiter_sse():
                if sse.event == "HEARTBEAT":
                    continue
                if sse.event == "error":
                    raise HostError(f"the server has no run {request_id}", code="RUN_NOT_FOUND")
                envelope: dict[str, Any] = json.loads(sse.data)
                yield envelope
                if envelope.get("eventType") in TERMINAL_EVENT_TYPES:
                    return

    # --- queries

    def status(self, request_id: str) -> dict[str, Any]:
        """``GET agent/run/status``."""
        return self._get("agent/run/status", requestId=request_id)

    def runs(self, session: str | None = None) -> list[dict[str, Any]]:
        """``GET agent/runs`` (of the named session when given)."""
        if session is None:
            return list(self._get("agent/runs")["runs"])
        found = [s for s in self.sessions() if s.get("name") == session]
        if not found:
            return []
        return list(self._get("agent/runs", sessionId=str(found[0]["sessionId"]))["runs"])

    def sessions(self) -> list[dict[str, Any]]:
        """``GET sessions``."""
        return list(self._get("sessions")["sessions"])

    def history(self, session: str) -> list[dict[str, Any]]:
        """The active path of the session tree."""
        found = [s for s in self.sessions() if s.get("name") == session]
        if not found:
            return []
        tree = self._get("sessions/tree", sessionId=str(found[0]["sessionId"]))
        by_id = {e["entryId"]: e for e in tree.get("entries", [])}
        return [by_id[i] for i in tree.get("activePath", []) if i in by_id]

    def models(self) -> dict[str, Any]:
        """``GET models``."""
        answer = self._get("models")
        return {"default": answer.get("default"), "models": answer.get("models", [])}

    def describe(self) -> dict[str, Any]:
        """Where runs go."""
        return {
            "mode": "server",
            "server": self.server.url,
            "found via": self.server.source,
            "kernel id": self.kernel_id or "(unknown: kernel tools are unavailable)",
        }

    def image_source(self, virtual_path: str) -> str:
        """The widget resolves virtual paths against the server itself."""
        return virtual_path

    async def aclose(self) -> None:
        """Close both HTTP clients."""
        self._sync.close()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
