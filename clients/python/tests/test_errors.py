"""The error mapping: every reason of the table in docs/server.md (which a Go
test keeps equal to client/rpcerr's) is an exception class of the sentinel
of the same name, from a call's status and from a failed batch of
AppendStream alike; and a live server's refusals come back as them."""

import re
from pathlib import Path

import grpc
import pytest

import tern
from tern import _errors
from tern._pb import tern_pb2 as pb

DOC = Path(__file__).resolve().parents[3] / "docs" / "server.md"

# The Go sentinel each class stands for.
SENTINELS = {
    "ErrTruncated": tern.TruncatedError, "ErrOutOfRange": tern.OutOfRangeError, "ErrFenced": tern.FencedError,
    "ErrNotOwner": tern.NotOwnerError, "ErrTakenOver": tern.TakenOverError,
    "ErrConditionFailed": tern.ConditionFailedError, "ErrNotFound": tern.NotFoundError,
    "ErrSubNotFound": tern.SubscriptionNotFoundError, "ErrExist": tern.ExistsError,
    "ErrSubExist": tern.SubscriptionExistsError, "ErrInvalidName": tern.InvalidNameError,
    "ErrTooLarge": tern.TooLargeError, "ErrInvalid": tern.InvalidArgumentError, "ErrDamaged": tern.DamagedError,
    "ErrCorrupt": tern.CorruptError, "ErrNoSpace": tern.NoSpaceError, "ErrLimit": tern.LimitError,
    "ErrUnavailable": tern.UnavailableError, "ErrClosed": tern.ClosedError, "ErrLocked": tern.LockedError,
    "ErrUnsupported": tern.UnsupportedError, "ErrUnauthenticated": tern.UnauthenticatedError,
    "ErrPermissionDenied": tern.PermissionDeniedError,
}


def table():
    """The rows (code, reason, sentinel) of docs/server.md's status codes."""
    rows = []
    for line in DOC.read_text().splitlines():
        m = re.match(r"^\| `([A-Z_]+)` \| `([A-Z_]+)` \| `(\w+)` \|", line)
        if m:
            rows.append(m.groups())
    return rows


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, reason="", metadata=None, domain=_errors.DOMAIN):
        self._code, self._details = code, details
        st = _errors._Status(code=code.value[0], message=details)
        if reason:
            info = _errors._ErrorInfo(reason=reason, domain=domain, metadata=metadata or {})
            d = st.details.add()
            d.type_url = "type.googleapis.com/google.rpc.ErrorInfo"
            d.value = info.SerializeToString()
        self._trailers = (("grpc-status-details-bin", st.SerializeToString()),)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers


def test_every_reason_of_the_table_is_a_class():
    rows = [r for r in table() if not r[2].startswith(("ErrSegment", "ErrFragment", "ErrReplica", "ErrJournal"))]
    assert len(rows) == len(SENTINELS), f"docs/server.md lists {[r[2] for r in rows]}"
    for code, reason, sentinel in rows:
        cls = SENTINELS[sentinel]
        assert cls.reason_name == reason
        grpc_code = grpc.StatusCode[code]
        for err in (
            _errors.from_rpc(FakeRpcError(grpc_code, "msg", reason)),
            _errors.from_proto(pb.Error(code=grpc_code.value[0], message="msg", reason=reason)),
        ):
            assert type(err) is cls, (reason, err)
            assert err.code == grpc_code and err.reason == reason and str(err) == "msg"
            assert isinstance(err, tern.TernError)


def test_typed_errors_carry_their_metadata():
    e = _errors.from_rpc(FakeRpcError(grpc.StatusCode.OUT_OF_RANGE, "t", "TRUNCATED", {"offset": "3", "start": "42"}))
    assert isinstance(e, tern.TruncatedError) and (e.offset, e.start) == (3, 42)
    e = _errors.from_proto(pb.Error(code=9, message="n", reason="NOT_OWNER", metadata={"log": "a/b", "owner": "h:1"}))
    assert isinstance(e, tern.NotOwnerError) and (e.log, e.owner) == ("a/b", "h:1")
    e = _errors.from_proto(pb.Error(code=9, message="c", reason="CONDITION_FAILED",
                                    metadata={"expected": "4", "end": "7"}))
    assert isinstance(e, tern.ConditionFailedError) and (e.expected, e.end) == (4, 7)
    assert isinstance(_errors.from_proto(pb.Error(code=9, reason="TAKEN_OVER")), tern.ClosedError)


def test_statuses_without_a_tern_reason():
    cases = {
        grpc.StatusCode.UNAUTHENTICATED: tern.UnauthenticatedError,
        grpc.StatusCode.PERMISSION_DENIED: tern.PermissionDeniedError,
        grpc.StatusCode.UNAVAILABLE: tern.UnavailableError,
        grpc.StatusCode.DEADLINE_EXCEEDED: tern.DeadlineExceededError,
        grpc.StatusCode.INTERNAL: tern.TernError,
    }
    for code, cls in cases.items():
        assert type(_errors.from_rpc(FakeRpcError(code, "x"))) is cls
    # Another domain's reason is not Tern's.
    e = _errors.from_rpc(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x", "LOG_NOT_FOUND", domain="example.com"))
    assert type(e) is tern.TernError
    # A failed batch always reports a failure, whatever its code says.
    assert _errors.from_proto(pb.Error(code=0, message="x")).code == grpc.StatusCode.UNKNOWN


def test_which_append_errors_are_resent():
    def err(reason, code=grpc.StatusCode.FAILED_PRECONDITION):
        return _errors.from_parts(code, "x", reason, {})

    for reason, code in [("UNAVAILABLE", grpc.StatusCode.UNAVAILABLE), ("CLOSED", grpc.StatusCode.UNAVAILABLE),
                         ("NOT_OWNER", grpc.StatusCode.FAILED_PRECONDITION)]:
        assert _errors.resent(err(reason, code)), reason
    for reason in ["FENCED", "TAKEN_OVER", "LOG_NOT_FOUND", "TOO_LARGE"]:
        assert not _errors.resent(err(reason)), reason


def test_a_server_refusals(client, name):
    with pytest.raises(tern.NotFoundError):
        client.open_log(name)
    with pytest.raises(tern.NotFoundError):
        client.delete_log(name)
    with pytest.raises(tern.InvalidNameError):
        client.create_log("/bad//name")
    log = client.create_log(name, options=tern.LogOptions(max_entry_bytes=1024))
    with pytest.raises(tern.ExistsError):
        client.create_log(name)
    with pytest.raises(tern.SubscriptionNotFoundError):
        log.subscription("nobody")
    with pytest.raises(tern.SubscriptionNotFoundError):
        log.subscribe("nobody", create=False)
    log.create_subscription("s")
    with pytest.raises(tern.SubscriptionExistsError):
        log.create_subscription("s")
    with log.open_writer() as w:
        with pytest.raises(tern.TooLargeError):
            w.append(b"x" * 2048)
        with pytest.raises(tern.InvalidArgumentError):
            w.append_batch([])
        with pytest.raises(TypeError):
            w.append("text")  # type: ignore[arg-type]
        w.append_batch([b"a", b"b", b"c"])
    with pytest.raises(tern.OutOfRangeError):
        log.open_reader(10)
    log.truncate(2)
    with pytest.raises(tern.TruncatedError) as ei:
        log.open_reader(1)
    assert ei.value.start == 2 and ei.value.offset == 1
    with pytest.raises(tern.OutOfRangeError):
        log.truncate(100)  # beyond the end
