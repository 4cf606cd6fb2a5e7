"""One spec per event type: its message class and the facts every reader of the log decides by.

Dump, consolidation, compaction, load, ACID replay and the metadata cache each keep a table of their own
behaviour per event type; what an event *is* (which object it touches, whether it is transactional, whether it
creates something a later event cannot make redundant) is said here once, and the groups of types those
readers use are derived from this table. ``tests/unit/test_event_specs.py`` checks that every ``EventType``
has a spec and that every reader's behaviour table covers every type.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec

from hmsrepl.metastore.events import EventType, NotificationEvent, message_json
from hmsrepl.metastore.messages import (
    AbortTxnMessage,
    AcidWriteMessage,
    AddPartitionMessage,
    AllocWriteIdMessage,
    AlterDatabaseMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CommitTxnMessage,
    CreateDatabaseMessage,
    CreateFunctionMessage,
    CreateTableMessage,
    DeletePartitionColumnStatMessage,
    DeleteTableColumnStatMessage,
    DropDatabaseMessage,
    DropFunctionMessage,
    DropPartitionMessage,
    DropTableMessage,
    InsertMessage,
    Message,
    OpenTxnMessage,
    UpdatePartitionColumnStatMessage,
    UpdateTableColumnStatMessage,
)
from hmsrepl.metastore.payloads import Payload


class Scope(StrEnum):
    DATABASE = "database"
    FUNCTION = "function"
    TABLE = "table"
    PARTITION = "partition"
    TXN = "txn"
    STATS = "stats"


@dataclass(frozen=True)
class EventSpec:
    kind: EventType
    message: type[Message[Any]]
    scope: Scope
    transactional: bool = False  # part of a transaction's replay: never compacted, a barrier for its tables
    structural: bool = False  # creates or adds an object: a later event never makes it redundant
    drops: bool = False  # removes its object(s)
    data: bool = False  # may carry a data change (``Message.objects``)
    replayed: bool = True  # a load applies it (CREATE_DATABASE: the bootstrap makes the replica database)
    db_wide: bool = False  # has no table: dumps write it for the database, loads flush every table's run
    floats: bool = False  # its message may hold doubles, NaN included (``json_text.dumps_sorted``)


E = EventType
SPECS: dict[EventType, EventSpec] = {
    spec.kind: spec
    for spec in (
        EventSpec(
            E.CREATE_DATABASE,
            CreateDatabaseMessage,
            Scope.DATABASE,
            structural=True,
            replayed=False,
            db_wide=True,
        ),
        EventSpec(E.ALTER_DATABASE, AlterDatabaseMessage, Scope.DATABASE, db_wide=True),
        EventSpec(E.DROP_DATABASE, DropDatabaseMessage, Scope.DATABASE, drops=True, db_wide=True),
        EventSpec(E.CREATE_TABLE, CreateTableMessage, Scope.TABLE, structural=True, data=True),
        EventSpec(E.ALTER_TABLE, AlterTableMessage, Scope.TABLE, data=True),
        EventSpec(E.DROP_TABLE, DropTableMessage, Scope.TABLE, drops=True),
        EventSpec(E.ADD_PARTITION, AddPartitionMessage, Scope.PARTITION, structural=True, data=True),
        EventSpec(E.ALTER_PARTITION, AlterPartitionMessage, Scope.PARTITION, data=True),
        EventSpec(E.DROP_PARTITION, DropPartitionMessage, Scope.PARTITION, drops=True),
        EventSpec(E.INSERT, InsertMessage, Scope.PARTITION, data=True),
        EventSpec(E.CREATE_FUNCTION, CreateFunctionMessage, Scope.FUNCTION, structural=True, db_wide=True),
        EventSpec(E.DROP_FUNCTION, DropFunctionMessage, Scope.FUNCTION, drops=True, db_wide=True),
        EventSpec(E.OPEN_TXN, OpenTxnMessage, Scope.TXN, transactional=True),
        EventSpec(E.COMMIT_TXN, CommitTxnMessage, Scope.TXN, transactional=True),
        EventSpec(E.ABORT_TXN, AbortTxnMessage, Scope.TXN, transactional=True),
        EventSpec(E.ALLOC_WRITE_ID, AllocWriteIdMessage, Scope.TXN, transactional=True),
        EventSpec(E.ACID_WRITE, AcidWriteMessage, Scope.TXN, transactional=True),
        EventSpec(E.UPDATE_TABLE_COLUMN_STAT, UpdateTableColumnStatMessage, Scope.STATS, floats=True),
        EventSpec(E.UPDATE_PARTITION_COLUMN_STAT, UpdatePartitionColumnStatMessage, Scope.STATS, floats=True),
        EventSpec(E.DELETE_TABLE_COLUMN_STAT, DeleteTableColumnStatMessage, Scope.STATS, floats=True),
        EventSpec(E.DELETE_PARTITION_COLUMN_STAT, DeletePartitionColumnStatMessage, Scope.STATS, floats=True),
    )
}


def kinds(**facts: Any) -> frozenset[EventType]:
    """The event types whose spec has every given fact, e.g. ``kinds(transactional=True)``."""
    return frozenset(k for k, s in SPECS.items() if all(getattr(s, f) == v for f, v in facts.items()))


TXN_KINDS = kinds(transactional=True)
DATA_KINDS = kinds(data=True)
PARTITION_KINDS = kinds(scope=Scope.PARTITION)
DATABASE_KINDS = kinds(scope=Scope.DATABASE)


class UnknownEventTypeError(ValueError):
    """An event type no spec describes: the log or the dump comes from a newer or foreign writer."""


def spec_of(kind: str) -> EventSpec:
    try:
        return SPECS[EventType(kind)]
    except ValueError as exc:
        raise UnknownEventTypeError(
            f"unknown event type '{kind}'; it comes from a newer or foreign writer: upgrade the reader"
        ) from exc


def parse(
    kind: str, body: Mapping[str, Any], db_name: str | None = None, table_name: str | None = None
) -> Message[Any]:
    """The typed message of one event's stored body."""
    return spec_of(kind).message.parse(kind, body, db_name, table_name)


def parse_event(event: NotificationEvent) -> Message[Any]:
    """The typed message of a logged event, decoded from its stored text straight into its payload type.

    A text the typed decoder refuses (NaN in statistics, which only the standard library reads, or a
    document that does not fit) takes the document path, which reads what can be read and names the rest.
    """
    message = spec_of(event.event_type).message
    try:
        body = _decoder(message.body_type).decode(
            message_json(event.message, event.message_format, own=event.own_log)
        )
    except msgspec.DecodeError:
        return parse(event.event_type, event.body(), event.db_name, event.table_name)
    return message(event.event_type, body, event.db_name, event.table_name)


@functools.cache
def _decoder(body_type: type[Payload]) -> msgspec.json.Decoder[Payload]:
    return msgspec.json.Decoder(body_type)
