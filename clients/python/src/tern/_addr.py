"""Server addresses as people write them, by the rules of the Go client's
ParseServer (client/addr.go) and tern --server."""

from __future__ import annotations

import ipaddress

from ._errors import InvalidArgumentError

DEFAULT_PORT = 7070  # tern serve --listen 127.0.0.1:7070


def parse_server(s: str) -> tuple[str, bool]:
    """Returns the host:port of one server address and whether it asks for
    TLS: host:port; host alone (port 7070); :port (loopback); an IPv6
    address, bracketed or not; http://host[:port]; https://host[:port] (TLS).
    Raises InvalidArgumentError, showing the forms accepted, for anything
    else."""
    orig, s, tls = s, s.strip(), False

    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"tern: server address {orig!r}: {why}: use host:port (port {DEFAULT_PORT} when left out), "
            "or https://host:port for TLS"
        )

    scheme, sep, rest = s.partition("://")
    if sep:
        if scheme.lower() == "https":
            tls = True
        elif scheme.lower() != "http":
            raise bad(f"the scheme {scheme}:// is not tern serve's")
        s = rest.removesuffix("/")
    if not s:
        raise bad("no address")
    if any(c in s for c in "/?#@ "):
        raise bad("an address is host:port, with no path, query or user")
    host, port = _split(s)
    if port is None:
        port = str(DEFAULT_PORT)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise bad(f"port {port!r} is not a number from 1 to 65535")
    host = host or "127.0.0.1"
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), tls


def _split(s: str) -> tuple[str, str | None]:
    """Splits host and port; port is None when there is none."""
    if s.startswith("["):
        host, sep, rest = s[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise InvalidArgumentError(f"tern: server address {s!r}: a bracketed IPv6 address is [addr]:port")
        return host, (rest[1:] if rest else None)
    if s.count(":") > 1:
        try:
            ipaddress.IPv6Address(s)
        except ValueError:
            raise InvalidArgumentError(
                f"tern: server address {s!r}: too many colons: use host:port, or [addr]:port for IPv6"
            ) from None
        return s, None
    host, sep, port = s.partition(":")
    return host, (port if sep else None)
