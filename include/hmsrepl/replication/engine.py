"""One entry point for REPL commands, whether they come from the CLI, Python or a DAG task.

Every dump and load run through here is recorded in ``repl_metrics`` (see ``replication.metrics``): loads in
the target database, dumps in the target database when this engine has a target metastore, else in the
source's. With ``HMSREPL_METRICS_TEXTFILE_DIR`` set, each run also exports that table's totals (and, after a
load that can read the source, the replica's lag) as Prometheus textfiles (``monitoring.repl_textfile``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore import Metastore
from hmsrepl.monitoring.repl_textfile import export_lag, export_runs
from hmsrepl.replication.commands import Command, DumpCommand, LoadCommand, StatusCommand, parse_command
from hmsrepl.replication.dump import DumpEngine, DumpResult
from hmsrepl.replication.layout import DumpDir, DumpMetadata
from hmsrepl.replication.load import LoadEngine, LoadResult, repl_status
from hmsrepl.replication.metrics import UNKNOWN_KIND, Counts, MetricsLog, Progress, StageClock, dump_id_of
from hmsrepl.replication.source import ReplicationSource
from hmsrepl.replication.source_roots import SourceRoots

log = logging.getLogger(__name__)


class MissingMetastoreError(HmsReplError, ValueError):
    """A command needs the source (DUMP) or target (LOAD, STATUS) metastore and it was not configured."""


@dataclass
class ReplicationEngine:
    dump_root: str
    #: An hmsrepl metastore or a stock Hive Metastore (``hive_source.StockHiveSource``).
    source: ReplicationSource | None = None
    target: Metastore | None = None
    #: Where loads may read the source's files (the dump's own claims are never trusted). Default: the
    #: source metastore's warehouse and cmroot when there is one, else ``HMSREPL_SOURCE_*`` variables.
    source_roots: SourceRoots | None = None

    def execute(
        self, command: str | Command, progress: Progress | None = None
    ) -> DumpResult | LoadResult | int | None:
        """Run one REPL command; ``progress`` hears how many tables or events are done (dumps and loads)."""
        parsed = parse_command(command) if isinstance(command, str) else command
        if isinstance(parsed, DumpCommand):
            if self.source is None:
                raise MissingMetastoreError("REPL DUMP needs the source metastore (--source-db-url)")
            return self._dump(self.source, parsed, progress)
        if self.target is None:
            verb = "REPL LOAD" if isinstance(parsed, LoadCommand) else "REPL STATUS"
            raise MissingMetastoreError(
                f"{verb} needs the target metastore: pass --target-db-url (or set HMSREPL_TARGET_DB_URL)"
            )
        if isinstance(parsed, LoadCommand):
            return self._load(self.target, parsed, progress)
        assert isinstance(parsed, StatusCommand)
        return repl_status(self.target, parsed.db_name)

    @property
    def load_source_roots(self) -> SourceRoots | None:
        """The trusted source roots of loads (None: ``LoadEngine`` reads ``HMSREPL_SOURCE_*``)."""
        if self.source_roots is not None:
            return self.source_roots
        if self.source is not None:
            return SourceRoots.of_source(self.source.config.warehouse, self.source.config.cmroot)
        return None

    @property
    def dump_metrics(self) -> MetricsLog:
        """Where dumps are recorded: the target database if this engine has one, else the source's."""
        store = self.target or (self.source if isinstance(self.source, Metastore) else None)
        if store is None:
            raise MissingMetastoreError(
                "replication metrics need a target metastore (--target-db-url) or an hmsrepl source"
            )
        return MetricsLog(store.engine)

    def _dump(self, source: ReplicationSource, command: DumpCommand, progress: Progress | None) -> DumpResult:
        def work(clock: StageClock) -> DumpResult:
            if progress is not None:
                progress.begin(None, "table" if command.is_bootstrap else "event")
            on_table = (lambda _name: progress.advance(1)) if progress is not None else None
            result = DumpEngine(source, self.dump_root, on_table, clock=clock).dump(command)
            if progress is not None and not command.is_bootstrap:
                progress.advance(result.events)  # events are written in parallel: reported at the end
            return result

        return recorded_dump(self.dump_metrics, command, work)

    def _load(self, target: Metastore, command: LoadCommand, progress: Progress | None) -> LoadResult:
        def work(clock: StageClock, meta: DumpMetadata | None) -> LoadResult:
            events = meta.event_count if meta is not None and meta.kind == "incremental" else None
            if progress is not None:
                progress.begin(events, "table" if events is None else "event")
            advance = progress.advance if progress is not None else None
            return LoadEngine(target, clock=clock, source_roots=self.load_source_roots).load(command, advance)

        result = recorded_load(MetricsLog(target.engine), command, work)
        if isinstance(self.source, Metastore):
            self._export_lag(self.source, target, command.dump_dir, result)
        return result

    @staticmethod
    def _export_lag(source: Metastore, target: Metastore, dump_dir: str, result: LoadResult) -> None:
        """The replica's lag after this load, for Prometheus (only when a textfile directory is set)."""
        from hmsrepl.monitoring.settings import MetricsSettings
        from hmsrepl.replication.failover import replica_lag

        try:
            if not MetricsSettings().textfile_dir:
                return
            meta = DumpDir(dump_dir).read_metadata()
            export_lag(replica_lag(source, meta.policy, target, result.target_db))
        except Exception as exc:  # the load succeeded; its lag is a report, not part of the outcome
            log.warning("could not measure the lag of '%s' for metrics: %s", result.target_db, exc)


def recorded_dump(
    metrics: MetricsLog, command: DumpCommand, work: Callable[[StageClock], DumpResult]
) -> DumpResult:
    """Run ``work`` (a dump that times its stages on the given clock) as one recorded ``repl_metrics`` row.

    Public so that other dump drivers (the Spark dump application) record exactly what the engine records.
    """
    try:
        return _recorded_dump(metrics, command, work)
    finally:
        export_runs(metrics.engine)


def _recorded_dump(
    metrics: MetricsLog, command: DumpCommand, work: Callable[[StageClock], DumpResult]
) -> DumpResult:
    with metrics.record(
        policy=command.policy.to_text(),
        operation="dump",
        kind="bootstrap" if command.is_bootstrap else "incremental",
        from_event_id=command.from_event_id,
        to_event_id=command.to_event_id,
    ) as run:
        result = work(run.clock)
        meta = DumpDir(result.dump_dir).read_metadata()
        run.dump_id = dump_id_of(result.dump_dir)
        run.from_event_id, run.to_event_id = meta.from_event_id, meta.to_event_id
        run.last_event_id = result.last_event_id
        run.counts = Counts(result.events, result.tables, result.partitions, result.files, result.bytes)
    return result


def recorded_load(
    metrics: MetricsLog,
    command: LoadCommand,
    work: Callable[[StageClock, DumpMetadata | None], LoadResult],
) -> LoadResult:
    """Run ``work`` (a load timing its stages on the clock) as one recorded ``repl_metrics`` row.

    ``work`` also gets the dump's metadata when it is readable (None: the load itself will fail and say why,
    and the row records that failure). A driver that copies files ahead of the load (the Spark load
    application) times that with ``clock.stage("copy")`` inside ``work``.
    """
    try:
        return _recorded_load(metrics, command, work)
    finally:
        export_runs(metrics.engine)


def _recorded_load(
    metrics: MetricsLog,
    command: LoadCommand,
    work: Callable[[StageClock, DumpMetadata | None], LoadResult],
) -> LoadResult:
    meta = _readable_metadata(command.dump_dir)
    with metrics.record(
        policy=meta.policy if meta else (command.target_db or ""),
        operation="load",
        kind=meta.kind if meta else UNKNOWN_KIND,
        dump_id=dump_id_of(command.dump_dir),
        from_event_id=meta.from_event_id if meta else None,
        to_event_id=meta.to_event_id if meta else None,
    ) as run:
        result = work(run.clock, meta)
        stats = result.stats
        run.last_event_id = result.last_event_id
        run.counts = Counts(
            result.events_applied, stats.tables, stats.partitions, stats.files_copied, stats.bytes_copied
        )
    return result


def _readable_metadata(dump_dir: str) -> DumpMetadata | None:
    try:
        return DumpDir(dump_dir).read_metadata()
    except (HmsReplError, OSError, ValueError, TypeError):
        return None
