"""The command line refuses what its configuration cannot support, in one line, and writes only where asked.

Each refusal: exit code 1, one line naming the object and the fix, no traceback, nothing changed. The
working-directory test runs the CLI as an operator does (a child process in an empty directory, with no
``HMSREPL_*`` variables), because the embedded defaults are resolved against the working directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests import python_forks
from tests.helpers import make_partition, make_table, open_store, side_args, write_file

REPO = Path(__file__).resolve().parents[2]


def seed(store: Metastore) -> int:
    """Database ``sales`` with a partitioned table holding one file; returns the log's last event id."""
    store.catalog.create_database(Database(name="sales"))
    orders = store.catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    [part] = store.catalog.add_partitions("sales", "orders", [make_partition(orders, "d1")])
    write_file(part.sd.location or "", "part-0.parquet", b"rows")
    store.catalog.insert("sales", "orders", ["d1"])
    return store.events.current_event_id()


def tree_digest(root: Path) -> str:
    """Every path and file content below ``root``: equal digests mean nothing was written there."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def assert_one_line_refusal(output: str, exit_code: int, *needles: str) -> None:
    assert exit_code == 1, output
    assert "Traceback" not in output
    [line] = output.strip().splitlines()
    assert line.startswith("Error: ")
    for needle in needles:
        assert needle in line, line


def test_a_dump_from_beyond_the_log_is_refused(tmp_path: Path) -> None:
    source = open_store(tmp_path, "src")
    last = seed(source)
    dump_root = tmp_path / "dumps"
    done = CliRunner().invoke(
        main,
        [
            "repl",
            "run",
            "REPL DUMP sales FROM 999",
            *side_args("source", source),
            "--dump-root",
            str(dump_root),
        ],
    )
    assert_one_line_refusal(done.output, done.exit_code, "FROM 999", f"ends at event {last}")
    assert not dump_root.exists() or not any(dump_root.iterdir()), "a refused dump wrote a dump directory"
    # The log's end itself is a valid start (nothing new to dump), and a TO beyond it is only capped.
    for command in (f"REPL DUMP sales FROM {last}", "REPL DUMP sales FROM 0 TO 999"):
        ok = CliRunner().invoke(
            main, ["repl", "run", command, *side_args("source", source), "--dump-root", str(dump_root)]
        )
        assert ok.exit_code == 0, ok.output
        assert ok.output.strip().endswith(f"\t{last}")
    source.close()


def test_a_load_without_the_source_warehouse_names_the_missing_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = open_store(tmp_path, "src"), open_store(tmp_path, "dst")
    seed(source)
    dumped = CliRunner().invoke(
        main,
        ["repl", "run", "REPL DUMP sales", *side_args("source", source), "--dump-root", str(tmp_path / "d")],
    )
    assert dumped.exit_code == 0, dumped.output
    dump_dir = dumped.output.split("\t")[0]
    for name in ("WAREHOUSE", "CMROOT", "EXTERNAL_ROOTS"):
        monkeypatch.delenv(f"HMSREPL_SOURCE_{name}", raising=False)
    monkeypatch.setenv("HMSREPL_SOURCE_DB_URL", source.config.db_url)
    monkeypatch.setenv("HMSREPL_SOURCE_CMROOT", source.config.cmroot)
    before = tree_digest(tmp_path)
    done = CliRunner().invoke(
        main, ["repl", "run", f"REPL LOAD sales_dr FROM '{dump_dir}'", *side_args("target", target)]
    )
    assert_one_line_refusal(done.output, done.exit_code, "HMSREPL_SOURCE_WAREHOUSE", "--source-warehouse")
    assert "EXTERNAL_ROOTS" not in done.output and "HMSREPL_SOURCE_CMROOT" not in done.output
    assert "sales_dr" not in target.catalog.get_databases()
    assert tree_digest(tmp_path) == before
    source.close()
    target.close()


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HMSREPL_")}
    env.update(PYTHONPATH=f"{REPO / 'include'}:{REPO}", HMSREPL_REPL_RETIRE_GRACE_SECONDS="0")
    return python_forks.run_fresh("hmsrepl.cli", list(args), env, timeout=120, cwd=cwd)  # start-up is tested


def test_no_command_writes_into_the_working_directory(tmp_path: Path) -> None:
    """Side metastores named by URL only get no roots under the working directory: commands that write files
    refuse, naming the variables; the others only read. Either way the working directory stays empty."""
    root, cwd = tmp_path / "stores", tmp_path / "cwd"
    root.mkdir()
    cwd.mkdir()
    source, target = open_store(root, "src"), open_store(root, "dst")
    last = seed(source)
    src_url, dst_url = ["--source-db-url", source.config.db_url], ["--target-db-url", target.config.db_url]
    dumps = ["--dump-root", str(root / "dumps")]
    # Commands that need a side's roots refuse without them (before this fix, they used ./var/...).
    refused = {
        "REPL DUMP": _cli(cwd, "repl", "run", "REPL DUMP sales", *src_url, *dumps),
        "REPL LOAD": _cli(
            cwd, "repl", "run", f"REPL LOAD sales_dr FROM '{root}/dumps/x'", *src_url, *dst_url, *dumps
        ),
        "cleanup": _cli(cwd, "repl", "cleanup", "sales_dr", *dst_url),
        "failover": _cli(cwd, "repl", "failover", "sales", "sales_dr", *src_url, *dst_url, *dumps),
    }
    for what, done in refused.items():
        assert_one_line_refusal(done.stderr, done.returncode, what, "HMSREPL_")
    # Commands that use an existing metastore do not create one (nor its directory) where there is none.
    for args in (
        ["events", "current-id"],
        ["txns", "show"],
        ["intents", "list"],
        ["repl", "metrics", "--target-db-url", "sqlite:///var/replica.db"],
    ):
        done = _cli(cwd, *args)
        assert_one_line_refusal(done.stderr, done.returncode, "schema upgrade")
    # With every root configured, a replication round writes only into the configured places.
    dumped = _cli(cwd, "repl", "run", "REPL DUMP sales", *side_args("source", source), *dumps)
    assert dumped.returncode == 0, dumped.stderr
    dump_dir = dumped.stdout.split("\t")[0]
    loaded = _cli(
        cwd,
        "repl",
        "run",
        f"REPL LOAD sales_dr FROM '{dump_dir}'",
        *side_args("target", target),
        *("--source-warehouse", source.config.warehouse, "--source-cmroot", source.config.cmroot),
    )
    assert loaded.returncode == 0, loaded.stderr
    # Commands that only read work with the URLs alone.
    for args in (
        ["repl", "run", "REPL STATUS sales_dr", *dst_url],
        ["repl", "verify", "sales", "sales_dr", *src_url, *dst_url],
        ["repl", "lag", "sales", "sales_dr", *src_url, *dst_url],
        ["repl", "metrics", *dst_url],
        ["repl", "run", f"REPL DUMP sales FROM {last + 5}", *side_args("source", source), *dumps],
    ):
        done = _cli(cwd, *args)
        assert "Traceback" not in done.stderr, done.stderr
    assert list(cwd.iterdir()) == []
    source.close()
    target.close()
