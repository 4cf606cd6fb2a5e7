"""Replication runs' Prometheus textfiles: what node_exporter would expose after real dumps and loads.

Expected values come from the source (its files on disk, its notification log), not from the engine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.monitoring.repl_textfile import FAILURE_CAUSES, LAG_FILE_PREFIX, RUNS_FILE, failure_cause
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, side_args, write_file
from tests.integration.test_repl_metrics import seed, source_objects


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a .prom file, keyed by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def test_runs_and_lag_are_written_for_the_textfile_collector(
    engine: ReplicationEngine, source: Metastore, target: Metastore, tmp_path: Path, monkeypatch
) -> None:
    textfiles = tmp_path / "textfiles"
    monkeypatch.setenv("HMSREPL_METRICS_TEXTFILE_DIR", str(textfiles))
    seed(source)
    _, _, files = source_objects(source, "sales")
    bootstrap = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{bootstrap.dump_dir}'")
    runs = samples(textfiles / RUNS_FILE)
    assert value(runs, "hmsrepl_repl_runs_total", policy="sales", operation="load", status="succeeded") == 1
    assert value(runs, "hmsrepl_repl_bytes_copied_total", policy="sales") == sum(files.values())
    assert value(runs, "hmsrepl_repl_load_duration_seconds_count", policy="sales") == 1
    assert value(runs, "hmsrepl_repl_last_run_succeeded", policy="sales", operation="load") == 1
    lag = samples(textfiles / f"{LAG_FILE_PREFIX}sales_dr.prom")
    assert value(lag, "hmsrepl_repl_lag_events", source_db="sales", target_db="sales_dr") == 0
    assert value(lag, "hmsrepl_repl_lag_seconds", source_db="sales", target_db="sales_dr") == 0

    # An incremental dump of 4 events; 2 more source events after it: the load leaves the replica 2 behind.
    orders = source.catalog.get_table("sales", "orders")
    [d4] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d4")])
    write_file(d4.sd.location, "part-d4.parquet", b"y" * 777)
    source.catalog.insert("sales", "orders", ["d4"])
    [d5] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d5")])
    write_file(d5.sd.location, "part-d5.parquet", b"z" * 50)
    source.catalog.insert("sales", "orders", ["d5"])
    incremental = engine.execute(f"REPL DUMP sales FROM {bootstrap.last_event_id} LIMIT 2")
    [d6] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d6")])
    write_file(d6.sd.location, "part-d6.parquet", b"w" * 5)
    source.catalog.insert("sales", "orders", ["d6"])
    engine.execute(f"REPL LOAD sales_dr FROM '{incremental.dump_dir}'")
    behind = source.get_notification_events_count(incremental.last_event_id, "sales")
    assert behind == 4
    runs = samples(textfiles / RUNS_FILE)
    assert value(runs, "hmsrepl_repl_events_applied_total", policy="sales") == 2
    assert value(runs, "hmsrepl_repl_events_dumped_total", policy="sales") == 2
    assert value(runs, "hmsrepl_repl_bytes_copied_total", policy="sales") == sum(files.values()) + 777
    assert value(runs, "hmsrepl_repl_runs_total", policy="sales", operation="load", status="succeeded") == 2
    lag = samples(textfiles / f"{LAG_FILE_PREFIX}sales_dr.prom")
    assert value(lag, "hmsrepl_repl_lag_events", source_db="sales", target_db="sales_dr") == behind
    assert value(lag, "hmsrepl_repl_lag_seconds", source_db="sales", target_db="sales_dr") > 0
    assert value(lag, "hmsrepl_repl_replica_event_id", source_db="sales", target_db="sales_dr") == (
        incremental.last_event_id
    )

    # A load that fails on a file changed behind the metastore's back is counted by its cause.
    rest = engine.execute(f"REPL DUMP sales FROM {incremental.last_event_id}")
    Path(local_path(d6.sd.location), "part-d6.parquet").write_bytes(b"changed")
    Path(local_path(d5.sd.location), "part-d5.parquet").write_bytes(b"changed too")
    with pytest.raises(Exception, match=r"part-d[56]\.parquet"):
        engine.execute(f"REPL LOAD sales_dr FROM '{rest.dump_dir}'")
    runs = samples(textfiles / RUNS_FILE)
    assert (
        value(runs, "hmsrepl_repl_failures_total", policy="sales", operation="load", cause="lost_files") == 1
    )
    assert value(runs, "hmsrepl_repl_last_run_succeeded", policy="sales", operation="load") == 0
    assert value(runs, "hmsrepl_repl_events_applied_total", policy="sales") == 2  # nothing was applied
    assert not list(textfiles.glob("*.prom.*")), "a temporary file was left next to the .prom files"
    if shutil.which("promtool"):  # the files are valid exposition text by Prometheus's own linter
        for path in textfiles.glob("*.prom"):
            linted = subprocess.run(
                ["promtool", "check", "metrics"], input=path.read_bytes(), capture_output=True
            )
            assert linted.returncode == 0, linted.stdout + linted.stderr


def test_repl_lag_refreshes_the_lag_file_between_loads(
    engine: ReplicationEngine, source: Metastore, target: Metastore, tmp_path: Path, monkeypatch
) -> None:
    textfiles = tmp_path / "textfiles"
    monkeypatch.setenv("HMSREPL_METRICS_TEXTFILE_DIR", str(textfiles))
    seed(source)
    engine.execute(f"REPL LOAD sales_dr FROM '{engine.execute('REPL DUMP sales').dump_dir}'")
    lag_file = textfiles / f"{LAG_FILE_PREFIX}sales_dr.prom"
    assert value(samples(lag_file), "hmsrepl_repl_lag_events", source_db="sales", target_db="sales_dr") == 0
    orders = source.catalog.get_table("sales", "orders")
    source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d9")])
    result = CliRunner().invoke(
        main, ["repl", "lag", "sales", "sales_dr", *side_args("source", source), *side_args("target", target)]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    lag = samples(lag_file)
    assert (
        value(lag, "hmsrepl_repl_lag_events", source_db="sales", target_db="sales_dr")
        == printed["events"]
        == 1
    )
    assert (
        value(lag, "hmsrepl_repl_lag_seconds", source_db="sales", target_db="sales_dr") == printed["seconds"]
    )


def test_without_a_textfile_directory_nothing_is_written(
    engine: ReplicationEngine, source: Metastore, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("HMSREPL_METRICS_TEXTFILE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    seed(source)
    engine.execute(f"REPL LOAD sales_dr FROM '{engine.execute('REPL DUMP sales').dump_dir}'")
    assert not list(tmp_path.rglob("*.prom"))


@pytest.mark.parametrize(
    ("status", "error", "cause"),
    [
        ("abandoned", "abandoned: the process running it ended", "abandoned"),
        ("failed", "KeyboardInterrupt: interrupted", "interrupted"),
        (
            "failed",
            "LoadFailedError: load into 'dr' failed: no space left on the target file system",
            "no_space",
        ),
        (
            "failed",
            "LoadFailedError: load into 'dr' failed: the target metastore database failed (x)",
            "database",
        ),
        (
            "failed",
            "LoadFailedError: load into 'dr' failed: the object store failed (ClientError: x)",
            "object_store",
        ),
        ("failed", "FileLostError: 'x' changed", "lost_files"),
        ("failed", "LoadFailedError: load into 'dr' failed: Permission denied ('/x')", "filesystem"),
        ("failed", "InvalidOperationError: 'dr' is protected", "refused"),
        ("failed", "ZeroDivisionError: division by zero", "other"),
        ("failed", None, "other"),
    ],
)
def test_failure_causes_are_a_bounded_set(status: str, error: str | None, cause: str) -> None:
    assert failure_cause(status, error) == cause
    assert cause in FAILURE_CAUSES
