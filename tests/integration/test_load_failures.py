"""Loads fail cleanly: a full disk or a lost database connection stops a load with one line naming the cause
and the fix, nothing of the failed batch is left (version directories and staged copies removed, space
freed), the metrics row ends ``failed`` (or ``abandoned``), and the same load run again converges.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import VERSION_MARK, is_staging_name
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import FAILED, RUNNING, MetricsLog
from hmsrepl.replication.verify import verify
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, open_sqlite_source, repl_run_cli, write_file


def _unnamed(root: Path) -> list[str]:
    """Staged copies anywhere, and version directories that are not the current one of anything."""
    return [str(p) for p in root.rglob("*") if is_staging_name(p.name)]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs for the replica's warehouse (needs root; skipped where mounting is not allowed)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _used_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def test_full_disk_fails_cleanly_frees_space_and_rerun_converges(tmp_path: Path, small_fs: Path) -> None:
    source = open_sqlite_source(tmp_path)
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db",
            warehouse=str(small_fs / "wh"),
            cmroot=str(tmp_path / "dst_cm"),
        )
    )
    source.catalog.create_database(Database(name="big"))
    table = source.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
    [part] = source.catalog.add_partitions("big", "t", [make_partition(table, "small")])
    write_file(part.sd.location, "f0", os.urandom(100_000))
    source.catalog.insert("big", "t", ["small"])
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    assert (
        repl_run_cli(
            f"REPL LOAD big_dr FROM '{engine.execute('REPL DUMP big').dump_dir}'", target, engine.source
        ).returncode
        == 0
    )
    used_before = _used_bytes(small_fs)
    [part] = source.catalog.add_partitions("big", "t", [make_partition(table, "large")])
    for i in range(6):  # 3 MiB: more than the file system holds
        write_file(part.sd.location, f"f{i}", os.urandom(512 * 1024))
    source.catalog.insert("big", "t", ["large"])
    dump = engine.execute(f"REPL DUMP big FROM {repl_status(target, 'big_dr')}")
    failed = repl_run_cli(f"REPL LOAD big_dr FROM '{dump.dump_dir}'", target, engine.source)
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1, failed.stderr  # one line, no traceback
    assert "no space left" in lines[0] and "free space" in lines[0] and "big_dr" in lines[0]
    assert _unnamed(small_fs) == []
    assert _used_bytes(small_fs) <= used_before + 64 * 1024, "the failed batch's copies were not removed"
    assert not [p for p in small_fs.rglob(f"*{VERSION_MARK}*") if "large" in p.name]
    assert MetricsLog(target.engine).list(limit=1)[0].status == FAILED
    assert target.catalog.get_partition_names("big_dr", "t") == ["p=small"]  # nothing published
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_fs)], check=True)  # space is added
    assert repl_run_cli(f"REPL LOAD big_dr FROM '{dump.dump_dir}'", target, engine.source).returncode == 0
    assert verify(source, "big", target, "big_dr") == []
    target.close()
    source.close()


@pytest.mark.postgres
def test_lost_database_connection_fails_cleanly_and_rerun_converges(tmp_path: Path) -> None:
    source = open_sqlite_source(tmp_path)
    source.catalog.create_database(Database(name="pg"))
    table = source.catalog.create_table(make_table("pg", "t", partition_keys=("p",)))
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    with temporary_database("postgres", str(tmp_path)) as url:
        target = Metastore.open(
            MetastoreConfig(db_url=url, warehouse=str(tmp_path / "dst_wh"), cmroot=str(tmp_path / "dst_cm"))
        )
        assert (
            repl_run_cli(
                f"REPL LOAD pg_dr FROM '{engine.execute('REPL DUMP pg').dump_dir}'", target, engine.source
            ).returncode
            == 0
        )
        for i in range(40):
            [part] = source.catalog.add_partitions("pg", "t", [make_partition(table, f"d{i}")])
            for f in range(5):
                write_file(part.sd.location, f"f{f}", os.urandom(20_000))
            source.catalog.insert("pg", "t", [f"d{i}"])
        dump = engine.execute(f"REPL DUMP pg FROM {repl_status(target, 'pg_dr')}")
        name = make_url(url).database
        admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
        warehouse = tmp_path / "dst_wh"
        stop = threading.Event()

        def cut_connections() -> None:  # once the load is publishing, the database drops its sessions
            while not stop.is_set():
                if any("p=d" in p.name for p in warehouse.rglob(f"*{VERSION_MARK}*")):
                    with admin.connect() as conn:
                        conn.execute(
                            text(
                                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = :name AND pid <> pg_backend_pid()"
                            ),
                            {"name": name},
                        )
                    return
                time.sleep(0.005)

        cutter = threading.Thread(target=cut_connections)
        cutter.start()
        failed = repl_run_cli(f"REPL LOAD pg_dr FROM '{dump.dump_dir}'", target, engine.source)
        stop.set()
        cutter.join()
        admin.dispose()
        assert failed.returncode == 1, failed.stdout + failed.stderr
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1, failed.stderr
        assert "target metastore database failed" in lines[0] and "run the same REPL LOAD again" in lines[0]
        assert _unnamed(warehouse) == []
        done = repl_run_cli(f"REPL LOAD pg_dr FROM '{dump.dump_dir}'", target, engine.source)
        assert done.returncode == 0, done.stderr
        assert verify(source, "pg", target, "pg_dr") == []
        statuses = [row.status for row in MetricsLog(target.engine).list(limit=None)]
        assert RUNNING not in statuses and statuses[0] == "succeeded"
        assert statuses[1] in (FAILED, "abandoned")
        target.close()
    source.close()
