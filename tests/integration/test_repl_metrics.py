"""Replication metrics on real metastores: every dump and load leaves a row a user can list and trust.

Expected counts come from the source's own objects and files on disk, never from the engine's results.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.exceptions import FileLostError, NoSuchDatabaseError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Function
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.metrics import MetricsLog, MetricsRow, StageClock
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, open_replica, side_args, write_file

DUMP_STAGES = {"bootstrap": {"read", "consolidate", "acknowledge"}, "incremental": {"write", "acknowledge"}}
LOAD_STAGES = {"preflight", "apply"}


def seed(store: Metastore) -> None:
    catalog = store.catalog
    catalog.create_database(Database(name="sales"))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    for day, size in (("d1", 10), ("d2", 300), ("d3", 4000)):
        [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, day)])
        write_file(part.sd.location, f"part-{day}.parquet", b"x" * size)
        catalog.insert("sales", "orders", [day])
    plain = catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\nb,2\n")
    write_file(plain.sd.location, "000001_0", b"c,3\n")
    catalog.insert("sales", "plain")
    catalog.create_function(Function(function_name="myudf", db_name="sales", class_name="com.example.Udf"))


def source_objects(store: Metastore, db: str) -> tuple[set[str], set[str], dict[str, int]]:
    """Tables, partitions ('table/name') and data files (path -> size) of a source database, from disk."""
    catalog = store.catalog
    tables, partitions, locations = set(catalog.get_tables(db)), set(), []
    for name in tables:
        table = catalog.get_table(db, name)
        if not table.partition_keys:
            locations.append(table.sd.location)
        for part in catalog.get_partitions(db, name) if table.partition_keys else []:
            partitions.add(f"{name}/{'/'.join(part.values)}")
            locations.append(part.sd.location)
    files = {}
    for location in locations:
        for root, _, names in os.walk(local_path(location)):
            for file_name in names:
                files[os.path.join(root, file_name)] = os.path.getsize(os.path.join(root, file_name))
    return tables, partitions, files


def only(rows: list[MetricsRow], **wanted: str) -> MetricsRow:
    [row] = [r for r in rows if all(getattr(r, k) == v for k, v in wanted.items())]
    return row


def assert_finished(row: MetricsRow, stages: set[str], status: str = "succeeded") -> None:
    assert row.status == status
    assert stages <= set(row.stages), row.stages  # the main stages; engines may time more
    assert all(seconds >= 0 for seconds in row.stages.values())
    assert row.finished_at is not None and row.finished_at >= row.started_at


def test_bootstrap_and_incremental_record_what_was_replicated(engine, source, target) -> None:
    seed(source)
    tables, partitions, files = source_objects(source, "sales")
    dumped = engine.execute("REPL DUMP sales")
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    current = source.get_current_notification_event_id()
    rows = MetricsLog(target.engine).list(policy="sales")
    assert [(r.operation, r.kind) for r in rows] == [("load", "bootstrap"), ("dump", "bootstrap")]
    dump_id = Path(dumped.dump_dir).name
    for row in rows:
        assert (row.policy, row.dump_id, row.last_event_id, row.error) == ("sales", dump_id, current, None)
        assert (row.tables, row.partitions, row.files, row.bytes) == (
            len(tables),
            len(partitions),
            len(files),
            sum(files.values()),
        )
    assert_finished(only(rows, operation="dump"), DUMP_STAGES["bootstrap"])
    assert_finished(only(rows, operation="load"), LOAD_STAGES)
    assert only(rows, operation="dump").to_event_id == current
    assert loaded.last_event_id == current

    # Incremental: a new partition and a new table, each with one new file.
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    [d4] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d4")])
    write_file(d4.sd.location, "part-d4.parquet", b"y" * 777)
    catalog.insert("sales", "orders", ["d4"])
    fresh = catalog.create_table(make_table("sales", "fresh"))
    write_file(fresh.sd.location, "000000_0", b"z" * 55)
    catalog.insert("sales", "fresh")
    after_tables, after_partitions, after_files = source_objects(source, "sales")
    added = {path: size for path, size in after_files.items() if path not in files}
    events = source.get_notification_events_count(current, "sales")
    assert events == 4 and len(added) == 2  # ADD_PARTITION, INSERT, CREATE_TABLE, INSERT
    incremental = engine.execute(f"REPL DUMP sales FROM {current}")
    engine.execute(f"REPL LOAD sales_dr FROM '{incremental.dump_dir}'")
    rows = MetricsLog(target.engine).list(policy="sales", limit=2)
    dump, load = only(rows, operation="dump"), only(rows, operation="load")
    assert dump.dump_id == load.dump_id and (dump.kind, load.kind) == ("incremental", "incremental")
    newest = source.get_current_notification_event_id()
    for row in (dump, load):
        assert (row.from_event_id, row.to_event_id, row.last_event_id) == (current, newest, newest)
        assert (row.events, row.files, row.bytes) == (events, len(added), sum(added.values()))
    assert (load.tables, load.partitions) == (
        len(after_tables - tables),
        len(after_partitions - partitions),
    )
    assert_finished(dump, DUMP_STAGES["incremental"])
    assert_finished(load, LOAD_STAGES)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_failed_load_is_recorded_and_listed_by_the_cli(engine, source, target) -> None:
    seed(source)
    bootstrap = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{bootstrap.dump_dir}'")
    orders = source.catalog.get_table("sales", "orders")
    [part] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d7")])
    path = write_file(part.sd.location, "data.parquet", b"original")
    source.catalog.insert("sales", "orders", ["d7"])
    Path(local_path(path)).write_bytes(b"changed behind the metastore's back")  # no cmroot copy exists
    dumped = engine.execute(f"REPL DUMP sales FROM {bootstrap.last_event_id}")
    runner = CliRunner()
    roots = ["--source-warehouse", source.config.warehouse, "--source-cmroot", source.config.cmroot]
    load = [
        "repl",
        "run",
        f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'",
        *side_args("target", target),
        *roots,
    ]

    failed_run = runner.invoke(main, load)
    assert failed_run.exit_code == 1, failed_run.output
    assert "data.parquet" in failed_run.stderr and "nothing was applied" in failed_run.stderr
    failed = MetricsLog(target.engine).list(operation="load", limit=1)[0]
    assert (failed.status, failed.kind, failed.policy) == ("failed", "incremental", "sales")
    assert failed.dump_id == Path(dumped.dump_dir).name and failed.from_event_id == bootstrap.last_event_id
    assert failed.error.startswith("FileLostError: ") and "data.parquet" in failed.error
    assert (failed.events, failed.files, failed.bytes, failed.last_event_id) == (0, 0, 0, None)
    assert "preflight" in failed.stages and "apply" not in failed.stages  # it stopped before applying
    assert failed.finished_at is not None

    gone = runner.invoke(main, ["repl", "run", "REPL LOAD sales_dr FROM '/nonexistent/dump'", *load[3:]])
    assert gone.exit_code == 1 and "not a dump directory" in gone.stderr
    unreadable = MetricsLog(target.engine).list(limit=1)[0]
    assert (unreadable.status, unreadable.kind, unreadable.policy, unreadable.dump_id) == (
        "failed",
        "unknown",
        "sales_dr",
        "dump",
    )

    listing = runner.invoke(main, ["repl", "metrics", *side_args("target", target)])
    assert listing.exit_code == 0, listing.output
    lines = listing.stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "started", "(UTC)"]
    row_lines = [line for line in lines[1:] if line.split()[0].isdigit()]
    assert [line.split()[-1] for line in row_lines] == [
        "failed",
        "failed",
        "succeeded",
        "succeeded",
        "succeeded",
    ]
    assert f"dump {failed.dump_id}" in listing.stdout and "error: FileLostError:" in listing.stdout
    assert "preflight" in listing.stdout and "consolidate" in listing.stdout

    as_json = runner.invoke(
        main, ["repl", "metrics", "--json", "--policy", "sales", *side_args("target", target)]
    )
    rows = json_lines(as_json.stdout)
    assert [(r["operation"], r["status"]) for r in rows] == [
        ("load", "failed"),
        ("dump", "succeeded"),
        ("load", "succeeded"),
        ("dump", "succeeded"),
    ]
    assert rows[1]["dump_id"] == failed.dump_id and rows[1]["events"] == 2  # ADD_PARTITION, INSERT
    only_failed = runner.invoke(
        main, ["repl", "metrics", "--json", "--status", "failed", *side_args("target", target)]
    )
    assert {r["id"] for r in json_lines(only_failed.stdout)} == {failed.id, unreadable.id}
    dumps = runner.invoke(
        main, ["repl", "metrics", "--json", "--operation", "dump", *side_args("target", target)]
    )
    assert [r["kind"] for r in json_lines(dumps.stdout)] == ["incremental", "bootstrap"]
    newest = runner.invoke(main, ["repl", "metrics", "--json", "--limit", "1", *side_args("target", target)])
    assert [r["id"] for r in json_lines(newest.stdout)] == [unreadable.id]


def test_dump_without_a_target_records_into_the_source(source, tmp_path) -> None:
    seed(source)
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    dumped = engine.execute("REPL DUMP sales")
    with pytest.raises(NoSuchDatabaseError):  # recording never swallows the error
        engine.execute("REPL DUMP nosuchdb")
    failed, succeeded = MetricsLog(source.engine).list()
    assert (failed.policy, failed.status, failed.dump_id) == ("nosuchdb", "failed", "")
    assert failed.error.startswith("NoSuchDatabaseError: ") and "nosuchdb" in failed.error
    assert (succeeded.policy, succeeded.status, succeeded.dump_id) == (
        "sales",
        "succeeded",
        Path(dumped.dump_dir).name,
    )
    listing = CliRunner().invoke(main, ["repl", "metrics", *side_args("source", source)])
    assert listing.exit_code == 0 and "nosuchdb" in listing.stdout and "sales" in listing.stdout


def test_progress_bar_when_forced_and_not_in_plain_output(source, tmp_path) -> None:
    seed(source)
    runner = CliRunner()
    dump = [
        "repl",
        "run",
        "REPL DUMP sales",
        "--dump-root",
        str(tmp_path / "dumps"),
        *side_args("source", source),
    ]
    plain = runner.invoke(main, dump)  # CliRunner's stderr is no terminal: no bar by default
    assert plain.exit_code == 0, plain.output
    assert plain.stderr == "" and len(plain.stdout.splitlines()) == 1
    forced = runner.invoke(main, [*dump, "--progress"])
    assert forced.exit_code == 0, forced.output
    assert "dump: 2 tables" in forced.stderr  # orders and plain
    assert len(forced.stdout.splitlines()) == 1  # the bar never mixes into what scripts parse
    quiet = runner.invoke(main, [*dump, "--no-progress"])
    assert quiet.stderr == ""


def test_progress_bar_is_shown_on_a_terminal_by_default(source, tmp_path) -> None:
    """A real pseudo-terminal on stderr, as an operator's shell has; stdout stays a pipe."""
    seed(source)
    with temporary_database("sqlite", str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        first = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{first.dump_dir}'")
        fresh = source.catalog.create_table(make_table("sales", "fresh"))
        write_file(fresh.sd.location, "000000_0", b"z" * 55)
        source.catalog.insert("sales", "fresh")
        dumped = engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")
        command = f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'"
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a fresh pty is 0x0
        try:
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "hmsrepl.cli", "repl", "run", command),
                    *side_args("target", target),
                    *("--source-warehouse", source.config.warehouse, "--source-cmroot", source.config.cmroot),
                ],
                stdout=subprocess.PIPE,
                stderr=slave,
                timeout=120,
                check=False,
            )
        finally:
            os.close(slave)
        terminal = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            terminal += chunk
        os.close(master)
        target.close()
    assert done.returncode == 0, terminal.decode(errors="replace")
    assert done.stdout.decode().split("\t")[0] == "sales_dr"
    assert "load: 100%" in terminal.decode() and "2/2" in terminal.decode()  # CREATE_TABLE, INSERT


def test_stage_clock_sums_each_stage_and_times_failed_ones(monkeypatch) -> None:
    ticks = iter(range(100))
    monkeypatch.setattr("hmsrepl.replication.metrics.time.perf_counter", lambda: float(next(ticks)))
    clock = StageClock()
    for _ in range(3):
        with clock.stage("apply"):
            pass
    with pytest.raises(FileLostError), clock.stage("preflight"):
        raise FileLostError("gone")
    assert clock.seconds == {"apply": 3.0, "preflight": 1.0}


def test_stage_clock_counts_a_stage_threads_are_in_at_once_as_its_wall_time(monkeypatch) -> None:
    now = [0.0]
    monkeypatch.setattr("hmsrepl.replication.metrics.time.perf_counter", lambda: now[0])
    clock = StageClock()
    first, second = clock.stage("apply"), clock.stage("apply")  # two tables applied side by side
    first.__enter__()
    now[0] = 1.0
    second.__enter__()
    now[0] = 2.0
    first.__exit__(None, None, None)
    now[0] = 3.0
    second.__exit__(None, None, None)  # apply ran from 0 to 3: 3 s of the run's wall, not 2 + 2
    now[0] = 5.0
    with clock.stage("apply"):  # a later batch, alone
        now[0] = 6.0
    assert clock.seconds == {"apply": 4.0}


class WatchingProgress:
    """Reads the newest metrics row while the engine works; can interrupt the run like Ctrl-C."""

    def __init__(self, metrics: MetricsLog, interrupt: bool = False) -> None:
        self.metrics, self.interrupt, self.seen = metrics, interrupt, []

    def begin(self, total: int | None, unit: str) -> None:
        self.seen.append(self.metrics.list(limit=1)[0].status)

    def advance(self, n: int) -> None:
        if self.interrupt:
            raise KeyboardInterrupt


def test_row_is_running_during_the_work_and_failed_when_interrupted(source, tmp_path) -> None:
    seed(source)
    engine, metrics = ReplicationEngine(str(tmp_path / "dumps"), source), MetricsLog(source.engine)
    watching = WatchingProgress(metrics)
    engine.execute("REPL DUMP sales", watching)
    assert watching.seen == ["running"] and metrics.list(limit=1)[0].status == "succeeded"
    with pytest.raises(KeyboardInterrupt):
        engine.execute("REPL DUMP sales", WatchingProgress(metrics, interrupt=True))
    interrupted = metrics.list(limit=1)[0]
    assert (interrupted.status, interrupted.error) == ("failed", "KeyboardInterrupt: interrupted")
    assert "read" in interrupted.stages  # the stage it was in is timed up to the interruption
