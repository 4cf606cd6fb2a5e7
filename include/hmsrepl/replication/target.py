"""Applies replicated objects to the target metastore, idempotently.

Every operation makes the target object equal to a source snapshot ("put"), or removes it if present, so a
load that is interrupted and run again converges to the same target. Data follows the pseudo-snapshot in
the event: the target directory is made to hold exactly the listed files. New files are staged under
hidden names and verified before anything is published, and metadata is switched last, so a new table or
partition appears complete or not at all.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files, list_data_files
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.metastore.protection import LOCAL_PARAMS
from hmsrepl.replication.filecopy import (
    below_any,
    copy_verified,
    publish_all,
    remove_staging_leftovers,
    staging_name,
)
from hmsrepl.replication.locations import LocationMapper
from hmsrepl.storage.base import filesystem_for, join_uri, relative_to
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.local import is_local_uri, local_path, sync_file_systems

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
    *LOCAL_PARAMS,  # failover and protection state of one side
)
# Values the metastore or engine rewrite on every change; never compared or copied as replicated state.
VOLATILE_PARAMS = ("transient_lastDdlTime",)


class ReplicationStateError(HmsReplError):
    """The target is not in a state this load can continue from (no bootstrap, gap, other source)."""


@dataclass
class ApplyStats:
    tables: int = 0
    partitions: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    files_from_cmroot: int = 0
    files_prefetched: int = 0
    files_removed: int = 0
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
    ) -> None:
        self.target = target
        self.catalog = target.catalog
        self.db = target_db
        self.mapper = mapper
        self.source_cmroot = source_cmroot.rstrip("/")
        self.copy_data = copy_data
        self.stats = stats or ApplyStats()
        self._unsynced_dirs: set[str] = set()  # local directories with renames not yet made durable

    # -- mapping -------------------------------------------------------------------------------------------
    def map_table(self, snapshot: dict[str, Any]) -> Table:
        table = Table.model_validate(snapshot)
        sd = table.sd.model_copy(update={"location": self.mapper.map(table.sd.location)})
        params = {k: v for k, v in table.parameters.items() if k not in TARGET_ONLY_PARAMS}
        return table.model_copy(update={"db_name": self.db, "sd": sd, "id": None, "parameters": params})

    def map_partition(self, snapshot: dict[str, Any], table_name: str) -> Partition:
        part = Partition.model_validate(snapshot)
        sd = part.sd.model_copy(update={"location": self.mapper.map(part.sd.location)})
        return part.model_copy(update={"db_name": self.db, "table_name": table_name, "sd": sd})

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

        ``bootstrap_done`` also lifts the bootstrap-in-progress mark, in the same change.
        """
        self.make_durable()
        db = self.catalog.get_database(self.db)
        params = {**db.parameters, REPL_LAST_ID: str(event_id)}
        if bootstrap_done:
            params.pop(BOOTSTRAP_IN_PROGRESS, None)
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
        try:
            return self.catalog.get_table(self.db, name)
        except NoSuchObjectError:
            return None

    def put_table(
        self, snapshot: dict[str, Any], files: Sequence[str] | None, source_location: str | None
    ) -> Table:
        """Create or update a table; ``files`` (unpartitioned tables) become its exact data (None: untouched)."""
        wanted = self.map_table(snapshot)
        current = self.get_table(wanted.table_name)
        mark, applied, removed = self._data_mark(), None, []
        if files is not None and not wanted.partition_keys and wanted.sd.location:
            removed = self.reconcile(wanted.sd.location, files, source_location)
            applied = self._applied(files)
        if current is None:
            self.stats.tables += 1
            return self.catalog.create_table(wanted, applied_files=applied)
        comparable = wanted.model_copy(update={"id": current.id, "write_id": current.write_id})
        altered = _without_volatile(current) != _without_volatile(comparable)
        if altered:
            self.catalog.alter_table(
                self.db, wanted.table_name, comparable, capture_files=True, applied_files=applied
            )
        if self._data_mark() != mark and not (altered and applied):  # logged like any write (chains)
            self.catalog.insert(self.db, wanted.table_name, applied_files=applied, applied_recycled=removed)
        return comparable

    def rename_table(self, old_name: str, after: dict[str, Any]) -> None:
        wanted = self.map_table(after)
        current = self.get_table(old_name)
        if current is None:
            return  # renamed by an earlier, interrupted run (or never replicated)
        renamed = current.model_copy(update={"table_name": wanted.table_name, "sd": current.sd})
        self.catalog.alter_table(self.db, old_name, renamed)

    def drop_table(self, name: str) -> None:
        with contextlib.suppress(NoSuchObjectError):
            self.catalog.drop_table(self.db, name, delete_data=True)

    # -- partitions --------------------------------------------------------------------------------------
    def put_partitions(
        self,
        table_name: str,
        parts: Sequence[tuple[dict[str, Any], Sequence[str] | None]],
        source_table_location: str | None = None,
    ) -> None:
        """Add or update partitions, data first, then one metadata call for the new and one for the changed."""
        if not parts:
            return
        table = self.catalog.get_table(self.db, table_name)
        keys = table.partition_key_names
        mapped = [(self.map_partition(snapshot, table_name), snapshot, files) for snapshot, files in parts]
        names = [make_partition_name(keys, part.values) for part, _, _ in mapped]
        existing = {
            make_partition_name(keys, p.values): p
            for p in self.catalog.get_partitions_by_names(self.db, table_name, names)
        }
        new_parts: list[Partition] = []
        changed: list[Partition] = []
        applied: dict[str, list[str] | None] = {}
        data_only: list[tuple[Partition, list[str] | None, list[str]]] = []  # (partition, files, replaced)
        for name, (part, snapshot, files) in zip(names, mapped, strict=True):
            mark, removed = self._data_mark(), []
            if files is not None and part.sd.location:
                removed = self.reconcile(part.sd.location, files, snapshot.get("sd", {}).get("location"))
                applied[name] = self._applied(files)
            current = existing.get(name)
            if current is None:
                new_parts.append(part)
            elif _without_volatile(current) != _without_volatile(
                part.model_copy(update={"write_id": current.write_id})
            ):
                changed.append(part)
                if self._data_mark() != mark and not applied.get(name):
                    data_only.append((part, applied.get(name), removed))
            elif self._data_mark() != mark:
                data_only.append((part, applied.get(name), removed))
        if new_parts:
            self.catalog.add_partitions(
                self.db,
                table_name,
                new_parts,
                if_not_exists=True,
                applied_files=[applied.get(make_partition_name(keys, p.values)) for p in new_parts],
            )
            self.stats.partitions += len(new_parts)
        if changed:
            self.catalog.alter_partitions(
                self.db,
                table_name,
                changed,
                applied_files=[applied.get(make_partition_name(keys, p.values)) for p in changed],
            )
        for part, files, removed in data_only:  # logged like any write (chains)
            self.catalog.insert(
                self.db, table_name, part.values, applied_files=files, applied_recycled=removed
            )

    def set_partition_files(self, table_name: str, snapshot: dict[str, Any], files: Sequence[str]) -> None:
        part = self.map_partition(snapshot, table_name)
        if part.sd.location:
            mark = self._data_mark()
            removed = self.reconcile(part.sd.location, files, snapshot.get("sd", {}).get("location"))
            if self._data_mark() != mark:  # logged like any write (chains)
                self.catalog.insert(
                    self.db,
                    table_name,
                    part.values,
                    applied_files=self._applied(files),
                    applied_recycled=removed,
                )

    def drop_partitions(self, table_name: str, values_list: Sequence[Sequence[str]]) -> None:
        table = self.get_table(table_name)
        if table is None:
            return
        keys = table.partition_key_names
        names = [make_partition_name(keys, values) for values in values_list]
        present = {
            make_partition_name(keys, p.values)
            for p in self.catalog.get_partitions_by_names(self.db, table_name, names)
        }
        remaining = [list(v) for v, n in zip(values_list, names, strict=True) if n in present]
        if remaining:
            self.catalog.drop_partitions(self.db, table_name, remaining, delete_data=True)

    # -- data ----------------------------------------------------------------------------------------------
    def reconcile(self, target_location: str, files: Sequence[str], source_location: str | None) -> list[str]:
        """Make ``target_location`` hold exactly ``files`` (by relative path and checksum).

        Returns the files it replaced or removed (encoded, now in the target's cmroot).
        """
        if not self.copy_data:
            return []
        fs = filesystem_for(target_location)
        fs.makedirs(target_location)
        wanted = {relative_target(encoded): encoded for encoded in files}
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
        to_publish = []
        for rel, encoded in needed.items():
            target_uri = join_uri(target_location, rel)
            result = copy_verified(encoded, target_uri, default_cmroot=self.source_cmroot, allowed=allowed)
            self.stats.files_copied += 1
            self.stats.bytes_copied += result.bytes_copied
            self.stats.files_from_cmroot += int(result.from_cmroot)
            self.stats.files_prefetched += int(result.prefetched)
            to_publish.append(target_uri)
        extras = [status for rel, status in present.items() if rel not in wanted]
        removed = describe_files(target_location, self.target.cm, extras) if extras else []
        if extras:  # replaced on the source: keep them in the target's own cmroot (chained replication)
            self.target.cm.recycle(removed)
            self.stats.files_removed += len(extras)
        publish_all(to_publish, durable=False)  # made durable with the batch, in set_last_id
        if to_publish and is_local_uri(target_location):
            self._unsynced_dirs.add(local_path(target_location))
        return removed

    def _data_mark(self) -> tuple[int, int]:
        """Files copied and removed so far: a change between two marks means a location's data changed."""
        return self.stats.files_copied, self.stats.files_removed

    def _applied(self, files: Sequence[str]) -> list[str] | None:
        """The files a location was made to hold, for the catalog to log (None: nothing was copied)."""
        return list(files) if self.copy_data else None

    def make_durable(self) -> None:
        """One ``syncfs`` per file system for every rename published since the last call.

        Publishing renames a staged copy into place; until the rename reaches the disk, a crash could leave
        the target's metadata (committed with the position) naming a file still under its staged name. One
        sync per load batch instead of one per file keeps this cheap.
        """
        if self._unsynced_dirs:
            sync_file_systems(self._unsynced_dirs)
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


def relative_target(encoded: str) -> str:
    """Where a file goes below its object's target location: its subdirectory and name, as at the source."""
    entry = EncodedFileUri.decode(encoded)
    return f"{entry.subdir}/{entry.file_name}" if entry.subdir else entry.file_name


def _without_volatile(obj: Table | Partition) -> Any:
    params = {k: v for k, v in obj.parameters.items() if k not in VOLATILE_PARAMS}
    return obj.model_copy(update={"parameters": params, "create_time": 0, "last_access_time": 0})
