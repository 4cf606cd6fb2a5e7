"""Hive's notification messages translated into this product's event bodies (message format 1).

A stock metastore's ``JSONMessageFactory`` (Hive 2.3: ``json-0.2``; Hive 4: ``gzip(json-2.0)``, base64 of
gzip) writes each event as JSON with the changed objects as embedded Thrift-JSON (``tableObjJson``,
``partitionListJson``...). Those become the snapshots our bodies hold. What Hive leaves out is filled in by
reading the source when the event is read (``Lookups``):

- **listings**: every data-bearing body (CREATE_TABLE, ADD_PARTITION, ALTER_TABLE/ALTER_PARTITION of an
  object with data, INSERT) carries the object's complete listing *as read now*, with this product's
  checksums. Hive's own checksums (HDFS MD5-of-CRC; none at all on local or S3 stores) cannot be checked
  here, and its INSERT names only the files added, so its file lists are not used. Consequence: a load
  brings each object to its state at read time, which is at or after the event; intermediate states are not
  reproduced, the state after the last loaded event is (when nothing changed meanwhile).
- **objects Hive 2.3 omits** (CREATE_DATABASE's database, INSERT's table and partition): read now; DROP_TABLE
  and DROP_PARTITION only need names and values, which the message has.

Event types with no counterpart here (indexes, statistics events, ACID_WRITE) translate to None: the
dump leaves them out, as Hive's own replication does for indexes. Hive 3/4 txn events (OPEN_TXN,
ALLOC_WRITE_ID_EVENT, COMMIT_TXN, ABORT_TXN) become this product's (``txn_messages``). Constraint events (ADD_PRIMARYKEY and the
others, DROP_CONSTRAINT) become the table's ALTER_TABLE with its constraints as read now: this product keeps
them in the table.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats.bounded import inflate_gzip, loads_bounded
from hmsrepl.hive_source import tjson
from hmsrepl.hive_source.allocations import Allocation
from hmsrepl.hive_source.txn_messages import TXN_ALIASES, TXN_TRANSLATORS, TXN_TYPES, table_of
from hmsrepl.metastore.constraints import TableConstraints
from hmsrepl.metastore.events import JSON_FORMAT, EventType, NotificationEvent
from hmsrepl.metastore.model import Database, Function, Partition, Table, TableType
from hmsrepl.thrift.convert import (
    database_from_thrift,
    function_from_thrift,
    partition_from_thrift,
    table_from_thrift,
)
from hmsrepl.thrift.idl import hms

#: The factory setting that makes a stock metastore write messages this module reads.
FACTORY_SETTING = "hive.metastore.event.message.factory"
JSON_FACTORY = "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageFactory"


class UnknownMessageFormatError(HmsReplError):
    """A notification message in a format this reader does not know (another message factory)."""


#: Hive 4's setting that makes one ``alter_partitions`` call log one ALTER_PARTITIONS event (default true).
BATCH_ALTER_SETTING = "hive.metastore.alterPartitions.notification.v2.enabled"


class BatchAlterError(HmsReplError):
    """A Hive 4 ALTER_PARTITIONS event naming several partitions: replayed here one partition per event."""


@dataclass(frozen=True)
class HiveEvent:
    """One event of a stock metastore's notification log, as ``get_next_notification`` returns it."""

    event_id: int
    event_time: int
    event_type: str
    db_name: str | None
    table_name: str | None
    message: str
    message_format: str | None

    @classmethod
    def from_thrift(cls, event: Any) -> HiveEvent:
        """Hive logs its txn events with the database \"null\" and a blank table: they belong to none."""
        kind = str(event.eventType)
        db = None if kind in TXN_TYPES else (event.dbName or "").strip().lower() or None
        return cls(
            int(event.eventId),
            int(event.eventTime or 0),
            kind,
            db,
            None if kind in TXN_TYPES else (event.tableName or "").strip().lower() or None,
            event.message or "",
            event.messageFormat,
        )


class Lookups(Protocol):
    """What a translation reads from the source now (Hive's message lacks it)."""

    def listing(self, location: str | None) -> list[str]:
        """Encoded URIs, with this product's checksums, of the data files under ``location`` now."""
        ...

    def database(self, db_name: str) -> Database | None: ...

    def table(self, db_name: str, table_name: str, *, constraints: bool = False) -> Table | None: ...

    def partition(self, db_name: str, table_name: str, values: list[str]) -> Partition | None: ...

    def txn_allocations(self, txn_id: int, before_event_id: int) -> list[Allocation]:
        """The write ids ``txn_id`` allocated before its end (event ``before_event_id``)."""
        ...

    def write_files(self, db_name: str, table_name: str, write_id: int) -> list[dict[str, Any]]:
        """``TxnWrite`` documents of what ``write_id`` wrote in the table (per partition), files read now."""
        ...


def decode(event: HiveEvent) -> dict[str, Any]:
    """The message's JSON document, from plain JSON (``json-*``) or base64 gzip (``gzip(json-*)``)."""
    fmt = (event.message_format or "json").strip()
    what = f"event {event.event_id} ({event.event_type}) of the stock metastore"
    if not (fmt.startswith("json") or (fmt.startswith("gzip(") and fmt.endswith(")"))):
        raise UnknownMessageFormatError(
            f"event {event.event_id} ({event.event_type}) has message format '{fmt}', which hmsrepl does not read; "
            f"set {FACTORY_SETTING}={JSON_FACTORY} on the source metastore (json-0.2 and gzip(json-2.0) are read)"
        )
    try:
        packed = fmt.startswith("gzip(")
        document = loads_bounded(
            inflate_gzip(base64.b64decode(event.message), what) if packed else event.message, what
        )
        if not isinstance(document, dict):
            raise ValueError(f"a message must be a JSON object, not {type(document).__name__}")
        return document
    except (ValueError, OSError, zlib.error) as exc:
        raise UnknownMessageFormatError(
            f"event {event.event_id} ({event.event_type}) is not valid {fmt}: {exc}; the notification log is "
            "damaged: run a bootstrap dump after it"
        ) from None


def _snapshot(obj: Database | Table | Partition | Function) -> dict[str, Any]:
    return obj.model_dump(mode="json")


def as_stored(table: Table) -> Table:
    """``table`` with the type Hive's ObjectStore stores for it: a message carries the table as the client
    sent it, but the store makes a MANAGED_TABLE whose ``EXTERNAL`` parameter is true external, and an
    EXTERNAL_TABLE without it managed. Hive 4 turns a plain managed table into an external one on create; a
    client that then alters it without that parameter makes it managed again while the message still says
    external."""
    external = table.parameters.get("EXTERNAL", "").strip().upper() == "TRUE"
    if table.table_type == TableType.MANAGED_TABLE and external:
        return table.model_copy(update={"table_type": TableType.EXTERNAL_TABLE})
    if table.table_type == TableType.EXTERNAL_TABLE and not external:
        return table.model_copy(update={"table_type": TableType.MANAGED_TABLE})
    return table


def _table(doc: Mapping[str, Any], key: str = "tableObjJson") -> Table:
    return as_stored(table_from_thrift(tjson.loads(hms.Table, doc[key])))


def _partition(text: str, table: Table) -> Partition:
    return partition_from_thrift(tjson.loads(hms.Partition, text), table.db_name, table.table_name)


def _values(table: Table, key_values: Mapping[str, str]) -> list[str]:
    return [key_values[key.name] for key in table.partition_keys]


def _is_view(table: Table) -> bool:
    return table.table_type in (TableType.VIRTUAL_VIEW, TableType.MATERIALIZED_VIEW)


def _data(table: Table, location: str | None, lookups: Lookups) -> tuple[list[str], bool]:
    """(files, is_truncate) of an object after an ALTER: its listing now; empty means it was emptied."""
    if _is_view(table):
        return [], False
    files = lookups.listing(location)
    return files, not files


# -- one translator per event type -------------------------------------------------------------------------
Body = dict[str, Any] | None
Translator = Callable[[HiveEvent, dict[str, Any], Lookups], Body]


def _create_database(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    name = doc.get("db") or event.db_name or ""
    db = lookups.database(name) or Database(name=name)
    return {"database": _snapshot(db)}


def _alter_database(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    before = database_from_thrift(tjson.loads(hms.Database, doc["dbObjBeforeJson"]))
    after = database_from_thrift(tjson.loads(hms.Database, doc["dbObjAfterJson"]))
    return {"before": _snapshot(before), "after": _snapshot(after)}


def _drop_database(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    return {"database": _snapshot(Database(name=doc.get("db") or event.db_name or ""))}


def _create_table(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    table = _table(doc)
    unpartitioned = not table.partition_keys and not _is_view(table)
    files = lookups.listing(table.sd.location) if unpartitioned else []
    return {"table": _snapshot(table), "files": files}


def _alter_table(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    before, after = _table(doc, "tableObjBeforeJson"), _table(doc, "tableObjAfterJson")
    files, emptied = ([], False) if after.partition_keys else _data(after, after.sd.location, lookups)
    return {
        "before": _snapshot(before),
        "after": _snapshot(after),
        "is_truncate": emptied,
        "files": files,
        "recycled": [],
    }


def _constraints_changed(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    """ADD_PRIMARYKEY and the other constraint events: the table's ALTER_TABLE, with its constraints as read
    now. An empty set, not None, when none is left: the replica's copy must lose a dropped one (None keeps
    what the replica holds, as a client's alter without constraints does)."""
    db_name, table_name = event.db_name or doc.get("dbName") or "", event.table_name or doc.get("tableName")
    table = lookups.table(db_name, table_name or "", constraints=True) if table_name else None
    if table is None:  # dropped since: its DROP_TABLE follows
        return None
    table = as_stored(table)
    if table.constraints is None:
        table = table.model_copy(update={"constraints": TableConstraints()})
    return {"before": _snapshot(table), "after": _snapshot(table), "recycled": []}  # no data change


def _drop_table(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    if doc.get("tableObjJson"):  # Hive 3 and later
        table = _table(doc)
    else:  # Hive 2.3 names the table only
        table = Table(db_name=doc.get("db") or event.db_name or "", table_name=doc["table"].lower())
    return {"table": _snapshot(table), "recycled": []}


def _add_partition(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    table = _table(doc)
    parts = [_partition(text, table) for text in doc.get("partitionListJson") or []]
    return {
        "table": _snapshot(table),
        "partitions": [_snapshot(p) for p in parts],
        "files": [lookups.listing(p.sd.location) for p in parts],
    }


def _alter_partition(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    table = _table(doc)
    before = _partition(doc["partitionObjBeforeJson"], table)
    after = _partition(doc["partitionObjAfterJson"], table)
    files, emptied = _data(table, after.sd.location, lookups)
    return {
        "table": _snapshot(table),
        "before": _snapshot(before),
        "after": _snapshot(after),
        "is_truncate": emptied,
        "files": files,
        "recycled": [],
    }


def _alter_partitions(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    """Hive 4's ALTER_PARTITIONS (one event per ``alter_partitions`` call, the new partitions only): one
    partition is an ALTER_PARTITION; several are refused, naming the setting that makes Hive log one
    ALTER_PARTITION per partition, since this product's log and loads hold one partition per such event."""
    texts = doc.get("partitionListJson") or []
    if len(texts) != 1:
        raise BatchAlterError(
            f"event {event.event_id} (ALTER_PARTITIONS) of the stock metastore alters {len(texts)} partitions of "
            f"'{event.db_name}.{event.table_name}' in one event, which hmsrepl does not replay; set "
            f"{BATCH_ALTER_SETTING}=false in the source's hive-site.xml (Hive then logs one ALTER_PARTITION per "
            "partition), restart it and take a bootstrap dump"
        )
    table = _table(doc)
    after = _partition(texts[0], table)
    files, emptied = _data(table, after.sd.location, lookups)
    return {
        "table": _snapshot(table),
        "before": _snapshot(after),
        "after": _snapshot(after),
        "is_truncate": emptied,
        "files": files,
        "recycled": [],
    }


def _drop_partition(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    table = _table(doc)
    parts = [
        Partition(values=_values(table, kv), db_name=table.db_name, table_name=table.table_name)
        for kv in doc.get("partitions") or []
    ]
    return {"table": _snapshot(table), "partitions": [_snapshot(p) for p in parts], "recycled": []}


def _insert(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    """An INSERT of a table or partition that is gone by now is left out: its drop follows in the log."""
    db_name, table_name = doc.get("db") or event.db_name or "", (doc.get("table") or "").lower()
    table = _table(doc) if doc.get("tableObjJson") else lookups.table(db_name, table_name)
    if table is None:
        return None
    partition = None
    if doc.get("ptnObjJson"):
        partition = _partition(doc["ptnObjJson"], table)
    elif doc.get("partKeyVals"):
        partition = lookups.partition(db_name, table_name, _values(table, doc["partKeyVals"]))
        if partition is None:
            return None
    location = (partition.sd if partition else table.sd).location
    return {
        "table": _snapshot(table),
        "partition": _snapshot(partition) if partition else None,
        "replace": str(doc.get("replace", "false")).lower() == "true",
        "files": lookups.listing(location),
        "new_files": [],
        "recycled": [],
    }


def _create_function(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    return {"function": _snapshot(function_from_thrift(tjson.loads(hms.Function, doc["functionObjJson"])))}


def _drop_function(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    name = (doc.get("functionName") or "").lower()
    db_name = doc.get("db") or event.db_name or ""
    return {"function": _snapshot(Function(function_name=name, db_name=db_name, class_name=""))}


TRANSLATORS: dict[EventType, Translator] = {
    EventType.CREATE_DATABASE: _create_database,
    EventType.ALTER_DATABASE: _alter_database,
    EventType.DROP_DATABASE: _drop_database,
    EventType.CREATE_TABLE: _create_table,
    EventType.ALTER_TABLE: _alter_table,
    EventType.DROP_TABLE: _drop_table,
    EventType.ADD_PARTITION: _add_partition,
    EventType.ALTER_PARTITION: _alter_partition,
    EventType.DROP_PARTITION: _drop_partition,
    EventType.INSERT: _insert,
    EventType.CREATE_FUNCTION: _create_function,
    EventType.DROP_FUNCTION: _drop_function,
    **TXN_TRANSLATORS,
}


#: Hive event types translated into one of this product's other types, with their translators.
ALIASES: dict[str, tuple[EventType, Translator]] = {
    "ALTER_PARTITIONS": (EventType.ALTER_PARTITION, _alter_partitions),
    **TXN_ALIASES,
    **dict.fromkeys(
        (
            "ADD_PRIMARYKEY",
            "ADD_FOREIGNKEY",
            "ADD_UNIQUECONSTRAINT",
            "ADD_NOTNULLCONSTRAINT",
            "ADD_DEFAULTCONSTRAINT",
            "ADD_CHECKCONSTRAINT",
            "DROP_CONSTRAINT",
        ),
        (EventType.ALTER_TABLE, _constraints_changed),
    ),
}


def kind_of(event_type: str) -> EventType | None:
    """This product's type for a Hive event type (None: no counterpart)."""
    if event_type in ALIASES:
        return ALIASES[event_type][0]
    try:
        return EventType(event_type)
    except ValueError:
        return None


def translate(event: HiveEvent, lookups: Lookups) -> NotificationEvent | None:
    """The event as this product's log would hold it, or None for a type with no counterpart here."""
    kind = kind_of(event.event_type)
    if kind is None:
        return None
    translator = ALIASES[event.event_type][1] if event.event_type in ALIASES else TRANSLATORS.get(kind)
    if translator is None:
        return None
    body = translator(event, decode(event), lookups)
    if body is None:
        return None
    table_name = event.table_name or table_of(event.event_type, body)
    return NotificationEvent(
        event.event_id,
        event.event_time,
        kind,
        event.db_name,
        table_name,
        json.dumps(body, separators=(",", ":"), sort_keys=True),
        JSON_FORMAT,
    )
