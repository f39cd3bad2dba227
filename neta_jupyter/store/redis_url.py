"""A Redis store's URL, read without the redis package (which only the ``[redis]`` extra installs).

Configuration names a Redis store before anything needs the client: whether a ``store_url`` names
Redis, and its password (a secret, redacted by value), are known without importing it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDIS_SCHEMES = ("redis", "rediss", "unix")


def is_redis_url(url: str) -> bool:
    """Whether ``url`` names a Redis store."""
    return urlsplit(url).scheme in REDIS_SCHEMES


def url_password(url: str) -> str | None:
    """The password in ``url`` (a secret: redacted like an API key), if any."""
    parts = urlsplit(url)
    found = parts.password
    if found is None and parts.query:
        for pair in parts.query.split("&"):
            name, _, value = pair.partition("=")
            if name == "password" and value:
                found = value
    return found or None


def masked_url(url: str) -> str:
    """``url`` as logs and errors show it: the password replaced by ``***``."""
    parts = urlsplit(url)
    if url_password(url) is None:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        user = parts.username or ""
        host = netloc.rsplit("@", 1)[-1]
        netloc = f"{user}:***@{host}"
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
