"""The Python client of a Tern server (tern serve), a write-ahead log service.

    import tern
    c = tern.connect("127.0.0.1:7070")
    log = c.create_log("tenant/db/ch-1", mode="local")
    with log.open_writer() as w:
        off = w.append(b"payload", properties={"k": b"v"})
    for e in log.open_reader(0):
        print(e.offset, e.payload)

The model is the Go client's (github.com/ternwal/tern/client): docs/python.md
describes it, and how each error maps to the Go sentinel of the same name.
"""

from ._client import Client, Log, connect, validate_name, validate_sub_name
from ._errors import (
    ClosedError, ConditionFailedError, CorruptError, DamagedError, DeadlineExceededError, ExistsError,
    FencedError, InvalidArgumentError, InvalidNameError, LimitError, LockedError, NoSpaceError, NotFoundError,
    NotOwnerError, OutOfRangeError, PermissionDeniedError, SubscriptionExistsError, SubscriptionNotFoundError,
    TakenOverError, TernError, TLSError, TooLargeError, TruncatedError, UnauthenticatedError, UnavailableError,
    UnsupportedError,
)
from ._reader import Reader
from ._subscribe import Subscriber
from ._tls import TLS
from ._types import FROM_END, FROM_START, Entry, LogInfo, LogOptions, SubscriptionInfo, TimeTick
from ._writer import Writer

__all__ = [
    "connect", "Client", "Log", "Writer", "Reader", "Subscriber", "TLS",
    "Entry", "TimeTick", "LogInfo", "LogOptions", "SubscriptionInfo", "FROM_START", "FROM_END",
    "validate_name", "validate_sub_name",
    "TernError", "ClosedError", "ConditionFailedError", "CorruptError", "DamagedError", "DeadlineExceededError",
    "ExistsError", "FencedError", "InvalidArgumentError", "InvalidNameError", "LimitError", "LockedError",
    "NoSpaceError", "NotFoundError", "NotOwnerError", "OutOfRangeError", "PermissionDeniedError",
    "SubscriptionExistsError", "SubscriptionNotFoundError", "TakenOverError", "TLSError", "TooLargeError",
    "TruncatedError", "UnauthenticatedError", "UnavailableError", "UnsupportedError",
]
