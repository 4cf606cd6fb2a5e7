"""Typed notification messages: one class per event type, each holding its typed body (``payloads``).

Readers (dump, consolidation, compaction, load, ACID replay, the metadata cache) used to read message bodies
by key and re-derive the same facts each in its own way ("does this ALTER carry a new listing?", "which files
does this event name?"). A message class answers those once, for both message formats:

- format 1 (``v`` absent): data events carry ``files``, the object's *complete* listing after the change,
  and ALTERs that emptied an object say ``is_truncate``;
- format 2 (``v: 2``): data events carry ``data``, a ``DataChange``: the files the write added or changed
  (encoded URIs with checksums), the relative paths it removed, and the listing's file count and digest
  after the change (``formats.listing_digest``), so a reader that applies the deltas in order knows it holds
  exactly the source's listing as of the event. ``complete`` marks a change whose ``added`` is the whole
  listing (creates, bootstraps, overwrites that kept no file, truncates).

Both formats parse to the same ``DataChange``: a format-1 listing is a complete change. A message is parsed
once, where its document enters (``parse``), and its document is made again only where it leaves
(``document``: a dump writes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.payloads import (
    MESSAGE_FORMAT_VERSION,
    AbortTxnBody,
    AcidWriteBody,
    AddPartitionBody,
    AllocWriteIdBody,
    AlterDatabaseBody,
    AlterPartitionBody,
    AlterTableBody,
    CommitTxnBody,
    CreateTableBody,
    DatabaseBody,
    DatabaseSnapshot,
    DataChange,
    DeleteColumnStatBody,
    DropPartitionBody,
    DropTableBody,
    FunctionBody,
    FunctionSnapshot,
    InsertBody,
    ListingMismatchError,
    OpenTxnBody,
    PartitionSnapshot,
    Payload,
    TableSnapshot,
    UpdateColumnStatBody,
    checksum_of,
    convert,
    encode,
    relative_path,
)

__all__ = [
    "MESSAGE_FORMAT_VERSION",
    "DataChange",
    "ListingMismatchError",
    "checksum_of",
    "relative_path",
]

B = TypeVar("B", bound=Payload)


def partition_key_names(table: Mapping[str, Any]) -> list[str]:
    """The partition keys of a table document (for builders of documents)."""
    return [k["name"] for k in table.get("partition_keys") or []]


@dataclass(frozen=True)
class ObjectData:
    """One object's data change in an event: its snapshot (table or partition), location and change."""

    snapshot: TableSnapshot | PartitionSnapshot
    partition_name: str | None
    change: DataChange

    @property
    def location(self) -> str | None:
        return self.snapshot.sd.location


@dataclass(frozen=True)
class Message(Generic[B]):
    """A parsed message: its event type, typed body, and the database and table the log files it under."""

    kind: str
    body: B
    db_name: str | None = None
    table_name: str | None = None
    body_type: ClassVar[type[Payload]] = Payload

    @classmethod
    def parse(cls, kind: str, document: Mapping[str, Any], db: str | None, table: str | None) -> Message[B]:
        """The message of one stored document (the log's or a dump's edge: the only place it is read)."""
        body: B = convert(document, cls.body_type, f"{kind} message")  # type: ignore[assignment]
        return cls(kind, body, db, table)

    def document(self) -> dict[str, Any]:
        """The stored document of this message (what a dump writes: the document that was read)."""
        return encode(self.body)

    # -- facts every reader asks; each class answers for its own events --------------------------------
    @property
    def version(self) -> int:
        """The message format (1 or 2) its body is written in; 1 for bodies without a data change."""
        return self.body.version

    @property
    def table(self) -> TableSnapshot | None:
        """The table's snapshot as of the event (after an ALTER), None for non-table events."""
        return None

    @property
    def carries_data(self) -> bool:
        """The document names a data change (in either format), even an empty one."""
        return self.body.carries_data

    @property
    def rename_target(self) -> str | None:
        """The new table name of a rename (None: not a rename)."""
        return None

    @property
    def moved_to_db(self) -> str | None:
        """The database a rename across databases moves the table into (None: it stays in its database).

        Such an event is logged under the database the table leaves, as Hive logs it; ``rename_target``
        compares names only, so a table keeping its name in another database is no rename by it."""
        return None

    @property
    def renames(self) -> bool:
        """The event gives its table or partition another name (one name leaves the table, another comes)."""
        return self.rename_target is not None

    @property
    def table_names(self) -> set[str]:
        """The tables the event names: its own and, for a rename, the new name (none for a database's)."""
        return {str(name) for name in (self.table_name, self.rename_target) if name is not None}

    def objects(self) -> list[ObjectData]:
        """Each object whose data the event changes, with the change."""
        return []

    def partition_names(self) -> tuple[str, ...]:
        """The partitions the event adds, drops, alters or writes (by Hive partition name)."""
        return ()

    def files(self) -> list[str]:
        """Every file the event adds (what a dump's ``_files`` names for it)."""
        return [f for obj in self.objects() for f in obj.change.added]

    def _partition_name(self, snapshot: PartitionSnapshot) -> str:
        return make_partition_name(self._key_names, snapshot.values)

    @cached_property
    def _key_names(self) -> list[str]:
        table = self.table
        return table.partition_key_names if table is not None else []


# -- databases and functions -----------------------------------------------------------------------------
class DatabaseMessage(Message[B]):
    @property
    def database(self) -> DatabaseSnapshot:
        raise NotImplementedError


class CreateDatabaseMessage(DatabaseMessage[DatabaseBody]):
    body_type = DatabaseBody

    @property
    def database(self) -> DatabaseSnapshot:
        return self.body.database


class DropDatabaseMessage(CreateDatabaseMessage):
    pass


class AlterDatabaseMessage(DatabaseMessage[AlterDatabaseBody]):
    body_type = AlterDatabaseBody

    @property
    def database(self) -> DatabaseSnapshot:
        return self.body.after

    @property
    def before(self) -> DatabaseSnapshot:
        return self.body.before


class FunctionMessage(Message[FunctionBody]):
    body_type = FunctionBody

    @property
    def function(self) -> FunctionSnapshot:
        return self.body.function


class CreateFunctionMessage(FunctionMessage):
    pass


class DropFunctionMessage(FunctionMessage):
    pass


# -- tables and partitions -------------------------------------------------------------------------------
class CreateTableMessage(Message[CreateTableBody]):
    body_type = CreateTableBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.table

    def objects(self) -> list[ObjectData]:
        if self.body.table.partition_keys:
            return []
        change = self.body.change(always=True)
        return [ObjectData(self.body.table, None, change)] if change is not None else []


class DropTableMessage(Message[DropTableBody]):
    body_type = DropTableBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.table


class AlterTableMessage(Message[AlterTableBody]):
    body_type = AlterTableBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.after

    @property
    def before(self) -> TableSnapshot:
        return self.body.before

    @property
    def rename_target(self) -> str | None:
        new = self.body.after.table_name
        return new if new != self.body.before.table_name else None

    @property
    def moved_to_db(self) -> str | None:
        old, new = self.body.before.db_name.lower(), self.body.after.db_name.lower()
        return new if old and new and new != old else None

    @property
    def data(self) -> DataChange | None:
        if self.body.after.partition_keys:
            return None  # partitions carry their own files
        return self.body.change()

    def objects(self) -> list[ObjectData]:
        change = self.data
        return [ObjectData(self.body.after, None, change)] if change is not None else []


P = TypeVar("P", AddPartitionBody, DropPartitionBody)


class PartitionListMessage(Message[P]):
    """An event naming a list of partitions (added or dropped)."""

    @property
    def table(self) -> TableSnapshot:
        return self.body.table

    @property
    def partitions(self) -> list[PartitionSnapshot]:
        return self.body.partitions

    @cached_property
    def _names(self) -> tuple[str, ...]:
        """Made once: a dump, its validation and a load each ask for them several times (escaping is the
        costly part of a metadata replay's partition events)."""
        return tuple(self._partition_name(p) for p in self.body.partitions)

    def partition_names(self) -> tuple[str, ...]:
        return self._names


class AddPartitionMessage(PartitionListMessage[AddPartitionBody]):
    body_type = AddPartitionBody

    def changes(self) -> list[DataChange | None]:
        """One change per partition (None: an ACID partition, whose files come with its writes)."""
        return self.body.changes()

    def objects(self) -> list[ObjectData]:
        return [
            ObjectData(part, name, change)
            for part, name, change in zip(self.partitions, self._names, self.changes(), strict=True)
            if change is not None
        ]


class DropPartitionMessage(PartitionListMessage[DropPartitionBody]):
    body_type = DropPartitionBody


class AlterPartitionMessage(Message[AlterPartitionBody]):
    body_type = AlterPartitionBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.table

    @property
    def after(self) -> PartitionSnapshot:
        return self.body.after

    @property
    def before(self) -> PartitionSnapshot | None:
        return self.body.before

    @property
    def renames(self) -> bool:
        before = self.body.before
        return before is not None and before.values != self.body.after.values

    @property
    def data(self) -> DataChange | None:
        return self.body.change()

    def objects(self) -> list[ObjectData]:
        change = self.data
        return [ObjectData(self.after, self._name, change)] if change is not None else []

    def partition_names(self) -> tuple[str, ...]:
        return (self._name,)

    @cached_property
    def _name(self) -> str:
        return self._partition_name(self.after)


class InsertMessage(Message[InsertBody]):
    body_type = InsertBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.table

    @property
    def partition(self) -> PartitionSnapshot | None:
        return self.body.partition

    @property
    def data(self) -> DataChange:
        change = self.body.change(always=True)
        return change if change is not None else DataChange()

    def objects(self) -> list[ObjectData]:
        part = self.partition
        if part is not None:
            return [ObjectData(part, self._partition_name(part), self.data)]
        return [ObjectData(self.body.table, None, self.data)]

    def partition_names(self) -> tuple[str, ...]:
        return (self._partition_name(self.partition),) if self.partition is not None else ()


# -- transactions ------------------------------------------------------------------------------------------
T = TypeVar("T", OpenTxnBody, CommitTxnBody, AbortTxnBody, AllocWriteIdBody, AcidWriteBody)


class TxnMessage(Message[T]):
    """An event of a transaction's replay: its tables are the ones its writes and write ids name."""

    def txn_tables(self) -> tuple[str, ...]:
        """Names of the tables a commit or abort names (its writes and write ids)."""
        return ()


class OpenTxnMessage(TxnMessage[OpenTxnBody]):
    body_type = OpenTxnBody


class CommitTxnMessage(TxnMessage[CommitTxnBody]):
    body_type = CommitTxnBody

    def txn_tables(self) -> tuple[str, ...]:
        names = {w.table for w in self.body.write_ids} | {w.table for w in self.body.writes}
        return tuple(sorted(name for name in names if name))

    def files(self) -> list[str]:
        return [f for write in self.body.writes for f in write.files]


class AbortTxnMessage(TxnMessage[AbortTxnBody]):
    body_type = AbortTxnBody

    def txn_tables(self) -> tuple[str, ...]:
        return tuple(sorted({w.table for w in self.body.write_ids if w.table}))


class AllocWriteIdMessage(TxnMessage[AllocWriteIdBody]):
    body_type = AllocWriteIdBody


class AcidWriteMessage(TxnMessage[AcidWriteBody]):
    body_type = AcidWriteBody

    @property
    def table(self) -> TableSnapshot:
        return self.body.table


# -- column statistics -----------------------------------------------------------------------------------
class UpdateColumnStatMessage(Message[UpdateColumnStatBody]):
    body_type = UpdateColumnStatBody


class UpdateTableColumnStatMessage(UpdateColumnStatMessage):
    pass


class UpdatePartitionColumnStatMessage(UpdateColumnStatMessage):
    pass


class DeleteColumnStatMessage(Message[DeleteColumnStatBody]):
    body_type = DeleteColumnStatBody


class DeleteTableColumnStatMessage(DeleteColumnStatMessage):
    pass


class DeletePartitionColumnStatMessage(DeleteColumnStatMessage):
    pass


@dataclass
class MessageBuilder:
    """Builds format-2 documents: the data of each object as a ``DataChange`` under ``data`` (documents
    made outside the catalog: fixtures and tools that write a log directly)."""

    body: dict[str, Any] = field(default_factory=dict)

    def with_data(self, change: DataChange | None) -> dict[str, Any]:
        out = dict(self.body)
        out["v"] = MESSAGE_FORMAT_VERSION
        out.pop("files", None)
        out.pop("is_truncate", None)
        if change is not None:
            out["data"] = change.to_json()
        return out

    def with_partition_data(self, changes: Iterable[DataChange | None]) -> dict[str, Any]:
        out = dict(self.body)
        out["v"] = MESSAGE_FORMAT_VERSION
        out.pop("files", None)
        out["data"] = [c.to_json() if c is not None else None for c in changes]
        return out
