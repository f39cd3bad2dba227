"""Wire the redactor: every secret this server knows is cut from events and log lines."""

from __future__ import annotations

import logging
from typing import Any

from ..events.redact import RedactingFilter, Redactor

# Where Jupyter prints its login URL: a generated token stays readable there, for its owner.
_LOGIN_URL_LINES = ("jupyter_server/serverapp.py",)


def install_redaction(serverapp: Any, redactor: Redactor, *extra: str) -> None:
    """Register the server's token, the kernel token, keys from the environment; filter the logs.

    The runtime has registered the secrets its configuration names already (endpoint keys).
    """
    redactor.add_from_environment()
    redactor.add(*extra)
    identity = getattr(serverapp, "identity_provider", None)
    token = getattr(identity, "token", None) or None
    redactor.add(token)
    log_filter = RedactingFilter(redactor, spare=token, spare_in=_LOGIN_URL_LINES)
    loggers = [logging.getLogger(), logging.getLogger("neta_jupyter")]
    if serverapp is not None:
        loggers.append(serverapp.log)
    for target in [*loggers, *(h for logger in loggers for h in logger.handlers)]:
        # Loggers are process-wide: a server started earlier in this process left its own filter.
        for stale in [f for f in target.filters if isinstance(f, RedactingFilter)]:
            target.removeFilter(stale)
        target.addFilter(log_filter)
