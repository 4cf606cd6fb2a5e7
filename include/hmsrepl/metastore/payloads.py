"""The notification log's payloads as types: object snapshots and one body per event type.

A message body used to travel as the JSON document the log stores, and every reader read it by key. Here each
body is a frozen ``msgspec`` struct, made once where a document enters (``decode``: the log's or a dump's
edge) and turned back into a document once where it leaves (``encode``). msgspec converts a decoded document
into its struct in a few microseconds, so a replay or an append pays nothing measurable for the types.

The wire format is the one the log always had:

- snapshots carry every field of the catalog model (``model.Table`` and friends), with the model's defaults
  for a field an older document lacks;
- a key a writer leaves out (``v``, ``files``, ``data``, ``recycled`` ...) is ``UNSET``, never written, so a
  document read and written again is the document that was read (``tests/unit/test_payload_codec.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import msgspec.inspect
from msgspec import UNSET, UnsetType
from pydantic import BaseModel

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats import listing_digest
from hmsrepl.formats.file_uri import file_name_of, split_encoded
from hmsrepl.formats.json_text import LazyArray
from hmsrepl.storage.checksum import checksum_size

MESSAGE_FORMAT_VERSION = 2


class PayloadFormatError(HmsReplError, ValueError):
    """A stored message does not have its event type's fields: a foreign, newer or damaged writer."""


def relative_path(encoded: str) -> str:
    """Where an encoded file sits below its object's location: its subdirectory and name."""
    return relative_path_of(split_encoded(encoded))


def checksum_of(encoded: str) -> str:
    return split_encoded(encoded)[1]


def referenced_bytes(encoded_files: Iterable[str]) -> int:
    """Bytes of data files named by encoded file URIs, from the size in their checksum tokens (no I/O)."""
    return sum(max(checksum_size(checksum_of(uri)), 0) for uri in encoded_files)


def place_and_checksum(encoded: str) -> tuple[str, str]:
    """``relative_path`` and ``checksum_of`` of one entry, split once: a bootstrap load asks both of each of
    a partition's files when it records them and again when it logs them (a million of each)."""
    parts = split_encoded(encoded)
    return relative_path_of(parts), parts[1]


def relative_path_of(parts: list[str]) -> str:
    """``relative_path`` of an entry already split (``split_encoded``)."""
    name, subdir = file_name_of(parts[0]), parts[3]
    return f"{subdir}/{name}" if subdir else name


class ListingMismatchError(HmsReplError):
    """Deltas applied to a held listing did not give the listing the source recorded."""


def _no_files() -> tuple[str, ...]:
    return ()


class DataChange(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one write did to one table's or partition's data files (format 2's ``data``).

    ``added`` and ``removed`` are always written; ``complete``, ``count`` and ``digest`` only when set, as the
    format always had them.
    """

    # A factory msgspec does not know: the two lists are written even when empty, as they always were.
    added: tuple[str, ...] = msgspec.field(default_factory=_no_files)  # files new or changed by the write
    # relative paths of files the write removed (not with ``complete``)
    removed: tuple[str, ...] = msgspec.field(default_factory=_no_files)
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
        return convert(doc, cls, "data change")

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


@dataclass(frozen=True)
class ColumnStat:
    """One column's statistics: ``kind`` names the union member, ``data`` its fields (binary as base64)."""

    col_name: str
    col_type: str
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"col_name": self.col_name, "col_type": self.col_type, "kind": self.kind, "data": self.data}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ColumnStat:
        return cls(doc["col_name"], doc["col_type"], doc["kind"], dict(doc["data"]))


# -- snapshots: the catalog model's fields and defaults (``metastore.model``) -------------------------------
class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """An object as it was when its event happened: the catalog model's JSON form, typed.

    Names the catalog always writes default to empty, so a partial document (a hand-written fixture, an
    older tool's message) reads as it did when readers took what was there; the catalog model still refuses
    such a snapshot where one is applied.
    """

    def to_json(self) -> dict[str, Any]:
        """The document the target's catalog validates (``model.Table.model_validate`` and friends)."""
        return encode(self)


class ColumnSnapshot(Snapshot, frozen=True, kw_only=True):
    name: str
    type: str = ""
    comment: str | None = None


class SerDeSnapshot(Snapshot, frozen=True, kw_only=True):
    name: str | None = None
    serialization_lib: str | None = None
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    # Hive 4's fields: written only when the object has them (``model.SerDeInfo``)
    description: str | UnsetType | None = UNSET
    serializer_class: str | UnsetType | None = UNSET
    deserializer_class: str | UnsetType | None = UNSET
    serde_type: int | UnsetType | None = UNSET


class OrderSnapshot(Snapshot, frozen=True, kw_only=True):
    col: str
    order: int = 1


class StorageSnapshot(Snapshot, frozen=True, kw_only=True):
    cols: list[ColumnSnapshot] = msgspec.field(default_factory=list)
    location: str | None = None
    input_format: str | None = None
    output_format: str | None = None
    compressed: bool = False
    num_buckets: int = -1
    serde_info: SerDeSnapshot | None = None
    bucket_cols: list[str] = msgspec.field(default_factory=list)
    sort_cols: list[OrderSnapshot] = msgspec.field(default_factory=list)
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    stored_as_sub_directories: bool = False


class DatabaseSnapshot(Snapshot, frozen=True, kw_only=True):
    name: str = ""
    description: str | None = None
    location_uri: str | None = None
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    owner_name: str | None = None
    owner_type: str | None = "USER"
    managed_location_uri: str | UnsetType | None = UNSET  # Hive 4's; written only when set


class TableSnapshot(Snapshot, frozen=True, kw_only=True):
    db_name: str = ""
    table_name: str = ""
    owner: str | None = None
    create_time: int = 0
    last_access_time: int = 0
    retention: int = 0
    sd: StorageSnapshot = msgspec.field(default_factory=StorageSnapshot)
    partition_keys: list[ColumnSnapshot] = msgspec.field(default_factory=list)
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    view_original_text: str | None = None
    view_expanded_text: str | None = None
    table_type: str = "MANAGED_TABLE"
    temporary: bool = False
    id: int | None = None
    write_id: int = 0
    constraints: dict[str, Any] | UnsetType = UNSET
    """``model.Table.constraints`` as its document (``metastore.constraints``); left out when it has none."""

    @property
    def location(self) -> str | None:
        return self.sd.location

    @property
    def partition_key_names(self) -> list[str]:
        return [key.name for key in self.partition_keys]


class PartitionSnapshot(Snapshot, frozen=True, kw_only=True):
    values: list[str] = msgspec.field(default_factory=list)
    db_name: str = ""
    table_name: str = ""
    create_time: int = 0
    last_access_time: int = 0
    sd: StorageSnapshot = msgspec.field(default_factory=StorageSnapshot)
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    write_id: int = 0

    @property
    def location(self) -> str | None:
        return self.sd.location


class ResourceSnapshot(Snapshot, frozen=True, kw_only=True):
    resource_type: str = "JAR"
    uri: str


class FunctionSnapshot(Snapshot, frozen=True, kw_only=True):
    function_name: str
    db_name: str = ""
    class_name: str = ""
    owner_name: str | None = None
    owner_type: str | None = "USER"
    create_time: int = 0
    function_type: int = 1
    resource_uris: list[ResourceSnapshot] = msgspec.field(default_factory=list)


S = TypeVar("S", bound=Snapshot)


def snapshot_of(model: BaseModel, kind: type[S]) -> S:
    """The snapshot of a catalog object (``model.Table`` -> ``TableSnapshot``), as its event records it."""
    return convert(model.model_dump(mode="json"), kind, kind.__name__)


def snapshot_of_json(document: str, kind: type[S]) -> S:
    """``snapshot_of`` a catalog object from its JSON document (``model_dump_json``, what its row stores), for a
    writer that made the document already: one decode instead of a second walk of the model (a bootstrap stores
    and logs each partition it adds, 100,000 for one table). Fields the document leaves out take their
    defaults."""
    return msgspec.json.decode(document, type=kind)


# -- bodies: one per event type ------------------------------------------------------------------------------
class Payload(msgspec.Struct, frozen=True, kw_only=True):
    """One event's message body."""

    @property
    def version(self) -> int:
        """The message format of the body: 1 unless a data-carrying body says ``v``."""
        return 1

    @property
    def carries_data(self) -> bool:
        """The body names a data change (of either format): without one, an event changes metadata only."""
        return False

    def without_data(self) -> Payload:
        """The same body without its data change (a load applies its metadata only)."""
        return self


class DatabaseBody(Payload, frozen=True, kw_only=True):
    """CREATE_DATABASE, DROP_DATABASE."""

    database: DatabaseSnapshot


class AlterDatabaseBody(Payload, frozen=True, kw_only=True):
    before: DatabaseSnapshot
    after: DatabaseSnapshot


class FunctionBody(Payload, frozen=True, kw_only=True):
    """CREATE_FUNCTION, DROP_FUNCTION."""

    function: FunctionSnapshot


class DataBody(Payload, frozen=True, kw_only=True):
    """A body that may carry one object's data change, in format 1 (``files``) or 2 (``v``, ``data``)."""

    v: int | UnsetType = UNSET
    files: list[str] | UnsetType | None = UNSET
    is_truncate: bool | UnsetType = UNSET
    data: DataChange | UnsetType | None = UNSET

    @property
    def version(self) -> int:
        return self.v if isinstance(self.v, int) else 1

    @property
    def carries_data(self) -> bool:
        """The body names a data change (of either format): without one, an event changes metadata only."""
        return not (self.files is UNSET and self.is_truncate is UNSET and self.data is UNSET)

    def without_data(self) -> DataBody:
        return msgspec.structs.replace(self, files=UNSET, is_truncate=UNSET, data=UNSET)

    def change(self, always: bool = False) -> DataChange | None:
        """The data change in either format (None: metadata only); ``always``: format 1 always has one."""
        if self.version >= 2:
            return self.data if isinstance(self.data, DataChange) else None
        files = self.files if isinstance(self.files, list) else []
        if always or files or self.is_truncate is True:
            return DataChange.full(files)
        return None


def format2(change: DataChange | None) -> dict[str, Any]:
    """The format fields of a body written now: ``v: 2`` and the change (none: metadata only)."""
    return {"v": MESSAGE_FORMAT_VERSION, "data": UNSET if change is None else change}


class CreateTableBody(DataBody, frozen=True, kw_only=True):
    table: TableSnapshot


class AlterTableBody(DataBody, frozen=True, kw_only=True):
    before: TableSnapshot
    after: TableSnapshot
    recycled: list[str] | UnsetType = UNSET


class DropTableBody(Payload, frozen=True, kw_only=True):
    table: TableSnapshot
    recycled: list[str] | UnsetType = UNSET
    renamed_to: str | UnsetType | None = UNSET  # a dump's: a rename out of its policy, dropped on the target


class AddPartitionBody(Payload, frozen=True, kw_only=True):
    """Partitions added, each with its data change (None: an ACID partition, whose files come with writes)."""

    table: TableSnapshot
    partitions: list[PartitionSnapshot]
    v: int | UnsetType = UNSET
    files: list[list[str] | None] | UnsetType = UNSET
    data: list[DataChange | None] | UnsetType = UNSET

    @property
    def version(self) -> int:
        return self.v if isinstance(self.v, int) else 1

    @property
    def carries_data(self) -> bool:
        return not (self.files is UNSET and self.data is UNSET)

    def changes(self) -> list[DataChange | None]:
        if self.version >= 2:
            return list(self.data) if isinstance(self.data, list) else []
        files = self.files if isinstance(self.files, list) else []
        return [DataChange.full(f) if f is not None else None for f in files]

    def keeping(self, keep: list[bool]) -> AddPartitionBody:
        """The body naming only the partitions ``keep`` marks (every per-partition list loses the same)."""
        return msgspec.structs.replace(
            self,
            partitions=_kept(self.partitions, keep),
            files=_kept(self.files, keep),
            data=_kept(self.data, keep),
        )

    def without_data(self) -> AddPartitionBody:
        """The same partitions with no data change each (their files come with the transaction's writes)."""
        none: list[None] = [None] * len(self.partitions)
        if self.version >= 2:
            return msgspec.structs.replace(self, files=UNSET, data=none)
        return msgspec.structs.replace(self, files=none, data=UNSET)


class AlterPartitionBody(DataBody, frozen=True, kw_only=True):
    table: TableSnapshot
    before: PartitionSnapshot | None = None
    after: PartitionSnapshot
    recycled: list[str] | UnsetType = UNSET


class DropPartitionBody(Payload, frozen=True, kw_only=True):
    table: TableSnapshot
    partitions: list[PartitionSnapshot]
    recycled: list[list[str]] | UnsetType = UNSET  # per partition: the files its drop recycled

    def keeping(self, keep: list[bool]) -> DropPartitionBody:
        """The body naming only the partitions ``keep`` marks (every per-partition list loses the same)."""
        return msgspec.structs.replace(
            self, partitions=_kept(self.partitions, keep), recycled=_kept(self.recycled, keep)
        )


L = TypeVar("L")


def _kept(items: list[L] | UnsetType, keep: list[bool]) -> list[L] | UnsetType:
    """The entries of a per-partition list that ``keep`` marks (a list of another length: left as it is)."""
    if isinstance(items, UnsetType) or len(items) != len(keep):
        return items
    return [item for item, k in zip(items, keep, strict=True) if k]


class InsertBody(DataBody, frozen=True, kw_only=True):
    table: TableSnapshot
    partition: PartitionSnapshot | None = None
    replace: bool | UnsetType = UNSET
    new_files: list[str] | UnsetType = UNSET
    recycled: list[str] | UnsetType = UNSET


class OpenTxnBody(Payload, frozen=True, kw_only=True):
    txn_ids: list[int]
    user: str | None = None
    host: str | None = None


class TableWriteId(msgspec.Struct, frozen=True, kw_only=True):
    """A write id a transaction holds on one table."""

    db: str
    table: str
    write_id: int


class TxnWrite(msgspec.Struct, frozen=True, kw_only=True):
    """One write of a committed transaction: its table (and partition) and the files it added."""

    db: str
    table: str
    partition: str | None = None
    write_id: int
    files: list[str] = msgspec.field(default_factory=list)


class CommitTxnBody(Payload, frozen=True, kw_only=True):
    txn_id: int
    write_ids: list[TableWriteId] = msgspec.field(default_factory=list)
    writes: list[TxnWrite] = msgspec.field(default_factory=list)
    files: list[str] | UnsetType = UNSET  # a dump's: every write's files, for a load's pre-flight checks


class AbortTxnBody(Payload, frozen=True, kw_only=True):
    txn_id: int
    write_ids: list[TableWriteId] = msgspec.field(default_factory=list)
    reason: str | UnsetType = UNSET


class TxnWriteIdPair(msgspec.Struct, frozen=True, kw_only=True):
    txn_id: int
    write_id: int


class AllocWriteIdBody(Payload, frozen=True, kw_only=True):
    db: str
    table: str
    txn_to_write_ids: list[TxnWriteIdPair]


class AcidWriteBody(Payload, frozen=True, kw_only=True):
    txn_id: int
    write_id: int
    table: TableSnapshot
    partition: PartitionSnapshot | None = None
    files: list[str] = msgspec.field(default_factory=list)


class UpdateColumnStatBody(Payload, frozen=True, kw_only=True):
    partition: str | None = None
    engine: str | None = None
    last_analyzed: int | None = None
    stats: list[ColumnStat]


class DeleteColumnStatBody(Payload, frozen=True, kw_only=True):
    partition: str | None = None
    engine: str | None = None
    columns: list[str] = msgspec.field(default_factory=list)


# -- the codec --------------------------------------------------------------------------------------------
T = TypeVar("T")


def convert(document: Any, kind: type[T], what: str) -> T:
    """``document`` (decoded JSON) as ``kind``; a one-line error naming what does not fit."""
    try:
        return msgspec.convert(document, kind)
    except msgspec.ValidationError as exc:
        raise PayloadFormatError(
            f"{what}: the stored message does not have its event type's fields ({exc}); it comes from a "
            "foreign or damaged writer: take a new bootstrap dump"
        ) from exc


def encode(payload: msgspec.Struct) -> dict[str, Any]:
    """The JSON document of a payload or snapshot (what the log stores, with NaN kept as a float).

    A data change's file lists stay tuples (JSON arrays once written): no second pass over the document; a
    listing too long to hold (``LazyArray``) stays as it is, for ``dumps_sorted_pieces`` to write.
    """
    document: dict[str, Any] = msgspec.to_builtins(payload, builtin_types=(LazyArray,))
    return document


def prior_database(body: Payload | Mapping[str, Any]) -> DatabaseSnapshot | None:
    """The database as it was before an ALTER_DATABASE or DROP_DATABASE (None: the body names none)."""
    if isinstance(body, AlterDatabaseBody):
        return body.before
    if isinstance(body, DatabaseBody):
        return body.database
    if isinstance(body, Mapping):
        doc = body.get("before") or body.get("database")
        return convert(doc, DatabaseSnapshot, "database snapshot") if isinstance(doc, dict) else None
    return None


def named_databases(body: Payload | Mapping[str, Any]) -> set[str]:
    """The database of every object snapshot in a body (tables, partitions, functions), lower-cased."""
    names: set[str] = set()
    if isinstance(body, Payload):
        for name in _snapshot_fields(type(body)):
            value = getattr(body, name)
            for item in value if isinstance(value, list) else (value,):
                if isinstance(item, TableSnapshot | PartitionSnapshot | FunctionSnapshot):
                    names.add(item.db_name.lower())
        return names
    for value in body.values():  # a document already in the log's form
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, dict) and isinstance(item.get("db_name"), str):
                names.add(item["db_name"].lower())
    return names


_NAMED = (TableSnapshot, PartitionSnapshot, FunctionSnapshot)


@functools.cache
def _snapshot_fields(kind: type[Payload]) -> tuple[str, ...]:
    """The fields of a body type that hold snapshots naming a database (found once per type)."""

    def holds(info: msgspec.inspect.Type) -> bool:
        if isinstance(info, msgspec.inspect.StructType):
            return info.cls in _NAMED
        if isinstance(info, msgspec.inspect.UnionType):
            return any(holds(t) for t in info.types)
        if isinstance(info, msgspec.inspect.ListType):
            return holds(info.item_type)
        return False

    struct = msgspec.inspect.type_info(kind)
    assert isinstance(struct, msgspec.inspect.StructType)
    return tuple(f.name for f in struct.fields if holds(f.type))


class ObjectMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """A bootstrap dump's ``_metadata`` of one table or partition (its other keys are the dump's own)."""

    table: TableSnapshot | None = None
    partition: PartitionSnapshot | None = None

    @property
    def location(self) -> str | None:
        """The partition's location for a partition's metadata, else the table's."""
        obj = self.partition or self.table
        return obj.sd.location if obj is not None else None


def metadata_location(document: Mapping[str, Any], what: str) -> str | None:
    """The location a bootstrap dump's ``_metadata`` document records for its table or partition."""
    return convert(document, ObjectMetadata, what).location
