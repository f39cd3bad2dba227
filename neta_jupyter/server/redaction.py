"""Wire the redactor: every secret this server knows is cut from events and log lines."""

from __future__ import annotations

import logging
from typing import Any

from ..events.redact import RedactingFilter, Redactor


def install_redaction(serverapp: Any, redactor: Redactor, *extra: str) -> None:
    """Register the server's token, the kernel token, keys from the environment; filter the logs."""
    redactor.add_from_environment()
    redactor.add(*extra)
    # The log keeps the server's own token: Jupyter prints it in the login URL for its owner.
    log_filter = RedactingFilter(Redactor(redactor.secrets))
    identity = getattr(serverapp, "identity_provider", None)
    redactor.add(getattr(identity, "token", None))
    loggers = [logging.getLogger(), logging.getLogger("neta_jupyter")]
    if serverapp is not None:
        loggers.append(serverapp.log)
    for logger in loggers:
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(log_filter)
        for handler in logger.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(log_filter)
