"""Readers: a log's entries as an iterator, over one Read stream at a time,
reopened where it left off when the server restarts or the log moves (as the
Go client's read.go and recv.go)."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator

import grpc

from . import _route
from ._errors import ClosedError, TernError, retryable
from ._pb import tern_pb2 as pb
from ._types import FROM_END, FROM_START, Entry, TimeTick, entries_from_proto

if TYPE_CHECKING:
    from ._client import Log

RECV_AHEAD = 4  # responses received before they are asked for
FROM_HEADER = "tern-from"  # the offset a Read stream opened at (grpcopts.FromHeader)

class _End:
    """The end of a stream: err is None when the server ended it with OK."""

    __slots__ = ("err",)

    def __init__(self, err: TernError | None) -> None:
        self.err = err


class RecvLoop:
    """Receives one server stream's responses in a thread of its own, a few
    ahead, so that a caller's timeout only stops its wait, and close can end
    the stream from any thread."""

    def __init__(self, call, map_err: Callable[[grpc.RpcError], TernError]) -> None:
        self.call = call
        self.items: queue.Queue = queue.Queue(RECV_AHEAD)
        self.stopped = threading.Event()
        self.buf: list = []
        self.end: _End | None = None
        self._map = map_err
        self.thread = threading.Thread(target=self._run, name="tern-recv", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        end = _End(None)
        try:
            for resp in self.call:
                if not self._put(entries_from_proto(resp)):
                    return
        except grpc.RpcError as e:
            end = _End(self._map(e))
        self._put(end)

    def _put(self, item) -> bool:
        while not self.stopped.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def stop(self) -> None:
        self.stopped.set()
        self.call.cancel()

    def next(self, timeout: float | None):
        """The next entry or tick; an _End once the stream ended; raises
        TimeoutError when timeout passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.buf:
            if self.end is not None:
                return self.end
            if self.stopped.is_set():
                return _End(ClosedError("tern: the stream was closed", code=grpc.StatusCode.CANCELLED))
            # Short waits, so that a stop from another thread is seen.
            wait = 0.1 if deadline is None else min(max(deadline - time.monotonic(), 0), 0.1)
            try:
                it = self.items.get(timeout=wait)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("tern: no entry within the timeout") from None
                continue
            if isinstance(it, _End):
                self.end = it
            else:
                self.buf.extend(it)
        return self.buf.pop(0)


def opened(call) -> dict[str, str]:
    """Waits for the response headers, which the server sends once the stream
    is open; raises the call's error if it ended without them."""
    md = call.initial_metadata()
    if call.done() and call.code() != grpc.StatusCode.OK:
        raise call
    return {k: v for k, v in (md or ()) if isinstance(v, str)}


class Reader(Iterator["Entry | TimeTick"]):
    """Reads a log in offset order: iterate it, or call next(timeout=...).
    Without follow, it stops at the log's end; with follow, it waits at the
    tail. It yields only acknowledged entries (Entry), and with ticks=True
    the time ticks (TimeTick) in their places.

    When its stream breaks for a reason that may pass (the server restarts,
    the log moves), it opens another after the last entry it returned and
    goes on: no entry twice, none skipped, for up to the client's
    retry_timeout. TruncatedError ends it when it fell below the log's start
    (the error says where the log starts), NotFoundError when the log is
    deleted. Not safe for concurrent use, but close may be called from
    another thread: the iteration then ends.
    """

    def __init__(self, log: Log, from_: int, *, follow: bool, ticks: bool, timeout: float | None) -> None:
        self.log = log
        self.follow = follow
        self.ticks = ticks
        self.position = from_  # where a new stream starts: after the last entry returned
        self._mu = threading.Lock()
        self._closed = False
        self._loop: RecvLoop | None = None
        self._open(timeout)
        try:
            log.client._track(self)
        except ClosedError:
            if self._loop is not None:  # the client closed meanwhile
                self._loop.stop()
            raise

    def __repr__(self) -> str:
        return f"tern.Reader({self.log.name!r}, at={self.position})"

    def _open(self, timeout: float | None) -> None:
        log = self.log
        md = log.client._metadata

        def try_open(stub, t):
            req = pb.ReadRequest(log=log.name, follow=self.follow, ticks=self.ticks)
            if self.position == FROM_START:
                req.from_start = True
            elif self.position == FROM_END:
                req.from_end = True
            else:
                setattr(req, "from", self.position)
            call = stub.Read(req, metadata=md)
            try:
                headers = opened(call)
            except grpc.RpcError:
                call.cancel()
                raise
            return call, headers

        call, headers = _route.call(log, try_open, timeout=timeout)
        with self._mu:
            if self._closed:
                call.cancel()
                raise ClosedError(f"tern: the reader of {log.name!r} is closed")
            if self.position in (FROM_START, FROM_END) and FROM_HEADER in headers:
                self.position = int(headers[FROM_HEADER])
            self._loop = RecvLoop(call, log.client._map)

    def next(self, timeout: float | None = None) -> Entry | TimeTick | None:
        """The next entry (or tick), waiting up to ``timeout`` seconds (None:
        as long as it takes) at the tail. None once a reader without follow
        has reached the end, or the reader is closed. Raises TimeoutError when
        the timeout passes, and the error that ended the reader."""
        while True:
            with self._mu:
                closed, loop = self._closed, self._loop
            if closed:
                return None
            if loop is not None:
                it = loop.next(timeout)
                if not isinstance(it, _End):
                    if isinstance(it, Entry):
                        self.position = it.offset + 1
                    return it
                if it.err is None:
                    if not self.follow:
                        return None
                    it.err = ClosedError("tern: the server ended the read stream", code=grpc.StatusCode.UNAVAILABLE)
                with self._mu:
                    if self._closed:
                        return None
                if not retryable(it.err) or self.log.client.closed:
                    raise it.err
                with self._mu:
                    self._loop = None
                loop.stop()
            self._open(timeout)

    def __next__(self) -> Entry | TimeTick:
        it = self.next()
        if it is None:
            raise StopIteration
        return it

    def __iter__(self) -> Reader:
        return self

    def close(self) -> None:
        """Ends the stream; an iteration in another thread ends."""
        with self._mu:
            self._closed = True
            loop = self._loop
        if loop is not None:
            loop.stop()
        self.log.client._untrack(self)

    def _close_with_client(self) -> None:
        self.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
