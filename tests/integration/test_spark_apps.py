"""The Spark applications as the orchestrator runs them: subprocesses with options, a JSON line, an exit code.

Metastores are real (SQLite files), data files real, Spark real (``local[2]``). Each application start that
needs Spark is a JVM (~10 s), so the assertions are grouped into few runs: bootstrap dump and load on
Spark, an incremental dump (no Spark), an incremental load whose copy fails and then succeeds, cmroot
cleanup on Spark; the bad-input runs never start Spark and run concurrently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Function
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.verify import capture_state, diff_states, verify
from hmsrepl.spark.copy import MAX_GROUP_ITEMS, balance, group_count
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table, open_store, settle, side_args, write_file

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "spark_apps"
STAGING = ".hmsrepl-staging-"


@dataclass
class AppRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        assert self.returncode == 0, f"app failed ({self.returncode}):\n{self.stderr[-4000:]}"
        return json.loads(self.stdout.strip().splitlines()[-1])

    @property
    def error(self) -> str:
        """The one-line error an operator sees (the last line on stderr)."""
        assert self.returncode != 0, f"app succeeded but should have failed:\n{self.stdout}"
        return self.stderr.strip().splitlines()[-1]


def _env() -> dict[str, str]:
    """The test's environment without HMSREPL_* settings or PYTHONPATH: options alone must be enough."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HMSREPL_") and k != "PYTHONPATH"}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Tests retire replaced version directories at once (readers' grace period; see tests/conftest.py).
    env["HMSREPL_REPL_RETIRE_GRACE_SECONDS"] = "0"
    return env


def start(app: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APPS / app), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def finish(process: subprocess.Popen[str]) -> AppRun:
    stdout, stderr = process.communicate(timeout=300)
    return AppRun(process.returncode, stdout, stderr)


def source_roots_args(source: Metastore) -> list[str]:
    """The roots a load may read the source's files from (its own configuration, never the dump's)."""
    return ["--source-warehouse", source.config.warehouse, "--source-cmroot", source.config.cmroot]


def run_app(app: str, *args: str) -> AppRun:
    return finish(start(app, *args))


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Metastore]:
    store = open_store(tmp_path, "source")
    yield store
    store.close()


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Metastore]:
    store = open_store(tmp_path, "target")
    yield store
    store.close()


def seed(store: Metastore) -> None:
    catalog = store.catalog
    catalog.create_database(Database(name="sales", parameters={"owner_team": "finance"}))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    for day in ("d1", "d2", "k:v"):  # 'k:v' is the directory day=k%3Av: never URL-decoded on the way
        [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, day)])
        write_file(part.sd.location, f"part-{day}.parquet", f"rows of {day}".encode())
        write_file(part.sd.location, "_SUCCESS", b"")  # hidden: not data, not replicated
        settle()  # recorded with their times (trusted by the dump below)
        catalog.insert("sales", "orders", [day])
    plain = catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\nb,2\n")
    write_file(plain.sd.location, "sub/000001_0", b"c,3\n")
    catalog.insert("sales", "plain")
    catalog.create_function(Function(function_name="myudf", db_name="sales", class_name="com.example.Udf"))


def rewrite_keeping_stat(path: Path, content: bytes, stat: os.stat_result) -> None:
    """Change a file's content as only a tamperer would: same size, same modification time."""
    path.write_bytes(content)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def staged_leftovers(store: Metastore) -> list[str]:
    return [str(p) for p in Path(store.config.warehouse).rglob(f"{STAGING}*")]


@pytest.mark.spark
def test_bootstrap_and_incremental_through_the_apps(source, target, tmp_path) -> None:
    seed(source)
    dump_root = str(tmp_path / "dumps")
    # The executors list recorded files with their recorded checksums, reading none of them: a file rewritten
    # behind the metastore's back with its size and modification time kept is listed as recorded (restored
    # before the load, which verifies every copy against the dump's checksum).
    d1_file = Path(local_path(source.catalog.get_partition("sales", "orders", ["d1"]).sd.location or ""))
    d1_file = d1_file / "part-d1.parquet"
    original, stat = d1_file.read_bytes(), d1_file.stat()
    rewrite_keeping_stat(d1_file, b"X" * len(original), stat)
    # Bootstrap dump: every table described on Spark (threshold 1 location).
    dumped = run_app(
        "repl_dump.py",
        "--command",
        "REPL DUMP sales",
        *side_args("source", source),
        "--dump-root",
        dump_root,
        "--spark-min-locations",
        "1",
    ).summary
    rewrite_keeping_stat(d1_file, original, stat)
    assert dumped["kind"] == "bootstrap"
    assert dumped["last_event_id"] == source.get_current_notification_event_id()
    assert (dumped["tables"], dumped["partitions"], dumped["files"]) == (2, 3, 5)
    assert dumped["locations_on_spark"] == 4 and dumped["locations_on_driver"] == 0
    assert dumped["spark_startup_seconds"] > 0
    # Bootstrap load: the copy runs on Spark, the load only publishes the staged copies.
    loaded = run_app(
        "repl_load.py",
        "--command",
        f"REPL LOAD sales_dr FROM '{dumped['dump_dir']}'",
        *side_args("target", target),
        *source_roots_args(source),
        "--spark-min-files",
        "1",
    ).summary
    assert loaded["target_db"] == "sales_dr" and loaded["last_event_id"] == dumped["last_event_id"]
    assert loaded["staged_on_spark"] == loaded["prefetched"] == loaded["files"] == 5
    assert (
        loaded["bytes"]
        == loaded["staged_bytes"]
        == sum(len(b) for b in (b"rows of d1", b"rows of d2", b"rows of k:v", b"a,1\nb,2\n", b"c,3\n"))
    )
    assert verify(source, "sales", target, "sales_dr") == []
    assert repl_status(target, "sales_dr") == dumped["last_event_id"]
    assert staged_leftovers(target) == []

    # Changes of several kinds, with a replaced file that only cmroot keeps.
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    [d3] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    d3_file = write_file(d3.sd.location, "part-d3.parquet", b"rows of d3")
    catalog.insert("sales", "orders", ["d3"])
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    new = write_file(d1.sd.location, "part-d1-v2.parquet", b"rows of d1, version 2")
    catalog.insert("sales", "orders", ["d1"], new_files=[new], replace=True)
    catalog.drop_partitions("sales", "orders", [["d2"]])
    plain = catalog.get_table("sales", "plain")
    catalog.alter_table("sales", "plain", plain.model_copy(update={"table_name": "plain_v2"}))
    # Incremental dump: metadata work, no Spark.
    inc = run_app(
        "repl_dump.py",
        "--command",
        f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}",
        *side_args("source", source),
        "--dump-root",
        dump_root,
    ).summary
    assert inc["kind"] == "incremental" and inc["events"] > 0 and inc["spark_startup_seconds"] is None
    assert inc["last_event_id"] == source.get_current_notification_event_id()
    load_args = [
        "--command",
        f"REPL LOAD sales_dr FROM '{inc['dump_dir']}'",
        *side_args("target", target),
        *source_roots_args(source),
        "--spark-min-files",
        "1",
    ]
    # A file changed behind the metastore's back (same size, no cmroot copy): the copy fails, names the
    # file and the reason, and nothing is applied.
    original = Path(local_path(d3_file)).read_bytes()
    Path(local_path(d3_file)).write_bytes(original.upper())
    before_state, before_id = capture_state(target, "sales_dr"), repl_status(target, "sales_dr")
    failed = run_app("repl_load.py", *load_args)
    assert failed.returncode == 1
    assert failed.error.startswith("Error: 1 of ") and "nothing was applied" in failed.error
    assert "part-d3.parquet" in failed.error and "checksum" in failed.error
    assert "Traceback" not in failed.stderr
    assert repl_status(target, "sales_dr") == before_id
    assert diff_states(before_state, capture_state(target, "sales_dr")) == []
    # Put right, the same command converges; copies staged by the failed run are reused, not redone.
    Path(local_path(d3_file)).write_bytes(original)
    loaded = run_app("repl_load.py", *load_args).summary
    assert loaded["last_event_id"] == inc["last_event_id"] and loaded["events_applied"] > 0
    # Planned: d3 and d1-v2. The renamed table's files are no change (format 2 carries what a write added),
    # so the load links them into the new name's version without planning a copy.
    assert loaded["planned_files"] == loaded["staged_on_spark"] == 2
    # The load removes staged copies of files it finds already in place, so nothing is left to discard.
    assert loaded["files"] == loaded["prefetched"] == 2 and loaded["staged_unused"] == 0
    assert verify(source, "sales", target, "sales_dr") == []
    assert repl_status(target, "sales_dr") == inc["last_event_id"]
    assert staged_leftovers(target) == []
    part = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    assert os.listdir(local_path(part.sd.location)) == ["part-d1-v2.parquet"]

    # Re-running finished loads plans no copies (no Spark, nothing staged) and changes nothing.
    reruns = [
        start(
            "repl_load.py",
            "--command",
            f"REPL LOAD sales_dr FROM '{d}'",
            *side_args("target", target),
            *source_roots_args(source),
        )
        for d in (dumped["dump_dir"], inc["dump_dir"])
    ]
    for rerun in map(finish, reruns):
        summary = rerun.summary
        assert summary["planned_files"] == 0 and summary["spark_startup_seconds"] is None
        assert summary["last_event_id"] == inc["last_event_id"] and summary["events_applied"] == 0
    assert staged_leftovers(target) == [] and verify(source, "sales", target, "sales_dr") == []


@pytest.mark.spark
def test_cm_cleanup_app_deletes_only_expired_files(tmp_path) -> None:
    cmroot = tmp_path / "cmroot"
    cmroot.mkdir()
    now = time.time()
    expired, fresh = [], []
    for index in range(6):
        path = cmroot / f"old{index}.parquet_crc32c-0000000{index}-3"
        path.write_bytes(b"old")
        os.utime(path, (now - 3 * 86400, now - 3 * 86400))
        expired.append(path)
    for index in range(3):
        path = cmroot / f"new{index}.parquet_crc32c-0000000{index}-3"
        path.write_bytes(b"new")
        os.utime(path, (now - 3600, now - 3600))  # recycled an hour ago: within the retention
        fresh.append(path)
    summary = run_app(
        "cm_cleanup.py",
        "--cmroot",
        str(cmroot),
        "--retention-seconds",
        "86400",
        "--spark-min-files",
        "1",
    ).summary
    assert (summary["deleted"], summary["kept"], summary["bytes_deleted"]) == (6, 3, 18)
    assert summary["failed"] == 0 and summary["spark_startup_seconds"] > 0
    assert sorted(p.name for p in cmroot.iterdir()) == sorted(p.name for p in fresh)


def test_bad_input_fails_clearly_without_changing_state(source, target, tmp_path) -> None:
    """No Spark starts for any of these: each fails before there is work to distribute."""
    seed(source)
    from hmsrepl.replication.engine import ReplicationEngine

    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    source.catalog.create_table(make_table("sales", "late"))
    before_state, before_id = capture_state(target, "sales_dr"), repl_status(target, "sales_dr")
    inc = engine.execute(f"REPL DUMP sales FROM {before_id}")
    missing_db = tmp_path / "nowhere" / "missing.db"
    dump_root = tmp_path / "bad-dumps"
    load = ["--command", f"REPL LOAD sales_dr FROM '{inc.dump_dir}'"]
    cases = {
        "missing source db": start(
            "repl_dump.py",
            "--command",
            "REPL DUMP sales",
            "--source-db-url",
            f"sqlite:///{missing_db}",
            "--dump-root",
            str(dump_root),
        ),
        "unreachable target db": start(
            "repl_load.py", *load, "--target-db-url", "postgresql+psycopg://hmsrepl@127.0.0.1:1/nowhere"
        ),
        "missing target db": start("repl_load.py", *load, "--target-db-url", f"sqlite:///{missing_db}"),
        "malformed command": start(
            "repl_dump.py", "--command", "REPL DUMPP sales", *side_args("source", source)
        ),
        "wrong command for the app": start(
            "repl_load.py", "--command", "REPL DUMP sales", *side_args("target", target)
        ),
        "not a dump directory": start(
            "repl_load.py",
            "--command",
            f"REPL LOAD sales_dr FROM '{tmp_path / 'no-dump'}'",
            *side_args("target", target),
        ),
        "no db url": start("repl_load.py", *load),
    }
    runs = {name: finish(process) for name, process in cases.items()}
    expected = {
        "missing source db": ("source metastore database", "missing.db", "does not exist"),
        "unreachable target db": ("cannot reach the target metastore database", "127.0.0.1:1"),
        "missing target db": ("target metastore database", "does not exist"),
        "malformed command": ("cannot parse REPL command", "REPL DUMPP"),
        "wrong command for the app": ("runs REPL LOAD commands",),
        "not a dump directory": ("is not a dump directory",),
        "no db url": ("--target-db-url",),
    }
    # Exit codes tell an orchestrator whether to retry: 1 an outage, 2 bad options, 3 what only a change of
    # settings or input fixes.
    codes = {"unreachable target db": 1, "no db url": 2}
    for name, run in runs.items():
        assert run.returncode == codes.get(name, 3), f"{name}: exit {run.returncode}\n{run.stderr}"
        assert "Traceback" not in run.stderr, f"{name}:\n{run.stderr}"
        assert run.stdout.strip() == "", f"{name} printed a summary: {run.stdout}"
        for fragment in expected[name]:
            assert fragment in run.error, f"{name}: {run.error!r} lacks {fragment!r}"
        assert "Spark" not in run.stderr, f"{name} started Spark"
    assert runs["no db url"].returncode == 2  # a usage error, as click reports them
    assert not missing_db.exists() and not missing_db.parent.exists()  # nothing created by a typo
    assert not dump_root.exists()
    assert repl_status(target, "sales_dr") == before_id
    assert diff_states(before_state, capture_state(target, "sales_dr")) == []
    # A load refused while planning its copies is recorded, as the CLI records it.
    failed = MetricsLog(target.engine).list(operation="load", status="failed")
    assert [(row.dump_id, row.policy) for row in failed] == [("no-dump", "sales_dr")]
    assert "is not a dump directory" in (failed[0].error or "")


def test_balance_spreads_large_files_and_counts_small_ones() -> None:
    """The copy's packing: big files go to different groups first; many small ones even out the rest."""
    costs = [400, 300, 300, 200] + [10] * 40
    groups = balance(costs, 4)
    totals = sorted(sum(costs[i] for i in group) for group in groups)
    assert totals[-1] - totals[0] <= 10
    assert sorted(i for group in groups for i in group) == list(range(len(costs)))
    assert [sorted(g)[0] for g in groups] == [0, 1, 2, 3]  # one large file per group
    assert balance([5], 8) == [[0]] and balance([], 3) == []
    # Many small files: more groups, so each task stays small to ship, in whole waves over the cores.
    assert group_count(10, 2) == 2 and group_count(2 * MAX_GROUP_ITEMS, 2) == 2
    assert group_count(2 * MAX_GROUP_ITEMS + 1, 2) == 4 and group_count(1_000_000, 8) == 248
