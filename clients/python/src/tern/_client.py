"""The client and its log handles: the calls that are one request and one
answer. Writers, readers and subscribers have files of their own."""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import TYPE_CHECKING, Any, Sequence

import grpc

from . import _route
from ._addr import parse_server
from ._errors import (
    ClosedError, ExistsError, InvalidArgumentError, InvalidNameError, NotFoundError, NotOwnerError,
    SubscriptionExistsError, SubscriptionNotFoundError, TernError, UnauthenticatedError, UnavailableError,
    UnsupportedError,
    from_rpc,
)
from ._pb import tern_pb2 as pb
from ._pb import tern_pb2_grpc as pbg
from ._tls import TLS, TLSArg, diagnose, tls_config
from ._types import FROM_END, FROM_START, LogInfo, LogOptions, SubscriptionInfo

if TYPE_CHECKING:
    from ._reader import Reader
    from ._subscribe import Subscriber
    from ._writer import Writer

DEFAULT_RETRY_TIMEOUT = 30.0
PROBE_TIMEOUT = 10.0
MAX_MESSAGE_BYTES = 64 << 20  # grpcopts.MaxMessageBytes
MAX_LIST_PAGE = 10000

_NAME = re.compile(r"^[A-Za-z0-9._/-]{1,255}$")
_SUB_NAME = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


def validate_name(name: str) -> None:
    """Raises InvalidNameError unless name can name a log: 1 to 255 bytes of
    letters, digits, '.', '_', '-' and '/' between non-empty parts other than
    "." and ".." (client/name.go)."""
    parts = name.split("/")
    if not _NAME.match(name) or any(p in ("", ".", "..") for p in parts):
        raise InvalidNameError(
            f"tern: invalid name: log {name!r}: use 1 to 255 bytes of letters, digits, '.', '_', '-', "
            "and '/' between non-empty parts other than \".\" and \"..\""
        )


def validate_sub_name(name: str) -> None:
    if not _SUB_NAME.match(name) or name in (".", ".."):
        raise InvalidNameError(
            f"tern: invalid name: subscription {name!r}: use 1 to 255 bytes of letters, digits, '.', '_' "
            "and '-', other than \".\" and \"..\""
        )


def connect(
    server: str,
    *,
    tls: TLSArg = None,
    token: str | None = None,
    nodes: Sequence[str] = (),
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
) -> Client:
    """Connects to the Tern server at ``server`` and checks that it answers.

    ``server`` is written as for ``tern --server``: host:port, host alone
    (port 7070), http://host:port, https://host:port (TLS with the system's
    CAs unless ``tls`` says otherwise), or several nodes of a cluster
    separated by commas.

    ``tls``: None (plaintext), True (TLS, the system's CAs), the path of the
    PEM file of the CA that signed the server's certificate, or a tern.TLS
    (with a client certificate for mutual TLS). ``token``: the bearer token
    for a server started with --auth, sent with every call. ``nodes``: more
    nodes of the same cluster, asked in turn when the first cannot be
    reached. ``retry_timeout``: how long, in seconds, a call (or a writer,
    reader or subscriber reconnecting) keeps trying while the server cannot
    be reached or the log moves; 0 or less: no retry beyond redirects.

    Raises TLSError when TLS is why it cannot connect, UnauthenticatedError
    when the server does not know the token, UnavailableError when nothing
    answers.
    """
    if not server:
        raise InvalidArgumentError("tern: connect needs the server's address (host:port)")
    if token is not None and (not token or any(not (0x21 <= ord(ch) <= 0x7E) for ch in token)):
        raise InvalidArgumentError("tern: the token must be printable ASCII without spaces")
    seeds: list[str] = []
    https = False
    for a in [p for n in (server, *nodes) for p in n.split(",") if p.strip()]:
        addr, wants_tls = parse_server(a)
        https = https or wants_tls
        if addr not in seeds:
            seeds.append(addr)
    if not seeds:
        raise InvalidArgumentError("tern: connect needs the server's address (host:port)")
    if https and tls is None:
        tls = True
    last: TernError | None = None
    for addr in seeds:
        c = Client(addr, seeds, tls_config(tls), token, retry_timeout)
        try:
            c._probe()
            return c
        except _Unreached as e:
            c.close()
            last = e.err
        except BaseException:
            c.close()
            raise
    assert last is not None
    raise last


class _Unreached(Exception):
    def __init__(self, err: TernError) -> None:
        self.err = err


class Client:
    """A connection to a Tern server (or the nodes of a cluster). Safe for
    concurrent use from many threads. Close it (or use it as a context
    manager) to close its writers, readers and subscribers and its
    connections."""

    def __init__(self, addr: str, seeds: list[str], tls: TLS | None, token: str | None, retry_timeout: float) -> None:
        self.addr = addr
        self._seeds = seeds
        self._tls = tls
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", "Bearer " + token),) if token else ()
        self._retry_timeout = max(retry_timeout, 0.0)
        self._mu = threading.Lock()
        self.closed = False
        self._channels: dict[str, grpc.Channel] = {}
        self._open: set[Any] = set()  # writers, readers, subscribers to close with the client
        self._stub = self._stub_at(addr)

    def _stub_at(self, addr: str) -> pbg.TernStub:
        with self._mu:
            if self.closed:
                raise ClosedError("tern: the client is closed")
            ch = self._channels.get(addr)
            if ch is None:
                opts: list[tuple[str, Any]] = [
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    # Reconnect soon after a server restart (gRPC's default backs off to 120 s).
                    ("grpc.initial_reconnect_backoff_ms", 20),
                    ("grpc.min_reconnect_backoff_ms", 20),
                    ("grpc.max_reconnect_backoff_ms", 200),
                ]
                if self._tls is not None:
                    if self._tls.server_name:
                        opts.append(("grpc.ssl_target_name_override", self._tls.server_name))
                    ch = grpc.secure_channel(addr, self._tls.credentials(), options=opts)
                else:
                    ch = grpc.insecure_channel(addr, options=opts)
                self._channels[addr] = ch
            return pbg.TernStub(ch)

    def _probe(self) -> None:
        """One cheap call, the description of a log with an invalid name, which a
        Tern server refuses without touching its storage."""
        try:
            self._stub.DescribeLog(pb.DescribeLogRequest(name=""), timeout=PROBE_TIMEOUT, metadata=self._metadata)
        except grpc.RpcError as e:
            code = e.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                terr = diagnose(self.addr, self._tls)
                if terr is not None:
                    raise terr from None
                raise _Unreached(UnavailableError(
                    f"tern: cannot reach the server at {self.addr}: {e.details()} (is `tern serve` running?)",
                    code=code,
                )) from None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise UnsupportedError(f"tern: the server at {self.addr} does not serve the Tern API: {e.details()}",
                                       code=code) from None
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise UnauthenticatedError(
                    f"tern: the server at {self.addr} does not know this client: {e.details()}: give it a token "
                    "the server knows (token=), or a client certificate (tls=tern.TLS(cert=..., key=...))",
                    code=code,
                ) from None
            # It answered, even if to refuse the call (INVALID_ARGUMENT, PERMISSION_DENIED).

    def _map(self, err: grpc.RpcError) -> TernError:
        """The error of a failed call; ClosedError for one cut short by close."""
        if self.closed and err.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE):
            return ClosedError("tern: the client is closed")
        return from_rpc(err)

    def _track(self, x: Any) -> None:
        with self._mu:
            if self.closed:
                raise ClosedError("tern: the client is closed")
            self._open.add(x)

    def _untrack(self, x: Any) -> None:
        with self._mu:
            self._open.discard(x)

    def close(self) -> None:
        """Detaches the client's writers (after their queued appends are
        answered), closes its subscribers (so the server commits their
        acknowledgements) and readers, then its connections. Later calls
        raise ClosedError."""
        with self._mu:
            if self.closed:
                return
            open_ = list(self._open)
            self._open.clear()
        for x in open_:  # before closed is set, so that writers can drain
            try:
                x._close_with_client()
            except TernError:
                pass
        with self._mu:
            self.closed = True
            channels = list(self._channels.values())
            self._channels.clear()
        for ch in channels:
            ch.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _log(self, name: str) -> Log:
        return Log(self, name, LogOptions())

    def create_log(self, name: str, mode: str | None = None, *, options: LogOptions | None = None,
                   timeout: float | None = None) -> Log:
        """Creates a log and returns it. ``mode`` is "local", "object" or
        "quorum" (None: the server's default); ``options`` sets the rest (zero
        fields take the server's defaults). Raises ExistsError if a log of that
        name exists, InvalidNameError for a bad name."""
        validate_name(name)
        opts = options or LogOptions()
        if mode is not None:
            opts = dataclasses.replace(opts, mode=mode)
        log = self._log(name)
        r = _route.Retrier(log, timeout)
        req = pb.CreateLogRequest(name=name, options=opts.to_proto())
        try:
            info = _route.call(log, lambda s, t: s.CreateLog(req, timeout=t, metadata=self._metadata), retrier=r)
        except ExistsError:
            # A retry after an unknown outcome may find the log the earlier try created.
            if not r.unknown:
                raise
            info = log._describe(timeout)
        log.options = LogOptions.from_proto(info.options)
        return log

    def open_log(self, name: str, *, timeout: float | None = None) -> Log:
        """Returns a handle on an existing log (NotFoundError if there is none).
        The handle holds nothing on the server."""
        validate_name(name)
        log = self._log(name)
        log.options = LogOptions.from_proto(log._describe(timeout).options)
        return log

    def delete_log(self, name: str, *, timeout: float | None = None) -> None:
        """Deletes a log and its data. NotFoundError if there is none."""
        validate_name(name)
        log = self._log(name)
        r = _route.Retrier(log, timeout)
        try:
            _route.call(log, lambda s, t: s.DeleteLog(pb.DeleteLogRequest(name=name), timeout=t,
                                                      metadata=self._metadata), retrier=r)
        except NotFoundError:
            if not r.unknown:  # else deleted by the try whose outcome was unknown
                raise

    def list_logs(self, prefix: str = "", *, timeout: float | None = None) -> list[LogInfo]:
        """Describes the logs whose names start with prefix, by name, following
        every page. The server answers from its metadata: a log it does not have
        open has end == start and bytes, segments and objects 0
        (extent_unknown; Log.info describes it in full)."""
        out: list[LogInfo] = []
        token = ""
        log = self._log("")
        while True:
            req = pb.ListLogsRequest(prefix=prefix, page_size=MAX_LIST_PAGE, page_token=token)
            resp = _route.call(log, lambda s, t: s.ListLogs(req, timeout=t, metadata=self._metadata), timeout=timeout)
            out.extend(LogInfo.from_proto(p) for p in resp.logs)
            if not resp.next_page_token:
                return out
            token = resp.next_page_token


class Log:
    """A handle on a log of the server. ``name`` and ``options`` are fixed; the
    rest is asked of the server at each call. Safe for concurrent use."""

    def __init__(self, client: Client, name: str, options: LogOptions) -> None:
        self.client = client
        self.name = name
        self.options = options
        self._mu = threading.Lock()
        self._at = ""  # the node serving the log; "" for the client's
        self._named = ""  # the last node a NotOwnerError named
        self._turn = 0

    def __repr__(self) -> str:
        return f"tern.Log({self.name!r})"

    # Routing (route.go): where the log's calls go.
    def _node(self) -> tuple[pbg.TernStub, str]:
        with self._mu:
            at = self._at or self.client.addr
        return self.client._stub_at(at), at

    def _redirect(self, err: TernError) -> bool:
        """Learns from a retryable error where the next try goes; reports
        whether that is another node than the one that failed."""
        with self._mu:
            was = self._at
            if isinstance(err, NotOwnerError):
                self._at = err.owner
                if err.owner:
                    self._named = err.owner
            elif self._at:
                self._at = ""
            else:
                nodes = [a for a in ([self._named] if self._named and self._named != self.client.addr else [])]
                nodes += [a for a in self.client._seeds if a != self.client.addr and a != self._named]
                if nodes:
                    self._turn += 1
                    self._at = nodes[self._turn % len(nodes)]
            return self._at != was

    def _describe(self, timeout: float | None) -> pb.LogInfo:
        md = self.client._metadata
        return _route.call(self, lambda s, t: s.DescribeLog(pb.DescribeLogRequest(name=self.name), timeout=t,
                                                            metadata=md), timeout=timeout)

    def info(self, *, timeout: float | None = None) -> LogInfo:
        """Describes the log as it is now: start, end, bytes, segments, epoch."""
        return LogInfo.from_proto(self._describe(timeout))

    def truncate(self, before: int, *, timeout: float | None = None) -> None:
        """Declares the entries below ``before`` no longer needed: reads below it
        raise TruncatedError from now on. The start only moves forward; before
        may be at most the log's end."""
        md = self.client._metadata
        _route.call(self, lambda s, t: s.TruncateLog(pb.TruncateLogRequest(name=self.name, before=before),
                                                     timeout=t, metadata=md), timeout=timeout)

    def open_writer(self, epoch: int | None = None, *, only_reopen: bool = False, shared: bool = False,
                    timeout: float | None = None) -> Writer:
        """Opens a writer session: a new epoch above every older one, or the one
        ``epoch`` names (lower than the log's newest: FencedError; equal: that
        session, reopened; higher: a new one). Every older session is fenced.
        ``only_reopen``: only if epoch is the log's newest session.
        ``shared``: a shared producer, which fences no one and has no epoch.
        The session outlives the server: the Writer rides through a restart."""
        from ._writer import Writer

        if shared:
            if epoch:
                raise InvalidArgumentError("tern: a shared producer has no epoch of its own (epoch with shared)")
            return Writer(self, 0, shared=True)
        md = self.client._metadata
        req = pb.OpenWriterRequest(log=self.name, epoch=epoch or 0, reopen=only_reopen)
        resp = _route.call(self, lambda s, t: s.OpenWriter(req, timeout=t, metadata=md), timeout=timeout)
        return Writer(self, resp.epoch, shared=False)

    def open_reader(self, from_: int = FROM_START, *, follow: bool = False, ticks: bool = False,
                    timeout: float | None = None) -> Reader:
        """Returns a Reader, an iterator of the log's entries from ``from_`` (an
        offset between the log's start and end, or FROM_START or FROM_END).
        Without ``follow`` it stops at the log's end as of each (re)opening;
        with it, it waits at the tail for new entries. ``ticks``: yield the time
        ticks too (TimeTick). Raises TruncatedError for an offset below the
        start, when it opens (it returns once the server opened the reader)."""
        from ._reader import Reader

        return Reader(self, from_, follow=follow, ticks=ticks, timeout=timeout)

    # Subscriptions.
    def create_subscription(self, name: str, *, from_: int = 0, from_end: bool = False, pin: bool = False,
                            timeout: float | None = None) -> SubscriptionInfo:
        """Creates a durable subscription whose first entry is ``from_`` (or the
        log's end, with from_end). ``pin``: retention keeps what it has not
        consumed. SubscriptionExistsError if there is one of that name."""
        validate_sub_name(name)
        md = self.client._metadata
        req = pb.CreateSubscriptionRequest(log=self.name, name=name, from_end=from_end, pin=pin)
        setattr(req, "from", from_)
        r = _route.Retrier(self, timeout)
        try:
            info = _route.call(self, lambda s, t: s.CreateSubscription(req, timeout=t, metadata=md), retrier=r)
        except SubscriptionExistsError:
            if not r.unknown:
                raise
            info = self._subscription(name, timeout)
            if info.pin != pin:
                raise
        return SubscriptionInfo.from_proto(info)

    def _subscription(self, name: str, timeout: float | None) -> pb.SubscriptionInfo:
        md = self.client._metadata
        req = pb.DescribeSubscriptionRequest(log=self.name, name=name)
        return _route.call(self, lambda s, t: s.DescribeSubscription(req, timeout=t, metadata=md), timeout=timeout)

    def subscription(self, name: str, *, timeout: float | None = None) -> SubscriptionInfo:
        """Describes a subscription: its cursor and lag."""
        validate_sub_name(name)
        return SubscriptionInfo.from_proto(self._subscription(name, timeout))

    def subscriptions(self, *, timeout: float | None = None) -> list[SubscriptionInfo]:
        """Describes the log's subscriptions, by name."""
        md = self.client._metadata
        req = pb.ListSubscriptionsRequest(log=self.name)
        resp = _route.call(self, lambda s, t: s.ListSubscriptions(req, timeout=t, metadata=md), timeout=timeout)
        return [SubscriptionInfo.from_proto(p) for p in resp.subscriptions]

    def delete_subscription(self, name: str, *, timeout: float | None = None) -> None:
        """Deletes a subscription; its subscriber, if any, ends with ClosedError."""
        validate_sub_name(name)
        md = self.client._metadata
        req = pb.DeleteSubscriptionRequest(log=self.name, name=name)
        r = _route.Retrier(self, timeout)
        try:
            _route.call(self, lambda s, t: s.DeleteSubscription(req, timeout=t, metadata=md), retrier=r)
        except SubscriptionNotFoundError:
            if not r.unknown:
                raise

    def seek(self, name: str, to: int, *, timeout: float | None = None) -> None:
        """Moves a subscription's cursor to ``to``, forwards or backwards; its
        subscriber, if any, goes on from there."""
        validate_sub_name(name)
        md = self.client._metadata
        req = pb.SeekRequest(log=self.name, name=name, to=to)
        _route.call(self, lambda s, t: s.Seek(req, timeout=t, metadata=md), timeout=timeout)

    def subscribe(self, name: str, *, create: bool = True, ticks: bool = False,
                  timeout: float | None = None) -> Subscriber:
        """Returns a Subscriber, an iterator of the subscription's entries from
        its cursor, following the tail; acknowledge them with its ack. With
        ``create`` (the default) a subscription that does not exist is created
        at the log's start first; without, SubscriptionNotFoundError. Raises
        TruncatedError when the cursor is below the log's start (seek it)."""
        from ._subscribe import Subscriber

        validate_sub_name(name)
        if create:
            try:
                self._subscription(name, timeout)
            except SubscriptionNotFoundError:
                try:
                    self.create_subscription(name, from_=self.info(timeout=timeout).start, timeout=timeout)
                except SubscriptionExistsError:
                    pass  # another subscriber made it meanwhile
        return Subscriber(self, name, ticks=ticks, timeout=timeout)

