"""Runs count as activity: an idle culler never stops a server while one of its runs executes.

Jupyter's own culler (``ServerApp.shutdown_no_activity_timeout``) and JupyterHub's (through the
single-user server's reported activity) read the server's last activity, which a run executing
on its own (no request, no kernel busy) would not move. While runs execute, the server reports
``neta_last_activity`` among its activity times every ``c.NetaApp.activity_interval`` seconds.
"""

from __future__ import annotations

from typing import Any

from jupyter_server._tz import utcnow
from tornado.ioloop import PeriodicCallback

from ..runtime import Runtime

KEY = "neta_last_activity"


class RunActivity:
    """Moves the server's last activity on while the runtime executes runs."""

    def __init__(self, settings: dict[str, Any], runtime: Runtime, interval: float) -> None:
        self._times: dict[str, Any] = settings.setdefault("last_activity_times", {})
        self._runtime = runtime
        self._timer = PeriodicCallback(self.report, max(interval, 0.05) * 1000)

    def start(self) -> None:
        """Report from now on (on the running event loop)."""
        self._timer.start()

    def stop(self) -> None:
        """Report no more."""
        self._timer.stop()

    def report(self) -> None:
        """Now is the last activity, if a run executes."""
        if self._runtime.executing():
            self._times[KEY] = utcnow()
