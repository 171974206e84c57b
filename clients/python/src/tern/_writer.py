"""The writer: appends pipelined over one AppendStream, as the Go client's
writer.go does.

Each append is one batch (appended atomically) with one result, and carries
the writer's producer id (random) and a sequence number, so that the server
applies a batch sent twice only once (docs/writers.md). Appends are queued
under the writer's lock, so the queue order is the call order and the
sequence order. A sender thread puts every batch queued since its last send
into one request (many appends, one message) and a receiver thread completes
the futures in order, since the server answers a stream's batches in the
order received.

When the stream breaks (the server restarted, the log moved, the connection
dropped), the batches sent and not answered go back to the front of the
queue, in order, and are sent again on a new stream to the node that serves
the log now; the server answers a batch it had applied with its first
offset. The writer keeps trying for the client's retry_timeout, then fails
the appends it could not get answered. Only FencedError ends it for good.
"""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import secrets
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

import grpc

from . import _route
from ._errors import (
    ClosedError, FencedError, InvalidArgumentError, NotFoundError, TernError, TooLargeError, from_proto, resent,
)
from ._pb import tern_pb2 as pb
from ._types import Entry, Payload

if TYPE_CHECKING:
    from ._client import Log

MAX_REQUEST_BYTES = 4 << 20  # about the most batch bytes packed into one request
STREAM_END_TIMEOUT = 5.0  # how long closing waits for the server to end the stream
MAX_BATCH_BYTES = 64 << 20

# What append_batch takes: payloads, (payload, properties) pairs, or Entries.
BatchItem = Union[Payload, tuple, Entry]


class _Pending:
    __slots__ = ("future", "seq", "batch", "bytes")

    def __init__(self, seq: int, batch: pb.Batch, size: int) -> None:
        self.future: Future[int] = Future()
        self.future.set_running_or_notify_cancel()  # an append cannot be called off once queued
        self.seq = seq
        self.batch = batch
        self.bytes = size


class _Stream:
    """One AppendStream: its call, its request queue (None half-closes) and
    the receiver thread's end."""

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.call: Any = None  # the grpc call, once started
        self.broken = threading.Event()

    def request_iter(self):
        while True:
            r = self.requests.get()
            if r is None:
                return
            yield r


def _entry(item: BatchItem) -> pb.Entry:
    if isinstance(item, Entry):
        return _pb_entry(item.payload, item.properties, item.time_unix_nano)
    if isinstance(item, tuple):
        return _pb_entry(*item)
    return _pb_entry(item, None)


def _pb_entry(payload: Payload, properties: Mapping[str, bytes] | None = None, time_unix_nano: int = 0) -> pb.Entry:
    if isinstance(payload, str):
        raise TypeError("tern: a payload is bytes, not str: encode it (payload.encode())")
    e = pb.Entry(payload=bytes(payload), time_unix_nano=time_unix_nano)
    if properties:
        for k, v in properties.items():
            if isinstance(v, str):
                raise TypeError(f"tern: property {k!r} is str: property values are bytes (encode it)")
            e.properties[k] = bytes(v)
    return e


class Writer:
    """Appends to a log as one writer session (its ``epoch``), or as a shared
    producer. Safe for concurrent use from many threads: concurrent appends
    are committed together, in the order they were queued. Only the newest
    session of a log can append; an older one's appends raise FencedError.

    Use it as a context manager, or call close (ends the session, so shared
    producers may append again) or detach (leaves it open, to be reopened with
    open_writer(epoch=...)).
    """

    def __init__(self, log: Log, epoch: int, *, shared: bool) -> None:
        self.log = log
        self.epoch = epoch
        self.shared = shared
        self._producer = secrets.randbits(64) | 1
        self._cv = threading.Condition()
        self._closed = False
        self._seq = 0
        self._queue: collections.deque[_Pending] = collections.deque()  # not sent on the current stream
        self._sent: collections.deque[_Pending] = collections.deque()  # sent, not answered, in order
        self._stream: _Stream | None = None
        self._fenced: TernError | None = None
        self._failing: float | None = None  # when the oldest unanswered batch's stream broke
        self._last: _Pending | None = None
        log.client._track(self)
        self._sender = threading.Thread(target=self._run, name=f"tern-writer {log.name}", daemon=True)
        self._sender.start()

    def __repr__(self) -> str:
        return f"tern.Writer({self.log.name!r}, epoch={self.epoch})"

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Appends.
    def append(self, payload: Payload, properties: Mapping[str, bytes] | None = None, *,
               if_end: int | None = None, timeout: float | None = None) -> int:
        """Appends one entry and returns its offset once it is durable (under
        the log's durability setting). Raises FencedError when a newer writer
        session was opened, TooLargeError over the log's entry limit, and
        TimeoutError when ``timeout`` seconds pass first (the append goes on;
        its outcome is then unknown). With ``if_end`` it is appended only if
        the log ends there, counting the appends queued before it, else
        ConditionFailedError says where it ends."""
        return _wait(self.append_async(payload, properties, if_end=if_end), timeout)

    def append_batch(self, entries: Iterable[BatchItem], *, if_end: int | None = None,
                     timeout: float | None = None) -> int:
        """Appends entries atomically (all or none, also across a crash) and
        returns the offset of the first; the others follow densely. An entry is
        a payload, a (payload, properties) pair or an Entry."""
        return _wait(self.append_batch_async(entries, if_end=if_end), timeout)

    def append_async(self, payload: Payload, properties: Mapping[str, bytes] | None = None, *,
                     if_end: int | None = None) -> Future[int]:
        """Queues one entry and returns at once a Future of its offset. Appends
        are acknowledged in the order they were queued, pipelined on one
        stream. The future's exception is the append's TernError."""
        return self._enqueue([_pb_entry(payload, properties)], if_end)

    def append_batch_async(self, entries: Iterable[BatchItem], *, if_end: int | None = None) -> Future[int]:
        """Queues entries to be appended atomically, as append_batch does, and
        returns at once a Future of the first's offset."""
        return self._enqueue([_entry(e) for e in entries], if_end)

    def _enqueue(self, es: list[pb.Entry], if_end: int | None) -> Future[int]:
        if not es:
            return _failed(InvalidArgumentError("tern: an append needs at least one entry"))
        batch = pb.Batch(entries=es, if_end=if_end)
        size = batch.ByteSize() + 16
        if size > MAX_BATCH_BYTES:
            return _failed(TooLargeError(f"tern: the batch is {size} bytes, over the {MAX_BATCH_BYTES} one "
                                         "request to a server can carry; split it"))
        with self._cv:
            if self._closed or self.log.client.closed:
                return _failed(ClosedError(f"tern: the writer of {self.log.name!r} is closed"))
            if self._fenced is not None:
                return _failed(self._fenced)
            self._seq += 1
            batch.seq = self._seq
            p = _Pending(self._seq, batch, size)
            self._queue.append(p)
            self._last = p
            self._cv.notify_all()
        return p.future

    def append_time_tick(self, t: int, *, timeout: float | None = None) -> None:
        """Sends a time tick: an ordered marker that readers and subscribers
        opened with ticks=True receive after every entry queued before the call
        and before every entry queued after it. ``t`` is the application's
        value. Nothing is written: a tick reaches the readers open when it is
        sent. It waits for the appends queued before it to be answered."""
        with self._cv:
            closed, last, fenced = self._closed, self._last, self._fenced
        if closed or self.log.client.closed:
            raise ClosedError(f"tern: the writer of {self.log.name!r} is closed")
        if fenced is not None:
            raise fenced
        if self.shared:
            raise InvalidArgumentError("tern: shared producers send no time ticks; open a writer")
        if last is not None:
            _wait(last.future, timeout)
        md = self.log.client._metadata
        req = pb.AppendTimeTickRequest(log=self.log.name, epoch=self.epoch, time=t)
        _route.call(self.log, lambda s, tt: s.AppendTimeTick(req, timeout=tt, metadata=md), timeout=timeout)

    # The sender.
    def _run(self) -> None:
        """Opens streams, sends the queue in order, and starts over on a new
        stream when one breaks, until the writer is closed and everything
        queued is answered; then half-closes the stream."""
        backoff = _route.Backoff()
        while True:
            with self._cv:
                while not self._queue and not (self._closed and not self._sent):
                    self._cv.wait()
                s = self._stream
                if self._queue and s is not None:
                    self._send(s)
                    continue
                closing = not self._queue
                failing = self._failing is not None
            if closing:
                if s is not None:
                    self._end(s)
                return
            # A new stream; every one while failing waits longer, up to a cap.
            if not failing:
                backoff = _route.Backoff()
            else:
                time.sleep(backoff.pause())
            self._open()

    def _open(self) -> None:
        try:
            stub, _ = self.log._node()
        except TernError as e:
            self._retry_or_fail(e)
            return
        s = _Stream()
        s.call = stub.AppendStream(s.request_iter(), metadata=self.log.client._metadata)
        with self._cv:
            self._stream = s
        threading.Thread(target=self._receive, args=(s,), name=f"tern-writer-recv {self.log.name}", daemon=True).start()

    def _send(self, s: _Stream) -> None:
        """Puts what is queued into requests on s, about MAX_REQUEST_BYTES each.
        The caller holds the lock."""
        while self._queue:
            n, size = 0, 0
            batches = []
            acked = self._sent[0].seq if self._sent else self._queue[0].seq
            while self._queue and (n == 0 or size + self._queue[0].bytes <= MAX_REQUEST_BYTES):
                p = self._queue.popleft()
                size += p.bytes
                n += 1
                batches.append(p.batch)
                self._sent.append(p)
            s.requests.put(pb.AppendStreamRequest(
                log=self.log.name, epoch=self.epoch, shared=self.shared, producer=self._producer,
                acked=acked, batches=batches,
            ))

    def _end(self, s: _Stream) -> None:
        """Half-closes s and waits, STREAM_END_TIMEOUT at most, for the server to end it."""
        s.requests.put(None)
        if not s.broken.wait(STREAM_END_TIMEOUT):
            s.call.cancel()
            s.broken.wait()

    # The receiver.
    def _receive(self, s: _Stream) -> None:
        err: TernError | None = None
        try:
            for resp in s.call:
                err = self._results(resp)
                if err is not None:
                    break
            else:
                with self._cv:
                    unanswered = bool(self._sent)
                if unanswered:
                    err = ClosedError("tern: the server ended the append stream without answering",
                                      code=grpc.StatusCode.UNAVAILABLE)
        except grpc.RpcError as e:
            err = self.log.client._map(e)
        if err is not None:
            self._broke(s, err)
        s.broken.set()

    def _results(self, resp: pb.AppendStreamResponse) -> TernError | None:
        """Completes the futures the response answers; returns the error that
        says to send the rest again, if any."""
        done: list[tuple[_Pending, int, TernError | None]] = []
        retry: TernError | None = None
        with self._cv:
            if len(self._sent) < len(resp.results):
                return ClosedError("tern: the server answered an append that was not sent",
                                   code=grpc.StatusCode.UNAVAILABLE)
            for r in resp.results:
                e = None
                if r.HasField("error"):
                    e = from_proto(r.error)
                    if resent(e) and not self.log.client.closed:
                        retry = e
                        break
                    if isinstance(e, FencedError) and self._fenced is None:
                        self._fenced = e
                done.append((self._sent.popleft(), r.offset, e))
            if done:
                self._failing = None  # answers come again
            self._cv.notify_all()
        for p, off, e in done:
            if e is not None:
                p.future.set_exception(e)
            else:
                p.future.set_result(off)
        return retry

    def _broke(self, s: _Stream, err: TernError) -> None:
        """Ends s for err: what it sent and did not answer goes back to the
        front of the queue, to be sent again on the next stream, unless err is
        final."""
        s.call.cancel()
        s.requests.put(None)
        with self._cv:
            if self._stream is s:
                self._stream = None
            self._sent.extend(self._queue)
            self._queue, self._sent = self._sent, collections.deque()
            self._cv.notify_all()
        self._retry_or_fail(err)

    def _retry_or_fail(self, err: TernError) -> None:
        if self.log.client.closed:
            self._fail_all(ClosedError("tern: the client is closed"))
            return
        with self._cv:
            if self._failing is None:
                self._failing = time.monotonic()
            expired = time.monotonic() - self._failing > self.log.client._retry_timeout
            self._cv.notify_all()
        if isinstance(err, FencedError):
            with self._cv:
                self._fenced = self._fenced or err
            self._fail_all(err)
        elif not (resent(err) or _route.retryable(err)):
            self._fail_all(err)
        elif expired:
            c = self.log.client
            self._fail_all(type(err)(
                f"{err.message}: the writer could not reach the tern server at {c.addr} for "
                f"{c._retry_timeout:g}s (retry_timeout): the outcome of the appends it had sent is unknown",
                code=err.code, reason=err.reason, metadata=err.metadata,
            ))
        else:
            self.log._redirect(err)

    def _fail_all(self, err: TernError) -> None:
        with self._cv:
            ps = list(self._queue)
            self._queue.clear()
            self._failing = None
            self._cv.notify_all()
        for p in ps:
            p.future.set_exception(err)

    # Ending.
    def _stop(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            last = self._last
            self._cv.notify_all()
        if last is not None:
            last.future.exception()
        self._sender.join()
        self.log.client._untrack(self)

    def detach(self) -> None:
        """Waits for the queued appends to be answered and ends the stream, but
        leaves the session open: open_writer(epoch=w.epoch) reopens it, and
        shared producers still cannot append."""
        self._stop()

    def close(self) -> None:
        """Waits for the queued appends to be answered, ends the stream, and
        ends the session on the server unless a newer one fenced it: shared
        producers may then append. The session can still be reopened with
        open_writer(epoch=...)."""
        self._stop()
        if self.shared or self._fenced is not None or self.log.client.closed:
            return
        md = self.log.client._metadata
        req = pb.CloseWriterRequest(log=self.log.name, epoch=self.epoch)
        try:
            _route.call(self.log, lambda s, t: s.CloseWriter(req, timeout=t, metadata=md), timeout=STREAM_END_TIMEOUT)
        except (FencedError, NotFoundError):
            pass  # a newer session, or no log: nothing to end

    def _close_with_client(self) -> None:
        self.detach()


def _wait(f: Future[int], timeout: float | None) -> int:
    """f's result; the built-in TimeoutError when timeout passes first (before
    Python 3.11, concurrent.futures raises a TimeoutError of its own)."""
    try:
        return f.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"tern: the append was not answered within {timeout}s; it goes on, "
                           "its outcome unknown") from None


def _failed(err: TernError) -> Future[int]:
    f: Future[int] = Future()
    f.set_running_or_notify_cancel()
    f.set_exception(err)
    return f
