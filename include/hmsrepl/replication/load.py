"""REPL LOAD on the target, and REPL STATUS.

The target database's ``repl.last.id`` parameter is the source of truth for how far replication got. A load
applies only events above it, in order, through the target metastore's own API (so the target logs events
too and can itself be replicated), and advances it only after the work it records is done. Every step is
idempotent, so re-running a finished or half-finished load converges to the same target.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import (
    InvalidOperationError,
    NoSuchDatabaseError,
    NoSuchObjectError,
)
from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.gc_pause import gc_paused, paused_pages, paused_walk
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import plan_for_growth
from hmsrepl.metastore.event_specs import Scope, kinds, spec_of
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    AlterDatabaseMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CommitTxnMessage,
    CreateFunctionMessage,
    CreateTableMessage,
    DataChange,
    DeleteColumnStatMessage,
    DropDatabaseMessage,
    DropFunctionMessage,
    DropPartitionMessage,
    DropTableMessage,
    InsertMessage,
    Message,
    UpdateColumnStatMessage,
    relative_path,
)
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.payloads import (
    ObjectMetadata,
    PartitionSnapshot,
    TableSnapshot,
    convert,
    metadata_location,
)
from hmsrepl.metastore.protection import privileged_call
from hmsrepl.replication import acid_replay, iceberg, lost_files, signing
from hmsrepl.replication.bootstrap_tables import GatheredTable, create_new_tables, gather_table
from hmsrepl.replication.column_stats import load_column_stats
from hmsrepl.replication.commands import LoadCommand, parse_policy
from hmsrepl.replication.copy_processes import copy_process_settings, start_early
from hmsrepl.replication.dir_processes import dir_process_threshold
from hmsrepl.replication.dir_processes import start_early as start_dir_process_early
from hmsrepl.replication.dump_validation import (
    DumpValidator,
    PendingEvents,
    SourceRoots,
    TargetPlace,
    ValidationReport,
    event_message,
)
from hmsrepl.replication.failures import explain_load_failure, fault_point
from hmsrepl.replication.filecopy import CopyTask, available_source
from hmsrepl.replication.holds import Holds
from hmsrepl.replication.layout import (
    FILES,
    FUNCTIONS_DIR,
    METADATA,
    TABLE,
    DumpDir,
    DumpedPartition,
    DumpError,
    DumpLayout,
    DumpMetadata,
)
from hmsrepl.replication.leftovers import Retirement, Retirer, locked_cleanup, own_directories
from hmsrepl.replication.locations import EXTERNAL_ROOT, LocationMapper
from hmsrepl.replication.metrics import StageClock
from hmsrepl.replication.preflight import Preflight
from hmsrepl.replication.prestage import (
    COPY_PAGE,
    StagedAhead,
    TaskPages,
    discard_staged,
    remove_empty,
    stage_ahead,
)
from hmsrepl.replication.replace import (
    apply_bootstrap_part,
    bootstrap_part_objects,
    has_bootstrap_part,
)
from hmsrepl.replication.replica_files import adds_one_file, compose
from hmsrepl.replication.replica_layout import (
    check_before_load,
    external_root_for,
    move_to_own_root,
    needs_move,
)
from hmsrepl.replication.replica_scope import ReplicaScope
from hmsrepl.replication.table_pool import TableWriters, each_in_parallel, load_parallelism
from hmsrepl.replication.table_writes import TableWrites, tables_touched
from hmsrepl.replication.target import (
    BOOTSTRAP_IN_PROGRESS,
    REPL_LAST_ID,
    REPLICA_OF,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
    ApplyStats,
    PreparedPartitions,
    ReplicationStateError,
    TargetWriter,
    refuse_during_bootstrap,
)
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

BATCH_EVENTS = 500
PARTITION_PAGE = 500  # partitions of a bootstrapped table written per catalog call
BOOTSTRAP_BATCH_OBJECTS = 500  # tables and partitions a bootstrap batch gathers before it commits
TABLES_KIND = "table"  # a bootstrap entry that is a table (functions are FUNCTIONS_DIR)
# A load marks the replica's directory while it runs (a file in this hidden subdirectory); a mark found at
# the start is an earlier load that did not finish (killed, or failed): this one then sweeps the whole
# directory at its end, removing what no metadata names (the marks included).
RUNNING_MARKS_DIR = ".hmsrepl-loads"


@dataclass
class LoadResult:
    target_db: str
    last_event_id: int
    events_applied: int = 0
    stats: ApplyStats = field(default_factory=ApplyStats)
    stale: list[str] = field(default_factory=list)  # one line per object left stale (or no longer stale)


def repl_status(target: Metastore, db_name: str) -> int | None:
    """The last replicated source event id of a replica database, or None if it is not a replica."""
    try:
        value = target.catalog.get_database(db_name).parameters.get(REPL_LAST_ID)
    except NoSuchDatabaseError:
        return None
    return int(value) if value is not None else None


class LoadEngine:
    def __init__(
        self, target: Metastore, clock: StageClock | None = None, source_roots: SourceRoots | None = None
    ) -> None:
        """``clock`` collects seconds per stage (replication metrics). ``source_roots``: where the source's
        files may be read from, from the load's configuration (default: ``HMSREPL_SOURCE_*`` variables);
        the roots a dump declares are never trusted."""
        self.target = target
        self.clock = clock or StageClock()
        self._source_roots = source_roots
        self.signing_key: bytes | None = None  # None: HMSREPL_DUMP_SIGNING_KEY (if set, dumps must be signed)
        # True when a copier (the Spark load app) staged and verified every planned copy before ``load``:
        # the load then does not copy ahead again.
        self.copies_staged = False
        self._ahead = StagedAhead()  # what each of those copies was copied from, and the directories made
        self._changed = False  # whether this load changed the target yet (a batch began)

    @property
    def source_roots(self) -> SourceRoots:
        if self._source_roots is None:
            self._source_roots = SourceRoots.from_environment()
        return self._source_roots

    # -- pre-flight: the whole dump is checked before the first change ---------------------------------------
    def _validator(
        self, dump: DumpDir, meta: DumpMetadata, target_db: str, checks: Preflight | None = None
    ) -> DumpValidator:
        roots = self.source_roots
        config = self.target.config

        def place(source_db_location: str) -> TargetPlace:
            db_location = self.target.catalog.default_db_location(target_db)
            mapper = LocationMapper(
                roots.warehouse,
                source_db_location,
                config.warehouse,
                db_location,
                external_root_for(self.target, target_db),
            )
            return TargetPlace(config.warehouse, db_location, mapper, cmroot=config.cmroot)

        return DumpValidator(
            dump, meta, roots, place, HANDLERS.keys() | NOT_YET_REPLAYED, checks.check if checks else None
        )

    def verify_signature(self, dump: DumpDir) -> None:
        """With ``HMSREPL_DUMP_SIGNING_KEY`` set, refuse a dump its source did not sign or that was altered."""
        key = self.signing_key if self.signing_key is not None else signing.signing_key()
        if key:
            with self.clock.stage("preflight"):
                signing.verify(dump, key)

    def validate_bootstrap(
        self, dump: DumpDir, meta: DumpMetadata, target_db: str, checks: Preflight | None = None
    ) -> ValidationReport:
        """Refuse (DumpValidationError) a bootstrap dump naming anything this load must not read or write.
        ``checks``: the pre-flight, given the dump's files a page at a time as they pass."""
        return self._validator(dump, meta, target_db, checks).validate_bootstrap()

    def validate_incremental(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        target_db: str,
        db: Database,
        last: int,
        checks: Preflight | None = None,
    ) -> ValidationReport:
        """Refuse an incremental dump whose events above ``last`` name anything this load must not touch."""
        validator = self._validator(dump, meta, target_db, checks)
        return validator.validate_incremental(last, db.parameters.get(SOURCE_DB_LOCATION, ""))

    def _preflight(self, dump: DumpDir, meta: DumpMetadata) -> Preflight | None:
        """The pre-flight of a load that copies data (None: a metadata-only dump names no file to read)."""
        if meta.metadata_only:
            return None
        return Preflight(self.source_roots.cmroot, roots=self.source_roots, dump_uri=dump.uri)

    @privileged_call("replication load")  # the only client of a protected replica
    def load(self, command: LoadCommand, progress: Callable[[int], None] | None = None) -> LoadResult:
        """``progress(n)``: n more tables (bootstrap) or events (incremental) are loaded.

        Errors of the environment (database, disk, object store) surface as one ``LoadFailedError`` line
        naming the cause and the fix; what the failed batch made is removed before its transaction ends.
        """
        lost_mode = lost_files.mode(command.settings)  # a bad setting is refused before anything is read
        copy_process_settings()  # so is a bad number of copy processes
        dir_process_threshold()  # and of directories
        dump = DumpDir(command.dump_dir)
        meta = dump.require_complete()
        self.verify_signature(dump)
        target_db = (command.target_db or meta.db_name).lower()
        check_before_load(self.target, target_db)  # before anything is written, the running mark too
        try:
            with self._running(target_db):
                if meta.kind == "bootstrap":
                    result = self._bootstrap(dump, meta, target_db, progress)
                else:
                    result = self._incremental(dump, meta, target_db, progress, lost_mode)
            self._drop_unused_copies()  # files the load found in place already
            return result
        except Exception as exc:
            self._drop_unused_copies()
            explained = explain_load_failure(exc, target_db)
            if explained is None:
                raise
            raise explained from exc

    @contextlib.contextmanager
    def _running(self, target_db: str) -> Iterator[None]:
        """Mark the replica's directory while loading; retire and sweep at the end (see RUNNING_MARK_PREFIX)."""
        self.retirer = Retirer(self.target, target_db)
        self._changed = False
        root = self.target.catalog.default_db_location(target_db)
        fs = RootedFileSystem([root], purpose=f"load into '{root}'")
        marks = join_uri(root, RUNNING_MARKS_DIR)
        earlier = [status.uri for status in fs.list_files(marks)]  # loads that did not finish (or still run)
        mark = join_uri(marks, f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        had_root = fs.exists(root)
        fs.makedirs(marks)
        fs.write_bytes(mark, b"")
        try:
            yield  # on failure the mark stays: the next load sweeps what this one may have left
        except Exception as exc:
            if self._changed and not isinstance(exc, DumpError):
                raise
            # A load refused before its first change (validation, signature, size limits, a target that is
            # not a replica, files whose content is not the dump's) and a failed batch (it removes what it
            # made) leave the target exactly as it was, mark and all.
            fs.delete(mark)
            for directory in [marks] if had_root else [marks, root]:
                fs.remove_empty_directory(directory)
            raise
        # Earlier loads' replaced directories whose readers' grace has passed go once this load succeeded: a
        # refused load leaves every file as it was, the housekeeping it owes included.
        self.retirer.run_tickets()
        self.retirer.run_due()
        self.retirer.defer()  # the rest waits for its grace period in tickets, not in this process
        if earlier:
            # The marks go last: a sweep killed half way is done again by the next load.
            swept = [(directory, None) for directory in own_directories(self.target, target_db)]
            removed = locked_cleanup(self.target, target_db, swept, keep_root=True, spare=marks, sweep=True)
            log.info("removed %d files an interrupted load of '%s' left behind", removed, target_db)
            for uri in earlier:
                fs.delete(uri)
        fs.delete(mark)
        fs.remove_empty_directory(marks)

    @contextlib.contextmanager
    def _batch(self, writer: TargetWriter) -> Iterator[None]:
        """One target transaction: its version directories are named at commit, or removed if it fails."""
        with self._transaction(writer):
            yield
        self._retire(writer.take_retirements())

    @contextlib.contextmanager
    def _transaction(self, writer: TargetWriter) -> Iterator[None]:
        """The transaction of a batch, on the calling thread's connection (tables of a bootstrap may be
        loaded by several threads, each with a writer of its own)."""
        self._changed = True
        with self.clock.stage("apply"), self.target.events.transaction():
            # Planned for their values: a replica's tables grow under its loads faster than PostgreSQL's
            # statistics follow, and a generic plan then filters a table's rows by a list parameter, every
            # row against every name (1,600 rows x 400 names: 15 ms, 1 ms planned for the list's values).
            with self.target.events.reader() as conn:
                plan_for_growth(conn)
            try:
                yield
                writer.owe_publishes()
                fault_point()  # everything staged, nothing committed
            except BaseException:
                writer.discard_batch()
                raise
        fault_point()  # committed, old directories not yet retired

    def _retire(self, retirements: list[Retirement]) -> None:
        """After a batch committed (in the load's own thread): the directories it stopped naming."""
        self.retirer.schedule(retirements)
        self.retirer.run_due()

    def _writer(
        self, target_db: str, meta: DumpMetadata, source_db_location: str, stats: ApplyStats | None
    ) -> TargetWriter:
        warehouse = self.target.config.warehouse
        mapper = LocationMapper(
            source_warehouse=self.source_roots.warehouse,
            source_db_location=source_db_location,
            target_warehouse=warehouse,
            target_db_location=self.target.catalog.default_db_location(target_db),
            external_root=external_root_for(self.target, target_db),
        )
        return TargetWriter(
            self.target,
            target_db,
            mapper,
            source_cmroot=self.source_roots.cmroot,
            copy_data=not meta.metadata_only,
            stats=stats,
            scope=ReplicaScope.of_dump(meta),
        )

    # -- copy planning (for parallel copiers such as the Spark load app) -----------------------------------------
    def plan_copies(self, command: LoadCommand) -> list[CopyTask]:
        """Every file this load would copy, with its final target path (the last version per path wins).

        A parallel copier stages these ahead of the load; the load then finds verified staged copies and
        only publishes them. Files already present at the target with the right checksum are still listed:
        checking them is the copier's job too (``copy_verified`` reuses valid staged copies).
        """
        dump = DumpDir(command.dump_dir)
        meta = dump.require_complete()
        self.verify_signature(dump)
        if meta.metadata_only:
            return []
        target_db = (command.target_db or meta.db_name).lower()
        if meta.kind == "bootstrap":
            already = repl_status(self.target, target_db)
            if already is not None and already >= meta.last_event_id:
                return []  # loaded before: load() will do nothing
            self._check_bootstrap_target(target_db, meta)
            source_db_location = self.validate_bootstrap(dump, meta, target_db).source_db_location
            objects: Iterable[tuple[str | None, Sequence[str]]] = self._bootstrap_objects(dump, meta)
        else:
            db, last = self._check_incremental_target(target_db, meta)
            source_db_location = db.parameters.get(SOURCE_DB_LOCATION, "")
            pending = self.validate_incremental(dump, meta, target_db, db, last).pending_events
            objects = self._incremental_objects(dump, meta, pending, last)
        tasks = next(self._copy_tasks(target_db, meta, source_db_location, objects), [])
        if (
            lost_files.mode(command.settings) == lost_files.SKIP_OBJECTS
        ):  # the load leaves their objects stale
            cmroot = self.source_roots.cmroot
            files = self.source_roots.readable
            return [task for task in tasks if available_source(files, task.encoded, cmroot) is not None]
        return tasks

    @staticmethod
    def _bootstrap_objects(dump: DumpDir, meta: DumpMetadata) -> Iterator[tuple[str | None, Sequence[str]]]:
        """(source location, files) of every table and partition of a bootstrap dump, one at a time (a
        million partitions are never held as a list), an object's listing a page at a time: one of many
        files comes as several pairs of its location and a page of its files."""
        for relative in dump.metadata_files(meta.db_name):
            found = DumpLayout.entry(relative)
            if found.kind != TABLE or found.table is None:
                continue  # partitions in their own directories come with their table's
            table = convert(dump.read_json(relative), ObjectMetadata, relative)
            for page in dump.files_pages(relative[: -len(METADATA)] + FILES):
                yield table.location, page
            for dumped, listing in dump.partition_listings(DumpLayout.table_dir(meta.db_name, found.table)):
                location = metadata_location(dumped.document, dumped.where)
                for page in [dumped.files or []] if listing is None else listing:
                    yield location, page

    @staticmethod
    def _incremental_objects(
        dump: DumpDir, meta: DumpMetadata, pending: PendingEvents, last: int
    ) -> list[tuple[str | None, Sequence[str]]]:
        """(source location, files) of every object the pending events and the dump's bootstrap part write."""
        objects: list[tuple[str | None, Sequence[str]]] = []
        for event_id in pending.ids:
            objects.extend(objects_to_copy(pending.message(dump, event_id)))
        if last < meta.last_event_id:  # tables bootstrapped inside the incremental dump
            objects.extend(bootstrap_part_objects(dump, meta))
        return objects

    def _copy_tasks(
        self,
        target_db: str,
        meta: DumpMetadata,
        source_db_location: str,
        objects: Iterable[tuple[str | None, Sequence[str]]],
        page: int | None = None,
    ) -> Iterator[list[CopyTask]]:
        """One task per target path, for ``objects`` of the dump, in pages of ``page`` tasks (None: all in
        one). The last version of a path wins within a page (a bootstrap's pages cut only the listing of
        one object, which names each of its paths once)."""
        writer = self._writer(target_db, meta, source_db_location, ApplyStats())
        replica_roots = self.target.cm.files.roots  # the replica's data roots and cmroot: copies stage there
        tasks: dict[str, CopyTask] = {}
        for source_location, files in objects:
            target_location = writer.mapper.map(source_location)
            if not target_location:
                continue
            roots = (source_location or "", self.source_roots.cmroot)
            for encoded in files:
                target_uri = join_uri(target_location, relative_path(encoded))
                tasks[target_uri] = CopyTask(
                    encoded, target_uri, roots, self.source_roots.cmroot, replica_roots
                )
                if page is not None and len(tasks) >= page:
                    yield list(tasks.values())
                    tasks = {}
        if tasks:
            yield list(tasks.values())

    def _drop_unused_copies(self) -> None:
        """Remove the copies staged ahead that no committed change still has to publish: those no object
        took (``copied_ahead`` keeps the ones not taken yet; the tasks themselves are not kept, a partition
        of 1,000,000 files held a task per file for the whole load)."""
        if not self._ahead.copies and not self._ahead.made:
            return
        owed = self.target.catalog.intents.owed_copies()
        unused = list(self._ahead.copies.unused(self.target.cm.files, owed))
        discard_staged(self.target.cm.files, unused)
        remove_empty(self.target.cm.files, self._ahead.made)
        self._ahead = StagedAhead()

    def _stage_ahead(
        self, dump: DumpDir, tasks: TaskPages | list[CopyTask], *, tolerate_lost: bool = False
    ) -> None:
        """Copy and verify every file before the first change (``prestage``), unless a copier did already."""
        if self.copies_staged or not tasks:
            return
        with self.clock.stage("copy"):
            self._ahead = stage_ahead(tasks, dump.uri, tolerate_lost=tolerate_lost)

    # -- bootstrap ------------------------------------------------------------------------------------------
    # The whole load runs with the collector paused, a young pass after each page validated or applied
    # (``gc_pause.paused_walk``): between pages and tables, the collector's middle and full passes rescanned
    # what the load keeps (1 x 20,000 partitions: 393 passes, 0.28 s of a 2.6 s load's CPU, two full ones
    # 0.16 s). What a young pass keeps is freed by reference counts; a cycle waits for the load's end.
    @gc_paused()
    def _bootstrap(
        self, dump: DumpDir, meta: DumpMetadata, target_db: str, progress: Callable[[int], None] | None = None
    ) -> LoadResult:
        self._check_bootstrap_target(target_db, meta)
        workers = load_parallelism(self.target)  # a bad setting is refused before anything is read
        already = repl_status(self.target, target_db)
        result = LoadResult(target_db, meta.last_event_id)
        if already is not None and already >= meta.last_event_id:
            return LoadResult(target_db, already)  # loaded before: nothing to do
        with self.clock.stage("preflight"):  # the whole dump, before the first change
            checks = self._preflight(dump, meta)
            report = self.validate_bootstrap(dump, meta, target_db, checks)
            traits = self.target.cm.files.traits(self.target.config.warehouse)
            if not meta.metadata_only and traits.cpu_bound and traits.has_directories:  # a mkdir a version
                start_dir_process_early(report.most_partitions)
            if checks is not None:
                if traits.cpu_bound:
                    start_early(copy_process_settings(), report.files, report.objects)
                checks.finish()
        if not meta.metadata_only and report.files:  # a dump naming no file has nothing to stage

            def pages() -> Iterator[list[CopyTask]]:  # planned again to remove what was staged, if need be
                objects = self._bootstrap_objects(dump, meta)
                return self._copy_tasks(target_db, meta, report.source_db_location, objects, COPY_PAGE)

            self._stage_ahead(dump, pages)
        source_db = dump.read_json(f"{meta.db_name}/{METADATA}")["database"]
        writer = self._writer(target_db, meta, report.source_db_location, result.stats)
        writer.copied_ahead = self._ahead.copies
        writer.version = meta.last_event_id
        self._changed = True
        writer.put_database(
            source_db,
            {
                REPLICA_OF: meta.db_name,
                SOURCE_DB_LOCATION: report.source_db_location,
                SOURCE_WAREHOUSE: self.source_roots.warehouse,
                BOOTSTRAP_IN_PROGRESS: dump.uri,
                EXTERNAL_ROOT: writer.mapper.external_root,
            },
        )
        dumped_tables: set[str] = set()
        # The replica's tables before the first batch (none on a first bootstrap): a dumped table not among
        # them is created without a read of its name first (``TargetWriter.assume_absent``).
        present = {name.lower() for name in self.target.catalog.get_tables(target_db)}

        entries = self._bootstrap_entries(dump, meta, dumped_tables)
        reading = threading.Lock()
        exhausted = threading.Event()

        def next_entry() -> tuple[str, dict[str, Any]] | None:  # read as workers take them, never all at once
            with reading:
                entry = next(entries, None)
            if entry is None:
                exhausted.set()
            return entry

        writers = TableWriters(writer, lambda: self._writer(target_db, meta, report.source_db_location, None))

        def load_batch(_: object) -> tuple[int, list[Retirement]]:
            """The next tables (and functions) in one transaction on a worker's own writer, up to
            ``BOOTSTRAP_BATCH_OBJECTS`` tables and partitions. A table and its partitions always appear together;
            small tables share a transaction, so its own round trips (file intents, event ids, protection
            check, commit) are paid once for many, which is most of a small table's cost on a server backend,
            and so is the creation of its new partitioned tables (``bootstrap_tables``); a worker takes one
            table at a time, so big tables still spread over the workers."""
            own = writers.mine()
            entry = next_entry()
            if entry is None:
                return 0, []
            weight = 0
            tables: list[GatheredTable] = []
            with self._transaction(own):
                while entry is not None:  # the batch's tables, each with a page of partitions read ahead
                    kind, document = entry
                    if kind == FUNCTIONS_DIR:
                        own.put_function(document)
                    else:
                        tables.append(gather_table(dump, meta.db_name, document, PARTITION_PAGE))
                        weight += 1 + tables[-1].ahead
                    if weight >= BOOTSTRAP_BATCH_OBJECTS:
                        break
                    entry = next_entry()
                created = create_new_tables(own, tables, present)  # the new containers: one call
                for table in tables:
                    self._load_table(
                        dump,
                        own,
                        meta,
                        table.document,
                        table.partitions,
                        created=table.name.lower() in created,
                    )
                    load_column_stats(dump, self.target, meta.db_name, target_db, table.document)
            return len(tables), own.take_retirements()

        def batches() -> Iterator[None]:
            while not exhausted.is_set():
                yield None

        try:
            for loaded, retirements in each_in_parallel(batches(), load_batch, workers):
                self._retire(retirements)
                if progress is not None and loaded:
                    progress(loaded)
        finally:
            writers.add_stats_to(result.stats)
        with self._batch(writer):
            for name in self.target.catalog.get_tables(target_db):
                if name not in dumped_tables:  # re-bootstrap of a replica: gone at the source
                    writer.drop_table(name)
        with self._batch(writer):  # ACID write-id state and the position it belongs to
            acid_replay.load_bootstrap_state(writer, dump, meta)
            writer.set_last_id(meta.last_event_id, bootstrap_done=True)
        return result

    @staticmethod
    def _bootstrap_entries(
        dump: DumpDir, meta: DumpMetadata, dumped_tables: set[str]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The dumped functions and tables of a bootstrap, each read when taken; notes each table's name."""
        for relative in dump.metadata_files(meta.db_name):
            parts = relative.split("/")
            if parts[1] == FUNCTIONS_DIR:
                yield FUNCTIONS_DIR, dump.read_json(relative)["function"]
            elif len(parts) == 3:
                table = dump.read_json(relative)["table"]
                dumped_tables.add(table["table_name"])
                yield TABLES_KIND, table

    def _check_incremental_target(self, target_db: str, meta: DumpMetadata) -> tuple[Database, int]:
        """The replica and its position; refuses targets that are not replicas or would skip events."""
        try:
            db = self.target.catalog.get_database(target_db)
        except NoSuchDatabaseError as exc:
            raise ReplicationStateError(
                f"target database '{target_db}' does not exist: run a bootstrap dump and load first"
            ) from exc
        if db.parameters.get(REPLICA_OF) != meta.db_name or REPL_LAST_ID not in db.parameters:
            raise ReplicationStateError(
                f"target database '{target_db}' is not a bootstrapped replica of '{meta.db_name}': run a bootstrap first"
            )
        refuse_during_bootstrap(target_db, db.parameters)
        last = int(db.parameters[REPL_LAST_ID])
        if meta.from_event_id > last:
            raise ReplicationStateError(
                f"dump covers events after {meta.from_event_id} but '{target_db}' is at {last}: events "
                f"{last + 1}..{meta.from_event_id} would be skipped; dump FROM {last}"
            )
        return db, last

    def _check_bootstrap_target(self, target_db: str, meta: DumpMetadata) -> None:
        try:
            existing = self.target.catalog.get_database(target_db)
        except NoSuchDatabaseError:
            return
        replica_of = existing.parameters.get(REPLICA_OF)
        if replica_of is None:
            if self.target.catalog.get_tables(target_db) or self.target.catalog.get_functions(target_db):
                raise ReplicationStateError(
                    f"target database '{target_db}' exists, is not empty and is not a replica; refusing to "
                    "overwrite it: load into another database name or drop it first"
                )
        elif replica_of != meta.db_name:
            raise ReplicationStateError(
                f"target database '{target_db}' is a replica of '{replica_of}', not of '{meta.db_name}'; "
                "load into another database name"
            )

    @staticmethod
    def _load_table(
        dump: DumpDir,
        writer: TargetWriter,
        meta: DumpMetadata,
        table: dict[str, Any],
        partitions: Iterable[DumpedPartition] | None = None,
        *,
        created: bool = False,
    ) -> int:
        """Write one dumped table and its partitions; answers how many partitions it had.

        ``partitions``: the table's, when the caller has begun reading them (``bootstrap_tables``; None: read
        from the dump here). ``created``: the table was created empty already (in this batch), only its
        partitions remain; the dump names each of them once (the pre-flight refuses one named twice), so none of
        them exists yet and the writer reads none back (``TargetWriter.put_partitions``, ``fresh``)."""
        base = f"{meta.db_name}/{table['table_name']}"
        location = table.get("sd", {}).get("location")
        if not created:
            files = None if meta.metadata_only else dump.read_files(f"{base}/{FILES}")
            writer.put_table(table, files, location)
        if not table.get("partition_keys"):
            return 0
        # The batch's transaction, which fills the table page by page.
        with writer.target.events.reader() as conn:
            plan_for_growth(conn)
        count = 0
        dumped_parts = dump.partitions_paged(base) if partitions is None else partitions
        # One page at a time: a table's are never held whole. A page's catalog call comes after the next page's
        # versions are published: its location checks then find the version directories the directory process
        # made meanwhile, instead of looking up names in the directory while it is still adding entries there
        # (each such lookup waited for the parent's lock through a ``mkdir``: a quarter of a 100,000-partition
        # load's samples on PostgreSQL). The catalog still takes the pages in their order, in one transaction.
        waiting: PreparedPartitions | None = None
        with contextlib.closing(paused_pages(dumped_parts, PARTITION_PAGE)) as pages:
            for page in pages:
                parts = [
                    (dumped.document["partition"], None if meta.metadata_only else dumped.files or [])
                    for dumped in page
                ]
                prepared = writer.prepare_partitions(table["table_name"], parts, location, fresh=created)
                if waiting is not None:
                    writer.write_partitions(waiting)
                waiting = prepared
                count += len(parts)
        if waiting is not None:
            writer.write_partitions(waiting)
        return count

    # -- incremental ----------------------------------------------------------------------------------------
    # The whole load runs with the collector paused, a young pass after each dump segment and each batch
    # (``gc_pause.paused_walk``): the documents validation keeps wait for their batches, and every full or
    # middle pass the collector made while on rescanned them (5,001 events on PostgreSQL: 26 passes, 0.18 s
    # of a 1.1 s load's CPU). A young pass sees each surviving object once; what it keeps is freed by
    # reference counts when its batch has taken it.
    @gc_paused()
    def _incremental(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        target_db: str,
        progress: Callable[[int], None] | None,
        lost_mode: str = lost_files.FAIL,
    ) -> LoadResult:
        db, last = self._check_incremental_target(target_db, meta)
        result = LoadResult(target_db, max(last, meta.last_event_id))
        lost = lost_files.LostFiles()
        with self.clock.stage("preflight"):  # the whole dump, before the first change
            checks = self._preflight(dump, meta)
            report = self.validate_incremental(dump, meta, target_db, db, last, checks)
            pending = report.pending_events
            if checks is not None:
                missing = checks.finish(allow_lost=lost_mode == lost_files.SKIP_OBJECTS)
                if missing:
                    lost = lost_files.LostFiles.attribute(missing, self._pending_messages(dump, pending))
        source_db_location = db.parameters.get(SOURCE_DB_LOCATION, "")
        if not meta.metadata_only:
            objects = self._incremental_objects(dump, meta, pending, last)
            tasks = next(self._copy_tasks(target_db, meta, source_db_location, objects), [])
            self._stage_ahead(dump, tasks, tolerate_lost=lost_mode == lost_files.SKIP_OBJECTS)
        writer = self._writer(target_db, meta, source_db_location, result.stats)
        writer.copied_ahead = self._ahead.copies
        writer.lost = lost
        if needs_move(self.target, target_db):  # a replica of the shared layout: its own directory first
            writer.version = last
            with self._batch(writer):
                move_to_own_root(writer)
        try:
            return self._apply_events(dump, meta, writer, result, last, pending, progress)
        finally:
            result.stale = lost.report(target_db)

    @staticmethod
    def _pending_messages(dump: DumpDir, pending: PendingEvents) -> Iterator[tuple[int, Message[Any]]]:
        for event_id in pending.ids:
            yield event_id, pending.message(dump, event_id)

    def _apply_events(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        writer: TargetWriter,
        result: LoadResult,
        last: int,
        pending: PendingEvents,
        progress: Callable[[int], None] | None,
    ) -> LoadResult:
        # Events are applied in batches, each one database transaction on the target that also advances
        # repl.last.id: a batch's metadata and the position that records it commit together. Tables the dump
        # bootstraps (REPLACE, renames into the policy) come last, in the transaction of the dump's last
        # events, with the final position: until then the position stays below the dump's last event, so an
        # interrupted load always gets to them, and never replays an event it applied.
        part = has_bootstrap_part(meta)
        cap = meta.last_event_id - 1 if part else meta.last_event_id
        ids = pending.ids
        chunks = parsed_chunks(dump, pending)
        holds = Holds.from_metadata(meta, dump.uri)
        with contextlib.closing(paused_walk(commit_batches(chunks, holds, cap))) as batches:
            for batch, published in batches:
                applied = self._apply_batch(
                    dump, meta, writer, result, batch, published, bootstrap_after=ids[-1] if part else None
                )
                if applied and progress is not None:
                    progress(applied)
        if meta.last_event_id > last and part:
            writer.version = meta.last_event_id
            with self._batch(writer):
                if writer.locked_last_id() < meta.last_event_id:
                    apply_bootstrap_part(dump, meta, writer, parse_policy(meta.policy), self._load_table)
                    writer.set_last_id(meta.last_event_id)
        elif meta.last_event_id > last:  # the dump's window ends after its last relevant event
            with self.target.events.transaction():
                if writer.locked_last_id() < meta.last_event_id:  # never move a replica backwards
                    writer.set_last_id(meta.last_event_id)
        return result

    def _apply_batch(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        writer: TargetWriter,
        result: LoadResult,
        batch: EventBatch,
        published: int,
        *,
        bootstrap_after: int | None,
    ) -> int:
        """Apply one batch in its own transaction, publishing ``published``; how many of its events were
        applied (those above the position another load may have reached meanwhile). ``bootstrap_after``: the
        event after which the dump's bootstrapped tables are loaded, if it has any."""
        with self._batch(writer):
            position = writer.locked_last_id()  # another load may have got further meanwhile
            batch = [(event, msg) for event, msg in batch if event["event_id"] > position]
            if not batch:
                return 0
            writer.in_place_tables = in_place_tables(msg for _, msg in batch)
            writer.written_at = written_at(batch)
            writer.expect_tables(
                msg.table.table_name for _, msg in batch if isinstance(msg, CreateTableMessage)
            )
            runs = PartitionRuns(writer, meta)
            creates = TableCreates(writer, meta)
            writes = TableWrites(writer)  # data loads' table writes (metadata-only loads skip INSERTs)
            for event, msg in batch:
                writer.version = event["event_id"]  # names the version directories it makes
                if (
                    not creates.absorb(msg)
                    and not runs.absorb(msg)
                    and (meta.metadata_only or not writes.absorb(msg))
                ):
                    creates.flush()
                    runs.flush_for(msg)
                    if database_event(msg):
                        writes.flush()
                    else:
                        writes.flush_for(msg)
                    apply_event(writer, event, meta, msg)
                result.events_applied += 1
            creates.flush()
            runs.flush()
            writes.flush()
            if batch[-1][0]["event_id"] == bootstrap_after:
                # The dump's bootstrapped tables commit with its last events: a position between them would
                # make a re-run replay events already applied (a txn's commit twice).
                writer.version = meta.last_event_id
                apply_bootstrap_part(dump, meta, writer, parse_policy(meta.policy), self._load_table)
                writer.set_last_id(meta.last_event_id)
            else:
                writer.set_last_id(published)
        return len(batch)


def parsed_chunks(dump: DumpDir, pending: PendingEvents) -> Iterator[EventBatch]:
    """The pending events with their typed messages, ``BATCH_EVENTS`` at a time, in order: the messages
    validation parsed, or parsed here for documents read again."""
    ids = pending.ids
    for start in range(0, len(ids), BATCH_EVENTS):
        yield [pending.take_parsed(dump, i) for i in ids[start : start + BATCH_EVENTS]]


def in_place_tables(messages: Iterable[Message[Any]]) -> frozenset[str]:
    """Tables whose data changes in a batch may be added in place (``VersionPublisher._publish_in_place``).

    Files added in place appear after the batch's commit, renamed one by one in the order the source wrote
    them (``written_at``), while objects given new versions switch at the commit: a table's readers must
    still see only states its source had. So a table qualifies when no event of the batch adds, drops or
    renames one of its partitions or the table (those show at the commit), and either its data changes in
    one object only (readers see it before the batch, then after), or several of its partitions change,
    every event of the batch on the table is a partition write adding one file (or none), and the batch has
    no database event (``database_event``, which would split the table's run in two): its files are then renamed in the
    source's order, across its partitions (A B A as well as A A B), provided every one of those partitions
    can be added in place (``TargetWriter.put_partitions`` checks them together). ``load_batches`` keeps a
    table's appends and its reshapes in separate batches, so the usual reshape (an hour rollover, a rolling
    window's drop) costs an extra commit, not new versions.
    """
    changed: dict[str, set[str | None]] = {}
    appends: dict[str, bool] = {}  # table -> every event on it is a one-file partition write
    reshaped: set[str] = set()  # tables whose partitions (or the table itself) come or go in the batch
    database_level = False
    for msg in messages:
        for obj in msg.objects():
            changed.setdefault(obj.snapshot.table_name, set()).add(obj.partition_name)
        if msg.table_name is None:
            database_level = database_level or database_event(msg)
            continue
        names = msg.table_names
        if _reshapes(msg):
            reshaped |= names
        append = _one_file_partition_write(msg)
        for name in names:
            appends[name] = appends.get(name, True) and append
    return frozenset(
        table
        for table, objects in changed.items()
        if table not in reshaped and (len(objects) == 1 or (not database_level and appends.get(table, False)))
    )


def database_event(msg: Message[Any]) -> bool:
    """An event without a table that every table's run must be applied before (a database's creation,
    change or drop). A transaction's events write ACID tables only (``PartitionRuns.flush_for``) and a
    function's touch no table: neither orders a plain table's writes."""
    return msg.table_name is None and spec_of(msg.kind).scope not in (Scope.TXN, Scope.FUNCTION)


def _reshapes(msg: Message[Any]) -> bool:
    """The event adds, drops or renames a partition, or drops or renames the table: it shows at the commit,
    so files renamed into the table after the commit (written before it, maybe) would show out of order."""
    spec = spec_of(msg.kind)
    return spec.structural or spec.drops or msg.renames


def written_at(events: Iterable[tuple[dict[str, Any], Message[Any]]]) -> dict[str, int]:
    """The event that wrote each file a one-file append of the batch adds (encoded URI -> event id)."""
    return {
        obj.change.added[0]: int(event["event_id"])
        for event, msg in events
        for obj in msg.objects()
        if adds_one_file(obj.change)
    }


def _one_file_partition_write(msg: Message[Any]) -> bool:
    """An ALTER_PARTITION or partition INSERT whose data change adds one file and removes none, or is none."""
    if not isinstance(msg, AlterPartitionMessage | InsertMessage) or not msg.partition_names():
        return False
    return all(adds_one_file(obj.change) or obj.change.is_empty for obj in msg.objects())


EventBatch = list[tuple[dict[str, Any], Message[Any]]]


def commit_batches(chunks: Iterable[EventBatch], holds: Holds, end: int) -> Iterator[tuple[EventBatch, int]]:
    """The transactions a load applies its events in, each with the position it publishes (``holds.py``).

    ``chunks``: the dump's events in order, ``BATCH_EVENTS`` at a time; ``end``: the highest position a
    commit may publish. ``load_batches`` cuts each chunk; a cut where the rule allows no commit (inside a
    hold) is undone, the batch merged with the next, and a merged batch is cut again only where a drop's name
    is reused (``split_before_reuse``), a cut ``compaction.compact`` keeps out of every hold.
    """
    group: EventBatch = []
    merged = False
    for batch in (batch for chunk in chunks for batch in load_batches(chunk)):
        if group:
            position = holds.position(group[-1][0]["event_id"], min(batch[0][0]["event_id"], end + 1))
            if position is None:  # no commit inside a hold: the next batch joins this one
                group, merged = group + batch, True
                continue
            yield from _cut_merged(group, merged, holds, position, end)
        group, merged = batch, False
    if group:
        last = min(group[-1][0]["event_id"], end)
        yield from _cut_merged(group, merged, holds, holds.position(last, end + 1) or last, end)


def _cut_merged(
    group: EventBatch, merged: bool, holds: Holds, position: int, end: int
) -> Iterator[tuple[EventBatch, int]]:
    """``group`` publishing ``position``; a merged one in the parts a reused name needs, each at its own.

    A reused name inside a hold (a rename-in's, or a dump that recorded none) is not cut: the drop's
    directories are retired only after the commit, and retirement removes only what no metadata names then
    (``leftovers``), so the re-created object's files stay; a cut there would show readers a state the
    source never had.
    """
    parts = split_before_reuse(group) if merged else [group]
    pending: EventBatch = []
    for part, following in itertools.pairwise(parts):
        pending += part
        published = holds.position(part[-1][0]["event_id"], min(following[0][0]["event_id"], end + 1))
        if published is not None:
            yield pending, published
            pending = []
    yield pending + parts[-1], position


def load_batches(events: EventBatch) -> Iterator[EventBatch]:
    """The transactions a run of events is applied in: cut where a drop's name is reused
    (``split_before_reuse``) and between a table's appends and a change to its shape or a database event
    (``split_appends_from_reshapes``)."""
    for reused in split_before_reuse(events):
        yield from split_appends_from_reshapes(reused)


def split_appends_from_reshapes(events: EventBatch) -> list[EventBatch]:
    """Cut a batch between a table's one-file appends and an event that adds, drops or renames one of its
    partitions or the table, or a database event, in either order.

    Files added in place appear after their batch's commit, a reshape at it; in one batch the appends'
    partitions would take new versions instead (``in_place_tables``), copying or linking every file they
    keep. Cut, each part commits on its own and its appends go in place: readers see the source's states in
    its order, at the cost of one more transaction. The usual cases are an hour rollover (appends to hour h,
    hour h+1 added, appends to both), once an hour per table, a rolling window dropping its oldest day, and
    a replica's own log read by the next replica in a chain (an ALTER_DATABASE, the position, per load).
    """
    out: list[EventBatch] = [[]]
    appended: set[str] = set()  # tables with a one-file append in the current part
    reshaped: set[str] = set()  # tables with a partition (or the table) added, dropped or renamed in it
    database_seen = False  # the current part holds a database event (it reshapes every table's order)
    for event, msg in events:
        names = msg.table_names
        database = database_event(msg)
        reshapes = database or _reshapes(msg)
        appends = not reshapes and any(adds_one_file(obj.change) for obj in msg.objects())
        if reshapes:
            clash = bool(appended) if database else bool(names & appended)
        else:
            clash = appends and (database_seen or bool(names & reshaped))
        if out[-1] and clash:
            out.append([])
            appended.clear()
            reshaped.clear()
            database_seen = False
        out[-1].append((event, msg))
        database_seen = database_seen or database
        if reshapes:
            reshaped |= names
        elif appends:
            appended |= names
    return [batch for batch in out if batch]


def split_before_reuse(events: EventBatch) -> list[EventBatch]:
    """Cut a batch where a table or partition dropped in it gets data at its name again.

    A drop removes the target's files only once its transaction commits; in a batch that later creates,
    renames into or adds the same table or partition, that removal would delete the new files (same
    directory). Each cut commits the drop first; readers still see only states the source had. Partitions
    count by name: dropping one partition and adding another (a rolling window) needs no cut.
    """
    out: list[EventBatch] = [[]]
    dropped_tables: set[str] = set()
    dropped_parts: set[tuple[str, str]] = set()
    for event, msg in events:
        spec = spec_of(msg.kind)
        table = msg.table.table_name if msg.table is not None else None
        reused = (spec.structural or isinstance(msg, AlterTableMessage)) and (
            table in dropped_tables or any((table, name) in dropped_parts for name in msg.partition_names())
        )
        if reused and out[-1]:
            out.append([])
            dropped_tables.clear()
            dropped_parts.clear()
        out[-1].append((event, msg))
        if spec.drops and spec.scope is Scope.TABLE and table:
            dropped_tables.add(table)
        elif spec.drops and spec.scope is Scope.PARTITION and table:
            dropped_parts.update((table, name) for name in msg.partition_names())
    return [batch for batch in out if batch]


class PartitionRuns:
    """Folds partition events into each partition's final state, per table, within one batch.

    A batch commits as one transaction, so readers of the target only ever see batch boundaries; applying a
    table's run of ADD/ALTER/DROP_PARTITION and partition INSERT events as one drop, one add and one alter
    call gives the same target as applying them one by one, with far fewer round trips and without copying
    file versions that a later event replaces. A partition's successive data changes are composed in memory
    into one (``replica_files.compose``) and published once. A table's run is flushed before any other event
    that touches that table (or the database) is applied, so event order per object is kept.
    """

    def __init__(self, writer: TargetWriter, meta: DumpMetadata) -> None:
        self.writer, self.meta = writer, meta
        self.tables: dict[str, TableSnapshot] = {}
        self.parts: dict[str, dict[str, PartState | None]] = {}

    def absorb(self, msg: Message[Any]) -> bool:
        """Take a partition event into its table's run; False for any other event (flush, then apply it)."""
        fold = _FOLDS.get(EventType(msg.kind))
        table = msg.table
        if fold is None or table is None or (isinstance(msg, InsertMessage) and msg.partition is None):
            return False
        self.tables[table.table_name] = table
        fold(self.parts.setdefault(table.table_name, {}), msg, self.meta)
        return True

    def flush_for(self, msg: Message[Any]) -> None:
        """Flush the runs an event depends on: its table's (both names for a rename), all for a database
        event, every transactional table's for a transaction's event (it writes ACID tables only), none for
        a function's."""
        if msg.table_name is None:
            if database_event(msg):
                self.flush()
            elif spec_of(msg.kind).scope is Scope.TXN:
                for name in [n for n, table in self.tables.items() if acid_replay.is_acid_snapshot(table)]:
                    self._flush_table(name)
            return
        for name in tables_touched(msg):
            self._flush_table(name)

    def flush(self) -> None:
        for name in list(self.tables):
            self._flush_table(name)

    def _flush_table(self, name: str) -> None:
        table, parts = self.tables.pop(name, None), self.parts.pop(name, {})
        if table is None:
            return
        dropped = [part_name for part_name, state in parts.items() if state is None]
        if dropped:
            self.writer.drop_partitions(name, [[v for _, v in parse_partition_name(n)] for n in dropped])
        kept = [(state.snapshot.to_json(), state.change) for state in parts.values() if state is not None]
        if kept:
            self.writer.put_partitions(name, kept, table.location)


class TableCreates:
    """New tables that take no data with them (a metadata-only load's, a partitioned table's), created
    together: one catalog call checks all their locations in one read, where each would cost its own.

    Only events ``PartitionRuns`` absorbs may come between them, and those are applied later still: any
    other event is applied after the pending tables are created, and so is every partition run (the load
    creates them before it flushes one). Each table therefore exists before anything else touches it, in
    the same transaction: readers of the target see the same batch.
    """

    def __init__(self, writer: TargetWriter, meta: DumpMetadata) -> None:
        self.writer, self.meta = writer, meta
        self.pending: list[Table] = []

    def absorb(self, msg: Message[Any]) -> bool:
        """Take a CREATE_TABLE of a table known not to exist and without data; False for any other event."""
        if not isinstance(msg, CreateTableMessage) or _table_change(msg, self.meta) is not None:
            return False
        table = self.writer.mapping.table(msg.table.to_json())
        if iceberg.is_iceberg(table) or not self.writer.claim_absent(table.table_name):
            return False  # an Iceberg table's metadata is rewritten for the replica: ``put_table``
        self.pending.append(table)
        return True

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        self.writer.create_tables(pending)


@dataclass
class PartState:
    """A partition's state at the end of a table's run: its snapshot and its data change since the batch
    began (composed; None: no data change)."""

    snapshot: PartitionSnapshot
    change: DataChange | None


def _fold_add(parts: dict[str, PartState | None], msg: AddPartitionMessage, meta: DumpMetadata) -> None:
    for name, snapshot, change in zip(msg.partition_names(), msg.partitions, msg.changes(), strict=True):
        parts[name] = PartState(snapshot, _data(change, meta))


def _fold_drop(parts: dict[str, PartState | None], msg: DropPartitionMessage, meta: DumpMetadata) -> None:
    for name in msg.partition_names():
        parts[name] = None


def _fold_alter(parts: dict[str, PartState | None], msg: AlterPartitionMessage, meta: DumpMetadata) -> None:
    """ALTER_PARTITION (new metadata, maybe data): compose onto the run."""
    _fold_write(parts, msg.partition_names()[0], msg.after, msg.data, meta)


def _fold_insert(parts: dict[str, PartState | None], msg: InsertMessage, meta: DumpMetadata) -> None:
    """A partition INSERT (data only: it changes data, not the partition's metadata)."""
    (name,) = msg.partition_names()
    previous = parts.get(name)
    snapshot = previous.snapshot if previous is not None else msg.partition
    if snapshot is not None:
        _fold_write(parts, name, snapshot, msg.data, meta)


def _fold_write(
    parts: dict[str, PartState | None],
    name: str,
    snapshot: PartitionSnapshot,
    data: DataChange | None,
    meta: DumpMetadata,
) -> None:
    previous = parts.get(name)
    parts[name] = PartState(snapshot, compose(previous.change if previous else None, _data(data, meta)))


Fold = Callable[[dict[str, PartState | None], Any, DumpMetadata], None]
"""A fold receives the message class of its event type (``SPECS``), as handlers do."""
_FOLDS: dict[EventType, Fold] = {
    EventType.ADD_PARTITION: _fold_add,
    EventType.DROP_PARTITION: _fold_drop,
    EventType.ALTER_PARTITION: _fold_alter,
    EventType.INSERT: _fold_insert,
}


# -- event handlers: one per event type (a table of behaviours, not a chain of ifs) ----------------------------
Handler = Callable[[TargetWriter, dict[str, Any], Any, DumpMetadata], None]
"""A handler receives the message class of the event type it is registered for (``SPECS``; checked by
``tests/unit/test_event_specs.py``), so it reads its typed body without a downcast."""


def objects_to_copy(msg: Message[Any]) -> list[tuple[str | None, Sequence[str]]]:
    """(source location, files) of each object whose data an event changes: the files a load copies."""
    if isinstance(msg, CommitTxnMessage):  # each write's files, below its table or partition
        return list(acid_replay.write_locations(msg))
    return [(obj.location, obj.change.added) for obj in msg.objects() if obj.change.added]


def _data(change: DataChange | None, meta: DumpMetadata) -> DataChange | None:
    return None if meta.metadata_only else change


def _table_change(msg: Message[Any], meta: DumpMetadata) -> DataChange | None:
    """The data change of a table-level event (None: metadata only, or a partitioned table)."""
    objects = msg.objects()
    return _data(objects[0].change, meta) if objects else None


def _create_table(w: TargetWriter, ev: dict[str, Any], msg: CreateTableMessage, meta: DumpMetadata) -> None:
    w.put_table(msg.table.to_json(), _table_change(msg, meta), msg.table.location)


def _alter_table(w: TargetWriter, ev: dict[str, Any], msg: AlterTableMessage, meta: DumpMetadata) -> None:
    after = msg.table.to_json()
    if msg.rename_target is not None:
        w.rename_table(msg.before.table_name, after)
    w.put_table(after, _table_change(msg, meta), msg.table.location)


def _drop_table(w: TargetWriter, ev: dict[str, Any], msg: DropTableMessage, meta: DumpMetadata) -> None:
    w.drop_table(msg.table.table_name)


def _add_partition(w: TargetWriter, ev: dict[str, Any], msg: AddPartitionMessage, meta: DumpMetadata) -> None:
    parts = [(p.to_json(), _data(c, meta)) for p, c in zip(msg.partitions, msg.changes(), strict=True)]
    w.put_partitions(msg.table.table_name, parts, msg.table.location)


def _alter_partition(
    w: TargetWriter, ev: dict[str, Any], msg: AlterPartitionMessage, meta: DumpMetadata
) -> None:
    w.put_partitions(msg.table.table_name, [(msg.after.to_json(), _data(msg.data, meta))], msg.table.location)


def _drop_partition(
    w: TargetWriter, ev: dict[str, Any], msg: DropPartitionMessage, meta: DumpMetadata
) -> None:
    w.drop_partitions(msg.table.table_name, [p.values for p in msg.partitions])


def _insert(w: TargetWriter, ev: dict[str, Any], msg: InsertMessage, meta: DumpMetadata) -> None:
    if meta.metadata_only:
        return
    if msg.partition is not None:
        w.put_partitions(msg.table.table_name, [(msg.partition.to_json(), msg.data)])
    else:
        w.put_table(msg.table.to_json(), msg.data, msg.table.location)


def _alter_database(
    w: TargetWriter, ev: dict[str, Any], msg: AlterDatabaseMessage, meta: DumpMetadata
) -> None:
    w.put_database(msg.database.to_json(), {})


def _drop_database(w: TargetWriter, ev: dict[str, Any], msg: DropDatabaseMessage, meta: DumpMetadata) -> None:
    with contextlib.suppress(NoSuchObjectError):
        w.catalog.drop_database(w.db, cascade=True)


def _create_function(
    w: TargetWriter, ev: dict[str, Any], msg: CreateFunctionMessage, meta: DumpMetadata
) -> None:
    w.put_function(msg.function.to_json())


def _drop_function(w: TargetWriter, ev: dict[str, Any], msg: DropFunctionMessage, meta: DumpMetadata) -> None:
    w.drop_function(msg.function.function_name)


def _update_column_stats(
    w: TargetWriter, ev: dict[str, Any], msg: UpdateColumnStatMessage, meta: DumpMetadata
) -> None:
    """Statistics follow their table: a table or partition dropped later in the window is not an error."""
    body = msg.body
    with contextlib.suppress(NoSuchObjectError):
        w.target.stats.update(
            w.db,
            msg.table_name or "",
            body.stats,
            partition_name=body.partition,
            engine=body.engine,
            last_analyzed=body.last_analyzed,
        )


def _delete_column_stats(
    w: TargetWriter, ev: dict[str, Any], msg: DeleteColumnStatMessage, meta: DumpMetadata
) -> None:
    body = msg.body
    for column in body.columns:
        with contextlib.suppress(NoSuchObjectError):  # already gone: replaying twice, or dropped since
            w.target.stats.delete(
                w.db, msg.table_name or "", column, partition_name=body.partition, engine=body.engine
            )


HANDLERS: dict[str, Handler] = {
    EventType.CREATE_TABLE: _create_table,
    EventType.ALTER_TABLE: _alter_table,
    EventType.DROP_TABLE: _drop_table,
    EventType.ADD_PARTITION: _add_partition,
    EventType.ALTER_PARTITION: _alter_partition,
    EventType.DROP_PARTITION: _drop_partition,
    EventType.INSERT: _insert,
    EventType.ALTER_DATABASE: _alter_database,
    EventType.DROP_DATABASE: _drop_database,
    EventType.CREATE_FUNCTION: _create_function,
    EventType.DROP_FUNCTION: _drop_function,
    EventType.UPDATE_TABLE_COLUMN_STAT: _update_column_stats,
    EventType.UPDATE_PARTITION_COLUMN_STAT: _update_column_stats,
    EventType.DELETE_TABLE_COLUMN_STAT: _delete_column_stats,
    EventType.DELETE_PARTITION_COLUMN_STAT: _delete_column_stats,
    **acid_replay.HANDLERS,  # txn events
}
# Counted, not applied: the replica database itself is made by the bootstrap.
NOT_YET_REPLAYED = kinds(replayed=False)


def parse_event(event: dict[str, Any]) -> Message[Any]:
    """The typed message of a dumped event (parsed once per event, for every step of its load)."""
    return event_message(event)


def apply_event(
    writer: TargetWriter, event: dict[str, Any], meta: DumpMetadata, msg: Message[Any] | None = None
) -> None:
    kind = event["event_type"]
    handler = HANDLERS.get(kind)
    if handler is None:
        if kind not in NOT_YET_REPLAYED:
            raise InvalidOperationError(
                f"event {event['event_id']} has unknown type '{kind}'; the dump is corrupt"
            )
        writer.stats.skipped_events[kind] = writer.stats.skipped_events.get(kind, 0) + 1
        return
    handler(writer, event, msg if msg is not None else parse_event(event), meta)
