"""Runs bound to a notebook's kernel go on on the server that hosts the kernel.

A kernel lives in one server's process, so a run bound to it has kernel tools only there. A
server that starts such a run says it hosts the kernel (:meth:`Leases.host_kernel`). A resume,
a permission answer or a retry that reaches another server while the host lives is handed to
the host, which carries it out as if asked directly; the caller gets the host's answer (the same
200 body, or its refusal), or ``503 KERNEL_HOST_UNREACHABLE`` when the host does not answer in
time. When no live server hosts the kernel, the run goes on where it was asked, without kernel
tools. A store only one server uses hands nothing off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...store import StorageError
from ..data.runs import Run
from ..errors import RunApiError

if TYPE_CHECKING:
    from ..host import RunHost

HANDOFF_WAIT = 30.0
"""Seconds a server waits for the kernel's host to answer a hand-off (a safety bound)."""


class HostUnreachable(RunApiError):
    """The server hosting the run's kernel did not answer in time."""

    status = 503
    code = "KERNEL_HOST_UNREACHABLE"


class HostRefused(RunApiError):
    """The kernel's host refused the action: its status and code, as it answered them."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message, code=code)
        self.status = status


class Handoff:
    """Hands control operations of kernel-bound runs to the server hosting the kernel."""

    def __init__(self, runtime: RunHost, *, wait: float = HANDOFF_WAIT) -> None:
        self._rt = runtime
        self._leases = runtime.store.leases
        self.wait = wait
        """Seconds to wait for the host's answer."""
        self._leases.on_control(self._carry_out)

    def _hosted_here(self, run: Run) -> bool:
        kernels = self._rt.kernels
        return kernels is not None and kernels(run) is not None

    async def bound(self, run: Run) -> None:
        """Say that this server hosts the run's kernel, if it does (other servers hand off)."""
        kernel_id = run.options.kernel_id
        if kernel_id is None or not self._leases.shared or not self._hosted_here(run):
            return
        try:
            await self._leases.host_kernel(run.principal, kernel_id)
        except Exception as error:  # the run started: only hand-offs to here are missed
            self._rt.log.warning("neta: kernel %s could not be registered: %s", kernel_id, error)

    async def elsewhere(
        self, principal: str, request_id: str, op: str, args: dict[str, Any]
    ) -> Run | None:
        """Carry out ``op`` on the server hosting the run's kernel; None: do it here.

        Here when the store is not shared, the run has no kernel, its kernel is here, or no
        live server hosts it.
        """
        if not self._leases.shared:
            return None
        run = await self._rt.get_run(principal, request_id)
        kernel_id = run.options.kernel_id
        if kernel_id is None or self._hosted_here(run):
            return None
        host = await self._leases.kernel_host(principal, kernel_id)
        if host is None or host == self._leases.replica:
            return None
        self._rt.log.info("neta: handing %s of run %s to server %s", op, request_id, host)
        message = {"op": op, "requestId": request_id, "args": args}
        answer = await self._leases.send_control(principal, host, message, self.wait)
        if answer is None:
            raise HostUnreachable(
                f"the server hosting the kernel of run {request_id} did not answer within "
                f"{self.wait:g} s; try again (once that server is gone, the run goes on here "
                "without kernel tools)"
            )
        if not answer.get("ok"):
            raise HostRefused(int(answer["status"]), str(answer["code"]), str(answer["message"]))
        run = await self._rt.get_run(principal, request_id)
        run.status = answer["status"]  # as the host answered, whatever the run did since
        return run

    async def _carry_out(self, principal: str, message: dict[str, Any]) -> dict[str, Any]:
        """A control operation another server handed over, as if asked here; the answer."""
        op, request_id = message.get("op"), str(message.get("requestId", ""))
        args: dict[str, Any] = dict(message.get("args") or {})
        try:
            if op == "resume":
                run = await self._rt.resume(principal, request_id, **args)
            elif op == "retry":
                run = await self._rt.retry(principal, request_id)
            else:
                return refusal(400, "BAD_REQUEST", f"unknown hand-off {op!r}")
        except (RunApiError, StorageError) as exc:
            return refusal(exc.status, exc.code, exc.message)
        except Exception:
            self._rt.log.exception("neta: a handed-off %s of run %s failed", op, request_id)
            return refusal(500, "INTERNAL_ERROR", f"the {op} failed on the kernel's server")
        return {"ok": True, "status": run.status}


def refusal(status: int, code: str, message: str) -> dict[str, Any]:
    """The answer to a hand-off the host refused."""
    return {"ok": False, "status": status, "code": code, "message": message}
