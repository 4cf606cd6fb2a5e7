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
where the metadata switch alone decides what readers see. The cost is O(files) links per changed object,
not a data copy (local disks); on S3 each unchanged file costs a server-side copy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files, list_data_files
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.metastore.protection import LOCAL_PARAMS
from hmsrepl.replication import iceberg
from hmsrepl.replication.failures import fault_point
from hmsrepl.replication.filecopy import (
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
        # The event being applied names the version directories it makes (set by the load per event).
        self.version = 0
        self._created: list[str] = []  # version directories made in the current batch (not yet named)
        self._retire: list[Retirement] = []  # directories the current batch stops naming

    # -- mapping -------------------------------------------------------------------------------------------
    def map_location(self, source_location: str | None) -> str | None:
        """The target's logical location of a source location (a source that is itself a replica: without
        its version marks)."""
        mapped = self.mapper.map(logical_location(source_location) if source_location else source_location)
        return logical_location(mapped) if mapped else mapped

    def map_table(self, snapshot: dict[str, Any]) -> Table:
        table = Table.model_validate(snapshot)
        sd = table.sd.model_copy(update={"location": self.map_location(table.sd.location)})
        params = {k: v for k, v in table.parameters.items() if k not in TARGET_ONLY_PARAMS}
        return table.model_copy(update={"db_name": self.db, "sd": sd, "id": None, "parameters": params})

    def map_partition(self, snapshot: dict[str, Any], table_name: str) -> Partition:
        part = Partition.model_validate(snapshot)
        sd = part.sd.model_copy(update={"location": self.map_location(part.sd.location)})
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
        data = None if wanted.partition_keys else files
        location = self._location_for(
            current.sd.location if current else None, wanted.sd.location, data, source_location
        )
        wanted = wanted.model_copy(update={"sd": wanted.sd.model_copy(update={"location": location})})
        wanted = iceberg.localize(wanted, source_location)  # Iceberg metadata naming the copies
        # The files the new version holds, for the replica's own event (a replica is a source too).
        applied = (
            self._applied(data)
            if data is not None and (current is None or location != current.sd.location)
            else None
        )
        if current is None:
            self.stats.tables += 1
            return self.catalog.create_table(wanted, applied_files=applied)
        comparable = wanted.model_copy(update={"id": current.id, "write_id": current.write_id})
        if _without_volatile(current) != _without_volatile(comparable):
            self.catalog.alter_table(
                self.db, wanted.table_name, comparable, capture_files=True, applied_files=applied
            )
        return comparable

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
        if table.is_managed:
            below = (table.sd.location or "").rstrip("/") + "/"
            if table.partition_keys:  # those below the table's directory are retired with it
                for part in self.catalog.get_partitions(self.db, name):
                    if part.sd.location and not (table.sd.location and part.sd.location.startswith(below)):
                        self._retire.append(Retirement(part.sd.location))
            if table.sd.location:
                self._retire.append(Retirement(table.sd.location))
        with contextlib.suppress(NoSuchObjectError):
            self.catalog.drop_table(self.db, name, delete_data=False)

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
        applied: dict[str, list[str] | None] = {}  # what new versions hold, for the replica's own events
        for name, (part, snapshot, files) in zip(names, mapped, strict=True):
            current = existing.get(name)
            location = self._location_for(
                current.sd.location if current else None,
                part.sd.location,
                files,
                snapshot.get("sd", {}).get("location"),
            )
            if files is not None and (current is None or location != current.sd.location):
                applied[name] = self._applied(files)
            part = part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})
            if current is None:
                new_parts.append(part)
            elif _without_volatile(current) != _without_volatile(
                part.model_copy(update={"write_id": current.write_id})
            ):
                changed.append(part)
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

    def set_partition_files(self, table_name: str, snapshot: dict[str, Any], files: Sequence[str]) -> None:
        """A partition's new data (INSERT): a new version directory, switched to with the partition's snapshot."""
        self.put_partitions(table_name, [(snapshot, files)])

    def drop_partitions(self, table_name: str, values_list: Sequence[Sequence[str]]) -> None:
        table = self.get_table(table_name)
        if table is None:
            return
        keys = table.partition_key_names
        names = [make_partition_name(keys, values) for values in values_list]
        found = {
            make_partition_name(keys, p.values): p
            for p in self.catalog.get_partitions_by_names(self.db, table_name, names)
        }
        remaining = [list(v) for v, n in zip(values_list, names, strict=True) if n in found]
        if remaining:
            if table.is_managed:
                self._retire.extend(
                    Retirement(found[n].sd.location or "")
                    for n in names
                    if n in found and found[n].sd.location
                )
            self.catalog.drop_partitions(self.db, table_name, remaining, delete_data=False)

    # -- data: location flips ------------------------------------------------------------------------------
    def _location_for(
        self,
        current: str | None,
        logical: str | None,
        files: Sequence[str] | None,
        source_location: str | None,
    ) -> str | None:
        """The location to record for an object: a new version holding ``files``, or the one it has.

        ``files`` None is a metadata-only change: the object keeps its directory (unless the source moved
        the object elsewhere, then it names the new logical location).
        """
        if files is not None and logical and self.copy_data:
            return self.publish_version(current, logical, files, source_location)
        if current and logical and logical_location(current) == logical.rstrip("/"):
            return current
        return logical

    def _new_version(self, logical: str, current: str | None) -> str:
        attempt = 0
        while True:
            candidate = versioned_location(logical, self.version, attempt)
            if candidate != (current or "").rstrip("/") and candidate not in self._created:
                return candidate
            attempt += 1

    def publish_version(
        self, current: str | None, logical: str, files: Sequence[str], source_location: str | None
    ) -> str:
        """A directory holding exactly ``files``: ``current`` if it already does, else a new version.

        A new version reuses what an interrupted attempt left in it (verified files and staged copies),
        links files ``current`` already holds with the right checksum, copies the rest (checksum-verified,
        original location, recorded version, then cmroot), and publishes the copies inside it: nothing a
        reader can see changes until the caller records the returned location.
        """
        fs = filesystem_for(logical)
        wanted = {relative_target(encoded): encoded for encoded in files}
        old = {relative_to(s.uri, current): s for s in list_data_files(current)} if current else {}
        kept = {rel for rel, encoded in wanted.items() if _checksum_matches(fs, old.get(rel), encoded)}
        if current and len(kept) == len(wanted) == len(old):
            self._retire_staging_area(logical, current)
            return current  # already this state (a re-run, or an event that changed no file)
        new = self._new_version(logical, current)
        fs.makedirs(new)
        self._created.append(new)
        present = {relative_to(s.uri, new): s for s in list_data_files(new)}  # an interrupted attempt's
        for rel, status in present.items():
            if rel not in wanted:
                fs.delete(status.uri)
        allowed = below_any(source_location, self.source_cmroot)
        to_publish = []
        for rel, encoded in wanted.items():
            target_uri = join_uri(new, rel)
            if _checksum_matches(fs, present.get(rel), encoded):
                continue
            if rel in kept:
                link_file(old[rel].uri, target_uri)
                fault_point()
                continue
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            to_publish.append(target_uri)
            fault_point()
        publish_all(to_publish, durable=False)  # made durable with the batch, in set_last_id
        fault_point()
        if is_local_uri(new):
            self._unsynced_dirs.add(local_path(new))
        if current:
            self._retire.append(Retirement(current, frozenset(kept)))
            self.stats.files_removed += len(set(old) - kept)
        self._retire_staging_area(logical, current)
        return new

    def _retire_staging_area(self, logical: str, current: str | None) -> None:
        """A copier working ahead stages files at the logical location: retired with the batch if unnamed."""
        if logical.rstrip("/") != (current or "").rstrip("/") and filesystem_for(logical).exists(logical):
            self._retire.append(Retirement(logical, recycle=False))

    def _relink(self, current: str, logical: str) -> str:
        """A new version at ``logical`` with the same files as ``current`` (a rename): links only."""
        new = self._new_version(logical, current)
        fs = filesystem_for(new)
        fs.delete_tree(new)  # whatever an interrupted attempt left: links are cheap to make again
        fs.makedirs(new)
        self._created.append(new)
        carried = set()
        for status in list_data_files(current):
            rel = relative_to(status.uri, current)
            link_file(status.uri, join_uri(new, rel))
            carried.add(rel)
            fault_point()
        if is_local_uri(new):
            self._unsynced_dirs.add(local_path(new))
        self._retire.append(Retirement(current, frozenset(carried)))
        self._retire_staging_area(logical, current)
        return new

    def _copy_in(
        self, encoded: str, target_uri: str, allowed: Callable[[str], bool], *, prefetched_at: str
    ) -> None:
        """One checksum-verified copy of an event's file to a place no reader sees yet, counted."""
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

    def _applied(self, files: Sequence[str]) -> list[str] | None:
        """The files a location was made to hold, for the catalog to log (None: nothing was copied)."""
        return list(files) if self.copy_data else None

    def discard_batch(self) -> None:
        """The batch failed: remove the version directories it made (nothing names them; frees space).

        Called before the batch's transaction ends, so it holds the replica's row lock: no other load
        can be filling a directory of the same name.
        """
        for directory in self._created:
            with contextlib.suppress(Exception):
                filesystem_for(directory).delete_tree(directory)
        self._created.clear()
        self._retire.clear()

    def take_retirements(self) -> list[Retirement]:
        """The batch committed: the directories it stopped naming, for retirement after the grace period."""
        out, self._retire = self._retire, []
        self._created.clear()
        return out

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
        if to_publish and is_local_uri(target_location):
            self._unsynced_dirs.add(local_path(target_location))
        if logical != target_location.rstrip("/") and fs.exists(logical):
            self._retire.append(Retirement(logical, recycle=False))  # a copier's staged copies, if unnamed

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
