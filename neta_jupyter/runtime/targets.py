"""What a run request names outside the runtime: the notebook and the kernel it is bound to.

Only a host that has notebooks and kernels (the Jupyter server) can tell whether they exist; it
sets :attr:`Runtime.targets <neta_jupyter.runtime.Runtime.targets>`, and every run request
passes it before the run starts (:func:`~neta_jupyter.runtime.requests.start_run`). Hosts
without one (the kernel's embedded runtime, the terminal client) bind runs to their own kernel.
"""

from __future__ import annotations

from typing import Protocol


class RunTargets(Protocol):
    """Checks the notebook and kernel a run request names (a ``BadRunRequest`` when wrong)."""

    async def check(self, principal: str, kernel_id: str | None, notebook_path: str | None) -> None:
        """Raise ``BadRunRequest`` unless each is given and real, or absent.

        Real: a notebook under the root, a kernel a server runs.
        """
        ...
