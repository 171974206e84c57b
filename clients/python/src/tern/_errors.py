"""Tern's errors, and how they come back from the wire.

A server's error is a gRPC status whose ErrorInfo detail (domain "tern.dev")
names it by a reason (client/rpcerr/rpcerr.go holds the table; docs/server.md
prints it). Each reason is one exception class here, the Python form of the
Go client's sentinel: FENCED is FencedError as ErrFenced is tern.ErrFenced.
"""

from __future__ import annotations

from typing import Mapping

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DOMAIN = "tern.dev"


class TernError(Exception):
    """The base of every error the client raises for a failed call.

    ``code`` is the gRPC status code, ``reason`` the ErrorInfo reason ("" when
    the status carried none, as when the server could not be reached) and
    ``metadata`` the ErrorInfo metadata.
    """

    reason_name = ""  # the reason of the class, for the table below

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode = grpc.StatusCode.UNKNOWN,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason or self.reason_name
        self.metadata = dict(metadata or {})


class NotFoundError(TernError, LookupError):
    """No such log (ErrNotFound)."""

    reason_name = "LOG_NOT_FOUND"


class ExistsError(TernError):
    """A log of that name exists (ErrExist)."""

    reason_name = "LOG_EXISTS"


class SubscriptionNotFoundError(TernError, LookupError):
    """The log has no subscription of that name (ErrSubNotFound)."""

    reason_name = "SUBSCRIPTION_NOT_FOUND"


class SubscriptionExistsError(TernError):
    """The log has a subscription of that name (ErrSubExist)."""

    reason_name = "SUBSCRIPTION_EXISTS"


class InvalidArgumentError(TernError, ValueError):
    """A malformed request: a bad option, a missing field (ErrInvalid)."""

    reason_name = "INVALID_ARGUMENT"


class InvalidNameError(InvalidArgumentError):
    """A log or subscription name breaks the naming rules (ErrInvalidName)."""

    reason_name = "INVALID_NAME"


class TooLargeError(InvalidArgumentError):
    """An entry or a batch is over its limit (ErrTooLarge)."""

    reason_name = "TOO_LARGE"


class FencedError(TernError):
    """A newer writer session was opened on the log: this writer is done (ErrFenced)."""

    reason_name = "FENCED"


class TruncatedError(TernError):
    """A read below the log's start (ErrTruncated, *TruncatedError).

    ``start`` is where the log starts now, ``offset`` the offset asked for.
    """

    reason_name = "TRUNCATED"

    def __init__(self, message: str, *, offset: int = 0, start: int = 0, **kw) -> None:
        super().__init__(message, **kw)
        self.offset = offset
        self.start = start


class OutOfRangeError(TernError, IndexError):
    """An offset beyond the log's end, or an ack of an entry not delivered (ErrOutOfRange)."""

    reason_name = "OUT_OF_RANGE"


class NotOwnerError(TernError):
    """In a cluster, another node serves the log; ``owner`` is its address.

    The client follows it by itself: it reaches callers only when the
    redirects did not settle within the retry timeout.
    """

    reason_name = "NOT_OWNER"

    def __init__(self, message: str, *, log: str = "", owner: str = "", **kw) -> None:
        super().__init__(message, **kw)
        self.log = log
        self.owner = owner


class ClosedError(TernError):
    """The client, writer, reader or subscriber is closed, or the server is
    shutting down (ErrClosed; the client retries the latter)."""

    reason_name = "CLOSED"


class TakenOverError(ClosedError):
    """A newer subscriber took the subscription over: this one is done, do not
    reopen it, or the two take turns (ErrTakenOver, which matches ErrClosed)."""

    reason_name = "TAKEN_OVER"


class ConditionFailedError(TernError):
    """A conditional append found the log's end at ``end``, not at ``expected``;
    nothing was appended (ErrConditionFailed, *EndMismatchError)."""

    reason_name = "CONDITION_FAILED"

    def __init__(self, message: str, *, expected: int = 0, end: int = 0, **kw) -> None:
        super().__init__(message, **kw)
        self.expected = expected
        self.end = end


class DamagedError(TernError):
    """The log is damaged: readable up to the damage, no appends until
    `tern log repair` (ErrDamaged)."""

    reason_name = "DAMAGED"


class CorruptError(TernError):
    """Stored data failed its checksum; the message names the file and byte (ErrCorrupt)."""

    reason_name = "CORRUPT"


class NoSpaceError(TernError):
    """A disk, or etcd's quota, is full; appends resume once space is freed (ErrNoSpace)."""

    reason_name = "NO_SPACE"


class LimitError(TernError):
    """A configured bound of the server would be passed; the message names its setting (ErrLimit)."""

    reason_name = "LIMIT"


class UnavailableError(TernError):
    """The server, etcd or a peer does not answer now; the call may be retried
    (ErrUnavailable, and a server that cannot be reached)."""

    reason_name = "UNAVAILABLE"


class LockedError(TernError):
    """The server's data directory is in use by another process (ErrLocked)."""

    reason_name = "LOCKED"


class UnsupportedError(TernError):
    """The call is one this kind of client or server cannot make (ErrUnsupported)."""

    reason_name = "UNSUPPORTED"


class UnauthenticatedError(TernError):
    """The server checks callers (--auth) and knows no token or certificate of
    this client (ErrUnauthenticated): pass token= or a client certificate."""

    reason_name = "UNAUTHENTICATED"


class PermissionDeniedError(TernError, PermissionError):
    """The caller's grants do not allow the call; the message names the
    permission and the log (ErrPermissionDenied)."""

    reason_name = "PERMISSION_DENIED"


class DeadlineExceededError(TernError, TimeoutError):
    """The call's timeout passed before the server answered."""


class TLSError(TernError):
    """connect could not agree on TLS with the server: one side speaks TLS and
    the other not, or a certificate was refused (ErrTLS). Never from a server."""


_BY_REASON: dict[str, type[TernError]] = {
    c.reason_name: c
    for c in (
        TruncatedError, OutOfRangeError, FencedError, NotOwnerError, TakenOverError,
        ConditionFailedError, NotFoundError, SubscriptionNotFoundError, ExistsError,
        SubscriptionExistsError, InvalidNameError, TooLargeError, InvalidArgumentError,
        DamagedError, CorruptError, NoSpaceError, LimitError, UnavailableError, ClosedError,
        LockedError, UnsupportedError, UnauthenticatedError, PermissionDeniedError,
    )
}

# Without a Tern reason, these codes still name an error (docs/server.md):
# gRPC itself, an interceptor or a proxy sends them.
_BY_CODE: dict[grpc.StatusCode, type[TernError]] = {
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}

_CODES = {c.value[0]: c for c in grpc.StatusCode}


def from_parts(code: grpc.StatusCode, message: str, reason: str, md: Mapping[str, str]) -> TernError:
    """The error of a status code, message, ErrorInfo reason and metadata."""
    cls = _BY_REASON.get(reason) if reason else None
    if cls is None:
        cls = _BY_CODE.get(code, TernError)
        reason = ""
    kw: dict = {"code": code, "reason": reason, "metadata": md}
    if cls is TruncatedError:
        kw.update(offset=_uint(md.get("offset")), start=_uint(md.get("start")))
    elif cls is NotOwnerError:
        kw.update(log=md.get("log", ""), owner=md.get("owner", ""))
    elif cls is ConditionFailedError:
        kw.update(expected=_uint(md.get("expected")), end=_uint(md.get("end")))
    return cls(message or f"tern: {code.name.lower()}", **kw)


def _uint(s: str | None) -> int:
    try:
        return int(s or 0)
    except ValueError:
        return 0


def from_proto(e) -> TernError:
    """The error of a failed batch of AppendStream (an api Error message). It
    always reports a failure: a code of OK is taken as UNKNOWN."""
    code = _CODES.get(e.code, grpc.StatusCode.UNKNOWN)
    if code == grpc.StatusCode.OK:
        code = grpc.StatusCode.UNKNOWN
    return from_parts(code, e.message, e.reason, dict(e.metadata))


def from_rpc(err: grpc.RpcError) -> TernError:
    """The error of a failed gRPC call: the class of the reason its status
    carries. A call cut short by the client's own cancel is ClosedError."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else "") or ""
    reason, md = "", {}  # type: tuple[str, dict[str, str]]
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == "grpc-status-details-bin":
            reason, md = _error_info(value)
    if code == grpc.StatusCode.CANCELLED and not reason:
        return ClosedError("tern: the call was canceled: " + details, code=code)
    return from_parts(code, details, reason, md)


# google.rpc.Status and google.rpc.ErrorInfo, built in a pool of their own so
# that the client needs no googleapis package and clashes with none.
def _status_classes():
    f = descriptor_pb2.FileDescriptorProto(name="tern_rpc_status.proto", package="google.rpc", syntax="proto3")
    f.dependency.append("google/protobuf/any.proto")
    st = f.message_type.add(name="Status")
    st.field.add(name="code", number=1, type=5, label=1)  # int32
    st.field.add(name="message", number=2, type=9, label=1)  # string
    st.field.add(name="details", number=3, type=11, label=3, type_name=".google.protobuf.Any")
    info = f.message_type.add(name="ErrorInfo")
    info.field.add(name="reason", number=1, type=9, label=1)
    info.field.add(name="domain", number=2, type=9, label=1)
    info.field.add(name="metadata", number=3, type=11, label=3, type_name=".google.rpc.ErrorInfo.MetadataEntry")
    entry = info.nested_type.add(name="MetadataEntry")
    entry.field.add(name="key", number=1, type=9, label=1)
    entry.field.add(name="value", number=2, type=9, label=1)
    entry.options.map_entry = True
    from google.protobuf import any_pb2

    pool = descriptor_pool.DescriptorPool()
    any_file = descriptor_pb2.FileDescriptorProto()
    any_pb2.DESCRIPTOR.CopyToProto(any_file)
    pool.Add(any_file)
    pool.Add(f)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.ErrorInfo")),
    )


_Status, _ErrorInfo = _status_classes()


def _error_info(raw: bytes) -> tuple[str, dict[str, str]]:
    """The reason and metadata of the Tern ErrorInfo in a status's details."""
    try:
        st = _Status.FromString(raw)
        for d in st.details:
            if d.type_url.endswith("/google.rpc.ErrorInfo"):
                info = _ErrorInfo.FromString(d.value)
                if info.domain == DOMAIN:
                    return info.reason, dict(info.metadata)
    except Exception:  # a detail that does not decode: no reason
        pass
    return "", {}


def resent(err: TernError) -> bool:
    """Whether an append that failed with err is sent again (rpcerr.Resent):
    the server went away or is shutting down, the log or its node is
    unavailable, or the log is served elsewhere; never when fenced or taken
    over."""
    if isinstance(err, (FencedError, TakenOverError)):
        return False
    return isinstance(err, (UnavailableError, NotOwnerError)) or type(err) is ClosedError and err.reason == "CLOSED"


def retryable(err: TernError) -> bool:
    """Whether trying a call again may cure err (route.go's policy): the node
    could not be reached or is going away (UNAVAILABLE), or another node
    serves the log."""
    return isinstance(err, NotOwnerError) or err.code == grpc.StatusCode.UNAVAILABLE
