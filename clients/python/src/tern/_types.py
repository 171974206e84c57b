"""The values the client hands out: entries, ticks, descriptions of logs and
subscriptions, and the log options of create_log."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Mapping, Union

from ._pb import tern_pb2 as pb

# Where open_reader may start besides an offset: the log's start as it is when
# the reader opens (wherever truncation moved it), and its end then (only the
# entries appended from then on). The Go client's FromStart and FromEnd.
FROM_START = (1 << 64) - 2
FROM_END = (1 << 64) - 1

# Payload is what an append takes as an entry's bytes.
Payload = Union[bytes, bytearray, memoryview]


def _time(ns: int) -> datetime.datetime | None:
    if ns == 0:
        return None
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)


@dataclass(frozen=True)
class Entry:
    """One entry of a log, as a reader or subscriber returns it.

    ``time`` is the writer's append time (UTC), ``time_unix_nano`` the same in
    nanoseconds. Appends take an Entry too (offset and time are then ignored
    unless time_unix_nano is set: 0 is the server's clock).
    """

    offset: int = 0
    payload: bytes = b""
    properties: Mapping[str, bytes] = field(default_factory=dict)
    time_unix_nano: int = 0

    @property
    def time(self) -> datetime.datetime | None:
        return _time(self.time_unix_nano)


@dataclass(frozen=True)
class TimeTick:
    """A time tick (Writer.append_time_tick), returned among the entries to
    readers and subscribers opened with ticks=True. ``time`` is the
    application's value; the entries below ``offset`` came before the tick,
    those at or above it come after."""

    time: int
    offset: int


@dataclass(frozen=True)
class LogOptions:
    """A log's settings. Durations are in seconds; 0 (or "") is the default.
    ``compression`` is "none" (or ""), "zstd" or "lz4": each batch is
    compressed once by the server and stored, replicated and uploaded so."""

    mode: str = ""
    fsync: str = "always"
    segment_bytes: int = 0
    segment_age: float = 0.0
    retention_age: float = 0.0
    retention_bytes: int = 0
    retention_entries: int = 0
    max_entry_bytes: int = 0
    flush_bytes: int = 0
    flush_interval: float = 0.0
    uploads_in_flight: int = 0
    ensemble: int = 0
    ack_quorum: int = 0
    compression: str = ""

    def to_proto(self) -> pb.LogOptions:
        p = pb.LogOptions(
            mode=self.mode, fsync=self.fsync, segment_bytes=self.segment_bytes,
            retention_bytes=self.retention_bytes, retention_entries=self.retention_entries,
            max_entry_bytes=self.max_entry_bytes, flush_bytes=self.flush_bytes,
            uploads_in_flight=self.uploads_in_flight, ensemble=self.ensemble, ack_quorum=self.ack_quorum,
            compression=self.compression,
        )
        for name in ("segment_age", "retention_age", "flush_interval"):
            secs = getattr(self, name)
            if secs:
                getattr(p, name).FromNanoseconds(int(secs * 1e9))
        return p

    @classmethod
    def from_proto(cls, p: pb.LogOptions) -> LogOptions:
        return cls(
            mode=p.mode, fsync=p.fsync or "always", segment_bytes=p.segment_bytes,
            segment_age=p.segment_age.ToNanoseconds() / 1e9, retention_age=p.retention_age.ToNanoseconds() / 1e9,
            retention_bytes=p.retention_bytes, retention_entries=p.retention_entries,
            max_entry_bytes=p.max_entry_bytes, flush_bytes=p.flush_bytes,
            flush_interval=p.flush_interval.ToNanoseconds() / 1e9, uploads_in_flight=p.uploads_in_flight,
            ensemble=p.ensemble, ack_quorum=p.ack_quorum, compression=p.compression,
        )


@dataclass(frozen=True)
class LogInfo:
    """A log as the server describes it. ``start`` is the first offset that
    can be read, ``end`` the offset the next append gets, ``epoch`` the
    newest writer session (0 before the first). ``extent_unknown``: described
    from metadata alone (list_logs of a log the server does not have open):
    end is start, and bytes, segments and objects are 0. ``bytes`` are as
    stored (compressed), ``logical_bytes`` as appended."""

    name: str
    id: int
    created: datetime.datetime | None
    options: LogOptions
    start: int
    end: int
    bytes: int
    segments: int
    epoch: int
    objects: int
    extent_unknown: bool
    logical_bytes: int = 0

    @classmethod
    def from_proto(cls, p: pb.LogInfo) -> LogInfo:
        return cls(
            name=p.name, id=p.id, created=_time(p.created_unix_nano), options=LogOptions.from_proto(p.options),
            start=p.start, end=p.end, bytes=p.bytes, segments=p.segments, epoch=p.epoch,
            objects=p.objects, extent_unknown=p.extent_unknown, logical_bytes=p.logical_bytes,
        )


@dataclass(frozen=True)
class SubscriptionInfo:
    """A subscription: ``cursor`` is the next offset it delivers (every entry
    below was acknowledged), ``lag`` the log's end minus the cursor, ``pin``
    whether retention keeps the entries it has not consumed."""

    log: str
    name: str
    created: datetime.datetime | None
    cursor: int
    pin: bool
    lag: int

    @classmethod
    def from_proto(cls, p: pb.SubscriptionInfo) -> SubscriptionInfo:
        return cls(log=p.log, name=p.name, created=_time(p.created_unix_nano), cursor=p.cursor, pin=p.pin, lag=p.lag)


def entries_from_proto(resp: pb.ReadResponse) -> list[Entry | TimeTick]:
    """A read response's entries, then its tick."""
    out: list[Entry | TimeTick] = [
        Entry(offset=e.offset, payload=e.payload, properties=dict(e.properties), time_unix_nano=e.time_unix_nano)
        for e in resp.entries
    ]
    if resp.HasField("tick"):
        out.append(TimeTick(time=resp.tick.time, offset=resp.tick.offset))
    return out
