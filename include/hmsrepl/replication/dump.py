"""REPL DUMP on the source: bootstrap (objects, then consolidation) and incremental (events) dumps.

A bootstrap dump first writes every object as it is when read, then replays the events that happened while
it was reading (seed 003's "consolidate at source"): events are applied in order to the dumped objects, so
the finished dump is the database as of one event id (the dump's last event id), never a mix of states.
Bootstrap dumps hold full listings: an event's data change (a format-1 listing or a format-2 delta) is
applied to the listing dumped for its object (``Consolidation``, one behaviour per event type in
``CONSOLIDATE``).
An incremental dump writes each relevant event's message as the log stored it (its own snapshot, never the
current state) and beside it the files that event adds (``Message.files``).
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import NoSuchDatabaseError, NoSuchTableError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.gc_pause import gc_paused, paused_walk
from hmsrepl.metastore.bulk_reads import NameRange, partition_ranges, range_pages, table_pages
from hmsrepl.metastore.event_specs import TXN_KINDS, Scope, kinds
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    AlterDatabaseMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CreateFunctionMessage,
    CreateTableMessage,
    DataChange,
    DropFunctionMessage,
    relative_path,
)
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.payloads import referenced_bytes
from hmsrepl.metastore.service import Metastore
from hmsrepl.metastore.transactions import ReplicationSnapshot
from hmsrepl.replication import acid_replay, dump_processes
from hmsrepl.replication.column_stats import dump_column_stats
from hmsrepl.replication.commands import CommandError, DumpCommand, check_dump_command
from hmsrepl.replication.compaction import COMPACT_SETTING, summarize
from hmsrepl.replication.crossing import crossing_relevant, enters, leaves, may_enter
from hmsrepl.replication.dump_events import DumpEvent, ParsedEvents
from hmsrepl.replication.dump_tally import DumpTally
from hmsrepl.replication.holds import Holds
from hmsrepl.replication.layout import (
    TABLE,
    DumpDir,
    DumpError,
    DumpLayout,
    DumpListing,
    DumpMetadata,
    SegmentWriter,
)
from hmsrepl.replication.metrics import StageClock
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.replace import WindowPlanner, bootstrap_in_window
from hmsrepl.replication.source import ReplicationSource
from hmsrepl.storage.base import join_uri

log = logging.getLogger(__name__)

PAGE = 10_000
WRITE_CHUNK = 1_000  # events a dump encodes with the collector paused, at most
WRITERS = 8
METADATA_ONLY = "hive.repl.dump.metadata.only"
INCLUDE_EXTERNAL = "hive.repl.include.external.tables"


@dataclass(frozen=True)
class DumpResult:
    dump_dir: str
    last_event_id: int
    events: int = 0
    tables: int = 0
    partitions: int = 0
    files: int = 0
    bytes: int = 0  # of the data files the dump references (sizes from their checksum tokens)


@dataclass
class TableEntry:
    """One table of a bootstrap dump while it is being consolidated."""

    table: dict[str, Any]
    files: DumpListing | None = None
    partitions: dict[str, tuple[dict[str, Any], DumpListing | None]] = field(default_factory=dict)

    @property
    def key_names(self) -> list[str]:
        return [k["name"] for k in self.table.get("partition_keys", [])]

    def partition_name(self, snapshot: dict[str, Any]) -> str:
        return make_partition_name(self.key_names, snapshot["values"])


def relevant(event: DumpEvent[Any], policy: ReplicationPolicy) -> bool:
    """Does the event belong to the policy's database and (for table events) an included table?

    OPEN/COMMIT/ABORT_TXN belong to no database and go to every dump, as Hive dumps them: when a txn
    opens nobody knows which databases it will write, and a replayed open must be closed again. A rename
    belongs to the policy when either name does (it may move a table into or out of it); a rename across
    databases is logged under the database the table leaves, and belongs by its name in the policy's
    database (``crossing``).
    """
    row = event.event
    if row.db_name is None and event.kind in TXN_KINDS:
        return True
    moved = crossing_relevant(event.message, row.db_name or "", policy)
    if moved is not None:
        return moved
    if (row.db_name or "") != policy.db_name:
        return False
    if row.table_name is None:
        return True
    if policy.functions_only:
        return False
    names = (row.table_name, event.message.rename_target)
    return any(policy.includes_table(name) for name in names if name)


class DumpEngine:
    #: A big bootstrap dump may read its tables in worker processes (``dump_processes``); an engine that
    #: reads them otherwise (on Spark) says no.
    reads_in_processes = True

    def __init__(
        self,
        source: ReplicationSource,  # an hmsrepl metastore or a stock one (hive_source.StockHiveSource)
        dump_root: str,
        on_table_dumped: Callable[[str], None] | None = None,
        clock: StageClock | None = None,
    ) -> None:
        """``on_table_dumped`` is called after each table's bootstrap read (progress reporting, tests);
        ``clock`` collects seconds per stage (replication metrics)."""
        self.source = source
        self.dump_root = dump_root.rstrip("/")
        self.on_table_dumped = on_table_dumped
        self.clock = clock or StageClock()
        #: What each dump in progress holds, by its directory (``dump_tally``).
        self._tallies: dict[str, DumpTally] = {}

    def dump(self, command: DumpCommand) -> DumpResult:
        check_dump_command(command)  # Python callers skip the parser's checks (REPLACE across databases...)
        try:
            self.source.catalog.get_database(command.policy.db_name)
        except NoSuchDatabaseError:
            if command.is_bootstrap:
                raise
        name = (
            f"{command.policy.db_name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
        )
        dump = DumpDir(join_uri(self.dump_root, name))
        try:
            if command.is_bootstrap:
                return self._bootstrap(command, dump)
            return self._incremental(command, dump)
        finally:  # the counts of this dump's entries (and of its bootstrapped part) are not needed again
            for uri in [uri for uri in self._tallies if uri == dump.uri or uri.startswith(f"{dump.uri}/")]:
                del self._tallies[uri]

    def _metadata(
        self, command: DumpCommand, kind: str, start: int, end: int, last: int, count: int
    ) -> DumpMetadata:
        return DumpMetadata(
            kind=kind,
            db_name=command.policy.db_name,
            policy=command.policy.to_text(),
            from_event_id=start,
            to_event_id=end,
            last_event_id=last,
            event_count=count,
            source_warehouse=self.source.config.warehouse,
            source_cmroot=self.source.config.cmroot,
            replaced_policy=command.replaced_policy.to_text() if command.replaced_policy else None,
            settings=dict(command.settings),
        )

    # -- bootstrap ---------------------------------------------------------------------------------------
    def _bootstrap(self, command: DumpCommand, dump: DumpDir) -> DumpResult:
        policy, catalog = command.policy, self.source.catalog
        with_data = command.settings.get(METADATA_ONLY, "false").lower() != "true"
        external = command.settings.get(INCLUDE_EXTERNAL, "true").lower() == "true"
        settings = dump_processes.dump_process_settings()  # a bad setting: refused before anything is written
        start = self.source.get_current_notification_event_id()
        database = catalog.get_database(policy.db_name)
        acid_replay.wait_for_open_txns(
            self.source, policy.db_name, acid_replay.open_txn_timeout_seconds(command.settings)
        )
        dump.write_json(DumpLayout.database(policy.db_name), {"database": database.model_dump(mode="json")})
        for function in catalog.get_functions(policy.db_name):
            snapshot = catalog.get_function(policy.db_name, function).model_dump(mode="json")
            dump.write_json(DumpLayout.function(policy.db_name, function), {"function": snapshot})
        tables = (
            []
            if policy.functions_only
            else [t for t in catalog.get_tables(policy.db_name) if policy.includes_table(t)]
        )
        with self.clock.stage("read"):
            self._read_tables(dump, policy.db_name, tables, (with_data, external), settings)
        # The dump ends at the txn snapshot's event: ACID tables are listed for exactly that snapshot.
        snapshot = self.source.txns.replication_snapshot(policy.db_name)
        end = snapshot.event_id
        with self.clock.stage("consolidate"):
            self._consolidate(dump, policy, start, end, with_data, external)
            self._finish_acid_tables(dump, policy.db_name, snapshot, with_data)
            dump_column_stats(dump, self.source, policy.db_name)
            counts = self._tallies.get(dump.uri, DumpTally()).totals()
        with self.clock.stage("acknowledge"):
            dump.write_metadata(self._metadata(command, "bootstrap", start, end, end, 0))
            dump.acknowledge()
        return DumpResult(
            dump.uri, end, tables=counts[0], partitions=counts[1], files=counts[2], bytes=counts[3]
        )

    def _read_tables(
        self,
        dump: DumpDir,
        db_name: str,
        tables: list[str],
        options: tuple[bool, bool],
        settings: dump_processes.DumpProcessSettings,
    ) -> None:
        """Every table into the dump, ``options`` (with data, with external tables): in worker processes for
        a big dump of this metastore's own database (``dump_processes``: slices of many tables, ranges of
        one big table's partitions), else here."""
        source = self.source
        if not (self.reads_in_processes and isinstance(source, Metastore)):
            self.dump_tables(dump, db_name, tables, *options)
            return
        big = dump_processes.big_tables(source, db_name, tables, settings)
        rest = [name for name in tables if name.lower() not in big]
        if dump_processes.worth_processes(source, db_name, rest, settings):
            tally = self._tallies.setdefault(dump.uri, DumpTally())
            for names, counted in dump_processes.dump_in_processes(
                source.config, dump.uri, db_name, rest, options, settings.processes
            ):
                tally.merge(counted)
                if self.on_table_dumped is not None:
                    for name in names:
                        self.on_table_dumped(name)
        else:
            self.dump_tables(dump, db_name, rest, *options)
        with_data, external = options
        for name, count in big.items():  # one at a time: a group's scan would skip through their partitions
            ranged = functools.partial(
                self._dump_in_ranges, source, dump, count, with_data, settings.processes
            )
            self._each_dumped(db_name, [name], external, ranged)

    def _dump_in_ranges(
        self,
        source: Metastore,
        dump: DumpDir,
        count: int,
        with_data: bool,
        processes: int,
        table: Table,
        _pages: Iterable[list[Partition]] | None,
    ) -> None:
        """One big table of ``count`` partitions into the dump: its entry from here, then its partitions in
        ranges of names read by this process and the workers at once (``dump_processes.dump_ranges_in_processes``),
        not from ``_pages``, its group's scan."""
        assert table.id is not None  # read from this metastore's own rows
        self._write_entry(dump, table.db_name, self._read_entry(table, with_data, []))
        size = dump_processes.range_size(count)
        ranges = dump_processes.within_most(partition_ranges(source.events, table.id, size))
        tally = self._tallies[dump.uri]
        for counted in dump_processes.dump_ranges_in_processes(
            source.config,
            dump.uri,
            table,
            ranges,
            with_data,
            processes,
            lambda number, names: self.dump_range(
                dump, table, names, dump_processes.first_page(number), with_data
            ),
        ):
            tally.merge(counted)

    def dump_range(
        self, dump: DumpDir, table: Table, names: NameRange, first_page: int, with_data: bool
    ) -> None:
        """Write the partitions of ``table`` in the range ``names`` as pages numbered from ``first_page``, at
        most ``dump_processes.RANGE_PAGES`` of them (the table's entry is written already)."""
        assert isinstance(self.source, Metastore) and table.id is not None
        number = first_page
        with paused_walk(range_pages(self.source.events, table.id, names)) as pages:
            for page in pages:
                if number >= first_page + dump_processes.RANGE_PAGES:
                    raise DumpError(
                        f"table '{table.table_name}' has more than {dump_processes.RANGE_PAGES} pages of "
                        f"partitions after '{names[0]}'; run REPL DUMP with HMSREPL_DUMP_PROCESSES=1"
                    )
                number = self._write_entry(
                    dump, table.db_name, self._read_entry(table, with_data, page), first_page=number
                )

    def dump_tables(
        self, dump: DumpDir, db_name: str, tables: list[str], with_data: bool, external: bool
    ) -> None:
        """Read ``tables`` into the dump, in this process."""
        self._each_dumped(
            db_name,
            tables,
            external,
            lambda table, pages: self._dump_table(dump, db_name, table, pages, with_data),
        )

    def _each_dumped(
        self,
        db_name: str,
        tables: list[str],
        external: bool,
        write: Callable[[Table, Iterable[list[Partition]] | None], None],
    ) -> None:
        """``write`` each of ``tables`` a bootstrap dump takes (managed ones; external ones too with
        ``external``), with its partitions in pages; a table dropped meanwhile is skipped (the consolidation
        settles it). Each is reported done to ``on_table_dumped``."""
        for table_name, table, pages in self._table_pages(db_name, tables):
            if table is None:
                log.info("table %s.%s was dropped during the bootstrap dump", db_name, table_name)
            elif external or table.is_managed:
                write(table, pages)
            if self.on_table_dumped is not None:
                self.on_table_dumped(table_name)

    def take_tally(self, dump_uri: str) -> DumpTally:
        """What this engine counted of the dump at ``dump_uri`` (a worker's share), forgotten here."""
        return self._tallies.pop(dump_uri, DumpTally())

    def _table_pages(
        self, db_name: str, tables: list[str]
    ) -> Iterator[tuple[str, Table | None, Iterable[list[Partition]] | None]]:
        """Each table with its partitions in pages (``table`` None: dropped meanwhile). From an hmsrepl
        metastore's database in a few statements per group of tables, not three per table, a page of
        partitions at a time; from a stock Hive Metastore (read over Thrift) one table at a time, its
        partitions (pages None) read with its entry."""
        if isinstance(self.source, Metastore):
            yield from table_pages(self.source.events, db_name, tables)
            return
        for table_name in tables:
            try:
                yield table_name, self.source.catalog.get_table(db_name, table_name), None
            except NoSuchTableError:
                yield table_name, None, None

    def _dump_table(
        self, dump: DumpDir, db: str, table: Table, pages: Iterable[list[Partition]] | None, with_data: bool
    ) -> None:
        """Write one table's entry, a page of partitions at a time: a table of 100,000 partitions is never
        held whole (``pages`` None: the entry reads its partitions itself)."""
        if pages is None or not table.partition_keys:
            self._write_entry(dump, db, self._read_entry(table, with_data, None if pages is None else []))
            return
        number = 0
        with paused_walk(pages) as paused:
            for page in paused:
                entry = self._read_entry(table, with_data, page)
                number = self._write_entry(dump, db, entry, first_page=number)
                number = max(number, 1)  # the table is written: later pages only add partitions
        if number == 0:  # no partitions at all
            self._write_entry(dump, db, self._read_entry(table, with_data, []))

    def _read_entry(self, table: Table, with_data: bool, parts: list[Partition] | None = None) -> TableEntry:
        """The table's dump entry; ``parts``: its partitions (or a page of them) when the caller read them."""
        entry = TableEntry(table.model_dump(mode="json"))
        # ACID tables are listed once the dump's txn snapshot is known (_finish_acid_tables): a listing
        # now would include files of open and aborted txns.
        with_data = with_data and not table.is_transactional
        catalog = self.source.catalog
        own = isinstance(self.source, Metastore)  # its long recorded listings are walked as they are written
        if not table.partition_keys:
            if with_data:
                entry.files = self.source.catalog.dump_listing(table) if own else catalog.describe_data(table)
            return entry
        if parts is None:
            parts = catalog.get_partitions(table.db_name, table.table_name)
        listed: list[DumpListing | None] = [None] * len(parts)
        if with_data and own:
            listed = list(self.source.catalog.dump_partition_listings(table, parts))
        elif with_data:
            listed = [catalog.describe_data(table, part) for part in parts]
        for part, files in zip(parts, listed, strict=True):
            snapshot = part.model_dump(mode="json")
            entry.partitions[entry.partition_name(snapshot)] = (snapshot, files)
        return entry

    def _finish_acid_tables(
        self, dump: DumpDir, db: str, snapshot: ReplicationSnapshot, with_data: bool
    ) -> None:
        """List each dumped ACID table's files as of the snapshot and record its write-id state.

        Files of directories valid in the snapshot never change afterwards (later writes go to new
        directories with higher write ids), so listing after the snapshot still gives its exact content.
        """
        acid_tables: set[str] = set()
        for relative, found in dump.entries(db):
            if found.kind != TABLE:
                continue
            # The table's own _metadata says whether it is ACID: only those are read back whole, to be listed.
            table = dump.read_json(relative)["table"]
            if not acid_replay.is_acid_snapshot(table):
                continue
            name = table["table_name"]
            acid_tables.add(name)
            entry = self._load_entry(dump, db, found.table or name) if with_data else None
            if entry is not None:
                write_ids = snapshot.tables.get(name, (ValidWriteIdList(f"{db}.{name}", 0), {}))[0]

                def files(location: str | None, ids: ValidWriteIdList = write_ids) -> list[str]:
                    return acid_replay.dump_acid_files(self.source, location, ids, snapshot.valid_txns)

                if entry.key_names:
                    for part_name, (part, _) in list(entry.partitions.items()):
                        entry.partitions[part_name] = (part, files(part["sd"].get("location")))
                else:
                    entry.files = files(entry.table["sd"].get("location"))
                self._write_entry(dump, db, entry)
        dump.write_json(DumpLayout.acid_state(db), acid_replay.acid_state_document(snapshot, acid_tables))

    def _write_entry(self, dump: DumpDir, db: str, entry: TableEntry, *, first_page: int = 0) -> int:
        """The entry's table (replacing what the dump held of it) and partitions, in pages numbered from
        ``first_page`` (above 0: a further page of a table written already); returns the next number."""
        name = entry.table["table_name"]
        tally = self._tallies.setdefault(dump.uri, DumpTally())
        if first_page == 0:
            dump.remove_tree(DumpLayout.table_dir(db, name))
            dump.write_object(DumpLayout.table(db, name), {"table": entry.table}, entry.files)
            tally.table(name, entry.files)
        parts = ((part, snapshot, files) for part, (snapshot, files) in entry.partitions.items())
        return dump.write_partitions(db, name, first_page, tally.partitions(name, parts))

    def _removed_entry(self, dump: DumpDir, db: str, name: str) -> None:
        dump.remove_tree(DumpLayout.table_dir(db, name))
        self._tallies.setdefault(dump.uri, DumpTally()).removed(name)

    def _load_entry(self, dump: DumpDir, db: str, table: str) -> TableEntry | None:
        metadata = DumpLayout.table(db, table)
        if not dump.exists(metadata):
            return None
        entry = TableEntry(dump.read_json(metadata)["table"], dump.read_listing(metadata))
        for dumped in dump.partitions(DumpLayout.table_dir(db, table)):
            snapshot = dumped.document["partition"]
            entry.partitions[entry.partition_name(snapshot)] = (snapshot, dumped.files)
        return entry

    def _consolidate(
        self, dump: DumpDir, policy: ReplicationPolicy, start: int, end: int, with_data: bool, external: bool
    ) -> None:
        """Replay events (start, end] onto the dumped objects, in order (seed 003, approach 2)."""
        if end <= start:
            return
        run = Consolidation(self, dump, policy, with_data, external)
        for event in self._events(policy, start, end):
            CONSOLIDATE[event.kind](run, event)
        run.finish()

    def _events(
        self,
        policy: ReplicationPolicy,
        after: int,
        upto: int,
        *,
        with_markers: bool = False,
        whole_pages: bool = True,
        parse: Callable[[NotificationEvent], DumpEvent[Any]] | None = None,
    ) -> Iterator[DumpEvent[Any]]:
        """The policy's events in (after, upto], as dumps write them: the database's events merged with
        the database-less txn events (two indexed reads per page, never the whole log), and the other
        databases' ALTER_TABLE events that rename a table into the policy's database (``crossing``).

        ``with_markers``: commits get their empty overwrites' markers, a metastore lookup and a listing each
        (``acid_replay.prepare_for_dump``); only the pass that writes events needs them, not planning or
        consolidation. ``whole_pages``: each page is parsed before its first event is yielded; a caller that
        may stop early (a LIMIT) passes False, so no event past its stop is parsed or prepared. ``parse``:
        how a row becomes an event (``ParsedEvents`` hands the planning pass's to the writing pass)."""
        parse = parse or DumpEvent.of
        last = after
        log_ = self.source.events
        while last < upto:
            own = log_.next_events(last, PAGE, db_name=policy.db_name, to_event_id=upto)
            txn = log_.next_events(last, PAGE, event_types=acid_replay.TXN_EVENTS, to_event_id=upto)
            moves = log_.next_renames_into(policy.db_name, last, PAGE, to_event_id=upto)
            bound = upto
            for page in (own, txn, moves):
                if len(page) == PAGE:
                    bound = min(bound, page[-1].event_id)
            entering = [e for e in moves if may_enter(e, policy.db_name)]
            merged = sorted(
                (e for e in (*own, *txn, *entering) if e.event_id <= bound), key=lambda e: e.event_id
            )
            page: Iterable[DumpEvent[Any]] = (
                prepared
                for prepared in (
                    acid_replay.prepare_for_dump(event, policy, self.source if with_markers else None)
                    for event in map(parse, merged)  # parsed once: every later step reads it
                    if relevant(event, policy)
                )
                if prepared is not None
            )
            if whole_pages:
                # Parsed with the collector paused: the messages hold no cycles, and full collections would
                # rescan the page's rows and the window's summaries every few hundred events (``gc_pause``).
                with gc_paused():
                    page = list(page)
            yield from page
            if not own and not txn and not moves:
                return
            last = bound

    @staticmethod
    def _count(dump: DumpDir, db: str) -> tuple[int, int, int, int]:
        tables = partitions = files = size = 0
        for relative, found in dump.entries(db):
            if found.kind != TABLE or found.table is None:
                continue
            tables += 1
            listed = dump.read_listing(relative) or []
            files, size = files + len(listed), size + referenced_bytes(listed)
            for dumped in dump.partitions(DumpLayout.table_dir(db, found.table)):
                partitions += 1
                files, size = files + len(dumped.files or []), size + referenced_bytes(dumped.files or [])
        return tables, partitions, files, size

    # -- incremental -----------------------------------------------------------------------------------------
    # The whole dump runs with the collector paused, a young pass after each chunk (``gc_pause.paused_walk``):
    # the window's summaries and the events parsed for the writing pass live through both passes, and every
    # middle or full pass the collector made while on rescanned them (a gen-2 pass alone took 0.21 s of a
    # 0.9 s dump of 5,001 events).
    @gc_paused()
    def _incremental(self, command: DumpCommand, dump: DumpDir) -> DumpResult:
        """Events of the window, planned before anything is written (replace.py, then compaction.py).

        A first pass reads the window into small summaries: which events REPLACE or a rename across the
        policy turn into a bootstrap of the table (written under ``_bootstrap``) or a drop, and which later
        events nullify (skipped unless ``'hmsrepl.repl.compact.events'='false'``). A second pass writes the
        rest. LIMIT counts the policy's events of the window, written or not; ``last`` is where it ends.
        """
        policy = command.policy
        assert command.from_event_id is not None
        current = self.source.get_current_notification_event_id()
        check_window_start(command, current)
        upto = min(command.to_event_id, current) if command.to_event_id is not None else current
        with_data = command.settings.get(METADATA_ONLY, "false").lower() != "true"
        external = command.settings.get(INCLUDE_EXTERNAL, "true").lower() == "true"
        compacting = command.settings.get(COMPACT_SETTING, "true").lower() != "false"
        planner = WindowPlanner(policy, command.replaced_policy)
        last = upto
        with self.clock.stage("plan"):
            limit = command.limit
            parsed = ParsedEvents(PAGE)  # for the writing pass
            events = self._events(
                policy,
                command.from_event_id,
                upto,
                whole_pages=limit is None,
                parse=functools.partial(parsed.parse, keep=True),
            )
            # In chunks; with a LIMIT a chunk ends at it, so no event past it is read from the generator.
            planned_chunks = chunks(
                events, lambda: WRITE_CHUNK if limit is None else limit - len(planner.summaries)
            )
            with paused_walk(planned_chunks) as planned:
                for chunk in planned:
                    for event in chunk:
                        planner.feed(summarize(event))
                    if limit is not None and len(planner.summaries) >= limit:
                        last = chunk[-1].event_id
                        break
            last = bootstrap_in_window(self, dump, planner, last, with_data=with_data, external=external)
            plan = planner.plan(compacting=compacting, with_data=with_data, last=last)
        count = files = size = 0
        # Segments are written on threads while the next ones are gathered (an object store's latency
        # overlaps); order does not matter because nothing reads the dump before its acknowledgement.
        with self.clock.stage("write"), ThreadPoolExecutor(max_workers=WRITERS) as pool:
            futures: list[Future[None]] = []
            segments = SegmentWriter(
                lambda first, lines: futures.append(pool.submit(dump.write_segment, first, lines))
            )
            events = self._events(
                policy,
                command.from_event_id,
                last,
                with_markers=True,
                parse=functools.partial(parsed.parse, keep=False),
            )
            with paused_walk(chunks(events, lambda: WRITE_CHUNK)) as written_chunks:
                for chunk in written_chunks:
                    for event in chunk:
                        written = plan.rewrite(event)
                        if written is not None:
                            listed = written.message.files() if with_data else []
                            segments.add(written.event_id, event_document(written), listed)
                            count, files = count + 1, files + len(listed)
                            size += referenced_bytes(listed)
            segments.flush()
            for future in futures:
                future.result()
        with self.clock.stage("acknowledge"):
            meta = self._metadata(command, "incremental", command.from_event_id, max(upto, last), last, count)
            meta.skipped_events = plan.skipped_events
            meta.holds = Holds.of(plan.holds).as_metadata()
            meta.bootstrapped_tables = planner.bootstrapped()
            dump.write_metadata(meta)
            dump.acknowledge()
        tables = partitions = 0
        if meta.bootstrapped_tables:  # what the bootstrapped tables add to the dump
            tables, partitions, more_files, more_bytes = self._count(dump.bootstrap_part(), policy.db_name)
            files, size = files + more_files, size + more_bytes
        return DumpResult(
            dump.uri, last, events=count, tables=tables, partitions=partitions, files=files, bytes=size
        )


def chunks(events: Iterator[DumpEvent[Any]], size: Callable[[], int]) -> Iterator[list[DumpEvent[Any]]]:
    """``events`` in lists of ``size()`` (asked before each list, at most ``WRITE_CHUNK``), the last one
    shorter; no event is read past a list's end before the next is asked for."""
    while chunk := list(itertools.islice(events, min(size(), WRITE_CHUNK))):
        yield chunk


def check_window_start(command: DumpCommand, current: int) -> None:
    """Refuse an incremental dump starting past the source's newest event.

    Such a FROM cannot come from this source's log (a typo, or a replica's ``repl.last.id`` taken from
    another source or from before the source was rebuilt): dumping nothing and printing the log's end
    would hide that and move the caller's position backwards.
    """
    start = command.from_event_id
    if start is not None and start > current:
        raise CommandError(
            f"REPL DUMP {command.policy.db_name} FROM {start}: the source's notification log ends at event "
            f"{current}; dump FROM an id at most {current} (the replica's repl.last.id), or bootstrap the replica"
        )


def event_document(event: DumpEvent[Any]) -> dict[str, object]:
    """What a dump keeps of one event: its row and its message as the log stored it."""
    row = event.event
    return {
        "event_id": row.event_id,
        "event_time": row.event_time,
        "event_type": row.event_type,
        "db": row.db_name,
        "table": row.table_name,
        "message": event.message.document(),
    }


# -- consolidation: each event type's effect on the dumped objects ---------------------------------------------
Listing = list[str] | None


@dataclass
class Consolidation:
    """One replay of a window of events onto the objects of a bootstrap layout (``DumpEngine._consolidate``).

    Tables are read back from the dump when an event first touches them and written once at the end; a
    table that ends dropped (or outside the policy) is removed. Bootstrap dumps hold full listings, so a
    data change of either message format applies to the listing held: a format-1 listing replaces it, a
    format-2 delta adds and removes files. Applying every event of the window in order gives the listing as
    of the window's end whatever point of the window the object was read at.
    """

    engine: DumpEngine
    dump: DumpDir
    policy: ReplicationPolicy
    with_data: bool
    external: bool
    touched: dict[str, TableEntry | None] = field(default_factory=dict)

    @property
    def db(self) -> str:
        return self.policy.db_name

    def entry(self, name: str) -> TableEntry | None:
        if name not in self.touched:
            self.touched[name] = self.engine._load_entry(self.dump, self.db, name)
        return self.touched[name]

    def wanted(self, table: dict[str, Any]) -> bool:
        return self.policy.includes_table(table["table_name"]) and (
            self.external or Table.model_validate(table).is_managed
        )

    def listing(self, change: DataChange | None, files: Listing) -> Listing:
        """The listing after ``change`` (None: no data change, ``files`` stay); None in metadata-only dumps."""
        if not self.with_data:
            return None
        if change is None:
            return files
        # A complete change (every format-1 listing) replaces the listing: no need to index the one held.
        held = {} if change.complete else {relative_path(encoded): encoded for encoded in files or []}
        return list(change.apply(held).values())

    def finish(self) -> None:
        for name, final in self.touched.items():
            if final is None:
                self.engine._removed_entry(self.dump, self.db, name)
            else:
                self.engine._write_entry(self.dump, self.db, final)


Consolidate = Callable[[Consolidation, Any], None]
"""An entry receives ``DumpEvent[M]`` for the message class ``M`` of its event type (``SPECS``)."""


def _ignored(run: Consolidation, event: DumpEvent[Any]) -> None:
    """Changes nothing a bootstrap dump holds (txns: ACID tables are listed for the txn snapshot; stats
    are read at the end; the database was read as it is, and a drop during the dump leaves it to the next)."""


def _alter_database(run: Consolidation, event: DumpEvent[AlterDatabaseMessage]) -> None:
    run.dump.write_json(DumpLayout.database(run.db), {"database": event.message.database.to_json()})


def _create_function(run: Consolidation, event: DumpEvent[CreateFunctionMessage]) -> None:
    function = event.message.function
    run.dump.write_json(DumpLayout.function(run.db, function.function_name), {"function": function.to_json()})


def _drop_function(run: Consolidation, event: DumpEvent[DropFunctionMessage]) -> None:
    run.dump.remove_tree(DumpLayout.function_dir(run.db, event.message.function.function_name))


def _create_table(run: Consolidation, event: DumpEvent[CreateTableMessage]) -> None:
    name, message = event.event.table_name or "", event.message
    table = message.table.to_json()
    objects = message.objects()
    files = run.listing(objects[0].change, None) if objects else None
    if run.with_data and not message.table.partition_keys and files is None:
        files = []  # a format-2 create without data: the table starts empty
    run.touched[name] = TableEntry(table, files) if run.wanted(table) else None


def _drop_table(run: Consolidation, event: DumpEvent[Any]) -> None:
    name = event.event.table_name or ""
    run.entry(name)
    run.touched[name] = None


def _alter_table(run: Consolidation, event: DumpEvent[AlterTableMessage]) -> None:
    name, message = event.event.table_name or "", event.message
    if enters(message, run.db):  # from another database, as from outside the policy
        _arrived(run, message.table.table_name)
        return
    if leaves(message, run.db):  # into another database: gone from this one, as after a drop
        run.entry(name)
        run.touched[name] = None
        return
    after = message.table.to_json()
    current = run.entry(name)
    new_name = message.rename_target
    if new_name is not None:
        run.touched[name] = None
        if current is not None and run.wanted(after):
            current.table = after
            current.files = run.listing(message.data, current.files)
            run.touched[new_name] = current
        elif current is None and run.wanted(after):
            _arrived(run, new_name)
        else:
            run.entry(new_name)
            run.touched[new_name] = None
        return
    if current is None:
        return
    current.table = after
    current.files = run.listing(message.data, current.files)


def _arrived(run: Consolidation, name: str) -> None:
    """A table renamed in from outside the policy (or its database), whose state no event carries.

    An entry held under ``name`` at this point was read after the rename (one read before it would have been
    taken away by the drop or rename that freed the name first): it is the arrived table, and the window's
    later events replay onto it. Without one the table is not in the dump: an incremental dump reads it in
    its next round (``replace.bootstrap_in_window``)."""
    if run.entry(name) is None:
        run.touched[name] = None


def _add_partitions(run: Consolidation, event: DumpEvent[AddPartitionMessage]) -> None:
    message = event.message
    current = run.entry(event.event.table_name or "")
    if current is None:
        return
    for part, change in zip(message.partitions, message.changes(), strict=True):
        snapshot = part.to_json()
        name = current.partition_name(snapshot)
        previous = current.partitions.get(name, (snapshot, []))[1]
        # No change: an ACID partition, listed for the dump's txn snapshot at the end.
        files = run.listing(change, previous) if change is not None else run.listing(None, [])
        current.partitions[name] = (snapshot, files)


def _alter_partition(run: Consolidation, event: DumpEvent[AlterPartitionMessage]) -> None:
    message = event.message
    current = run.entry(event.event.table_name or "")
    if current is None:
        return
    snapshot = message.after.to_json()
    name = current.partition_name(snapshot)
    previous = current.partitions.get(name, (snapshot, None))[1]
    current.partitions[name] = (snapshot, run.listing(message.data, previous))


def _drop_partitions(run: Consolidation, event: DumpEvent[Any]) -> None:
    current = run.entry(event.event.table_name or "")
    if current is None:
        return
    for name in event.message.partition_names():
        current.partitions.pop(name, None)


def _insert(run: Consolidation, event: DumpEvent[Any]) -> None:
    """An INSERT into a partition changes data only: the partition keeps its snapshot, and one not dumped
    stays so. Into a table it carries the table's snapshot too (a client's INSERT updates its basic
    statistics, ``DataCatalog.insert``), which a load puts as it does an alter's."""
    current = run.entry(event.event.table_name or "")
    if current is None:
        return
    for obj in event.message.objects():
        if obj.partition_name is None:
            current.table = event.message.table.to_json()
            current.files = run.listing(obj.change, current.files)
        elif obj.partition_name in current.partitions:
            snapshot, files = current.partitions[obj.partition_name]
            current.partitions[obj.partition_name] = (snapshot, run.listing(obj.change, files))


CONSOLIDATE: dict[EventType, Consolidate] = {
    EventType.ALTER_DATABASE: _alter_database,
    EventType.CREATE_FUNCTION: _create_function,
    EventType.DROP_FUNCTION: _drop_function,
    EventType.CREATE_TABLE: _create_table,
    EventType.ALTER_TABLE: _alter_table,
    EventType.DROP_TABLE: _drop_table,
    EventType.ADD_PARTITION: _add_partitions,
    EventType.ALTER_PARTITION: _alter_partition,
    EventType.DROP_PARTITION: _drop_partitions,
    EventType.INSERT: _insert,
    **dict.fromkeys(
        TXN_KINDS | kinds(scope=Scope.STATS) | {EventType.CREATE_DATABASE, EventType.DROP_DATABASE}, _ignored
    ),
}
"""What a bootstrap dump's consolidation does with each event type (``tests/unit/test_event_tables.py``)."""
