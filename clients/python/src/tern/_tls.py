"""TLS for the client: the credentials of connect(tls=...), and why a
connection that failed could not agree on TLS with the server."""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass
from typing import Union

import grpc

from ._errors import TLSError


@dataclass(frozen=True)
class TLS:
    """How to reach a server started with --tls-cert.

    ``ca`` is the PEM file (path or bytes) of the CA that signed the server's
    certificate (None: the system's CAs); ``cert`` and ``key`` the client's own
    certificate and key, for a server that requires one (--tls-client-ca);
    ``server_name`` the name to check the server's certificate for, when not
    the host of the address.
    """

    ca: Union[str, bytes, os.PathLike, None] = None
    cert: Union[str, bytes, os.PathLike, None] = None
    key: Union[str, bytes, os.PathLike, None] = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("tern: TLS needs both cert and key for a client certificate, or neither")
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca), private_key=_pem(self.key), certificate_chain=_pem(self.cert)
        )


def _pem(v: Union[str, bytes, os.PathLike, None]) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    with open(v, "rb") as f:
        return f.read()


TLSArg = Union[None, bool, str, os.PathLike, TLS]


def tls_config(tls: TLSArg) -> TLS | None:
    """connect's tls argument as a TLS, or None for plaintext: True is TLS with
    the system's CAs, a path is the CA's PEM file."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return TLS()
    if isinstance(tls, TLS):
        return tls
    if isinstance(tls, (str, os.PathLike)):
        return TLS(ca=tls)
    raise TypeError(f"tern: tls={tls!r}: pass None, True, the CA's PEM file, or a tern.TLS")


def diagnose(addr: str, tls: TLS | None, timeout: float = 3.0) -> TLSError | None:
    """Why a connection to addr failed, if TLS is why: the server speaks TLS
    and the client not, or the reverse, or its certificate is refused. None
    when TLS is not the cause (or addr cannot be reached at all)."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError):
        return None
    with sock:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        try:
            with ctx.wrap_socket(sock, server_hostname=host) as tsock:
                der = tsock.getpeercert(binary_form=True)
        except ssl.SSLError:
            speaks_tls = False
        except OSError:
            return None
        else:
            speaks_tls = der is not None
    if tls is None and speaks_tls:
        return TLSError(
            f"tern: TLS handshake failed: the server at {addr} speaks TLS and the client does not: "
            "pass tls= (the CA's PEM file, or tern.TLS(...))"
        )
    if tls is not None and not speaks_tls:
        return TLSError(
            f"tern: TLS handshake failed: the server at {addr} does not speak TLS: "
            "leave out tls= (or start tern serve with --tls-cert and --tls-key)"
        )
    if tls is not None:
        return _verify(addr, host, int(port), tls, timeout)
    return None


def _verify(addr: str, host: str, port: int, tls: TLS, timeout: float) -> TLSError | None:
    """The refusal of the server's certificate by the client's CA, if any."""
    ca = _pem(tls.ca)
    ctx = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if tls.cert is not None and tls.key is not None and isinstance(tls.cert, (str, os.PathLike)):
        try:
            ctx.load_cert_chain(tls.cert, tls.key)  # type: ignore[arg-type]
        except (OSError, ssl.SSLError):
            pass
    ctx.set_alpn_protocols(["h2"])
    name = tls.server_name or host
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            with ctx.wrap_socket(sock, server_hostname=name):
                return None
    except ssl.SSLCertVerificationError as e:
        return TLSError(
            f"tern: TLS handshake failed: the client refused the certificate of the server at {addr}: "
            f"{e.verify_message}: pass the CA that signed it (tls=tern.TLS(ca=...)), or the name it "
            "holds (server_name=)"
        )
    except ssl.SSLError as e:
        return TLSError(f"tern: TLS handshake failed with the server at {addr}: {e.reason or e}: "
                        "does the server require a client certificate (tern.TLS(cert=..., key=...))?")
    except OSError:
        return None
