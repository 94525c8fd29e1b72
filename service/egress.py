"""Which hosts the server may call: model clients (``base_url``) and webhooks (``LLMDUEL_ALLOWED_HOSTS``).

The setting is a comma-separated list of entries:

* ``*``: every host (the default; the server calls whatever a campaign names);
* a hostname (``api.openai.com``), or ``*.example.org`` for every name under a domain:
  trusted by name, whatever it resolves to;
* an IP address (``10.1.2.3``) or a CIDR network (``10.0.0.0/8``, ``fd00::/8``).

A host that no name entry covers must be an IP address in a listed network, or a
name that resolves only to such addresses. It is checked twice:

* when a campaign is created (:meth:`EgressPolicy.check_url`: 422 naming the host);
* on every new connection (:class:`EgressBackend`): the name is resolved again and the
  connection goes to the checked address itself, so a DNS answer that changed since
  (or changes between the check and the connection) cannot lead elsewhere.

When the policy is not ``*``, the HTTP client ignores proxy variables of the
environment (a proxy would make the connection on the server's behalf).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from typing import Any, Iterable
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx

SETTING = "LLMDUEL_ALLOWED_HOSTS"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class EgressDenied(Exception):
    """A host the egress policy does not allow; the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def normalise_host(host: str) -> str:
    """A hostname or address as compared: lower case, no brackets, no trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


def as_address(host: str) -> IPAddress | None:
    """``host`` as an IP address (IPv4-mapped IPv6 as IPv4), or None for a name."""
    try:
        ip = ipaddress.ip_address(normalise_host(host).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _getaddrinfo(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def resolve(host: str, port: int = 443) -> list[str]:
    """The addresses ``host`` resolves to now (``OSError`` when it does not)."""
    return list(dict.fromkeys(_getaddrinfo(host, port)))


@dataclasses.dataclass(frozen=True)
class EgressPolicy:
    allow_all: bool = True
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".example.org" for an entry "*.example.org"
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> EgressPolicy:
        """The policy of a setting's value; ``ValueError`` naming a bad entry."""
        entries = [e.strip() for e in (spec or "*").split(",") if e.strip()]
        if not entries:
            raise ValueError("must list at least one host, address or network, or be '*'")
        if "*" in entries:
            return cls()
        names: set[str] = set()
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        for entry in entries:
            e = normalise_host(entry)
            if as_address(e) is not None or "/" in e:
                try:
                    networks.append(ipaddress.ip_network(e, strict=False))
                except ValueError:
                    raise ValueError(f"{entry!r} is not a valid IP address or CIDR network") from None
            elif e.startswith("*.") and _is_hostname(e[2:]):
                suffixes.append(e[1:])
            elif _is_hostname(e):
                names.add(e)
            else:
                raise ValueError(f"{entry!r} is not a hostname, *.domain, IP address or CIDR network")
        return cls(False, frozenset(names), tuple(suffixes), tuple(networks))

    def name_allowed(self, host: str) -> bool:
        h = normalise_host(host)
        return self.allow_all or h in self.names or any(h.endswith(s) for s in self.suffixes)

    def address_allowed(self, address: str | IPAddress) -> bool:
        ip = as_address(address) if isinstance(address, str) else address
        if ip is None:
            return False
        return self.allow_all or any(ip.version == n.version and ip in n for n in self.networks)

    def check_addresses(self, host: str, addresses: Iterable[str]) -> list[str]:
        """``addresses`` (of ``host``) when every one is allowed; else :class:`EgressDenied`."""
        found = list(addresses)
        if not found:
            raise EgressDenied(f"host {host} resolves to no address")
        bad = [a for a in found if not self.address_allowed(a)]
        if bad:
            raise EgressDenied(f"host {host} resolves to {bad[0]}, which {SETTING} does not allow")
        return found

    def check_host(self, host: str, port: int = 443) -> None:
        """Create time: :class:`EgressDenied` naming ``host`` unless the policy allows it."""
        if self.name_allowed(host):
            return
        h = normalise_host(host)
        if as_address(h) is not None:
            if self.address_allowed(h):
                return
            raise EgressDenied(f"host {h} is not allowed by {SETTING}")
        if not self.networks:
            raise EgressDenied(f"host {h} is not allowed by {SETTING}")
        try:
            addresses = resolve(h, port)
        except OSError:
            raise EgressDenied(
                f"host {h} is not allowed by {SETTING} (not listed by name and not resolvable)"
            ) from None
        self.check_addresses(h, addresses)

    def check_url(self, url: str) -> None:
        """Create time: the host of ``url`` (http or https) may be called."""
        if self.allow_all:
            return
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self.check_host(parts.hostname or "", port)


class EgressBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the policy checked on every new connection.

    A host allowed by name is connected to as usual. Any other host is resolved
    here, every address it resolves to must be allowed, and the connection goes to
    that checked address (TLS still verifies the certificate of the name).
    """

    def __init__(self, policy: EgressPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.policy.name_allowed(host):
            return await self.inner.connect_tcp(
                host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
            )
        h = normalise_host(host)
        if as_address(h) is not None:
            addresses = [h]
        else:
            try:
                addresses = await anyio.to_thread.run_sync(resolve, h, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {h}: {exc}") from None
        addresses = self.policy.check_addresses(h, addresses)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last if last is not None else httpcore.ConnectError(f"cannot connect to {h}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise EgressDenied(f"unix sockets are not allowed by {SETTING}")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class EgressTransport(httpx.AsyncHTTPTransport):
    """httpx's transport whose connection pool connects through :class:`EgressBackend`."""

    def __init__(self, policy: EgressPolicy) -> None:
        super().__init__(trust_env=False)
        # httpx builds its pool without a network backend argument: the same pool (httpx's
        # default limits: 100 connections, 20 kept alive for 5 s), with one.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=EgressBackend(policy),
        )


def http_client(policy: EgressPolicy, timeout: httpx.Timeout | float) -> httpx.AsyncClient:
    """The server's HTTP client for model calls and webhooks, under ``policy``."""
    if policy.allow_all:
        return httpx.AsyncClient(timeout=timeout)
    return httpx.AsyncClient(timeout=timeout, transport=EgressTransport(policy), trust_env=False)


def _is_hostname(name: str) -> bool:
    labels = name.split(".")
    return bool(name) and len(name) <= 253 and all(_is_label(label) for label in labels)


def _is_label(label: str) -> bool:
    return (
        0 < len(label) <= 63
        and label[0] != "-"
        and label[-1] != "-"
        and all(c.isascii() and (c.isalnum() or c in "-_") for c in label)
    )
