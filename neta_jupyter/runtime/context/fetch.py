"""Fetching a URL for a user: where the server may connect, and how much it may inflate.

An attached URL (and a webhook) is fetched by the server, from inside its network: without a
policy a user could have it read a loopback-only page, a cloud metadata address or a private
service. Every connection, the first and each one a redirect leads to, resolves its host first
and is refused if any address it resolves to is not global (loopback, link-local, private,
reserved, …) or is one of the server's own, unless ``c.NetaApp.url_allowlist`` names the host or
a network holding the address. The connection is then made to the very address that was checked,
so a name cannot resolve to another one in between.

A compressed answer is inflated here piece by piece, each piece bounded by what is left of the
size limit, so a gzip bomb is refused after the limit, not after it has filled memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import ipaddress
import socket
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore
import httpx

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(httpcore.ConnectError):
    """A connection the address policy does not allow; the message says which and why."""


@dataclass(frozen=True)
class AddressPolicy:
    """Hosts and networks the server may reach although they are not public."""

    hosts: tuple[str, ...] = ()
    """Host name globs (``files.internal``, ``*.corp.example``), matched without case."""
    networks: tuple[IpNetwork, ...] = ()
    own: frozenset[IpAddress] = field(default_factory=frozenset)
    """The server's own addresses (refused like private ones)."""

    @classmethod
    def from_allowlist(cls, entries: Iterable[str]) -> AddressPolicy:
        """``entries``: host names or globs, addresses, or networks (``10.0.0.0/8``)."""
        hosts, networks = [], []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                hosts.append(entry.strip().lower())
        return cls(tuple(hosts), tuple(networks), own_addresses())

    def refusal(self, host: str, address: IpAddress) -> str | None:
        """Why ``host`` at ``address`` may not be reached; ``None`` if it may."""
        if any(fnmatch.fnmatchcase(host.lower(), glob) for glob in self.hosts):
            return None
        plain = _unmapped(address)
        if any(plain in net for net in self.networks):
            return None
        if plain.is_loopback:
            kind = "a loopback address"
        elif plain.is_link_local:
            kind = "a link-local address"
        elif plain.is_private:
            kind = "a private address"
        elif not plain.is_global or plain.is_multicast:
            kind = "not a public address"
        elif plain in self.own:
            kind = "one of this server's own addresses"
        else:
            return None
        return (
            f"{host} resolves to {plain}, {kind}; the server does not fetch from it unless "
            "c.NetaApp.url_allowlist names it"
        )


def own_addresses() -> frozenset[IpAddress]:
    """The addresses of this machine's interfaces (psutil), and what its host name resolves to."""
    found: set[IpAddress] = set()
    try:
        import psutil

        texts = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs]
    except (ImportError, OSError):
        texts = []
    with contextlib.suppress(OSError):
        texts += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    for text in texts:
        try:
            found.add(_unmapped(ipaddress.ip_address(text.split("%", 1)[0])))
        except ValueError:
            continue  # a MAC address
    return frozenset(found)


def _unmapped(address: IpAddress) -> IpAddress:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolve, check every address, connect to one that was checked."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, policy: AddressPolicy) -> None:
        self._inner, self._policy = inner, policy

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
        for address in addresses:
            if (why := self._policy.refusal(host, address)) is not None:
                raise AddressRefused(why)
        return await self._inner.connect_tcp(
            str(addresses[0]), port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("unix sockets are not fetched from")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_transport(policy: AddressPolicy) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection obeys ``policy`` (and no proxy)."""
    transport = httpx.AsyncHTTPTransport()
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        network_backend=_GuardedBackend(httpcore.AnyIOBackend(), policy),
    )
    return transport


def refused_by_policy(exc: BaseException) -> str | None:
    """The policy's reason, when ``exc`` (an httpx error) is an :class:`AddressRefused`."""
    while exc is not None:
        if isinstance(exc, AddressRefused):
            return str(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


class Inflater:
    """A response body's bytes as served (``Content-Encoding``), inflated within a limit."""

    def __init__(self, encoding: str) -> None:
        coding = encoding.strip().lower()
        if coding in ("", "identity"):
            self._z: Any = None
        elif coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._z = zlib.decompressobj()
        else:
            raise ValueError(f"the answer is encoded as {encoding!r}, which is not supported")

    def feed(self, data: bytes, room: int) -> bytes:
        """``data`` inflated; never more than ``room + 1`` bytes (one more: over the limit)."""
        if self._z is None:
            return data[: room + 1]
        out = [self._z.decompress(data, room + 1)]
        size = len(out[0])
        while self._z.unconsumed_tail and size <= room:
            out.append(self._z.decompress(self._z.unconsumed_tail, room + 1 - size))
            size += len(out[-1])
        return b"".join(out)


class ImportFailed(Exception):
    """An attached URL could not be imported; the message names it and says why."""

    def __init__(self, url: str, why: str, *, transient: bool) -> None:
        super().__init__(f"could not import the attachment {url}: {why}")
        self.transient = transient
        """A retry may succeed (the server failed, or did not answer in time)."""


async def download(
    url: str, *, limit: int, timeout: float, policy: AddressPolicy | None = None
) -> tuple[bytes, str | None]:
    """The bytes an attached URL serves and their content type; :class:`ImportFailed` if not."""
    transport = guarded_transport(policy or AddressPolicy.from_allowlist(()))
    try:
        async with (
            asyncio.timeout(timeout),
            httpx.AsyncClient(
                follow_redirects=True,
                timeout=timeout,
                transport=transport,
                headers={"Accept-Encoding": "gzip, deflate"},
            ) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code >= 400:
                why = f"the server answered HTTP {response.status_code} {response.reason_phrase}"
                raise ImportFailed(url, why, transient=response.status_code >= 500)
            return await _body(url, response, limit), response.headers.get("Content-Type")
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ImportFailed(url, f"no complete answer within {timeout:g} s", transient=True) from exc
    except httpx.HTTPError as exc:
        if (refused := refused_by_policy(exc)) is not None:
            raise ImportFailed(url, refused, transient=False) from exc
        if isinstance(exc, httpx.ConnectError):
            raise ImportFailed(url, f"could not connect ({exc})", transient=True) from exc
        raise ImportFailed(url, f"the download failed ({exc})", transient=True) from exc


async def _body(url: str, response: httpx.Response, limit: int) -> bytes:
    """The answer's body, inflated, counted as it comes: refused once past ``limit``."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ImportFailed(url, _too_large(int(declared), limit), transient=False)
    try:
        inflater = Inflater(response.headers.get("Content-Encoding", ""))
        chunks, size = [], 0
        async for raw in response.aiter_raw():
            chunk = inflater.feed(raw, limit - size)
            size += len(chunk)
            if size > limit:
                raise ImportFailed(url, _too_large(None, limit), transient=False)
            chunks.append(chunk)
    except (ValueError, zlib.error) as exc:
        raise ImportFailed(url, f"the answer cannot be decoded ({exc})", transient=False) from exc
    return b"".join(chunks)


def _too_large(size: int | None, limit: int) -> str:
    what = f"the file is {size:,} bytes" if size is not None else "the file is larger"
    return f"{what}, over the limit of {limit:,} bytes for an attachment"
