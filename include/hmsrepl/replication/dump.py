"""REPL DUMP on the source: bootstrap (objects, then consolidation) and incremental (events) dumps.

A bootstrap dump first writes every object as it is when read, then replays the events that happened while
it was reading (seed 003's "consolidate at source"): events are applied in order to the dumped objects, so
the finished dump is the database as of one event id (the dump's last event id), never a mix of states.
An incremental dump writes each relevant event with its own snapshot, never the current state.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import NoSuchDatabaseError, NoSuchTableError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.transactions import ReplicationSnapshot
from hmsrepl.replication import acid_replay
from hmsrepl.replication.column_stats import dump_column_stats
from hmsrepl.replication.commands import DumpCommand, check_dump_command
from hmsrepl.replication.compaction import COMPACT_SETTING, summarize
from hmsrepl.replication.layout import (
    BOOTSTRAP_DIR,
    EVENTS_DIR,
    FILES,
    FUNCTIONS_DIR,
    METADATA,
    DumpDir,
    DumpMetadata,
)
from hmsrepl.replication.metrics import StageClock, referenced_bytes
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.replace import WindowPlanner, bootstrap_in_window
from hmsrepl.replication.source import ReplicationSource
from hmsrepl.storage.base import join_uri

log = logging.getLogger(__name__)

PAGE = 10_000
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
    files: list[str] | None = None
    partitions: dict[str, tuple[dict[str, Any], list[str] | None]] = field(default_factory=dict)

    @property
    def key_names(self) -> list[str]:
        return [k["name"] for k in self.table.get("partition_keys", [])]

    def partition_name(self, snapshot: dict[str, Any]) -> str:
        return make_partition_name(self.key_names, snapshot["values"])


def relevant(event: NotificationEvent, policy: ReplicationPolicy) -> bool:
    """Does the event belong to the policy's database and (for table events) an included table?

    OPEN/COMMIT/ABORT_TXN belong to no database and go to every dump, as Hive dumps them: when a txn
    opens nobody knows which databases it will write, and a replayed open must be closed again.
    """
    if event.db_name is None and event.event_type in acid_replay.TXN_EVENTS:
        return True
    if (event.db_name or "") != policy.db_name:
        return False
    if event.table_name is None:
        return True
    if policy.functions_only:
        return False
    if event.event_type == EventType.ALTER_TABLE:
        body = event.body()
        names = {body["before"]["table_name"], body["after"]["table_name"]}
        return any(policy.includes_table(name) for name in names)
    return policy.includes_table(event.table_name)


class DumpEngine:
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
        if command.is_bootstrap:
            return self._bootstrap(command, dump)
        return self._incremental(command, dump)

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
        start = self.source.get_current_notification_event_id()
        database = catalog.get_database(policy.db_name)
        acid_replay.wait_for_open_txns(
            self.source, policy.db_name, acid_replay.open_txn_timeout_seconds(command.settings)
        )
        dump.write_json(f"{policy.db_name}/{METADATA}", {"database": database.model_dump(mode="json")})
        for function in catalog.get_functions(policy.db_name):
            snapshot = catalog.get_function(policy.db_name, function).model_dump(mode="json")
            dump.write_json(f"{policy.db_name}/{FUNCTIONS_DIR}/{function}/{METADATA}", {"function": snapshot})
        tables = (
            []
            if policy.functions_only
            else [t for t in catalog.get_tables(policy.db_name) if policy.includes_table(t)]
        )
        with self.clock.stage("read"):
            for table_name in tables:
                try:
                    table = catalog.get_table(policy.db_name, table_name)
                    if external or table.is_managed:
                        self._write_entry(dump, policy.db_name, self._read_entry(table, with_data))
                except NoSuchTableError:  # dropped while we were reading: consolidation settles it
                    log.info("table %s.%s was dropped during the bootstrap dump", policy.db_name, table_name)
                if self.on_table_dumped is not None:
                    self.on_table_dumped(table_name)
        # The dump ends at the txn snapshot's event: ACID tables are listed for exactly that snapshot.
        snapshot = self.source.txns.replication_snapshot(policy.db_name)
        end = snapshot.event_id
        with self.clock.stage("consolidate"):
            self._consolidate(dump, policy, start, end, with_data, external)
            self._finish_acid_tables(dump, policy.db_name, snapshot, with_data)
            dump_column_stats(dump, self.source, policy.db_name)
            counts = self._count(dump, policy.db_name)
        with self.clock.stage("acknowledge"):
            dump.write_metadata(self._metadata(command, "bootstrap", start, end, end, 0))
            dump.acknowledge()
        return DumpResult(
            dump.uri, end, tables=counts[0], partitions=counts[1], files=counts[2], bytes=counts[3]
        )

    def _read_entry(self, table: Table, with_data: bool) -> TableEntry:
        cm = self.source.cm
        entry = TableEntry(table.model_dump(mode="json"))
        # ACID tables are listed once the dump's txn snapshot is known (_finish_acid_tables): a listing
        # now would include files of open and aborted txns.
        with_data = with_data and not table.is_transactional
        if not table.partition_keys:
            entry.files = describe_files(table.sd.location, cm) if with_data else None
            return entry
        for part in self.source.catalog.get_partitions(table.db_name, table.table_name):
            files = describe_files(part.sd.location, cm) if with_data else None
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
        for relative in dump.metadata_files(db):
            parts = relative.split("/")
            if len(parts) != 3 or parts[1] == FUNCTIONS_DIR:
                continue
            # The table's own _metadata says whether it is ACID: only those are read back whole, to be listed.
            table = dump.read_json(relative)["table"]
            if not acid_replay.is_acid_snapshot(table):
                continue
            name = table["table_name"]
            acid_tables.add(name)
            entry = self._load_entry(dump, db, parts[1]) if with_data else None
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
        dump.write_json(
            f"{db}/{acid_replay.ACID_STATE}", acid_replay.acid_state_document(snapshot, acid_tables)
        )

    @staticmethod
    def _table_dir(db: str, table: str) -> str:
        return f"{db}/{table}"

    def _write_entry(self, dump: DumpDir, db: str, entry: TableEntry) -> None:
        base = self._table_dir(db, entry.table["table_name"])
        dump.remove_tree(base)
        dump.write_json(f"{base}/{METADATA}", {"table": entry.table})
        if entry.files is not None:
            dump.write_files(f"{base}/{FILES}", entry.files)
        for name, (snapshot, files) in entry.partitions.items():
            dump.write_json(f"{base}/{name}/{METADATA}", {"partition": snapshot})
            if files is not None:
                dump.write_files(f"{base}/{name}/{FILES}", files)

    def _load_entry(self, dump: DumpDir, db: str, table: str) -> TableEntry | None:
        base = self._table_dir(db, table)
        if not dump.fs.exists(dump.path(f"{base}/{METADATA}")):
            return None
        entry = TableEntry(dump.read_json(f"{base}/{METADATA}")["table"])
        if dump.fs.exists(dump.path(f"{base}/{FILES}")):
            entry.files = dump.read_files(f"{base}/{FILES}")
        for relative in dump.metadata_files(base):
            part_dir = relative[: -len("/" + METADATA)]
            if part_dir == base:
                continue
            snapshot = dump.read_json(relative)["partition"]
            files = (
                dump.read_files(f"{part_dir}/{FILES}")
                if dump.fs.exists(dump.path(f"{part_dir}/{FILES}"))
                else None
            )
            entry.partitions[entry.partition_name(snapshot)] = (snapshot, files)
        return entry

    def _consolidate(
        self, dump: DumpDir, policy: ReplicationPolicy, start: int, end: int, with_data: bool, external: bool
    ) -> None:
        """Replay events (start, end] onto the dumped objects, in order (seed 003, approach 2)."""
        if end <= start:
            return
        db = policy.db_name
        touched: dict[str, TableEntry | None] = {}

        def entry(name: str) -> TableEntry | None:
            if name not in touched:
                touched[name] = self._load_entry(dump, db, name)
            return touched[name]

        for event in self._events(policy, start, end):
            body = event.body()
            kind = event.event_type
            if kind == EventType.ALTER_DATABASE:
                dump.write_json(f"{db}/{METADATA}", {"database": body["after"]})
            elif kind == EventType.CREATE_FUNCTION:
                fn = body["function"]
                dump.write_json(f"{db}/{FUNCTIONS_DIR}/{fn['function_name']}/{METADATA}", {"function": fn})
            elif kind == EventType.DROP_FUNCTION:
                dump.remove_tree(f"{db}/{FUNCTIONS_DIR}/{body['function']['function_name']}")
            elif event.table_name is not None:
                self._apply_table_event(
                    event.table_name, kind, body, entry, touched, policy, with_data, external
                )
        for name, final in touched.items():
            if final is None:
                dump.remove_tree(self._table_dir(db, name))
            else:
                self._write_entry(dump, db, final)

    @staticmethod
    def _apply_table_event(
        name: str,
        kind: str,
        body: dict[str, Any],
        entry: Any,
        touched: dict[str, TableEntry | None],
        policy: ReplicationPolicy,
        with_data: bool,
        external: bool,
    ) -> None:
        def data(files: list[str] | None) -> list[str] | None:
            return list(files or []) if with_data else None

        def wanted(table: dict[str, Any]) -> bool:
            return policy.includes_table(table["table_name"]) and (
                external or Table.model_validate(table).is_managed
            )

        if kind == EventType.CREATE_TABLE:
            table = body["table"]
            touched[name] = TableEntry(
                table, None if table.get("partition_keys") else data(body.get("files"))
            )
            if not wanted(table):
                touched[name] = None
        elif kind == EventType.DROP_TABLE:
            entry(name)
            touched[name] = None
        elif kind == EventType.ALTER_TABLE:
            after = body["after"]
            current = entry(name)
            new_name = after["table_name"]
            if new_name != name:
                touched[name] = None
                if current is not None and wanted(after):
                    current.table = after
                    if not after.get("partition_keys"):
                        current.files = (
                            data(body.get("files"))
                            if body.get("files") or body.get("is_truncate")
                            else current.files
                        )
                    touched[new_name] = current
                else:
                    entry(new_name)
                    touched[new_name] = None
                return
            if current is None:
                return
            current.table = after
            if not after.get("partition_keys") and (body.get("files") or body.get("is_truncate")):
                current.files = data(body.get("files"))
        elif kind in (
            EventType.ADD_PARTITION,
            EventType.ALTER_PARTITION,
            EventType.DROP_PARTITION,
            EventType.INSERT,
        ):
            current = entry(name)
            if current is None:
                return
            if kind == EventType.ADD_PARTITION:
                for snapshot, files in zip(body["partitions"], body["files"], strict=True):
                    current.partitions[current.partition_name(snapshot)] = (snapshot, data(files))
            elif kind == EventType.ALTER_PARTITION:
                snapshot = body["after"]
                part_name = current.partition_name(snapshot)
                files = body.get("files") if (body.get("files") or body.get("is_truncate")) else None
                previous = current.partitions.get(part_name, (snapshot, None))[1]
                current.partitions[part_name] = (snapshot, data(files) if files is not None else previous)
            elif kind == EventType.DROP_PARTITION:
                for snapshot in body["partitions"]:
                    current.partitions.pop(current.partition_name(snapshot), None)
            else:  # INSERT: the event's listing is the object's data after the change
                if body.get("partition"):
                    part_name = current.partition_name(body["partition"])
                    if part_name in current.partitions:
                        snapshot = current.partitions[part_name][0]
                        current.partitions[part_name] = (snapshot, data(body["files"]))
                else:
                    current.files = data(body["files"])

    def _events(
        self, policy: ReplicationPolicy, after: int, upto: int, *, with_markers: bool = False
    ) -> Iterator[NotificationEvent]:
        """The policy's events in (after, upto], as dumps write them: the database's events merged with
        the database-less txn events (two indexed reads per page, never the whole log).

        ``with_markers``: commits get their empty overwrites' markers, a metastore lookup and a listing each
        (``acid_replay.prepare_for_dump``); only the pass that writes events needs them, not planning or
        consolidation."""
        last = after
        log_ = self.source.events
        while last < upto:
            own = log_.next_events(last, PAGE, db_name=policy.db_name, to_event_id=upto)
            txn = log_.next_events(last, PAGE, event_types=acid_replay.TXN_EVENTS, to_event_id=upto)
            bound = upto
            for page in (own, txn):
                if len(page) == PAGE:
                    bound = min(bound, page[-1].event_id)
            merged = sorted((e for e in (*own, *txn) if e.event_id <= bound), key=lambda e: e.event_id)
            for event in merged:
                if relevant(event, policy):
                    prepared = acid_replay.prepare_for_dump(
                        event, policy, self.source if with_markers else None
                    )
                    if prepared is not None:
                        yield prepared
            if not own and not txn:
                return
            last = bound

    @staticmethod
    def _count(dump: DumpDir, db: str) -> tuple[int, int, int, int]:
        tables = partitions = files = size = 0
        for relative in dump.metadata_files(db):
            depth = relative.count("/")
            if relative.startswith(f"{db}/{FUNCTIONS_DIR}/") or depth == 1:
                continue
            if depth == 2:
                tables += 1
            else:
                partitions += 1
            listed = dump.read_files(relative[: -len(METADATA)] + FILES)
            files, size = files + len(listed), size + referenced_bytes(listed)
        return tables, partitions, files, size

    # -- incremental -----------------------------------------------------------------------------------------
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
        upto = min(command.to_event_id, current) if command.to_event_id is not None else current
        with_data = command.settings.get(METADATA_ONLY, "false").lower() != "true"
        external = command.settings.get(INCLUDE_EXTERNAL, "true").lower() == "true"
        compacting = command.settings.get(COMPACT_SETTING, "true").lower() != "false"
        planner = WindowPlanner(policy, command.replaced_policy)
        last = upto
        with self.clock.stage("plan"):
            for event in self._events(policy, command.from_event_id, upto):
                planner.feed(summarize(event))
                if command.limit is not None and len(planner.summaries) >= command.limit:
                    last = event.event_id
                    break
            last = bootstrap_in_window(self, dump, planner, last, with_data=with_data, external=external)
            plan = planner.plan(compacting=compacting, with_data=with_data)
        count = files = size = 0
        # Writing many small files is bound by file-system calls, which threads overlap; order does not
        # matter because nothing reads the dump before its acknowledgement.
        with self.clock.stage("write"), ThreadPoolExecutor(max_workers=WRITERS) as pool:
            futures = []
            for event in self._events(policy, command.from_event_id, last, with_markers=True):
                written = plan.rewrite(event)
                if written is not None:
                    futures.append(pool.submit(self._write_event, dump, written, with_data))
                    count += 1
            for future in futures:
                listed = future.result()
                files, size = files + len(listed), size + referenced_bytes(listed)
        with self.clock.stage("acknowledge"):
            meta = self._metadata(command, "incremental", command.from_event_id, max(upto, last), last, count)
            meta.skipped_events = plan.skipped_events
            meta.bootstrapped_tables = planner.bootstrapped()
            dump.write_metadata(meta)
            dump.acknowledge()
        tables = partitions = 0
        if meta.bootstrapped_tables:  # what the bootstrapped tables add to the dump
            tables, partitions, more_files, more_bytes = self._count(
                DumpDir(dump.path(BOOTSTRAP_DIR)), policy.db_name
            )
            files, size = files + more_files, size + more_bytes
        return DumpResult(
            dump.uri, last, events=count, tables=tables, partitions=partitions, files=files, bytes=size
        )

    @staticmethod
    def _write_event(dump: DumpDir, event: NotificationEvent, with_data: bool) -> list[str]:
        """Write one event; returns the data files it names (none when the dump is metadata-only)."""
        body = event.body()
        base = f"{EVENTS_DIR}/{event.event_id}"
        dump.write_json(
            f"{base}/{METADATA}",
            {
                "event_id": event.event_id,
                "event_time": event.event_time,
                "event_type": event.event_type,
                "db": event.db_name,
                "table": event.table_name,
                "message": body,
            },
        )
        files = event_files(body)
        if with_data and files:
            dump.write_files(f"{base}/{FILES}", files)
        return files if with_data else []


def event_files(body: dict[str, Any]) -> list[str]:
    """Every file an event's pseudo-snapshot names (flattened; ADD_PARTITION has one list per partition)."""
    files = body.get("files") or []
    if files and (files[0] is None or isinstance(files[0], list)):  # None: an ACID partition (no listing)
        return [uri for group in files for uri in group or []]
    return list(files)
