"""A user's quota of runs going at once (the upload quota is in :mod:`..context.uploads`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..context.uploads import QuotaExceeded


class RunQuota:
    """How many runs of one user may be going (``running``) at once; ``0``: no limit.

    Starts under way count too, so a burst of them cannot all pass the check together.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._starting: defaultdict[str, int] = defaultdict(int)

    @asynccontextmanager
    async def starting(self, principal: str, running: int) -> AsyncIterator[None]:
        """Admit one start of ``principal``, who has ``running`` runs going, or refuse it."""
        if self.limit and running + self._starting[principal] >= self.limit:
            raise QuotaExceeded(
                f"you have {self.limit} runs going, the most one user may have at once "
                "(c.NetaApp.max_active_runs_per_user); wait for one to end or stop one",
                code="RUN_QUOTA_EXCEEDED",
            )
        self._starting[principal] += 1
        try:
            yield
        finally:
            self._starting[principal] -= 1
            if not self._starting[principal]:
                del self._starting[principal]
