"""Notification event types and the message codec.

A message is a JSON document holding a snapshot of the changed objects as of the change (so a dump never
reads current state) and, for data changes, the encoded file URIs with checksums. Large messages are stored
gzip-compressed and base64-encoded, flagged by ``message_format`` so readers decode either form.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

import msgspec

from hmsrepl.formats.bounded import inflate_gzip
from hmsrepl.formats.json_text import dumps_sorted, dumps_sorted_pieces, loads
from hmsrepl.metastore.payloads import DataChange, Payload, encode

JSON_FORMAT = "json-1"
GZIP_JSON_FORMAT = "gzip(json-1)"
#: A message holding an array this long (a file listing) is encoded and compressed in pieces.
LONG_LISTING = 20_000
#: ``zlib``'s window bits for a gzip member (header and trailer included), as ``gzip.compress`` writes.
GZIP_WBITS = 16 + zlib.MAX_WBITS


class EventType(StrEnum):
    CREATE_DATABASE = "CREATE_DATABASE"
    ALTER_DATABASE = "ALTER_DATABASE"
    DROP_DATABASE = "DROP_DATABASE"
    CREATE_TABLE = "CREATE_TABLE"
    ALTER_TABLE = "ALTER_TABLE"
    DROP_TABLE = "DROP_TABLE"
    ADD_PARTITION = "ADD_PARTITION"
    ALTER_PARTITION = "ALTER_PARTITION"
    DROP_PARTITION = "DROP_PARTITION"
    INSERT = "INSERT"
    CREATE_FUNCTION = "CREATE_FUNCTION"
    DROP_FUNCTION = "DROP_FUNCTION"
    OPEN_TXN = "OPEN_TXN"
    COMMIT_TXN = "COMMIT_TXN"
    ABORT_TXN = "ABORT_TXN"
    ALLOC_WRITE_ID = "ALLOC_WRITE_ID"
    ACID_WRITE = "ACID_WRITE"
    UPDATE_TABLE_COLUMN_STAT = "UPDATE_TABLE_COLUMN_STAT"
    UPDATE_PARTITION_COLUMN_STAT = "UPDATE_PARTITION_COLUMN_STAT"
    DELETE_TABLE_COLUMN_STAT = "DELETE_TABLE_COLUMN_STAT"
    DELETE_PARTITION_COLUMN_STAT = "DELETE_PARTITION_COLUMN_STAT"


def encode_message(
    body: Payload | dict[str, Any], *, compress: bool, compress_min_bytes: int, exact_floats: bool = False
) -> tuple[str, str]:
    """Return (stored text, message_format); ``exact_floats``: the body may hold NaN (``EventSpec.floats``).

    ``body`` is an event's typed payload, or a document already in the log's form (a copy of stored events).
    A compressed message naming many files (``LONG_LISTING`` or more) is written and compressed a piece at a
    time (``dumps_sorted_pieces``): the event of a partition of 1,000,000 files never holds its 160 MB of
    JSON text at once, only the compressed form it stores.
    """
    document = encode(body) if isinstance(body, Payload) else body
    if names_many(body):
        pieces = dumps_sorted_pieces(document, exact_floats=exact_floats)
        if compress:
            return _compressed(pieces), GZIP_JSON_FORMAT
        return b"".join(pieces).decode("utf-8"), JSON_FORMAT  # stored whole: held whole once, not twice
    data = dumps_sorted(document, exact_floats=exact_floats)
    if compress and len(data) >= compress_min_bytes:
        return _compressed((data,)), GZIP_JSON_FORMAT
    return data.decode("utf-8"), JSON_FORMAT


def _compressed(pieces: Iterable[bytes]) -> str:
    """The pieces of a JSON text as one gzip member (level 5, as the log always wrote), base64-encoded."""
    packer = zlib.compressobj(5, zlib.DEFLATED, GZIP_WBITS)
    packed = [packer.compress(piece) for piece in pieces]
    packed.append(packer.flush())
    return base64.b64encode(b"".join(packed)).decode("ascii")


def names_many(body: Payload | Mapping[str, Any], limit: int = LONG_LISTING) -> bool:
    """Whether a body names at least ``limit`` files: in its data changes (``added`` and ``removed``), its
    format-1 listings and its lists of recycled files, all of which lie in its own fields or in its lists of
    per-partition ones. Only those are looked at (a snapshot's fields are not walked): a few microseconds."""
    fields = msgspec.structs.astuple(body) if isinstance(body, Payload) else tuple(body.values())
    named = 0
    for value in fields:
        if isinstance(value, list | tuple) and _per_partition(value):
            named += sum(_files_in(item) for item in value)
        else:
            named += _files_in(value)
    return named >= limit


def _per_partition(value: list[Any] | tuple[Any, ...]) -> bool:
    """A list of per-partition listings or changes (not of snapshots, not a listing itself), by its first
    item that is not None (an ACID partition's)."""
    first = next((item for item in value if item is not None), None)
    return isinstance(first, DataChange | list | tuple) or (isinstance(first, dict) and "added" in first)


def _files_in(value: Any) -> int:
    """How many files one field names: a data change's, or a listing's (0 for anything else)."""
    if isinstance(value, DataChange):
        return len(value.added) + len(value.removed)
    if isinstance(value, dict):
        return sum(len(value.get(key) or ()) for key in ("added", "removed"))
    if isinstance(value, list | tuple) and value and isinstance(value[0], str):
        return len(value)
    return 0


def message_json(text: str, message_format: str, *, own: bool = False) -> bytes | str:
    """A stored message's JSON text (inflated when the log stored it compressed).

    ``own``: the message was read from this metastore's own log (``LoggedEvent``), which only this code
    writes, compressing documents it built itself: it is inflated whole, however long its listing (the
    event of a partition of 1,000,000 files is some 160 MB of text). Every other message (a peer's, received
    over the notification API; a stock metastore's) stays within the inflate limits (``formats.bounded``):
    from elsewhere, a message that inflates that far is a decompression bomb until proven otherwise.
    """
    if message_format == GZIP_JSON_FORMAT:
        data = base64.b64decode(text)
        return _inflate_own(data) if own else inflate_gzip(data, "notification message")
    if message_format == JSON_FORMAT:
        return text
    raise ValueError(f"unknown notification message format '{message_format}'")


def _inflate_own(data: bytes) -> bytes:
    """gzip this log wrote (one member, as ``_compressed`` writes it; more are read as ``gzip`` reads them),
    inflated into one buffer: pieces joined at the end held the text twice."""
    out = []
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=GZIP_WBITS)
        out.append(inflater.decompress(rest))
        if not inflater.eof:
            raise zlib.error("notification message: gzip data ends early (truncated)")
        rest = inflater.unused_data.lstrip(b"\x00")
    return out[0] if len(out) == 1 else b"".join(out)


def decode_message(text: str, message_format: str, *, own: bool = False) -> dict[str, Any]:
    """A notification message's document: always a JSON object (a message of any other shape is refused).
    ``own``: as in ``message_json``."""
    document = loads(message_json(text, message_format, own=own))
    if not isinstance(document, dict):
        raise ValueError(f"a notification message must be a JSON object, not {type(document).__name__}")
    return document


class NotificationEvent(NamedTuple):
    """One row of the notification log as clients receive it (Thrift's NotificationEvent).

    A named tuple rather than a frozen dataclass: as immutable and hashable, but built from a database row
    in one step (``_make``), where a frozen dataclass sets each field through ``object.__setattr__``; that
    was half the time of reading 100,000 events. Change fields with ``_replace``.
    """

    event_id: int
    event_time: int
    event_type: str
    db_name: str | None
    table_name: str | None
    message: str
    message_format: str
    cat_name: str = "hive"

    @property
    def own_log(self) -> bool:
        """Whether the event was read from this metastore's own log (``LoggedEvent``; see ``message_json``)."""
        return False

    def body(self) -> dict[str, Any]:
        return decode_message(self.message, self.message_format, own=self.own_log)


class LoggedEvent(NotificationEvent):
    """An event as this metastore's own log holds it, read from its own database: its message is inflated
    whole (``message_json``). Only the log makes these; an event received from anywhere else (a peer's
    notification API, a stock metastore) is a ``NotificationEvent``, and its message stays within the inflate
    limits. ``_replace`` keeps the class: a copy of a logged event is still this log's."""

    __slots__ = ()

    @property
    def own_log(self) -> bool:
        return True


@dataclass
class PendingEvent:
    """An event created inside a metastore transaction, numbered when the transaction commits.

    ``body``: the typed payload of a catalog write, or a document already in the log's form.
    """

    event_type: EventType
    db_name: str | None
    table_name: str | None
    body: Payload | dict[str, Any]
