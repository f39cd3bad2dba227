"""Known secrets (API keys, tokens) are cut out of everything that leaves the process.

Secrets are known by value: the configuration registers each one it names (the key of every model
endpoint, the server's and the kernels' tokens). The store runs every event, record and attachment
through one :class:`Redactor` before writing it, and the server puts the same redactor on its log
handlers, so a key that slips into a tool output, a provider error or a process payload never
reaches a client, the store, a file or a log line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
SECRET_ENV_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "JUPYTER_TOKEN", "NETA_KERNEL_TOKEN")
_MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words


class Redactor:
    """Replaces every registered secret value with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self.first_chars: frozenset[str] = frozenset()
        """The characters secrets start with: text without them cannot hide a secret's start."""
        self.longest = 0
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """Register more secret values (short or empty ones are ignored)."""
        known = set(self._secrets)
        known.update(s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH)
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = tuple(sorted(known, key=len, reverse=True))
        self.first_chars = frozenset(s[0] for s in self._secrets)
        self.longest = max(map(len, self._secrets), default=0)

    def add_from_environment(self) -> None:
        """Register the values of the usual secret variables and of any ``*_API_KEY``."""
        names = set(SECRET_ENV_VARS) | {k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN"))}
        self.add(*(os.environ.get(name) for name in names))

    @property
    def secrets(self) -> tuple[str, ...]:
        """The registered values."""
        return self._secrets

    def __call__(self, text: str) -> str:
        """``text`` with every known secret replaced."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def value(self, obj: Any) -> Any:
        """A JSON-like value with every string in it (keys too) redacted.

        Redacting before encoding, not the encoded text: an escape (a newline written before a
        secret that starts with ``n``) could otherwise hide a secret or be cut in half.
        """
        if not self._secrets:
            return obj
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj

    def data(self, content: bytes) -> bytes:
        """Bytes (a file's content) with the UTF-8 form of every secret replaced."""
        for secret in self._secrets:
            encoded = secret.encode()
            if encoded in content:
                content = content.replace(encoded, REDACTED.encode())
        return content

    def __bool__(self) -> bool:
        return bool(self._secrets)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message of every record it sees.

    ``spare`` is a secret left in the records of the modules named in ``spare_in`` (a server's
    own login URL, printed for its owner); every other record loses it like any secret.
    """

    def __init__(
        self, redactor: Redactor, *, spare: str | None = None, spare_in: Iterable[str] = ()
    ) -> None:
        super().__init__()
        self._redactor = redactor
        self._spare = spare
        self._spare_in = tuple(spare_in)

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        redact = self._redactor_for(record)
        if redact:
            message = record.getMessage()
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
            if record.exc_info and not record.exc_text:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
            elif record.exc_text:
                record.exc_text = redact(record.exc_text)
        return True

    def _redactor_for(self, record: logging.LogRecord) -> Redactor:
        if self._spare and record.pathname.replace(os.sep, "/").endswith(self._spare_in):
            return Redactor(s for s in self._redactor.secrets if s != self._spare)
        return self._redactor


class StreamRedactor:
    """Redacts a text that arrives in fragments, where a secret may be split across fragments.

    It holds back a tail that could be the start of a secret until the next fragment (or the end)
    shows whether it is one, so the concatenation of what it releases equals the redacted whole.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The part of the text so far that can safely be released, redacted."""
        if not self._held and self._redactor.first_chars.isdisjoint(chunk):
            # No secret starts anywhere in it: nothing to cut and no tail to hold (most chunks).
            return chunk
        if not self._redactor:
            return chunk
        text = self._held + chunk
        keep = self._risky_tail(text)
        self._held = text[len(text) - keep :] if keep else ""
        return self._redactor(text[: len(text) - keep])

    def flush(self) -> str:
        """Whatever was held back (at the end of the text)."""
        text, self._held = self._held, ""
        return self._redactor(text)

    def _risky_tail(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of some secret."""
        if self._redactor.first_chars.isdisjoint(text[-self._redactor.longest :]):
            return 0  # the usual case, decided without a loop in Python
        longest = 0
        for secret in self._redactor._secrets:
            start = max(0, len(text) - len(secret) + 1)
            i = text.find(secret[0], start)
            while i != -1:
                if secret.startswith(text[i:]):
                    longest = max(longest, len(text) - i)
                    break
                i = text.find(secret[0], i + 1)
        return longest
