import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogOptions(_message.Message):
    __slots__ = ("fsync", "segment_bytes", "segment_age", "retention_age", "retention_bytes", "retention_entries", "max_entry_bytes", "mode", "flush_bytes", "flush_interval", "uploads_in_flight", "ensemble", "ack_quorum", "compression")
    FSYNC_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_AGE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_AGE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETENTION_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FLUSH_BYTES_FIELD_NUMBER: _ClassVar[int]
    FLUSH_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    UPLOADS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_FIELD_NUMBER: _ClassVar[int]
    ACK_QUORUM_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    fsync: str
    segment_bytes: int
    segment_age: _duration_pb2.Duration
    retention_age: _duration_pb2.Duration
    retention_bytes: int
    retention_entries: int
    max_entry_bytes: int
    mode: str
    flush_bytes: int
    flush_interval: _duration_pb2.Duration
    uploads_in_flight: int
    ensemble: int
    ack_quorum: int
    compression: str
    def __init__(self, fsync: _Optional[str] = ..., segment_bytes: _Optional[int] = ..., segment_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retention_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retention_bytes: _Optional[int] = ..., retention_entries: _Optional[int] = ..., max_entry_bytes: _Optional[int] = ..., mode: _Optional[str] = ..., flush_bytes: _Optional[int] = ..., flush_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., uploads_in_flight: _Optional[int] = ..., ensemble: _Optional[int] = ..., ack_quorum: _Optional[int] = ..., compression: _Optional[str] = ...) -> None: ...

class LogInfo(_message.Message):
    __slots__ = ("name", "id", "created_unix_nano", "options", "start", "end", "bytes", "segments", "epoch", "objects", "extent_unknown", "logical_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    EXTENT_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    created_unix_nano: int
    options: LogOptions
    start: int
    end: int
    bytes: int
    segments: int
    epoch: int
    objects: int
    extent_unknown: bool
    logical_bytes: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., created_unix_nano: _Optional[int] = ..., options: _Optional[_Union[LogOptions, _Mapping]] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., bytes: _Optional[int] = ..., segments: _Optional[int] = ..., epoch: _Optional[int] = ..., objects: _Optional[int] = ..., extent_unknown: _Optional[bool] = ..., logical_bytes: _Optional[int] = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("offset", "payload", "properties", "time_unix_nano")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    offset: int
    payload: bytes
    properties: _containers.ScalarMap[str, bytes]
    time_unix_nano: int
    def __init__(self, offset: _Optional[int] = ..., payload: _Optional[bytes] = ..., properties: _Optional[_Mapping[str, bytes]] = ..., time_unix_nano: _Optional[int] = ...) -> None: ...

class CreateLogRequest(_message.Message):
    __slots__ = ("name", "options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    options: LogOptions
    def __init__(self, name: _Optional[str] = ..., options: _Optional[_Union[LogOptions, _Mapping]] = ...) -> None: ...

class DescribeLogRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListLogsRequest(_message.Message):
    __slots__ = ("prefix", "page_size", "page_token")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_size: int
    page_token: str
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListLogsResponse(_message.Message):
    __slots__ = ("logs", "next_page_token")
    LOGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    logs: _containers.RepeatedCompositeFieldContainer[LogInfo]
    next_page_token: str
    def __init__(self, logs: _Optional[_Iterable[_Union[LogInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteLogRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteLogResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TruncateLogRequest(_message.Message):
    __slots__ = ("name", "before")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    before: int
    def __init__(self, name: _Optional[str] = ..., before: _Optional[int] = ...) -> None: ...

class TruncateLogResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OpenWriterRequest(_message.Message):
    __slots__ = ("log", "epoch", "reopen")
    LOG_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REOPEN_FIELD_NUMBER: _ClassVar[int]
    log: str
    epoch: int
    reopen: bool
    def __init__(self, log: _Optional[str] = ..., epoch: _Optional[int] = ..., reopen: _Optional[bool] = ...) -> None: ...

class OpenWriterResponse(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class CloseWriterRequest(_message.Message):
    __slots__ = ("log", "epoch")
    LOG_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    log: str
    epoch: int
    def __init__(self, log: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class CloseWriterResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("log", "epoch", "entries", "shared", "producer", "seq", "if_end")
    LOG_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    IF_END_FIELD_NUMBER: _ClassVar[int]
    log: str
    epoch: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    shared: bool
    producer: int
    seq: int
    if_end: int
    def __init__(self, log: _Optional[str] = ..., epoch: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., shared: _Optional[bool] = ..., producer: _Optional[int] = ..., seq: _Optional[int] = ..., if_end: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class AppendStreamRequest(_message.Message):
    __slots__ = ("log", "epoch", "batches", "shared", "producer", "acked")
    LOG_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    log: str
    epoch: int
    batches: _containers.RepeatedCompositeFieldContainer[Batch]
    shared: bool
    producer: int
    acked: int
    def __init__(self, log: _Optional[str] = ..., epoch: _Optional[int] = ..., batches: _Optional[_Iterable[_Union[Batch, _Mapping]]] = ..., shared: _Optional[bool] = ..., producer: _Optional[int] = ..., acked: _Optional[int] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("entries", "seq", "if_end")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    IF_END_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    seq: int
    if_end: int
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., seq: _Optional[int] = ..., if_end: _Optional[int] = ...) -> None: ...

class AppendStreamResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendResult, _Mapping]]] = ...) -> None: ...

class AppendResult(_message.Message):
    __slots__ = ("offset", "error")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    offset: int
    error: Error
    def __init__(self, offset: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "reason", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AppendTimeTickRequest(_message.Message):
    __slots__ = ("log", "epoch", "time")
    LOG_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    log: str
    epoch: int
    time: int
    def __init__(self, log: _Optional[str] = ..., epoch: _Optional[int] = ..., time: _Optional[int] = ...) -> None: ...

class AppendTimeTickResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("log", "follow", "ticks", "max_batch", "from_start", "from_end")
    LOG_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TICKS_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    log: str
    follow: bool
    ticks: bool
    max_batch: int
    from_start: bool
    from_end: bool
    def __init__(self, log: _Optional[str] = ..., follow: _Optional[bool] = ..., ticks: _Optional[bool] = ..., max_batch: _Optional[int] = ..., from_start: _Optional[bool] = ..., from_end: _Optional[bool] = ..., **kwargs) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("entries", "tick")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TICK_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    tick: TimeTick
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., tick: _Optional[_Union[TimeTick, _Mapping]] = ...) -> None: ...

class TimeTick(_message.Message):
    __slots__ = ("time", "offset")
    TIME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    time: int
    offset: int
    def __init__(self, time: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class SubscriptionInfo(_message.Message):
    __slots__ = ("log", "name", "created_unix_nano", "cursor", "pin", "lag")
    LOG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PIN_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    log: str
    name: str
    created_unix_nano: int
    cursor: int
    pin: bool
    lag: int
    def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ..., created_unix_nano: _Optional[int] = ..., cursor: _Optional[int] = ..., pin: _Optional[bool] = ..., lag: _Optional[int] = ...) -> None: ...

class CreateSubscriptionRequest(_message.Message):
    __slots__ = ("log", "name", "from_end", "pin")
    LOG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    PIN_FIELD_NUMBER: _ClassVar[int]
    log: str
    name: str
    from_end: bool
    pin: bool
    def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ..., from_end: _Optional[bool] = ..., pin: _Optional[bool] = ..., **kwargs) -> None: ...

class DescribeSubscriptionRequest(_message.Message):
    __slots__ = ("log", "name")
    LOG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    log: str
    name: str
    def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListSubscriptionsRequest(_message.Message):
    __slots__ = ("log",)
    LOG_FIELD_NUMBER: _ClassVar[int]
    log: str
    def __init__(self, log: _Optional[str] = ...) -> None: ...

class ListSubscriptionsResponse(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[SubscriptionInfo, _Mapping]]] = ...) -> None: ...

class DeleteSubscriptionRequest(_message.Message):
    __slots__ = ("log", "name")
    LOG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    log: str
    name: str
    def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteSubscriptionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SeekRequest(_message.Message):
    __slots__ = ("log", "name", "to")
    LOG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    log: str
    name: str
    to: int
    def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ..., to: _Optional[int] = ...) -> None: ...

class SeekResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("start", "ack")
    class Start(_message.Message):
        __slots__ = ("log", "name", "ticks")
        LOG_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        TICKS_FIELD_NUMBER: _ClassVar[int]
        log: str
        name: str
        ticks: bool
        def __init__(self, log: _Optional[str] = ..., name: _Optional[str] = ..., ticks: _Optional[bool] = ...) -> None: ...
    class Ack(_message.Message):
        __slots__ = ("offset",)
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        offset: int
        def __init__(self, offset: _Optional[int] = ...) -> None: ...
    START_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    start: SubscribeRequest.Start
    ack: SubscribeRequest.Ack
    def __init__(self, start: _Optional[_Union[SubscribeRequest.Start, _Mapping]] = ..., ack: _Optional[_Union[SubscribeRequest.Ack, _Mapping]] = ...) -> None: ...

class RepairLogRequest(_message.Message):
    __slots__ = ("name", "accept_loss")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_LOSS_FIELD_NUMBER: _ClassVar[int]
    name: str
    accept_loss: bool
    def __init__(self, name: _Optional[str] = ..., accept_loss: _Optional[bool] = ...) -> None: ...

class RepairLogResponse(_message.Message):
    __slots__ = ("damaged", "repaired", "path", "pos", "size", "end", "cut_bytes", "batches_after", "entries_after", "acked", "damage", "record")
    DAMAGED_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    POS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    CUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    BATCHES_AFTER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_AFTER_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    DAMAGE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    damaged: bool
    repaired: bool
    path: str
    pos: int
    size: int
    end: int
    cut_bytes: int
    batches_after: int
    entries_after: int
    acked: int
    damage: str
    record: str
    def __init__(self, damaged: _Optional[bool] = ..., repaired: _Optional[bool] = ..., path: _Optional[str] = ..., pos: _Optional[int] = ..., size: _Optional[int] = ..., end: _Optional[int] = ..., cut_bytes: _Optional[int] = ..., batches_after: _Optional[int] = ..., entries_after: _Optional[int] = ..., acked: _Optional[int] = ..., damage: _Optional[str] = ..., record: _Optional[str] = ...) -> None: ...
