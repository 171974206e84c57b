"""Subscribers: a subscription's entries from its cursor, acknowledged with
ack, over one Subscribe stream at a time (as the Go client's subscribe.go)."""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Iterator

import grpc

from . import _route
from ._errors import ClosedError, OutOfRangeError, TernError, retryable
from ._pb import tern_pb2 as pb
from ._reader import RecvLoop, _End, opened
from ._types import Entry, TimeTick

if TYPE_CHECKING:
    from ._client import Log

STREAM_END_TIMEOUT = 5.0


class _Requests:
    """A Subscribe stream's requests: the start, then acknowledgements; None
    half-closes."""

    def __init__(self, start: pb.SubscribeRequest) -> None:
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.q.put(start)

    def __iter__(self):
        while True:
            r = self.q.get()
            if r is None:
                return
            yield r


class Subscriber(Iterator["Entry | TimeTick"]):
    """Receives a subscription's entries from its cursor, in offset order,
    following the tail: iterate it, or call next(timeout=...); acknowledge
    with ack(offset). Delivery is at least once: entries delivered but not
    acknowledged (or acknowledged but not yet committed when the server
    stopped) come again to the next subscriber. A subscription has one
    subscriber at a time: a new one takes over, and the older one ends with
    TakenOverError.

    When its stream breaks for a reason that may pass, it opens another, from
    the subscription's committed cursor: entries after it come again. Not
    safe for concurrent use, except ack and close, which any thread may call.
    """

    def __init__(self, log: Log, name: str, *, ticks: bool, timeout: float | None) -> None:
        self.log = log
        self.name = name
        self.ticks = ticks
        self._mu = threading.Lock()
        self._closed = False
        self._loop: RecvLoop | None = None
        self._requests: _Requests | None = None
        self._before = 0  # the offset after the last entry earlier streams delivered
        cursor = log._subscription(name, timeout).cursor
        self._delivered = cursor  # the offset after the last entry the stream delivered
        self._acked = cursor  # the offset after the last acknowledgement sent
        self._open(timeout)
        try:
            log.client._track(self)
        except ClosedError:
            if self._loop is not None:  # the client closed meanwhile
                self._loop.stop()
            raise

    def __repr__(self) -> str:
        return f"tern.Subscriber({self.log.name!r}, {self.name!r})"

    def _open(self, timeout: float | None) -> None:
        log = self.log
        md = log.client._metadata
        start = pb.SubscribeRequest(start=pb.SubscribeRequest.Start(log=log.name, name=self.name, ticks=self.ticks))

        def try_open(stub, t):
            reqs = _Requests(start)
            call = stub.Subscribe(iter(reqs), metadata=md)
            try:
                opened(call)
            except grpc.RpcError:
                reqs.q.put(None)
                call.cancel()
                raise
            return call, reqs

        call, reqs = _route.call(log, try_open, timeout=timeout)
        with self._mu:
            if self._closed:
                reqs.q.put(None)
                call.cancel()
                raise ClosedError(f"tern: the subscriber of {self.name!r} is closed")
            self._requests = reqs
            self._loop = RecvLoop(call, log.client._map)

    def next(self, timeout: float | None = None) -> Entry | TimeTick | None:
        """The next entry (or tick), waiting up to ``timeout`` seconds (None: as
        long as it takes). None once the subscriber is closed. Raises
        TimeoutError when the timeout passes, and the error that ended the
        subscriber (TakenOverError, SubscriptionNotFoundError, ...)."""
        while True:
            with self._mu:
                closed, loop = self._closed, self._loop
            if closed:
                return None
            if loop is not None:
                it = loop.next(timeout)
                if not isinstance(it, _End):
                    self._took(it)
                    return it
                err = it.err or ClosedError("tern: the server ended the subscription stream",
                                            code=grpc.StatusCode.UNAVAILABLE)
                with self._mu:
                    if self._closed:
                        return None
                if not retryable(err) or self.log.client.closed:
                    raise err
                self._drop(loop)
            self._open(timeout)

    def _took(self, it: Entry | TimeTick) -> None:
        if isinstance(it, TimeTick):
            return
        with self._mu:
            self._delivered = it.offset + 1
            # Delivery went back (a seek, or a new stream from the committed
            # cursor): acknowledge the entries again.
            self._acked = min(self._acked, it.offset)

    def _drop(self, loop: RecvLoop) -> None:
        with self._mu:
            if self._loop is loop:
                self._before = max(self._before, self._delivered)
                self._delivered = 0
                self._loop = None
                if self._requests is not None:
                    self._requests.q.put(None)
                self._requests = None
        loop.stop()

    def __next__(self) -> Entry | TimeTick:
        it = self.next()
        if it is None:
            raise StopIteration
        return it

    def __iter__(self) -> Subscriber:
        return self

    def ack(self, offset: int) -> None:
        """Acknowledges every entry up to and including ``offset``: once the
        server commits it (in batches, and when the stream ends) the
        subscription does not deliver them again. OutOfRangeError for an entry
        not yet delivered; an ack below an earlier one changes nothing. While
        the subscriber reconnects, and until the new stream has delivered the
        entry again, an ack is dropped: the entries come again."""
        with self._mu:
            if self._closed:
                raise ClosedError(f"tern: the subscriber of {self.name!r} is closed")
            top = max(self._delivered, self._before)
            if offset >= top:
                raise OutOfRangeError(
                    f"tern: cannot acknowledge offset {offset} of subscription {self.name!r}, "
                    f"which has not been delivered (next: {top})"
                )
            if offset < self._acked or self._requests is None or offset >= self._delivered:
                return
            self._requests.q.put(pb.SubscribeRequest(ack=pb.SubscribeRequest.Ack(offset=offset)))
            self._acked = offset + 1

    def close(self) -> None:
        """Half-closes the stream and waits, a few seconds at most, for the
        server to end it: the server commits the acknowledged cursor first."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            loop, reqs = self._loop, self._requests
        self.log.client._untrack(self)
        if loop is None:
            return
        if reqs is not None:
            reqs.q.put(None)
        _drain(loop)
        loop.thread.join(STREAM_END_TIMEOUT)
        ended = not loop.thread.is_alive()
        loop.stop()
        if not ended:
            raise TernError(
                f"tern: subscriber of {self.name!r}: the server did not end the stream within "
                f"{STREAM_END_TIMEOUT:g}s; the last acknowledgements may not be committed"
            )

    def _close_with_client(self) -> None:
        self.close()

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drain(loop: RecvLoop) -> None:
    """Lets the receiving thread run to the stream's end, dropping what it
    receives meanwhile."""

    def run() -> None:
        while loop.thread.is_alive():
            try:
                loop.items.get(timeout=0.05)
            except queue.Empty:
                pass

    threading.Thread(target=run, daemon=True).start()
