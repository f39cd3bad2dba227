"""Who a request acts for: the Jupyter user, or the user who started the kernel that sent it.

Every kernel the server's kernel manager starts gets a token of its own in its environment
(``NETA_KERNEL_TOKEN``), bound to the user on whose request it was started (Jupyter's kernels and
sessions APIs run ``start_kernel`` inside that request, whose handler ``CallContext`` holds). A run
the kernel starts with that token belongs to that user, so with an identity provider that knows
several users, each one's kernels start runs only that user can see. A kernel started outside any
request (by the server itself or another extension) belongs to the server's owner, as does the
server-wide token that processes inheriting the server's environment hold.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_server import CallContext
from jupyter_server.auth.identity import (
    IdentityProvider,
    LegacyIdentityProvider,
    PasswordIdentityProvider,
)
from jupyter_server.base.handlers import JupyterHandler

from ..events.redact import Redactor

OWNER = "owner"
_SHARED_SECRET_PROVIDERS = (IdentityProvider, PasswordIdentityProvider, LegacyIdentityProvider)


def principal_of(handler: JupyterHandler) -> str:
    """The principal of a request.

    Jupyter's stock identity providers authenticate a single shared secret (token or password)
    and invent a random anonymous user per browser; everyone holding that secret is the server's
    owner, so runs started from a kernel, a terminal or any browser are one principal's. Providers
    that know real users (JupyterHub, custom ones) keep users apart by username.
    """
    user = handler.current_user
    if type(handler.identity_provider) in _SHARED_SECRET_PROVIDERS:
        return str(handler.settings.get("neta_owner", OWNER))
    return str(getattr(user, "username", None) or user)


class KernelOwners:
    """Issues each started kernel its token and answers whose kernel a token belongs to."""

    def __init__(self, redactor: Redactor, owner: str = OWNER) -> None:
        self._redactor = redactor
        self._owner = owner
        self._by_digest: dict[bytes, str] = {}
        """Digest of a kernel token → principal (digests: a lookup leaks no timing of the token)."""
        self._by_kernel: dict[str, str] = {}
        """Kernel id → the user who started it."""

    def owner_of(self, kernel_id: str) -> str:
        """The user who started the kernel (the server's owner for one started otherwise)."""
        return self._by_kernel.get(kernel_id, self._owner)

    def own(self, kernel_id: str, principal: str) -> None:
        """The kernel was started for ``principal`` (outside a request of theirs)."""
        self._by_kernel[kernel_id] = principal

    def principal(self, token: str) -> str | None:
        """The user whose kernel holds ``token``; None for a token no kernel was given."""
        return self._by_digest.get(_digest(token))

    def install(self, kernel_manager: Any) -> None:
        """Wrap the kernel manager's ``start_kernel`` so every kernel gets a token of its own."""
        start: Callable[..., Awaitable[str]] = kernel_manager.start_kernel

        async def start_kernel(*args: Any, **kwargs: Any) -> str:
            token = secrets.token_urlsafe(32)
            # Tool output may show the kernel's environment: its token is a secret like any other.
            self._redactor.add(token)
            kwargs["env"] = {**(kwargs.get("env") or os.environ), "NETA_KERNEL_TOKEN": token}
            # Registered before the kernel runs a line: a startup script may start a run at once.
            digest = _digest(token)
            starter = self._by_digest[digest] = self._starter()
            try:
                kernel_id = await start(*args, **kwargs)
            except BaseException:
                del self._by_digest[digest]
                raise
            self._by_kernel.setdefault(kernel_id, starter)
            return kernel_id

        kernel_manager.start_kernel = start_kernel

    def _starter(self) -> str:
        handler = CallContext.get(CallContext.JUPYTER_HANDLER)
        if isinstance(handler, JupyterHandler) and handler.current_user:
            return principal_of(handler)
        return self._owner


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
