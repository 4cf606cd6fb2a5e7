"""Applies replicated objects to the target metastore, idempotently.

Every operation makes the target object equal to a source snapshot ("put"), or removes it if present, so a
load that is interrupted and run again converges to the same target. Data follows the pseudo-snapshot in
the event, and is published by *location flip*: an object whose data changes gets a new version directory
(``<logical location>.hmsrepl-v<event id>``, a sibling no metadata names yet) that is made to hold exactly
the listed files (unchanged files hard-linked from the current directory, server-side copied on S3; new
ones copied, checksum-verified, under hidden staging names), and the object's location is switched to it by
the same metadata call, in the load batch's database transaction, which also advances ``repl.last.id``.
Live directories are never written: a reader that took a table's or partition's metadata and then lists
its location sees one committed state. Directories a batch stops naming (older versions, dropped objects)
are handed to ``leftovers.Retirer`` and removed only after the commit and a grace period; a failed batch's
new directories are removed before its transaction ends.

Why not keep unchanged files in place and add only the new ones: a reader lists a location recursively, so
a file added to a live directory is visible at once, before the metadata commits (and after a kill); an
overwrite must also hide the old files at the same instant. One directory per version is the only layout
where the metadata switch alone decides what readers see for any change. Its cost is O(files) links per
changed object, not a data copy (local disks); on S3 each unchanged file costs a server-side copy.

The exception is the most common change of all, one file added (an append, a streaming micro-batch): one
rename makes one whole file appear, so a reader sees the listing before the change or after it, never a
part. Such a file is copied under its hidden staged name into the object's current directory and named in
a publish intent (``metastore.intents``) in the batch's transaction; the intent renames it after the
commit, or housekeeping does after a crash. Readers never see it before its metadata; for the moment
between the commit and the rename they see the state before it. Several such appends to one object in a
batch are renamed in the order they were written, so a reader sees the listing as of one of them, each a
listing the source had (one append of several files must appear at once and takes a new version). On an
object store the "rename" is a server-side copy of the one file onto its key (which S3 replaces whole) and
a delete of the staged one. The load then costs what was added, whatever the object holds: the new files
copied, not every file it keeps.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats import listing_digest
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore, listings
from hmsrepl.metastore.file_capture import count_data_files, describe_files, encode_at, list_data_files
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.messages import DataChange, checksum_of, relative_path
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.metastore.protection import LOCAL_PARAMS
from hmsrepl.replication import iceberg
from hmsrepl.replication.failures import fault_point
from hmsrepl.replication.filecopy import (
    CopyResult,
    adopt_staged_copy,
    below_any,
    copy_verified,
    link_file,
    logical_location,
    publish_all,
    remove_staging_leftovers,
    staging_name,
    versioned_location,
)
from hmsrepl.replication.leftovers import Retirement
from hmsrepl.replication.locations import EXTERNAL_ROOT, LocationMapper
from hmsrepl.replication.lost_files import STALE, LostFiles
from hmsrepl.replication.replica_files import (
    AddedOneByOne,
    HeldListing,
    Published,
    as_change,
    drift,
    partition_ids,
    read_record,
    record,
    scan,
    stamp_of,
    unchanged,
)
from hmsrepl.replication.replica_layout import is_below
from hmsrepl.replication.replica_scope import SCOPE_PARAMS, ReplicaScope
from hmsrepl.storage.base import FileIdentity, filesystem_for, join_uri, parent_uri, relative_to
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.local import sync_uris

log = logging.getLogger(__name__)

REPL_LAST_ID = "repl.last.id"
REPLICA_OF = "hmsrepl.replica.of"
SOURCE_DB_LOCATION = "hmsrepl.source.db.location"
SOURCE_WAREHOUSE = "hmsrepl.source.warehouse"
# Set while a bootstrap load is under way (the dump it loads): the replica's tables are then a mix of two
# points in time, and no incremental load may apply events to it until the bootstrap has finished.
BOOTSTRAP_IN_PROGRESS = "hmsrepl.bootstrap.in.progress"
TARGET_ONLY_PARAMS = (
    REPL_LAST_ID,
    REPLICA_OF,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
    BOOTSTRAP_IN_PROGRESS,
    STALE,  # the replica's own mark of an object whose data is behind the source (lost_files)
    *SCOPE_PARAMS,  # the policy and data mode the replica was loaded with (replica_scope)
    EXTERNAL_ROOT,  # the replica's own external directory (a source's, in a chain, is not this one's)
    *LOCAL_PARAMS,  # failover and protection state of one side
)
# Values the metastore or engine rewrite on every change; never compared or copied as replicated state.
VOLATILE_PARAMS = ("transient_lastDdlTime",)


class ReplicationStateError(HmsReplError):
    """The target is not in a state this load can continue from (no bootstrap, gap, other source)."""


class ReplicaDriftError(HmsReplError):
    """A replica file changed behind the load's back and cannot be fetched again from the source."""


@dataclass
class ApplyStats:
    tables: int = 0
    partitions: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    files_from_cmroot: int = 0
    files_prefetched: int = 0
    files_removed: int = 0
    files_kept: int = 0  # linked into a new version from the current one, without reading them
    files_reverified: int = 0  # kept files whose size or modification time differed from the record: read
    skipped_events: dict[str, int] = field(default_factory=dict)


class TargetWriter:
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
        self.source_cmroot = source_cmroot.rstrip("/")
        self.copy_data = copy_data
        self.stats = stats or ApplyStats()
        self.scope = scope  # recorded with each position (None: leave the recorded scope as it is)
        self._unsynced_dirs: set[str] = set()  # directories with renames not yet made durable
        # The event being applied names the version directories it makes (set by the load per event).
        self.version = 0
        # version directories made in the current batch (not yet named), in order; a dict for O(1) membership
        self._created: dict[str, None] = {}
        self._retire: list[Retirement] = []  # directories the current batch stops naming
        # Files added in place this batch (final URI -> the event that wrote it, encoded), staged until a
        # rename after the commit, which goes in event order.
        self._in_place: dict[str, tuple[int, str]] = {}
        # The relative paths added in place this batch, by the location of the object they were added to.
        self._added_in_place: dict[str, set[str]] = {}
        # Plans of in-place additions checked together for a table's partitions, by current location.
        self._planned: dict[str, tuple[dict[str, str], dict[str, str], listings.Summary]] = {}
        # Tables whose data changes in the batch may be added in place (set by the load per batch).
        self.in_place_tables: frozenset[str] = frozenset()
        # The event that wrote each file a one-file append of the batch adds (encoded source URI -> event
        # id; set by the load per batch): files added in place are renamed in this order.
        self.written_at: Mapping[str, int] = {}
        # Copies the load staged and verified before its first change (``prestage``), by planned target:
        # counted as the copies they are (from cmroot or not), not as a copier's prefetch.
        self.copied_ahead: dict[str, CopyResult] = {}
        self.lost = LostFiles()  # files this load cannot fetch: their objects' data stays as it is, marked

    # -- mapping -------------------------------------------------------------------------------------------
    def map_location(self, source_location: str | None) -> str | None:
        """The target's logical location of a source location (a source that is itself a replica: without
        its version marks)."""
        mapped = self.mapper.map(logical_location(source_location) if source_location else source_location)
        return logical_location(mapped) if mapped else mapped

    # The mapped snapshots are validated once, as the target's (model copies cost as much as a validation).
    def map_table(self, snapshot: dict[str, Any]) -> Table:
        params = snapshot.get("parameters") or {}
        return Table.model_validate(
            {
                **snapshot,
                "db_name": self.db,
                "sd": self._mapped_sd(snapshot),
                "id": None,
                "parameters": {k: v for k, v in params.items() if k not in TARGET_ONLY_PARAMS},
            }
        )

    def map_partition(self, snapshot: dict[str, Any], table_name: str) -> Partition:
        params = snapshot.get("parameters") or {}
        return Partition.model_validate(
            {
                **snapshot,
                "db_name": self.db,
                "table_name": table_name,
                "sd": self._mapped_sd(snapshot),
                "parameters": {k: v for k, v in params.items() if k != STALE},
            }
        )

    def _mapped_sd(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        sd = snapshot.get("sd") or {}
        return {**sd, "location": self.map_location(sd.get("location"))}

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
        wanted = source.model_copy(
            update={"name": self.db, "location_uri": self.mapper.target_db_location, "parameters": params}
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
        self.make_durable()
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
        return self.catalog.find_table(self.db, name)

    def put_table(
        self, snapshot: dict[str, Any], files: DataChange | Sequence[str] | None, source_location: str | None
    ) -> Table:
        """Create or update a table; ``files`` (unpartitioned tables: a data change, or the complete listing)
        becomes its data (None: untouched)."""
        wanted = self.map_table(snapshot)
        current = self.get_table(wanted.table_name)
        change = None if wanted.partition_keys else as_change(files)
        change, stale = self.lost.decide(
            current.parameters if current else {}, change, (wanted.table_name, None), self.version
        )
        if stale is not None:
            wanted = wanted.model_copy(update={"parameters": {**wanted.parameters, STALE: stale}})
        key = ObjectKey(current.id) if current is not None and current.id is not None else None
        location, published = self._location_for(
            current.sd.location if current else None,
            wanted.sd.location,
            change,
            source_location,
            key,
            f"table '{self.db}.{wanted.table_name}'",
            # An Iceberg table's new metadata is read and rewritten for the replica during the batch: it
            # must be at its name already, so those tables always take a new version.
            in_place=wanted.table_name in self.in_place_tables and not iceberg.is_iceberg(wanted),
        )
        wanted = wanted.model_copy(update={"sd": wanted.sd.model_copy(update={"location": location})})
        wanted = iceberg.localize(wanted, source_location)  # Iceberg metadata naming the copies
        # The files the version holds, for the replica's own event (a replica is a source too): from what the
        # load verified, so the catalog reads none of them again.
        applied = published.applied() if published is not None else None
        if current is None:
            self.stats.tables += 1
            table = self.catalog.create_table(wanted, applied_files=applied)
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
            self._record(ObjectKey(table.id), published, logged=logged and not table.partition_keys)
        return table

    def rename_table(self, old_name: str, after: dict[str, Any]) -> None:
        """Rename, moving the data to new version directories under the new name (links, no data copy).

        The target never moves files of a live directory (the catalog's own rename move): the renamed
        table's files are linked into a fresh directory and the location switched with the rename, so a kill
        at any point leaves the old or the new table whole, and a re-created old name starts empty.
        """
        wanted = self.map_table(after)
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
                        new_part = self._relink(part_location, new_part)
                    sd = part.sd.model_copy(update={"location": new_part})
                    moved.append(part.model_copy(update={"table_name": wanted.table_name, "sd": sd}))
                self._retire.append(Retirement(location))
                location = new_logical
                if self.copy_data:
                    filesystem_for(location).makedirs(location)  # readers list even an empty table
            elif self.copy_data:
                location = self._relink(location, new_logical)
            else:
                location = new_logical
        sd = current.sd.model_copy(update={"location": location})
        renamed = current.model_copy(update={"table_name": wanted.table_name, "sd": sd})
        self.catalog.alter_table(self.db, old_name, renamed)
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
                    self._retire.append(Retirement(part.sd.location))
        if self._owns(table, table.sd.location):
            self._retire.append(Retirement(table.sd.location))
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
    ) -> None:
        """Add or update partitions, data first, then one metadata call for the new and one for the changed.

        Each partition's data is a change (or a complete listing; None: metadata only)."""
        if not parts:
            return
        table = self.catalog.get_table(self.db, table_name)
        keys = table.partition_key_names
        mapped = [(self.map_partition(snapshot, table_name), snapshot, files) for snapshot, files in parts]
        names = [make_partition_name(keys, part.values) for part, _, _ in mapped]
        existing = {make_partition_name(keys, p.values): p for p in self.catalog.partitions_of(table, names)}
        ids = self._partition_ids(table, list(existing)) if existing and self.copy_data else {}
        new_parts: list[Partition] = []
        changed: list[Partition] = []
        published: dict[str, Published] = {}  # what new versions hold: the replica's events and record
        decided = self._decide(table, table_name, list(zip(names, mapped, strict=True)), existing, ids)
        in_place = table_name in self.in_place_tables and self._all_in_place(decided)
        for write in decided:
            name, part, current = write.name, write.part, write.current
            location, done = self._location_for(
                current.sd.location if current else None,
                part.sd.location,
                write.change,
                write.source_location,
                write.key,
                write.what,
                in_place=in_place,
            )
            if done is not None:
                published[name] = done
            part = part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})
            if current is None:
                new_parts.append(part)
            elif (done is not None and done.in_place) or _without_volatile(current) != _without_volatile(
                part.model_copy(update={"write_id": current.write_id})
            ):
                changed.append(part)  # a file added in place changes no metadata, but is the replica's event

        def applied(group: list[Partition]) -> list[Mapping[str, str] | None]:
            out = []
            for p in group:
                done = published.get(make_partition_name(keys, p.values))
                out.append(done.applied() if done is not None else None)
            return out

        if new_parts:
            self.catalog.add_partitions(
                self.db, table_name, new_parts, if_not_exists=True, applied_files=applied(new_parts)
            )
            self.stats.partitions += len(new_parts)
        if changed:
            self.catalog.alter_partitions(self.db, table_name, changed, applied_files=applied(changed))
        if published and table.id is not None:
            ids.update(self._partition_ids(table, [n for n in published if n not in ids]))
            logged = {make_partition_name(keys, p.values) for p in (*new_parts, *changed)}
            for name, done in published.items():
                if name in ids:
                    self._record(ObjectKey(table.id, ids[name]), done, logged=name in logged)

    def _partition_ids(self, table: Table, names: list[str]) -> dict[str, int]:
        if table.id is None or not names:
            return {}
        with self.target.events.reader() as conn:
            return partition_ids(conn, table.id, names)

    def _decide(
        self,
        table: Table,
        table_name: str,
        named: list[tuple[str, tuple[Partition, dict[str, Any], DataChange | Sequence[str] | None]]],
        existing: Mapping[str, Partition],
        ids: Mapping[str, int],
    ) -> list[_PartitionWrite]:
        """Each partition's write with its data change decided (``LostFiles.decide``: an object whose files
        this load cannot fetch keeps its data, marked stale), before any is published."""
        decided = []
        for name, (part, snapshot, files) in named:
            current = existing.get(name)
            change, stale = self.lost.decide(
                current.parameters if current else {}, as_change(files), (table_name, name), self.version
            )
            if stale is not None:
                part = part.model_copy(update={"parameters": {**part.parameters, STALE: stale}})
            decided.append(
                _PartitionWrite(
                    name,
                    part,
                    current,
                    change,
                    snapshot.get("sd", {}).get("location"),
                    ObjectKey(table.id or 0, ids[name]) if name in ids else None,
                    f"partition '{self.db}.{table_name}/{name}'",
                )
            )
        return decided

    def _all_in_place(self, writes: Sequence[_PartitionWrite]) -> bool:
        """Whether a table's partition writes may be added in place: one data change always may (it
        decides alone), several only if every one of them can be (see ``load.in_place_tables``).

        Files added in place appear after the batch's commit; an object given a new version switches at
        the commit. Were some partitions of a table added in place and others not, a reader could see a
        later partition's new files without an earlier one's. Each plan is kept for the publish that
        follows, so the two cannot disagree; nested partition directories are not added together in place
        (one's staged copies would lie below the other).
        """
        if not self.copy_data:
            return True
        writes = [w for w in writes if w.change is not None and w.part.sd.location]
        if len(writes) <= 1:
            return True
        locations = sorted((w.current.sd.location or "").rstrip("/") + "/" for w in writes if w.current)
        if len(locations) != len(writes) or any(b.startswith(a) for a, b in itertools.pairwise(locations)):
            return False
        plans = {}
        for write in writes:
            assert write.current is not None and write.change is not None
            current, logical = write.current.sd.location, write.part.sd.location or ""
            plan = self._in_place_plan(current, logical, write.change, write.key, write.what)
            if plan is None:
                return False
            plans[current or ""] = plan
        self._planned.update(plans)
        return True

    def _record(self, key: ObjectKey, published: Published, *, logged: bool) -> None:
        """Record what a version holds, in the batch's transaction (a failed batch records nothing).

        A version the catalog's call ``logged`` from its change alone (``Published.as_delta``: files added in
        place, for which the call is always made, or a local version keeping most of its files) is recorded
        already: that call (``capture_delta``) wrote exactly these records."""
        if logged and published.as_delta:
            return
        if published.replace or published.stamps or published.removed:
            with self.target.events.transaction() as tx:
                record(tx.conn, key, published)

    def drop_partitions(self, table_name: str, values_list: Sequence[Sequence[str]]) -> None:
        table = self.get_table(table_name)
        if table is None:
            return
        keys = table.partition_key_names
        names = [make_partition_name(keys, values) for values in values_list]
        found = {make_partition_name(keys, p.values): p for p in self.catalog.partitions_of(table, names)}
        remaining = [list(v) for v, n in zip(values_list, names, strict=True) if n in found]
        if remaining:
            self._retire.extend(
                Retirement(found[n].sd.location or "")
                for n in names
                if n in found and self._owns(table, found[n].sd.location)
            )
            self.catalog.drop_partitions(self.db, table_name, remaining, delete_data=False)

    # -- data: location flips ------------------------------------------------------------------------------
    def _location_for(
        self,
        current: str | None,
        logical: str | None,
        change: DataChange | None,
        source_location: str | None,
        key: ObjectKey | None,
        what: str,
        *,
        in_place: bool = True,
    ) -> tuple[str | None, Published | None]:
        """The location to record for an object: a new version with ``change`` applied, or the one it has.

        ``change`` None is a metadata-only change: the object keeps its directory (unless the source moved
        the object elsewhere, then it names the new logical location).
        """
        if change is not None and logical and self.copy_data:
            published = self.publish_version(
                current, logical, change, source_location, key, what, in_place=in_place
            )
            return published.location, published
        if current and logical and logical_location(current) == logical.rstrip("/"):
            return current, None
        return logical, None

    def _new_version(self, logical: str, current: str | None) -> str:
        attempt = 0
        while True:
            candidate = versioned_location(logical, self.version, attempt)
            if candidate != (current or "").rstrip("/") and candidate not in self._created:
                return candidate
            attempt += 1

    def publish_version(
        self,
        current: str | None,
        logical: str,
        change: DataChange,
        source_location: str | None,
        key: ObjectKey | None = None,
        what: str = "",
        *,
        in_place: bool = True,
    ) -> Published:
        """A directory holding the object's listing after ``change``: ``current`` if it already does, else a
        new version.

        The listing before the change is the replica's record of the object (``replica_files``; without one,
        ``current`` is listed and read once). The change's count and digest, when it has them, must match the
        result (else an event is missing: one-line error, nothing of the batch stays). A new version reuses
        what an interrupted attempt left in it, links the files ``current`` holds with the right checksum
        (after a size and modification-time check against the record, no read), copies the rest
        (checksum-verified, original location, recorded version, then cmroot), and publishes the copies inside
        it: nothing a reader can see changes until the caller records the returned location. A change that
        adds one file is instead added to ``current`` (``_publish_in_place``) unless ``in_place`` is False.
        """
        added_in_place = (
            self._publish_in_place(current, logical, change, source_location, key, what) if in_place else None
        )
        if added_in_place is not None:
            return added_in_place
        fs = filesystem_for(logical)
        held = self._held(current, key)
        wanted = change.apply(held.files)
        if not change.complete:  # a complete change is its own listing: only deltas can miss an event
            change.check(wanted, what or logical)
        kept = unchanged(held, wanted)
        stamps: dict[str, int] = {} if held.recorded else held.stamps
        drifted: set[str] = set()
        staged_here = self._staged_below(current)  # added in place earlier in this batch: not there yet
        if current and held.recorded and kept:
            drifted, restamped = drift(current, held, kept - staged_here.keys())
            stamps.update(restamped)
            self.stats.files_reverified += len(restamped) + len(drifted)
            for rel in sorted(drifted):
                log.warning("%s: '%s' changed on the replica behind its back; copying it again", what, rel)
            kept -= drifted
        removed = set(held.files) - set(wanted)
        if current and not drifted and len(kept) == len(wanted) == len(held.files):
            self._retire_staging_area(logical, current)  # already this state (a re-run, or no file changed)
            return Published(current, wanted, stamps, removed, not held.recorded)
        new = self._new_version(logical, current)
        fs.makedirs(new)
        self._created[new] = None
        present = {relative_to(s.uri, new): s for s in list_data_files(new)}  # an interrupted attempt's
        for rel, status in present.items():
            if rel not in wanted or rel in kept:
                fs.delete(status.uri)
        allowed = below_any(source_location, self.source_cmroot)
        from_event = {relative_path(encoded) for encoded in change.added}
        to_publish = []
        for rel, encoded in wanted.items():
            target_uri = join_uri(new, rel)
            if rel in kept:
                link_file(staged_here.get(rel) or join_uri(current or "", rel), target_uri)
                fault_point()
                continue
            if rel in present and _checksum_matches(fs, present[rel], encoded):
                stamps[rel] = present[rel].stamp
                continue
            source = encoded if rel in from_event else self._source_copy(encoded, source_location, what)
            self._copy_in(source, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            to_publish.append(target_uri)
            fault_point()
        publish_all(to_publish, durable=False)  # made durable with the batch, in set_last_id
        fault_point()
        if filesystem_for(new).hard_links:
            self._unsynced_dirs.add(new)
            stamps.update((relative_to(uri, new), stamp_of(uri)) for uri in to_publish)
        else:  # a server-side copy is a new object: every file of the version gets a new stamp
            stamps.update((relative_to(s.uri, new), s.stamp) for s in list_data_files(new))
        self.stats.files_kept += len(kept)
        if current:
            self._retire.append(Retirement(current, frozenset(kept)))
            self.stats.files_removed += len(removed)
        self._retire_staging_area(logical, current)
        return Published(new, wanted, stamps, removed, not held.recorded)

    def _publish_in_place(
        self,
        current: str | None,
        logical: str,
        change: DataChange,
        source_location: str | None,
        key: ObjectKey | None,
        what: str,
    ) -> Published | None:
        """A change that adds files one by one, published in the object's current directory: None if it is
        not one.

        One rename makes one file appear whole, so a reader listing the directory sees the listing before
        the change or after it, never a part of a step. A change of one file qualifies, and so does a batch's
        run of them on one object (``AddedOneByOne``, or an object already added to in place this batch):
        the files are renamed in step order, so a reader sees the listing as of one step or another, each a
        listing the source had. The files are copied under their hidden staged names and named in the
        batch's publish intent (``owe_publishes``), which renames them once the batch has committed (after a
        crash, housekeeping does), so readers never see one before its metadata. The kept files are neither
        read nor linked, only counted by name (a file added or removed behind the replica's back takes a new
        version, which holds exactly the listing), and the record is read for the new paths and its summary
        only: the load costs what was added whatever the object holds (on an object store the count lists
        the object's keys, 1,000 a request, and nothing is copied but the new files). Everything else (a step
        of several files, a file replaced or removed, no record yet) takes a new version.
        """
        plan = self._planned.pop(current or "", None) or self._in_place_plan(
            current, logical, change, key, what
        )
        if plan is None:
            return None
        assert current is not None
        new, checksums, before = plan
        allowed = below_any(source_location, self.source_cmroot)
        files: dict[str, str] = {}
        stamps: dict[str, int] = {}
        for rel, encoded in new.items():  # in step order: the publish intent renames them in this order
            target_uri = join_uri(current, rel)
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            fault_point()
            staged = staging_name(target_uri)
            files[rel] = encode_at(self.target.cm, current, rel, FileIdentity(checksums[rel]))
            self._in_place[target_uri] = (self.written_at.get(encoded, self.version), files[rel])
            stamps[rel] = stamp_of(staged)
            self._unsynced_dirs.add(parent_uri(staged))  # durable before the commit
        self._added_in_place.setdefault(current, set()).update(new)
        self.stats.files_kept += before.count
        self._retire_staging_area(logical, current)
        return Published(current, files, stamps, set(), False, in_place=True)

    def _in_place_plan(
        self, current: str | None, logical: str, change: DataChange, key: ObjectKey | None, what: str
    ) -> tuple[dict[str, str], dict[str, str], listings.Summary] | None:
        """Whether ``change`` can be added in place to ``current`` (``_publish_in_place``), and if so its new
        files (relative path -> encoded URI, in step order), their checksums and the record's summary before.
        Reads the record's summary and the new paths, and counts the directory's data files by name."""
        if not current or key is None or current in self._created:
            return None
        if change.complete or change.removed or not change.added:
            return None
        if len(change.added) > 1 and not isinstance(change, AddedOneByOne):
            return None
        earlier = self._added_in_place.get(current, set())
        if set(self._staged_below(current)) != earlier:  # another object's staged copies below this one
            return None
        if logical_location(current) != logical.rstrip("/"):
            return None
        new = {relative_path(encoded): encoded for encoded in change.added}
        checksums = {rel: checksum_of(encoded) for rel, encoded in new.items()}
        if not all(checksums.values()) or new.keys() & earlier:
            return None
        with self.target.events.reader() as conn:
            before = listings.summary(conn, key)
            if before.count == 0 or listings.read_paths(conn, key, new):
                return None
        # Files added or removed behind the replica's back: a new version holds exactly the listing.
        if count_data_files(current) + len(earlier) != before.count:
            return None
        after = listing_digest.combine(before.digest, checksums.items())
        change.check_summary(before.count + len(new), after, what or logical)
        return new, checksums, before

    def _staged_below(self, location: str | None) -> dict[str, str]:
        """Files this batch added in place below ``location`` (relative path -> staged copy)."""
        if not location or not self._in_place:
            return {}
        root = location.rstrip("/") + "/"
        return {uri[len(root) :]: staging_name(uri) for uri in self._in_place if uri.startswith(root)}

    def owe_publishes(self) -> None:
        """Name the batch's files added in place in one publish intent, in its transaction (call last).

        One intent for the batch: after the commit its files are renamed one after the other, before any
        other file work of the batch, so readers wait for them as little as possible. They are renamed in the
        order the source wrote them (``written_at``; a stable sort keeps one event's files in step order),
        across the partitions of a table too, so a reader sees the source's states one after the other.
        """
        if self._in_place:
            self.make_durable()
            order = sorted(self._in_place.values(), key=lambda written: written[0])  # stable
            with self.target.events.transaction() as tx:
                self.catalog.intents.publish(tx, [encoded for _, encoded in order])

    def _held(self, current: str | None, key: ObjectKey | None) -> HeldListing:
        """What the object's current version holds: the replica's record, else a listing read once."""
        if not current:
            return HeldListing()
        if key is not None:
            with self.target.events.reader() as conn:
                held = read_record(conn, key, current)
            if held is not None:
                return held
        return scan(current, self.target.cm)

    def _source_copy(self, held: str, source_location: str | None, what: str) -> str:
        """Where the source keeps a file the replica held but lost: its object's location, or cmroot."""
        entry = EncodedFileUri.decode(held)
        if not source_location:
            raise ReplicaDriftError(
                f"{what}: '{entry.file_name}' changed on the replica and the event names no source location "
                "to copy it from again; load from a new bootstrap dump"
            )
        rel = f"{entry.subdir}/{entry.file_name}" if entry.subdir else entry.file_name
        return EncodedFileUri(
            join_uri(source_location, rel), entry.checksum, self.source_cmroot, entry.subdir
        ).encode()

    def _retire_staging_area(self, logical: str, current: str | None) -> None:
        """A copier working ahead stages files at the logical location: retired with the batch if unnamed."""
        if logical.rstrip("/") != (current or "").rstrip("/") and filesystem_for(logical).exists(logical):
            self._retire.append(Retirement(logical, recycle=False))

    def relink(self, current: str, logical: str, key: ObjectKey | None) -> str:
        """A new version at ``logical`` holding exactly the files the replica's record of ``key`` lists (all
        of ``current``'s without a record; ``copy_data`` False: ``logical`` itself, nothing linked)."""
        if not self.copy_data:
            return logical
        recorded = None
        if key is not None:
            with self.target.events.reader() as conn:
                held = read_record(conn, key, current)
            recorded = set(held.files) if held is not None else None
        return self._relink(current, logical, recorded)

    def retire(self, retirement: Retirement) -> None:
        """Retire a directory once the batch commits (and its readers' grace period has passed)."""
        self._retire.append(retirement)

    def partition_ids(self, table: Table, names: list[str]) -> dict[str, int]:
        """The replica's partition ids of a table's partitions, by Hive partition name."""
        return self._partition_ids(table, names)

    def _relink(self, current: str, logical: str, only: set[str] | None = None) -> str:
        """A new version at ``logical`` with the same files as ``current`` (a rename): links only.

        ``only``: the relative paths to carry (a file beside them that the replica's record does not list,
        such as one another replica added to a directory of the shared layout, is left behind)."""
        new = self._new_version(logical, current)
        fs = filesystem_for(new)
        fs.delete_tree(new)  # whatever an interrupted attempt left: links are cheap to make again
        fs.makedirs(new)
        self._created[new] = None
        carried = set()
        for status in list_data_files(current):
            rel = relative_to(status.uri, current)
            if only is not None and rel not in only:
                continue
            link_file(status.uri, join_uri(new, rel))
            carried.add(rel)
            fault_point()
        for rel, staged in self._staged_below(current).items():  # added in place earlier in this batch
            link_file(staged, join_uri(new, rel))
            carried.add(rel)
        self._unsynced_dirs.add(new)
        self._retire.append(Retirement(current, frozenset(carried)))
        self._retire_staging_area(logical, current)
        return new

    def _copy_in(
        self, encoded: str, target_uri: str, allowed: Callable[[str], bool], *, prefetched_at: str
    ) -> None:
        """One checksum-verified copy of an event's file to a place no reader sees yet, counted."""
        ahead = self.copied_ahead.pop(prefetched_at, None)
        result = adopt_staged_copy(ahead, prefetched_at, target_uri) if ahead is not None else None
        if result is None:
            result = copy_verified(
                encoded,
                target_uri,
                default_cmroot=self.source_cmroot,
                allowed=allowed,
                prefetched_at=prefetched_at,
            )
        self.stats.files_copied += 1
        self.stats.bytes_copied += result.bytes_copied
        self.stats.files_from_cmroot += int(result.from_cmroot)
        self.stats.files_prefetched += int(result.prefetched)

    def discard_batch(self) -> None:
        """The batch failed: remove the version directories it made (nothing names them; frees space).

        Called before the batch's transaction ends, so it holds the replica's row lock: no other load
        can be filling a directory of the same name.
        """
        for directory in self._created:
            with contextlib.suppress(Exception):
                filesystem_for(directory).delete_tree(directory)
        for uri in self._in_place:  # hidden copies in live directories: never published
            with contextlib.suppress(Exception):
                filesystem_for(uri).delete(staging_name(uri))
        self._retire.clear()
        self._forget_batch_files()

    def take_retirements(self) -> list[Retirement]:
        """The batch committed: the directories it stopped naming, for retirement after the grace period."""
        out, self._retire = self._retire, []
        self._forget_batch_files()  # the publish intent renames the files added in place now
        return out

    def _forget_batch_files(self) -> None:
        """The batch ended (committed or failed): what it made and added in place is no longer its own."""
        self._created.clear()
        self._in_place.clear()
        self._added_in_place.clear()
        self._planned.clear()

    # -- data: in place (ACID write directories, which belong to one write id) -----------------------------
    def reconcile(self, target_location: str, files: Sequence[str], source_location: str | None) -> None:
        """Make ``target_location`` hold exactly ``files`` (by relative path and checksum), in place.

        Only for directories no reader trusts before the metadata commits: an ACID write directory
        (``delta_<w>_<w>``) is invisible to readers until its write id commits, in the same transaction.
        """
        if not self.copy_data:
            return
        fs = filesystem_for(target_location)
        fs.makedirs(target_location)
        wanted = {relative_path(encoded): encoded for encoded in files}
        present = {relative_to(s.uri, target_location): s for s in list_data_files(target_location)}
        needed = {
            rel: encoded
            for rel, encoded in wanted.items()
            if not _checksum_matches(fs, present.get(rel), encoded)
        }
        # Staged copies of files that need no copy (already in place) or are no longer wanted are leftovers.
        remove_staging_leftovers(
            target_location, {staging_name(join_uri(target_location, rel)) for rel in needed}
        )
        allowed = below_any(source_location, self.source_cmroot)
        logical = logical_location(target_location)  # where a copier working ahead staged them
        to_publish = []
        for rel, encoded in needed.items():
            target_uri = join_uri(target_location, rel)
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            to_publish.append(target_uri)
        extras = [status for rel, status in present.items() if rel not in wanted]
        if extras:  # replaced on the source: keep them in the target's own cmroot (chained replication)
            self.target.cm.recycle(describe_files(target_location, self.target.cm, extras))
            self.stats.files_removed += len(extras)
        publish_all(to_publish, durable=False)  # made durable with the batch, in set_last_id
        if to_publish:
            self._unsynced_dirs.add(target_location)
        if logical != target_location.rstrip("/") and fs.exists(logical):
            self._retire.append(Retirement(logical, recycle=False))  # a copier's staged copies, if unnamed

    def make_durable(self) -> None:
        """One ``syncfs`` per file system for every rename published since the last call.

        Publishing renames a staged copy into place; until the rename reaches the disk, a crash could leave
        the target's metadata (committed with the position) naming a file still under its staged name. One
        sync per load batch instead of one per file keeps this cheap.
        """
        if self._unsynced_dirs:
            sync_uris(self._unsynced_dirs)
            self._unsynced_dirs.clear()


def refuse_during_bootstrap(db_name: str, params: dict[str, str]) -> None:
    """Refuse an incremental load while the replica's bootstrap load is unfinished: complete that first."""
    dump = params.get(BOOTSTRAP_IN_PROGRESS)
    if dump is not None:
        raise ReplicationStateError(
            f"replica database '{db_name}' has an unfinished bootstrap load of '{dump}' (interrupted or still "
            f"running); nothing was applied: finish it first (REPL LOAD {db_name} FROM '{dump}'), then "
            "incremental loads continue"
        )


def _checksum_matches(fs: Any, status: Any, encoded: str) -> bool:
    """An existing target file already holds the content (size first: it avoids reading most files)."""
    entry = EncodedFileUri.decode(encoded)
    if status is None or not entry.checksum or checksum_size(entry.checksum) != status.size:
        return False
    return fs.checksum(status.uri) == entry.checksum


def _without_volatile(obj: Table | Partition) -> Any:
    params = {k: v for k, v in obj.parameters.items() if k not in VOLATILE_PARAMS}
    return obj.model_copy(update={"parameters": params, "create_time": 0, "last_access_time": 0})


@dataclass(frozen=True)
class _PartitionWrite:
    """One partition of a ``put_partitions`` call, with its data change decided (``LostFiles.decide``)."""

    name: str
    part: Partition
    current: Partition | None
    change: DataChange | None
    source_location: str | None
    key: ObjectKey | None
    what: str
