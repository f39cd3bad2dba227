"""neta's permissions in front of every MCP call, and the asks a call waits on while it is live.

The rules decide (a rule may name the client); reads are allowed and what changes things asks,
unless a rule or "always allow" in the session says otherwise. An ask is a ``PERMISSION_ASK`` of
the session's run, with the preview a neta run's ask shows (the diff, the code), answered through
the run API's ``resume`` like any other (the widget, the side panel, the terminal client). The
call waits for it up to ``wait`` seconds, then fails saying so; the decision is a
``PERMISSION_ASK_RESOLVED``. An approval binds to the state it was shown, as in a run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import EventType, PermissionAskData, PermissionResolvedData
from ..providers.base import ToolCall
from ..runtime.data.state import Ask
from ..runtime.errors import BadRunRequest, RunConflict, RunNotFound
from ..store import new_id
from ..tools import Decision, Tool, ToolContext, decide
from ..tools.files import rule_arguments
from ..tools.permissions import approval_digest, stricter
from ..tools.values import ToolError

if TYPE_CHECKING:
    from ..runtime.data.runs import Run
    from ..runtime.log.emitter import RunEmitter
    from ..runtime.manager import Runtime

Approved = Callable[[str | None], bool]


@dataclass(slots=True)
class Progress:
    """What a call is doing now, for the progress notifications that keep its client waiting."""

    message: str = "starting"


@dataclass(slots=True)
class _Pending:
    ask: Ask
    decided: asyncio.Future[tuple[bool, bool]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Asks:
    """The permission decisions of one MCP session's calls."""

    def __init__(
        self, runtime: Runtime, run: Run, emitter: RunEmitter, client: str, wait: float
    ) -> None:
        self._runtime = runtime
        self._run = run
        self._emitter = emitter
        self._client = client
        self._wait = wait
        self._pending: dict[str, _Pending] = {}

    async def permission(
        self,
        call: ToolCall,
        tool: Tool,
        arguments: dict[str, Any],
        ctx: ToolContext,
        progress: Progress,
    ) -> tuple[str | None, Approved | None]:
        """Whether the call may run: ``(refusal, None)``, or ``(None, approved)``.

        ``approved`` checks the state the user was shown (``None``: the rules allowed the call).
        """
        decision = await self._decide(call, tool, arguments)
        if isinstance(decision, str) or decision.action == "deny":
            why = decision if isinstance(decision, str) else _denied(decision)
            return why, None
        if decision.action == "allow":
            return None, None
        state = await _binding(tool, ctx, arguments)
        digest = approval_digest(call.name, call.arguments, state)
        ask = Ask(
            kind="permission",
            ask_id=new_id("ask"),
            tool_call_id=call.id,
            tool_name=call.name,
            digest=digest,
        )
        await self._announce(ask, call, tool, decision.rule_description, decision.rule_pattern, ctx)
        progress.message = f"{call.name} waits for your approval in JupyterLab"
        if not await self._decided(ask):
            return "the user denied permission to run this tool call", None
        return None, lambda now: approval_digest(call.name, call.arguments, now) == digest

    async def _decide(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> Decision | str:
        """What the rules say of the call (a refusal for a path outside the root)."""
        config = self._runtime.config
        try:
            seen = await rule_arguments(config.root_dir, arguments, tool.path_arguments)
        except ToolError as exc:
            return str(exc)
        session = await self._runtime.store.records.get_session(self._run.session_id)
        allowed = frozenset(session.always_allow if session else [])
        rules, client = config.permission_rules, self._client
        decision = decide(
            rules, call.name, seen, readonly=tool.readonly, always_allowed=allowed, client=client
        )
        if tool.also_does is not None and (other := tool.also_does(arguments)) is not None:
            # An insert that runs its cell is a run_cell too: the stricter decision holds.
            also = decide(rules, other, seen, readonly=False, always_allowed=allowed, client=client)
            decision = stricter(decision, also)
        return decision

    async def _announce(
        self, ask: Ask, call: ToolCall, tool: Tool, why: str, pattern: str, ctx: ToolContext
    ) -> None:
        arguments = tool.parse_arguments(call.arguments)
        self._pending[ask.ask_id] = _Pending(ask)
        self._run.state.ask = ask
        self._emitter.emit(
            EventType.PERMISSION_ASK,
            PermissionAskData(
                ask_id=ask.ask_id,
                principal_id=self._run.principal,
                tool_name=call.name,
                tool_call_id=call.id,
                arguments=call.arguments,
                rule_description=why,
                rule_pattern=pattern,
                preview=await _preview(tool, ctx, arguments),
                digest=ask.digest,
            ),
        )
        await self._runtime.runs.save(self._run)
        await self._emitter.flush()

    async def _decided(self, ask: Ask) -> bool:
        """The user's decision; a clear failure once the wait is over or the call cancelled."""
        pending = self._pending[ask.ask_id]
        try:
            approved, _always = await asyncio.wait_for(asyncio.shield(pending.decided), self._wait)
        except TimeoutError:
            await self._resolve(ask, approved=False, reason="timeout")
            raise ToolError(
                f"nobody answered the approval of {ask.tool_name} within {self._wait:g} s, so it "
                "was not run; approve it in JupyterLab's neta panel (or the terminal client) "
                "when you call it again"
            ) from None
        except asyncio.CancelledError:
            await self._resolve(ask, approved=False, reason="cancelled")
            raise
        return approved

    async def _resolve(
        self, ask: Ask, *, approved: bool, reason: str, always: bool = False
    ) -> None:
        if self._pending.pop(ask.ask_id, None) is None:
            return
        self._run.state.ask = next((p.ask for p in self._pending.values()), None)
        self._emitter.emit(
            EventType.PERMISSION_ASK_RESOLVED,
            PermissionResolvedData(
                ask_id=ask.ask_id,
                approved=approved,
                reason=reason,
                resolve_type="always" if always and approved else "once",
            ),
        )
        await self._runtime.runs.save(self._run)
        await self._emitter.flush()

    async def answer(
        self,
        principal: str,
        *,
        approved: bool | None,
        ask_id: str | None,
        always: bool,
        answer: str | None,
        digest: str | None,
    ) -> Run:
        """The run API's decision on one of the session's asks (the oldest, without ``askId``)."""
        run = self._run
        if principal != run.principal:
            raise RunNotFound(f"no run with requestId {run.request_id!r}")
        pending = self._pending.get(ask_id) if ask_id else next(iter(self._pending.values()), None)
        if pending is None:
            refused = f"askId {ask_id!r} is not a pending ask" if ask_id else "nothing to decide"
            raise RunConflict(f"run {run.request_id}: {refused}", code="ASK_MISMATCH")
        ask = pending.ask
        if digest is not None and ask.digest is not None and digest != ask.digest:
            raise RunConflict(
                f"the decision is on something other than what ask {ask.ask_id} shows; the ask "
                "stays open",
                code="ASK_CHANGED",
            )
        if approved is None:
            raise BadRunRequest(
                "approved (true or false) is required to answer a permission ask",
                code="APPROVED_REQUIRED",
            )
        if always and approved:
            await self._runtime.store.records.allow_always(run.session_id, ask.tool_name)
        await self._resolve(ask, approved=approved, reason="user", always=always)
        if not pending.decided.done():
            pending.decided.set_result((approved, always))
        return run

    def close(self) -> None:
        """The session is over: calls still waiting fail."""
        for pending in self._pending.values():
            if not pending.decided.done():
                pending.decided.set_exception(ToolError("the MCP session ended"))
        self._pending.clear()
        self._run.state.ask = None


def _denied(decision: Decision) -> str:
    return f"not allowed: {decision.rule_description} ({decision.rule_pattern})"


async def _binding(tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> str | None:
    if tool.binding is None:
        return None
    try:
        return await tool.binding(ctx, arguments)
    except Exception:  # unreadable now: bound to that, so a readable state differs
        return None


async def _preview(
    tool: Tool, ctx: ToolContext, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    if tool.preview is None:
        return None
    try:
        return await tool.preview(ctx, arguments)
    except Exception:  # a preview is a courtesy: the prompt goes out without one
        return None
