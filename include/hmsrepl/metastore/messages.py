"""Typed notification messages: each stored message parsed once, into the class its event type names.

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

Both formats parse to the same ``DataChange``: a format-1 listing is a complete change. Snapshots stay the
JSON documents the log stores (they go to the target as they are).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats import listing_digest
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.partition_names import make_partition_name

MESSAGE_FORMAT_VERSION = 2
DATA_KEYS = ("files", "is_truncate", "data")
"""Where a message of either format keeps its data change: without them, an event changes metadata only."""


class ListingMismatchError(HmsReplError):
    """Deltas applied to a held listing did not give the listing the source recorded."""


def relative_path(encoded: str) -> str:
    """Where an encoded file sits below its object's location: its subdirectory and name."""
    entry = EncodedFileUri.decode(encoded)
    return f"{entry.subdir}/{entry.file_name}" if entry.subdir else entry.file_name


def checksum_of(encoded: str) -> str:
    return EncodedFileUri.decode(encoded).checksum


@dataclass(frozen=True)
class DataChange:
    """What one write did to one table's or partition's data files."""

    added: tuple[str, ...] = ()  # encoded URIs of files new or changed by the write
    removed: tuple[str, ...] = ()  # relative paths of files the write removed (not with ``complete``)
    complete: bool = False  # ``added`` is the whole listing after the change: nothing else remains
    count: int | None = None  # files after the change (format 2)
    digest: str | None = None  # listing digest after the change (format 2)

    @classmethod
    def full(cls, files: Iterable[str]) -> DataChange:
        """A change that sets the listing to ``files`` (format 1's listings, bootstraps, overwrites)."""
        added = tuple(files)
        digest = listing_digest.of((relative_path(f), checksum_of(f)) for f in added)
        return cls(added, (), True, len(added), digest)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> DataChange:
        return cls(
            tuple(doc.get("added") or ()),
            tuple(doc.get("removed") or ()),
            bool(doc.get("complete")),
            doc.get("count"),
            doc.get("digest"),
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"added": list(self.added), "removed": list(self.removed)}
        if self.complete:
            doc["complete"] = True
        if self.count is not None:
            doc["count"] = self.count
        if self.digest is not None:
            doc["digest"] = self.digest
        return doc

    @property
    def is_empty(self) -> bool:
        """A write that changed no file (e.g. the second event of a client's write pair)."""
        return not self.added and not self.removed and not self.complete

    def apply(self, listing: Mapping[str, str]) -> dict[str, str]:
        """The listing (relative path -> encoded URI) after this change, given the one before it."""
        out = {} if self.complete else dict(listing)
        for rel in self.removed:
            out.pop(rel, None)
        for encoded in self.added:
            out[relative_path(encoded)] = encoded
        return out

    def check(self, listing: Mapping[str, str], what: str) -> None:
        """Raise unless ``listing`` (after applying this change) is the one the source recorded."""
        digest = None
        if self.digest is not None and (self.count is None or len(listing) == self.count):
            digest = listing_digest.of((rel, checksum_of(enc)) for rel, enc in listing.items())
        self.check_summary(len(listing), digest, what)

    def check_summary(self, count: int, digest: str | None, what: str) -> None:
        """Raise unless a listing of ``count`` files with ``digest`` (None: not computed) is the source's.

        A load that keeps a listing's summary up to date per change checks it without the listing itself.
        """
        if self.count is not None and count != self.count:
            raise ListingMismatchError(
                f"{what}: rebuilt listing has {count} files, the source recorded {self.count}; an "
                "event is missing or was applied twice: load from a new bootstrap dump"
            )
        if self.digest is not None and digest is not None and digest != self.digest:
            raise ListingMismatchError(
                f"{what}: rebuilt listing differs from the source's (digest {digest} != {self.digest}); "
                "an event is missing or was applied twice: load from a new bootstrap dump"
            )


def _data_v1(body: Mapping[str, Any], always: bool = False) -> DataChange | None:
    files = body.get("files")
    if always or files or body.get("is_truncate"):
        return DataChange.full(files or ())
    return None


def _data(body: Mapping[str, Any], always: bool = False) -> DataChange | None:
    """The message's data change in either format (None: metadata only)."""
    if body.get("v", 1) >= 2:
        doc = body.get("data")
        return DataChange.from_json(doc) if doc is not None else None
    return _data_v1(body, always)


def partition_key_names(table: Mapping[str, Any]) -> list[str]:
    return [k["name"] for k in table.get("partition_keys") or []]


@dataclass(frozen=True)
class ObjectData:
    """One object's data change in an event: its snapshot (table or partition), location and change."""

    snapshot: Mapping[str, Any]
    partition_name: str | None
    change: DataChange

    @property
    def location(self) -> str | None:
        return (self.snapshot.get("sd") or {}).get("location")


@dataclass(frozen=True)
class Message:
    """A parsed message. ``raw`` is the stored document, for the parts that go to the target as they are."""

    kind: str
    raw: Mapping[str, Any]
    db_name: str | None = None
    table_name: str | None = None
    version: int = 1

    @classmethod
    def parse(cls, kind: str, body: Mapping[str, Any], db: str | None, table: str | None) -> Message:
        return cls(kind, body, db, table, int(body.get("v", 1)))

    # -- facts every reader asks; each class answers for its own events --------------------------------
    @property
    def table(self) -> Mapping[str, Any] | None:
        """The table's snapshot as of the event (after an ALTER), None for non-table events."""
        return self.raw.get("table")

    @property
    def rename_target(self) -> str | None:
        """The new table name of a rename (None: not a rename)."""
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

    def _partition_name(self, snapshot: Mapping[str, Any]) -> str:
        return make_partition_name(self._key_names, snapshot["values"])

    @cached_property
    def _key_names(self) -> list[str]:
        return partition_key_names(self.table or {})


class DatabaseMessage(Message):
    @property
    def database(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.raw.get("after") or self.raw["database"])


class FunctionMessage(Message):
    @property
    def function(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.raw["function"])


class CreateTableMessage(Message):
    def objects(self) -> list[ObjectData]:
        table = self.raw["table"]
        if partition_key_names(table):
            return []
        change = _data(self.raw, always=True)
        return [ObjectData(table, None, change)] if change is not None else []


class DropTableMessage(Message):
    pass


class AlterTableMessage(Message):
    @property
    def table(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.raw["after"])

    @property
    def before(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.raw["before"])

    @property
    def rename_target(self) -> str | None:
        new = self.raw["after"]["table_name"]
        return new if new != self.raw["before"]["table_name"] else None

    @property
    def data(self) -> DataChange | None:
        if partition_key_names(self.raw["after"]):
            return None  # partitions carry their own files
        return _data(self.raw)

    def objects(self) -> list[ObjectData]:
        change = self.data
        return [ObjectData(self.raw["after"], None, change)] if change is not None else []


class PartitionListMessage(Message):
    """An event naming a list of partitions (added or dropped)."""

    @property
    def partitions(self) -> list[Mapping[str, Any]]:
        return list(self.raw["partitions"])

    @cached_property
    def _names(self) -> tuple[str, ...]:
        """Made once: a dump, its validation and a load each ask for them several times (escaping is the
        costly part of a metadata replay's partition events)."""
        return tuple(self._partition_name(p) for p in self.raw["partitions"])

    def partition_names(self) -> tuple[str, ...]:
        return self._names


class AddPartitionMessage(PartitionListMessage):
    def changes(self) -> list[DataChange | None]:
        """One change per partition (None: an ACID partition, whose files come with its writes)."""
        if self.version >= 2:
            return [DataChange.from_json(d) if d is not None else None for d in self.raw.get("data") or []]
        return [DataChange.full(f) if f is not None else None for f in self.raw.get("files") or []]

    def objects(self) -> list[ObjectData]:
        return [
            ObjectData(part, name, change)
            for part, name, change in zip(self.partitions, self._names, self.changes(), strict=True)
            if change is not None
        ]


class DropPartitionMessage(PartitionListMessage):
    pass


class AlterPartitionMessage(Message):
    @property
    def after(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.raw["after"])

    @property
    def renames(self) -> bool:
        before = self.raw.get("before") or {}
        return "values" in before and before["values"] != self.after.get("values")

    @property
    def data(self) -> DataChange | None:
        return _data(self.raw)

    def objects(self) -> list[ObjectData]:
        change = self.data
        return [ObjectData(self.after, self._name, change)] if change is not None else []

    def partition_names(self) -> tuple[str, ...]:
        return (self._name,)

    @cached_property
    def _name(self) -> str:
        return self._partition_name(self.after)


class InsertMessage(Message):
    @property
    def partition(self) -> Mapping[str, Any] | None:
        return self.raw.get("partition")

    @property
    def data(self) -> DataChange:
        change = _data(self.raw, always=True)
        assert change is not None
        return change

    def objects(self) -> list[ObjectData]:
        part = self.partition
        if part:
            return [ObjectData(part, self._partition_name(part), self.data)]
        return [ObjectData(self.raw["table"], None, self.data)]

    def partition_names(self) -> tuple[str, ...]:
        return (self._partition_name(self.partition),) if self.partition else ()


class TxnMessage(Message):
    @property
    def table(self) -> Mapping[str, Any] | None:
        return self.raw.get("table") if isinstance(self.raw.get("table"), dict) else None

    def txn_tables(self) -> tuple[str, ...]:
        """Names of the tables a commit or abort names (its writes and write ids)."""
        names = {
            entry["table"]
            for key in ("write_ids", "writes")
            for entry in self.raw.get(key) or []
            if isinstance(entry, dict) and entry.get("table")
        }
        return tuple(sorted(names))

    def files(self) -> list[str]:
        return [f for write in self.raw.get("writes") or [] for f in write.get("files") or []]


class ColumnStatMessage(Message):
    pass


@dataclass
class MessageBuilder:
    """Builds format-2 bodies: the data of each object as a ``DataChange`` under ``data``."""

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
