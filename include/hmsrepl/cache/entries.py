"""What the cache holds per table: its committed content, the write-id tag that content is valid for, and
the changes of open transactions held back until they commit.

Cached objects are never modified once published: readers take references under the store lock and use
them after releasing it, so every change replaces objects (and the ordered partition list) instead of
editing them. Only the updater thread changes a ``TableState``, always under the store lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.model import Database, Partition, Table

TableKey = tuple[str, str]
TABLE_OBJECT = ""  # the table itself, among the partition names that key the other objects (never empty)


class CachedObject:
    """One cached catalog object, its approximate size, and its Thrift struct, built on first use.

    Converting a partition to Thrift costs as much as reading it from the database, so the struct is kept:
    a Thrift cache hit then costs only the lookup. Two threads may build it at once; both results are equal.
    """

    __slots__ = ("_derived", "model", "size")

    def __init__(self, model: Table | Partition | Database, size: int) -> None:
        self.model = model
        self.size = size
        self._derived: tuple[Callable[[Any], Any], Any] | None = None

    def struct(self, convert: Callable[[Any], Any]) -> Any:
        """``convert(model)``, kept for the next call with the same ``convert``."""
        derived = self._derived
        if derived is None or derived[0] is not convert:
            derived = self._derived = (convert, convert(self.model))
        return derived[1]


@dataclass(frozen=True)
class ReplaceTable:
    """A new version of the table object (ALTER_TABLE)."""

    table: Table
    size: int


@dataclass(frozen=True)
class PutPartition:
    """A new or changed partition (ADD_PARTITION, ALTER_PARTITION)."""

    name: str
    partition: Partition
    size: int


@dataclass(frozen=True)
class DropPartition:
    name: str


@dataclass(frozen=True)
class MarkWritten:
    """A transactional write (ACID_WRITE): the table's and the partition's write id advance to it.

    These commute (the higher write id wins), so several open txns may hold them on one object.
    """

    write_id: int
    partition: str | None


Change = ReplaceTable | PutPartition | DropPartition | MarkWritten


def object_of(change: Change) -> str | None:
    """The object a change replaces, or None for changes that commute with every other."""
    if isinstance(change, ReplaceTable):
        return TABLE_OBJECT
    if isinstance(change, PutPartition | DropPartition):
        return change.name
    return None


@dataclass(eq=False)
class TableState:
    """A cached table: content valid for ``write_ids`` once ``unsettled`` is empty.

    ``base_event_id``: every event up to it is reflected (a loaded table may be ahead of the updater).
    ``unsettled``: write ids that were open when content arrived that may include their uncommitted changes
    (a load from the database, or a change no txn claimed); the table serves no reader until all settled.
    ``pending``: changes of open txns by txn id, applied at their COMMIT_TXN and dropped at ABORT_TXN.
    ``pending_objects``: which txn holds a replacing change of an object; a second txn on the same object
    cannot be ordered against the first, so such a change is applied at once and the table unsettled.
    ``held_since``: per txn holding changes, the event that made the first one; the database shows that
    change from then on (it applies changes of open txns at once), the cache only once the txn commits.
    """

    table_id: int
    table: CachedObject
    partitions: dict[str, CachedObject] | None
    write_ids: ValidWriteIdList
    base_event_id: int
    unsettled: frozenset[int] = frozenset()
    owners: dict[int, int] = field(default_factory=dict)  # open write id -> txn id, from ALLOC_WRITE_ID
    pending: dict[int, list[Change]] = field(default_factory=dict)
    pending_objects: dict[str, int] = field(default_factory=dict)
    held_since: dict[int, int] = field(default_factory=dict)  # txn id -> event of its first held change
    size: int = 0
    _ordered: list[tuple[str, CachedObject]] | None = None

    def __post_init__(self) -> None:
        self.size = self.table.size + sum(p.size for p in (self.partitions or {}).values())

    @property
    def key(self) -> TableKey:
        model = self.table.model
        return (model.db_name, model.table_name)  # type: ignore[union-attr]

    @property
    def table_model(self) -> Table:
        return self.table.model  # type: ignore[return-value]

    @property
    def entries(self) -> int:
        return 1 + len(self.partitions or ())

    # -- reads (under the store lock) ---------------------------------------------------------------------
    def ordered_partitions(self) -> list[tuple[str, CachedObject]]:
        """Partitions by name, as the database orders them (code-point order, like its C/binary collation)."""
        if self._ordered is None:
            self._ordered = sorted((self.partitions or {}).items())
        return self._ordered

    def oldest_held_event(self) -> int | None:
        """The earliest event whose change this entry still holds back (None: it holds nothing)."""
        return min(self.held_since.values(), default=None)

    def forget_partitions(self) -> None:
        """Keep only the table object (its partitions outgrew the budget); partition reads then miss."""
        self.partitions = None
        self._ordered = None
        self.size = self.table.size

    def partition_name(self, values: Sequence[str]) -> str:
        """The partition's name, failing as the catalog does when the values do not fit the keys."""
        table = self.table_model
        try:
            return make_partition_name(table.partition_key_names, values)
        except ValueError as exc:
            raise InvalidObjectError(f"table '{table.qualified_name}': {exc}") from exc

    def partition(self, values: Sequence[str]) -> CachedObject:
        name = self.partition_name(values)
        found = (self.partitions or {}).get(name)
        if found is None:
            raise NoSuchPartitionError(self.key[0], self.key[1], name)
        return found

    def partitions_by_names(self, names: Iterable[str]) -> list[CachedObject]:
        parts = self.partitions or {}
        return [parts[name] for name in sorted(set(names)) if name in parts]

    def matching(self, partial_values: Sequence[str], max_parts: int) -> list[tuple[str, CachedObject]]:
        """Partitions matching a partial spec (empty values match anything), as get_partitions_ps."""
        table = self.table_model
        if len(partial_values) > len(table.partition_keys):
            raise InvalidObjectError(
                f"partial spec {list(partial_values)} has more values than table '{table.qualified_name}' has keys"
            )
        wanted = [(i, v) for i, v in enumerate(partial_values) if v != ""]
        out: list[tuple[str, CachedObject]] = []
        if max_parts == 0:
            return out
        for name, entry in self.ordered_partitions():
            values = entry.model.values  # type: ignore[union-attr]
            if all(values[i] == v for i, v in wanted):
                out.append((name, entry))
                if len(out) == max_parts:
                    break
        return out

    # -- changes (updater thread, under the store lock) -----------------------------------------------------
    def apply(self, change: Change) -> None:
        """Make ``change`` part of the content, keeping write ids where only ACID_WRITE may move them."""
        if isinstance(change, ReplaceTable):
            kept = self.table_model.write_id  # an ALTER never moves the write id; its snapshot may be stale
            self._set_table(change.table.model_copy(update={"write_id": kept}), change.size)
        elif isinstance(change, PutPartition):
            if self.partitions is None:
                return
            old = self.partitions.get(change.name)
            part = change.partition
            if old is not None:
                part = part.model_copy(update={"write_id": old.model.write_id})  # type: ignore[union-attr]
            self._set_partition(change.name, CachedObject(part, change.size))
        elif isinstance(change, DropPartition):
            if self.partitions is not None and change.name in self.partitions:
                self.size -= self.partitions.pop(change.name).size
                self._ordered = None
        else:
            self._mark_written(change)

    def _mark_written(self, change: MarkWritten) -> None:
        table = self.table_model
        if change.write_id > table.write_id:
            self._set_table(table.model_copy(update={"write_id": change.write_id}), self.table.size)
        if change.partition is None or self.partitions is None:
            return
        old = self.partitions.get(change.partition)
        if old is not None and change.write_id > old.model.write_id:  # type: ignore[union-attr]
            part = old.model.model_copy(update={"write_id": change.write_id})
            self._set_partition(change.partition, CachedObject(part, old.size))

    def _set_table(self, table: Table, size: int) -> None:
        self.size += size - self.table.size
        self.table = CachedObject(table, size)

    def _set_partition(self, name: str, entry: CachedObject) -> None:
        assert self.partitions is not None
        old = self.partitions.get(name)
        self.size += entry.size - (old.size if old is not None else 0)
        self.partitions[name] = entry
        self._ordered = None

    def hold(self, txn_id: int, change: Change, event_id: int = 0) -> None:
        """Keep a change of open txn ``txn_id`` (made by event ``event_id``) back until that txn commits."""
        self.pending.setdefault(txn_id, []).append(change)
        self.held_since.setdefault(txn_id, event_id)
        target = object_of(change)
        if target is not None:
            self.pending_objects[target] = txn_id

    def holder_of(self, target: str) -> int | None:
        return self.pending_objects.get(target)

    def forget_held(self, target: str) -> None:
        """Drop every held replacing change of ``target``: newer content already includes it."""
        if self.pending_objects.pop(target, None) is None:
            return
        for txn_id, changes in list(self.pending.items()):
            kept = [c for c in changes if object_of(c) != target]
            if kept:
                self.pending[txn_id] = kept
            else:
                del self.pending[txn_id]
                self.held_since.pop(txn_id, None)

    def release(self, txn_id: int, *, commit: bool) -> None:
        """Apply (commit) or drop (abort) what ``txn_id`` held back."""
        changes = self.pending.pop(txn_id, [])
        self.held_since.pop(txn_id, None)
        for target, holder in list(self.pending_objects.items()):
            if holder == txn_id:
                del self.pending_objects[target]
        if commit:
            for change in changes:
                self.apply(change)
