"""Applies replicated objects to the target metastore, idempotently.

Every operation makes the target object equal to a source snapshot ("put"), or removes it if present, so a
load that is interrupted and run again converges to the same target. This module writes the replica's
metadata from the objects ``snapshot_mapping.SnapshotMapper`` makes of the source's snapshots; their data is
published by
``replica_versions.VersionPublisher`` (a new version directory per change, switched to by the same
metadata call, or a file added in place), whose batch state the writer holds for the load.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.applied_files import AppliedFiles
from hmsrepl.metastore.catalog.rows import partition_ids_named
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.messages import DataChange
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.replication import iceberg
from hmsrepl.replication.apply_stats import ApplyStats
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.leftovers import Retirement
from hmsrepl.replication.locations import LocationMapper
from hmsrepl.replication.lost_files import STALE, LostFiles
from hmsrepl.replication.replica_files import Published, as_change
from hmsrepl.replication.replica_layout import is_below
from hmsrepl.replication.replica_scope import ReplicaScope
from hmsrepl.replication.replica_versions import PartitionWrite, ReplicaDriftError, VersionPublisher
from hmsrepl.replication.snapshot_mapping import (
    BOOTSTRAP_IN_PROGRESS,
    REPL_LAST_ID,
    REPLICA_OF,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
    TARGET_ONLY_PARAMS,
    SnapshotMapper,
)
from hmsrepl.replication.staged_copies import StagedCopies
from hmsrepl.storage.base import join_uri

__all__ = [
    "BOOTSTRAP_IN_PROGRESS",
    "REPLICA_OF",
    "REPL_LAST_ID",
    "SOURCE_DB_LOCATION",
    "SOURCE_WAREHOUSE",
    "TARGET_ONLY_PARAMS",
    "ApplyStats",
    "ReplicaDriftError",
    "ReplicationStateError",
    "TargetWriter",
]

log = logging.getLogger(__name__)

# MetastoreTransaction.shared key (with the replica's name): tables known not to exist (TargetWriter.expect_tables)
_ABSENT_TABLES = "replica_absent_tables"
# Values the metastore or engine rewrite on every change; never compared or copied as replicated state.
VOLATILE_PARAMS = ("transient_lastDdlTime",)


class ReplicationStateError(HmsReplError):
    """The target is not in a state this load can continue from (no bootstrap, gap, other source)."""


@dataclass
class PreparedPartitions:
    """A page of partitions with their data published and nothing of the catalog written yet
    (``TargetWriter.prepare_partitions``; ``write_partitions`` writes it). ``ids``: the existing partitions' ids
    by name (filled further as the write needs them); the lists hold the new and the changed partitions, with
    their names in the same order."""

    table: Table
    table_name: str
    ids: dict[str, int]
    fresh: bool
    published: dict[str, Published] = field(default_factory=dict)
    new_parts: list[Partition] = field(default_factory=list)
    new_names: list[str] = field(default_factory=list)
    changed: list[Partition] = field(default_factory=list)
    changed_names: list[str] = field(default_factory=list)


class TargetWriter:
    """Puts a source's objects into one replica database: the metadata job (mapping snapshots, writing
    databases, functions, tables and partitions) over the data job (``VersionPublisher``), which publishes
    each object's files and holds the batch's directories until it commits or fails."""

    def __init__(
        self,
        target: Metastore,
        target_db: str,
        mapper: LocationMapper,
        *,
        source_cmroot: str,
        copy_data: bool = True,
        stats: ApplyStats | None = None,
        scope: ReplicaScope | None = None,
    ) -> None:
        self.target = target
        self.catalog = target.catalog
        self.db = target_db
        self.mapper = mapper
        self.mapping = SnapshotMapper(target_db, mapper)  # what each snapshot becomes on the replica
        self.copy_data = copy_data
        self.stats = stats or ApplyStats()
        self.scope = scope  # recorded with each position (None: leave the recorded scope as it is)
        self.data = VersionPublisher(
            target, source_cmroot=source_cmroot, copy_data=copy_data, stats=self.stats
        )
        # Tables whose data changes in the batch may be added in place (set by the load per batch).
        self.in_place_tables: frozenset[str] = frozenset()
        self.lost = LostFiles()  # files this load cannot fetch: their objects' data stays as it is, marked
        # The data job's batch work, as the load drives it.
        self.publish_version = self.data.publish_version
        self.relink = self.data.relink
        self.retire = self.data.retire
        self.reconcile = self.data.reconcile
        self.owe_publishes = self.data.owe_publishes
        self.discard_batch = self.data.discard_batch
        self.take_retirements = self.data.take_retirements
        self.make_durable = self.data.make_durable

    @property
    def version(self) -> int:
        """The event being applied: it names the version directories it makes (set by the load per event)."""
        return self.data.version

    @version.setter
    def version(self, event_id: int) -> None:
        self.data.version = event_id

    @property
    def written_at(self) -> Mapping[str, int]:
        return self.data.written_at

    @written_at.setter
    def written_at(self, order: Mapping[str, int]) -> None:
        self.data.written_at = order

    @property
    def copied_ahead(self) -> StagedCopies:
        return self.data.copied_ahead

    @copied_ahead.setter
    def copied_ahead(self, copies: StagedCopies) -> None:
        self.data.copied_ahead = copies

    # -- database and functions ----------------------------------------------------------------------------
    def put_database(self, snapshot: dict[str, Any], replica_params: dict[str, str]) -> Database:
        source = Database.model_validate(snapshot)
        try:
            current = self.catalog.get_database(self.db)
        except NoSuchObjectError:
            current = None
        keep = {k: v for k, v in (current.parameters if current else {}).items() if k in TARGET_ONLY_PARAMS}
        params = {**{k: v for k, v in source.parameters.items() if k not in TARGET_ONLY_PARAMS}, **keep}
        params.update(replica_params)
        # The replica's managed tables go below its own location: a source's managed location is a directory of
        # the source (as Hive's REPL LOAD, unless told to retain custom locations), mapped like the tables in it.
        wanted = source.model_copy(
            update={
                "name": self.db,
                "location_uri": self.mapper.target_db_location,
                "managed_location_uri": None,
                "parameters": params,
            }
        )
        if current is None:
            return self.catalog.create_database(wanted)
        if current != wanted:
            return self.catalog.alter_database(self.db, wanted)
        return current

    def locked_last_id(self) -> int:
        """``repl.last.id`` read under the database's row lock, inside the caller's transaction.

        A load batch starts with this: a second load of the same replica running at the same time waits
        here, then sees how far the first one got and skips those events instead of replaying them again.
        A bootstrap load that started meanwhile (or was interrupted) makes it refuse, naming the dump.
        """
        params = self.catalog.lock_database(self.db).parameters
        refuse_during_bootstrap(self.db, params)
        return int(params.get(REPL_LAST_ID, "0"))

    def set_last_id(self, event_id: int, *, bootstrap_done: bool = False) -> None:
        """Advance ``repl.last.id``; the files published for the work it records are made durable first.

        ``bootstrap_done`` also lifts the bootstrap-in-progress mark, in the same change; the load's scope
        (policy, metadata-only) is recorded with the position.
        """
        self.data.make_durable()
        db = self.catalog.get_database(self.db)
        params = {**db.parameters, REPL_LAST_ID: str(event_id)}
        if bootstrap_done:
            params.pop(BOOTSTRAP_IN_PROGRESS, None)
        if self.scope is not None:
            params = self.scope.record(params, bootstrap=bootstrap_done)
        if params != db.parameters:
            self.catalog.alter_database(self.db, db.model_copy(update={"parameters": params}))

    def put_function(self, snapshot: dict[str, Any]) -> None:
        function = Function.model_validate(snapshot).model_copy(update={"db_name": self.db})
        try:
            if self.catalog.get_function(self.db, function.function_name) == function:
                return
            self.catalog.drop_function(self.db, function.function_name)
        except NoSuchObjectError:
            pass
        self.catalog.create_function(function)

    def drop_function(self, name: str) -> None:
        with contextlib.suppress(NoSuchObjectError):
            self.catalog.drop_function(self.db, name)

    # -- tables ----------------------------------------------------------------------------------------
    def get_table(self, name: str) -> Table | None:
        if name.lower() in self._absent_tables():
            return None
        return self.catalog.find_table(self.db, name)

    def expect_tables(self, names: Iterable[str]) -> None:
        """Find out in one read which of ``names`` do not exist yet, for the open transaction: ``get_table``
        then answers them without a read each (a load batch creating hundreds of tables would otherwise
        ask for each first, one round trip apiece on a server database).

        Only absence is remembered: an existing table's row changes as the batch writes it (its write id
        too), so it is always read. The writer's own creates and renames keep the set current, and it ends
        with the transaction (``MetastoreTransaction.shared``), rolled back or committed.
        """
        tx = self.target.events.current_transaction()
        wanted = {name.lower() for name in names}
        if tx is None or not wanted:
            return
        self.assume_absent(wanted - self.catalog.existing_table_names(self.db, sorted(wanted)))

    def assume_absent(self, names: Iterable[str]) -> None:
        """Note, without a read, that ``names`` do not exist in the open transaction: the caller knows it (a
        bootstrap listed the replica's tables before its first batch and writes each dumped name once), so
        ``get_table`` answers them with no round trip each."""
        tx = self.target.events.current_transaction()
        if tx is not None:
            tx.shared.setdefault(self._absent_key, set()).update(name.lower() for name in names)

    @property
    def _absent_key(self) -> str:
        return f"{_ABSENT_TABLES}:{self.db}"

    def _absent_tables(self) -> set[str]:
        """Tables of this replica known not to exist in the open transaction (``expect_tables``)."""
        tx = self.target.events.current_transaction()
        return tx.shared.get(self._absent_key, set()) if tx is not None else set()

    def _now_exists(self, name: str) -> None:
        self._absent_tables().discard(name.lower())

    def claim_absent(self, name: str) -> bool:
        """Whether ``name`` is known not to exist (``expect_tables``); it no longer is once claimed (the
        caller creates it)."""
        absent = self._absent_tables()
        if name.lower() not in absent:
            return False
        absent.discard(name.lower())
        return True

    def create_tables(self, tables: Sequence[Table]) -> None:
        """Create tables ``claim_absent`` gave, mapped already (``mapping.table``), that take no data with
        them (a metadata-only load's, a partitioned table's): what ``put_table`` does for each, in one
        catalog call whose location checks are one read for all."""
        if tables:
            self.catalog.create_tables(tables)
            self.stats.tables += len(tables)

    def put_table(
        self, snapshot: dict[str, Any], files: DataChange | Sequence[str] | None, source_location: str | None
    ) -> Table:
        """Create or update a table; ``files`` (unpartitioned tables: a data change, or the complete listing)
        becomes its data (None: untouched)."""
        wanted = self.mapping.table(snapshot)
        current = self.get_table(wanted.table_name)
        change = None if wanted.partition_keys else as_change(files)
        change, stale = self.lost.decide(
            current.parameters if current else {}, change, (wanted.table_name, None), self.version
        )
        if stale is not None:
            wanted = wanted.model_copy(update={"parameters": {**wanted.parameters, STALE: stale}})
        key = ObjectKey(current.id) if current is not None and current.id is not None else None
        location, published = self.data.location_for(
            current.sd.location if current else None,
            wanted.sd.location,
            change,
            source_location,
            key,
            f"table '{self.db}.{wanted.table_name}'",
            # An Iceberg table's new metadata is read and rewritten for the replica during the batch: it
            # must be at its name already, so those tables always take a new version.
            in_place=wanted.table_name in self.in_place_tables and not iceberg.is_iceberg(wanted),
            from_standby=not iceberg.is_iceberg(wanted),
        )
        wanted = wanted.model_copy(update={"sd": wanted.sd.model_copy(update={"location": location})})
        wanted = iceberg.localize(wanted, source_location)  # Iceberg metadata naming the copies
        # The files the version holds, for the replica's own event (a replica is a source too): from what the
        # load verified, so the catalog reads none of them again.
        applied = published.applied() if published is not None else None
        if current is None:
            self.stats.tables += 1
            table = self.catalog.create_table(wanted, applied_files=applied)
            self._now_exists(wanted.table_name)
            logged = True
        else:
            table = wanted.model_copy(update={"id": current.id, "write_id": current.write_id})
            added_in_place = published is not None and published.in_place  # no metadata change, an event
            logged = added_in_place or _without_volatile(current) != _without_volatile(table)
            if logged:
                self.catalog.alter_table(
                    self.db, wanted.table_name, table, capture_files=True, applied_files=applied
                )
        if published is not None and table.id is not None:
            self.data.record_version(
                ObjectKey(table.id), published, logged=logged and not table.partition_keys
            )
        return table

    def rename_table(self, old_name: str, after: dict[str, Any]) -> None:
        """Rename, moving the data to new version directories under the new name (links, no data copy).

        The target never moves files of a live directory (the catalog's own rename move): the renamed
        table's files are linked into a fresh directory and the location switched with the rename, so a kill
        at any point leaves the old or the new table whole, and a re-created old name starts empty.
        """
        wanted = self.mapping.table(after)
        current = self.get_table(old_name)
        if current is None:
            return  # renamed by an earlier, interrupted run (or never replicated)
        location = current.sd.location
        new_logical = wanted.sd.location
        moved: list[Partition] = []
        if location and new_logical and logical_location(location) != new_logical:
            old_logical = logical_location(location)
            if current.partition_keys:  # a container: its partitions hold the data
                for part in self.catalog.get_partitions(self.db, old_name):
                    part_location = part.sd.location
                    if not part_location or not logical_location(part_location).startswith(old_logical + "/"):
                        continue  # outside the table's directory: stays where it is
                    new_part = join_uri(new_logical, logical_location(part_location)[len(old_logical) + 1 :])
                    if self.copy_data:
                        new_part = self.data.relink_files(part_location, new_part)
                    sd = part.sd.model_copy(update={"location": new_part})
                    moved.append(part.model_copy(update={"table_name": wanted.table_name, "sd": sd}))
                self.data.retire(Retirement(location))
                location = new_logical
                if self.copy_data:
                    self.target.cm.files.makedirs(location)  # readers list even an empty table
            elif self.copy_data:
                location = self.data.relink_files(location, new_logical)
            else:
                location = new_logical
        sd = current.sd.model_copy(update={"location": location})
        renamed = current.model_copy(update={"table_name": wanted.table_name, "sd": sd})
        self.catalog.alter_table(self.db, old_name, renamed)
        self._now_exists(wanted.table_name)
        if moved:
            self.catalog.alter_partitions(self.db, wanted.table_name, moved)

    def drop_table(self, name: str) -> None:
        """Drop the table; its directories are retired after the batch commits (never before)."""
        table = self.get_table(name)
        if table is None:
            return
        below = (table.sd.location or "").rstrip("/") + "/"
        if table.partition_keys:  # those below the table's directory are retired with it
            for part in self.catalog.get_partitions(self.db, name):
                if self._owns(table, part.sd.location) and not (
                    table.sd.location and part.sd.location.startswith(below)
                ):
                    self.data.retire(Retirement(part.sd.location))
        if table.sd.location and self._owns(table, table.sd.location):
            self.data.retire(Retirement(table.sd.location))
        with contextlib.suppress(NoSuchObjectError):
            self.catalog.drop_table(self.db, name, delete_data=False)

    def _owns(self, table: Table, location: str | None) -> bool:
        """A dropped object's directory is the replica's to retire: a managed table's, or an external one's
        that lies in the replica's own directories (the database's, or its external root; never the shared
        layout of older replicas, nor a location kept as the source's, which other databases may list)."""
        if not location:
            return False
        return table.is_managed or any(
            is_below(location, root) for root in (self.mapper.target_db_location, self.mapper.external_root)
        )

    # -- partitions --------------------------------------------------------------------------------------
    def put_partitions(
        self,
        table_name: str,
        parts: Sequence[tuple[dict[str, Any], DataChange | Sequence[str] | None]],
        source_table_location: str | None = None,
        *,
        fresh: bool = False,
    ) -> None:
        """Add or update partitions, data first, then one metadata call for the new and one for the changed.

        Each partition's data is a change (or a complete listing; None: metadata only). ``fresh``: the table
        was created in this transaction and ``parts`` are new to it (a bootstrap's pages of one table, each
        partition named once): nothing is read back to find existing ones, a round trip per page of a big
        table on a server database, and the table's unique names refuse a partition added twice."""
        prepared = self.prepare_partitions(table_name, parts, source_table_location, fresh=fresh)
        if prepared is not None:
            self.write_partitions(prepared)

    def prepare_partitions(
        self,
        table_name: str,
        parts: Sequence[tuple[dict[str, Any], DataChange | Sequence[str] | None]],
        source_table_location: str | None = None,
        *,
        fresh: bool = False,
    ) -> PreparedPartitions | None:
        """``put_partitions``' data: each partition's version published (or its location kept), nothing of the
        catalog written yet (``write_partitions``); None when there is nothing to write."""
        if not parts:
            return None
        table = self.catalog.get_table(self.db, table_name)
        keys = table.partition_key_names
        mapped = [
            (self.mapping.partition(snapshot, table_name, source_table_location), snapshot, files)
            for snapshot, files in parts
        ]
        names = [make_partition_name(keys, part.values) for part, _, _ in mapped]
        # A table this transaction created has none yet: the catalog answers that without a read.
        existing = (
            {}
            if fresh
            else {make_partition_name(keys, p.values): p for p in self.catalog.partitions_of(table, names)}
        )
        ids = self._partition_ids(table, list(existing)) if existing and self.copy_data else {}
        prepared = PreparedPartitions(table, table_name, ids, fresh)
        decided = self._decide(table, table_name, list(zip(names, mapped, strict=True)), existing, ids)
        in_place = table_name in self.in_place_tables and self.data.all_in_place(decided)
        with self.data.page():  # the page's directories resolved once for all its partitions
            for write in decided:
                name, part, current = write.name, write.part, write.current
                location, done = self.data.location_for(
                    current.sd.location if current else None,
                    part.sd.location,
                    write.change,
                    write.source_location,
                    write.key,
                    write.what,
                    in_place=in_place,
                )
                if done is not None:
                    prepared.published[name] = done
                # The mapped partition and its descriptor are this call's own (``SnapshotMapper.partition``
                # validates a new one per snapshot): set in place, two model copies per partition saved.
                part.sd.location = location
                if current is None:
                    prepared.new_parts.append(part)
                    prepared.new_names.append(name)
                elif (done is not None and done.in_place) or _without_volatile(current) != _without_volatile(
                    part.model_copy(update={"write_id": current.write_id})
                ):
                    # A file added in place changes no metadata, but is its event.
                    prepared.changed.append(part)
                    prepared.changed_names.append(name)
        return prepared

    def write_partitions(self, prepared: PreparedPartitions) -> None:
        """The catalog's calls for partitions ``prepare_partitions`` published: one for the new, one for the
        changed, then the records of versions neither call logged."""
        table_name, ids, published = prepared.table_name, prepared.ids, prepared.published

        def applied(group: list[str]) -> list[AppliedFiles | None]:
            out: list[AppliedFiles | None] = []
            for name in group:
                done = published.get(name)
                out.append(done.applied() if done is not None else None)
            return out

        if prepared.new_parts:
            self.catalog.add_partitions(
                self.db,
                table_name,
                prepared.new_parts,
                if_not_exists=True,
                applied_files=applied(prepared.new_names),
                new_ids=ids,
                absent=prepared.fresh,
            )
            self.stats.partitions += len(prepared.new_parts)
        if prepared.changed:
            self.catalog.alter_partitions(
                self.db, table_name, prepared.changed, applied_files=applied(prepared.changed_names)
            )
        # A version whose partition the catalog's calls above logged is recorded by them (``record_version``):
        # only the others are (a bootstrap's page has none: its new partitions are all logged).
        logged = {*prepared.new_names, *prepared.changed_names}
        unlogged = {name: done for name, done in published.items() if name not in logged}
        if unlogged and prepared.table.id is not None:
            ids.update(self._partition_ids(prepared.table, [n for n in unlogged if n not in ids]))
            for name, done in unlogged.items():
                if name in ids:
                    self.data.record_version(ObjectKey(prepared.table.id, ids[name]), done, logged=False)

    def _partition_ids(self, table: Table, names: list[str]) -> dict[str, int]:
        if table.id is None or not names:
            return {}
        with self.target.events.reader() as conn:
            return partition_ids_named(conn, table.id, names)

    def _decide(
        self,
        table: Table,
        table_name: str,
        named: list[tuple[str, tuple[Partition, dict[str, Any], DataChange | Sequence[str] | None]]],
        existing: Mapping[str, Partition],
        ids: Mapping[str, int],
    ) -> list[PartitionWrite]:
        """Each partition's write with its data change decided (``LostFiles.decide``: an object whose files
        this load cannot fetch keeps its data, marked stale), before any is published."""
        decided = []
        version, decide = self.version, self.lost.decide  # the page's, looked up once
        named_as = f"partition '{self.db}.{table_name}/"  # each partition's ``what``: this, its name, a quote
        for name, (part, snapshot, files) in named:
            current = existing.get(name)
            change, stale = decide(
                current.parameters if current else {}, as_change(files), (table_name, name), version
            )
            if stale is not None:
                part = part.model_copy(update={"parameters": {**part.parameters, STALE: stale}})
            sd = snapshot.get("sd")
            decided.append(
                PartitionWrite(
                    name,
                    part,
                    current,
                    change,
                    sd.get("location") if sd else None,
                    ObjectKey(table.id or 0, ids[name]) if name in ids else None,
                    named_as + name + "'",
                )
            )
        return decided

    def drop_partitions(self, table_name: str, values_list: Sequence[Sequence[str]]) -> None:
        table = self.get_table(table_name)
        if table is None:
            return
        keys = table.partition_key_names
        names = [make_partition_name(keys, values) for values in values_list]
        found = {make_partition_name(keys, p.values): p for p in self.catalog.partitions_of(table, names)}
        remaining = [list(v) for v, n in zip(values_list, names, strict=True) if n in found]
        if remaining:
            for n in names:
                if n in found and self._owns(table, found[n].sd.location):
                    self.data.retire(Retirement(found[n].sd.location or ""))
            self.catalog.drop_partitions(self.db, table_name, remaining, delete_data=False)

    def partition_ids(self, table: Table, names: list[str]) -> dict[str, int]:
        """The replica's partition ids of a table's partitions, by Hive partition name."""
        return self._partition_ids(table, names)


def refuse_during_bootstrap(db_name: str, params: dict[str, str]) -> None:
    """Refuse an incremental load while the replica's bootstrap load is unfinished: complete that first."""
    dump = params.get(BOOTSTRAP_IN_PROGRESS)
    if dump is not None:
        raise ReplicationStateError(
            f"replica database '{db_name}' has an unfinished bootstrap load of '{dump}' (interrupted or still "
            f"running); nothing was applied: finish it first (REPL LOAD {db_name} FROM '{dump}'), then "
            "incremental loads continue"
        )


def _without_volatile(obj: Table | Partition) -> Any:
    params = {k: v for k, v in obj.parameters.items() if k not in VOLATILE_PARAMS}
    return obj.model_copy(update={"parameters": params, "create_time": 0, "last_access_time": 0})
