"""REPL LOAD on the target, and REPL STATUS.

The target database's ``repl.last.id`` parameter is the source of truth for how far replication got. A load
applies only events above it, in order, through the target metastore's own API (so the target logs events
too and can itself be replicated), and advances it only after the work it records is done. Every step is
idempotent, so re-running a finished or half-finished load converges to the same target.

This module runs a load: its checks before the first change, the copies staged ahead, the bootstrap's tables and
pages, and the incremental load's transactions. How the events are cut into those transactions is
``event_batches``; what each event does to the replica is ``event_handlers``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import NoSuchDatabaseError
from hmsrepl.gc_pause import gc_paused, paused_pages, paused_walk
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import plan_for_growth
from hmsrepl.metastore.messages import CreateTableMessage, Message
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import privileged_call
from hmsrepl.replication import acid_replay, lost_files, signing
from hmsrepl.replication.bootstrap_tables import GatheredTable, create_new_tables, gather_table
from hmsrepl.replication.column_stats import load_column_stats
from hmsrepl.replication.commands import LoadCommand, parse_policy
from hmsrepl.replication.copy_plan import CopyPlanner, DumpedObject, bootstrap_objects, own_listing_objects
from hmsrepl.replication.copy_processes import copy_process_settings, start_early
from hmsrepl.replication.dir_processes import dir_process_threshold
from hmsrepl.replication.dir_processes import start_early as start_dir_process_early
from hmsrepl.replication.dump_snapshot_checks import TargetPlace
from hmsrepl.replication.dump_validation import DumpValidator, PendingEvents, ValidationReport
from hmsrepl.replication.event_batches import (
    EventBatch,
    commit_batches,
    database_event,
    in_place_tables,
    parsed_chunks,
    written_at,
)
from hmsrepl.replication.event_handlers import (
    HANDLERS,
    NOT_YET_REPLAYED,
    PartitionRuns,
    TableCreates,
    apply_event,
    objects_to_copy,
)
from hmsrepl.replication.failures import explain_load_failure, fault_point
from hmsrepl.replication.filecopy import CopyTask, available_source
from hmsrepl.replication.holds import Holds
from hmsrepl.replication.layout import (
    FILES,
    FUNCTIONS_DIR,
    METADATA,
    DumpDir,
    DumpedPartition,
    DumpError,
    DumpMetadata,
)
from hmsrepl.replication.leftovers import Retirement, Retirer, locked_cleanup, own_directories
from hmsrepl.replication.locations import EXTERNAL_ROOT, LocationMapper
from hmsrepl.replication.metrics import StageClock
from hmsrepl.replication.preflight import Preflight
from hmsrepl.replication.prestage import (
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
from hmsrepl.replication.replica_layout import (
    check_before_load,
    external_root_for,
    move_to_own_root,
    needs_move,
)
from hmsrepl.replication.replica_scope import ReplicaScope
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.staging_along import StagingAlong
from hmsrepl.replication.table_pool import TableWriters, each_in_parallel, load_parallelism
from hmsrepl.replication.table_writes import TableWrites
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
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        target_db: str,
        checks: Preflight | None = None,
        staging: StagingAlong | None = None,
    ) -> DumpValidator:
        """``staging``: given the checked pages of the big partitions, to copy while the walk goes on."""

        def place(source_db_location: str) -> TargetPlace:
            mapper = self._mapper(target_db, source_db_location)
            config = self.target.config
            return TargetPlace(config.warehouse, mapper.target_db_location, mapper, cmroot=config.cmroot)

        return DumpValidator(
            dump,
            meta,
            self.source_roots,
            place,
            HANDLERS.keys() | NOT_YET_REPLAYED,
            checks.check if checks else None,
            staging.hand_on if staging else None,
        )

    def _mapper(self, target_db: str, source_db_location: str) -> LocationMapper:
        """Where the source's locations go in the replica database ``target_db``."""
        return LocationMapper(
            source_warehouse=self.source_roots.warehouse,
            source_db_location=source_db_location,
            target_warehouse=self.target.config.warehouse,
            target_db_location=self.target.catalog.default_db_location(target_db),
            external_root=external_root_for(self.target, target_db),
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
        mapper = self._mapper(target_db, source_db_location)
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
            objects: Iterable[DumpedObject] = bootstrap_objects(dump, meta)
        else:
            db, last = self._check_incremental_target(target_db, meta)
            source_db_location = db.parameters.get(SOURCE_DB_LOCATION, "")
            pending = self.validate_incremental(dump, meta, target_db, db, last).pending_events
            objects = self._incremental_objects(dump, meta, pending, last)
        tasks = next(self._planner(target_db, source_db_location).pages(objects), [])
        if (
            lost_files.mode(command.settings) == lost_files.SKIP_OBJECTS
        ):  # the load leaves their objects stale
            cmroot = self.source_roots.cmroot
            files = self.source_roots.readable
            return [task for task in tasks if available_source(files, task.encoded, cmroot) is not None]
        return tasks

    @staticmethod
    def _incremental_objects(
        dump: DumpDir, meta: DumpMetadata, pending: PendingEvents, last: int
    ) -> list[DumpedObject]:
        """(source location, files) of every object the pending events and the dump's bootstrap part write."""
        objects: list[tuple[str | None, Sequence[str]]] = []
        for event_id in pending.ids:
            objects.extend(objects_to_copy(pending.message(dump, event_id)))
        if last < meta.last_event_id:  # tables bootstrapped inside the incremental dump
            objects.extend(bootstrap_part_objects(dump, meta))
        return [DumpedObject(location, files) for location, files in objects]

    def _planner(self, target_db: str, source_db_location: str, version: int | None = None) -> CopyPlanner:
        """The copy planner of a load into ``target_db`` (``version``: a bootstrap's event id, its big
        partitions then copied straight into the versions it publishes)."""
        mapper = self._mapper(target_db, source_db_location)
        return CopyPlanner(mapper, self.target.cm.files, self.source_roots, version)

    def _drop_unused_copies(self) -> None:
        """Remove the copies staged ahead that no committed change still has to publish: those no object
        took (``copied_ahead`` keeps the ones not taken yet; the tasks themselves are not kept, a partition
        of 1,000,000 files held a task per file for the whole load)."""
        if not self._ahead.copies and not self._ahead.made:
            return
        owed = self.target.catalog.intents.owed_copies()
        unused = list(self._ahead.copies.unused(self.target.cm.files, owed))
        discard_staged(self.target.cm.files, unused)
        for version in self._ahead.copies.untouched_placed():  # made by the staging, never published
            self.target.cm.files.delete_tree(version)
        remove_empty(self.target.cm.files, self._ahead.made)
        self._ahead = StagedAhead()

    def _stage_ahead(
        self, dump: DumpDir, tasks: TaskPages | list[CopyTask], *, tolerate_lost: bool = False
    ) -> None:
        """Copy and verify every file before the first change (``prestage``), unless a copier did already."""
        if self.copies_staged or not tasks:
            return
        with self.clock.stage("copy"):
            self._ahead = stage_ahead(tasks, dump.uri, tolerate_lost=tolerate_lost, pins=self.target.cm)

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
        checks = self._preflight(dump, meta)
        validator: list[DumpValidator] = []  # the planner's source database is the walk's to find

        def planner() -> CopyPlanner:
            source_db_location = validator[0].report.source_db_location
            return self._planner(target_db, source_db_location, version=meta.last_event_id)

        staging = None
        if checks is not None and not self.copies_staged:  # the load copies the dump's files itself
            staging = StagingAlong(
                planner,
                lambda: own_listing_objects(dump, meta),
                lambda: bootstrap_objects(dump, meta, own_listings=False),
                dump.uri,
                pins=self.target.cm,
            )
        try:
            with self.clock.stage("preflight"):  # the whole dump, before the first change
                validator.append(self._validator(dump, meta, target_db, checks, staging))
                report = validator[0].validate_bootstrap()
                traits = self.target.cm.files.traits(self.target.config.warehouse)
                if (
                    not meta.metadata_only and traits.cpu_bound and traits.has_directories
                ):  # a mkdir a version
                    start_dir_process_early(report.most_partitions)
                if checks is not None:
                    if traits.cpu_bound:
                        start_early(copy_process_settings(), report.files, report.objects)
                    checks.finish()
        except BaseException:
            if staging is not None:
                staging.stop()  # what it staged is removed before the refusal is raised
            raise
        if staging is not None and report.files:  # a dump naming no file has nothing to stage
            with self.clock.stage("copy"):
                self._ahead = staging.finish()
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
        with paused_pages(dumped_parts, PARTITION_PAGE) as pages:
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
            tasks = next(self._planner(target_db, source_db_location).pages(objects), [])
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
        with paused_walk(commit_batches(chunks, holds, cap)) as batches:
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
