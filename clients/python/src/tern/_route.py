"""The client's one retry policy, as the Go client's route.go.

A call, or the (re)opening of a stream, is tried again when it failed
because the node could not be reached or is going away (UNAVAILABLE: a
refused or broken connection, a server shutting down, a log the node gives
up, etcd not answering), or because another node serves the log (NOT_OWNER:
the next try goes to the node it names, at once for the first hops). Nothing
else is retried. Tries are spaced by 10 to 100 ms with jitter, for no longer
than the client's retry_timeout. Which calls are safe to retry is route.go's
list: reads of state, truncate, seek and time ticks as they are; deletes
and creates by looking at what a try with an unknown outcome left; appends
are numbered by the writer so that the server applies a resent batch once.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import grpc

from ._errors import ClosedError, NotOwnerError, TernError, UnavailableError, retryable

if TYPE_CHECKING:
    from ._client import Log

T = TypeVar("T")

BACKOFF_FIRST = 0.010
BACKOFF_MAX = 0.100
QUICK_HOPS = 2  # redirects followed without a pause


class Backoff:
    """The pauses between the tries of one operation: about 10 ms, doubling up
    to 100 ms, each drawn between half and all of that. Not thread-safe."""

    def __init__(self) -> None:
        self.n = 0

    def pause(self) -> float:
        d = BACKOFF_MAX
        if self.n < 16:
            d = min(BACKOFF_FIRST * (1 << self.n), BACKOFF_MAX)
            self.n += 1
        return d / 2 + random.uniform(0, d / 2)


class Retrier:
    """One operation's tries: the backoff between them and the deadline past
    which it gives up. ``unknown`` is set once a try that was retried failed
    with an unknown outcome (UNAVAILABLE may come after the server did the
    work; NOT_OWNER says it did nothing)."""

    def __init__(self, log: Log, timeout: float | None = None) -> None:
        self.log = log
        self.backoff = Backoff()
        now = time.monotonic()
        self.deadline = now + log.client._retry_timeout
        self.call_deadline = None if timeout is None else now + timeout
        self.hops = 0
        self.unknown = False

    def remaining(self) -> float | None:
        """The time left for one try, from the caller's timeout."""
        if self.call_deadline is None:
            return None
        return max(self.call_deadline - time.monotonic(), 0.001)

    def again(self, err: TernError, addr: str) -> None:
        """Decides after a try that failed with err at the node at addr: returns
        once the log points at the next node and the pause is over, or raises
        the error to give up with."""
        c = self.log.client
        if c.closed:
            raise ClosedError("tern: the client is closed")
        if not retryable(err):
            raise err
        pause = 0.0
        if self.log._redirect(err) and self.hops < QUICK_HOPS:
            self.hops += 1
        else:
            pause = self.backoff.pause()
        now = time.monotonic()
        if pause > 0 and now + pause > self.deadline:
            raise self.give_up(err, addr)
        if self.call_deadline is not None and now + pause > self.call_deadline:
            raise self.give_up(err, addr)
        self.unknown = self.unknown or not isinstance(err, NotOwnerError)
        if pause:
            time.sleep(pause)

    def give_up(self, err: TernError, addr: str) -> TernError:
        c = self.log.client
        if isinstance(err, UnavailableError) and err.reason == "":
            return UnavailableError(
                f"tern: cannot reach the tern server at {addr} (tried for up to {c._retry_timeout:g}s, "
                f"retry_timeout): {err.message} (is `tern serve` running?)",
                code=err.code,
            )
        return err


def call(log: Log, fn: Callable[[Any, float | None], T], *, timeout: float | None = None,
         retrier: Retrier | None = None) -> T:
    """Makes a call on the node that serves the log, following redirects and
    retrying as the policy says. fn(stub, timeout) must be safe to call again;
    it gets the stub of the node to try and the time left of the caller's
    timeout."""
    r = retrier or Retrier(log, timeout)
    while True:
        if log.client.closed:
            raise ClosedError("tern: the client is closed")
        stub, addr = log._node()
        try:
            return fn(stub, r.remaining())
        except grpc.RpcError as e:
            err = log.client._map(e)
        r.again(err, addr)  # outside the except: the error raised has no gRPC chain
