"""A load killed at random points converges when run again: no file lost or duplicated, no staging left.

The load runs as a real OS process (the CLI) and is killed with SIGKILL once it has made a random amount of
progress, observed on disk; then it is run again until it finishes. The replica must then equal the source.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import STAGING_PREFIX
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests import python_forks
from tests.helpers import make_partition, make_table, write_file

PARTITIONS = 40
FILES_PER_PARTITION = 5


def _cli_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": python_forks.PYTHONPATH,
        "HMSREPL_TARGET_DB_URL": f"sqlite:///{tmp_path}/target.db",
        "HMSREPL_TARGET_WAREHOUSE": str(tmp_path / "dst_wh"),
        "HMSREPL_TARGET_CMROOT": str(tmp_path / "dst_cm"),
        "HMSREPL_SOURCE_WAREHOUSE": str(tmp_path / "src_wh"),
        "HMSREPL_SOURCE_CMROOT": str(tmp_path / "src_cm"),
    }


def _data_files(root: Path) -> int:
    """Published data files under root; tolerant of directories the running load removes meanwhile."""
    return sum(1 for _, _, names in os.walk(root) for name in names if not name.startswith((".", "_")))


def _run_load_until_killed(command: str, env: dict[str, str], warehouse: Path, kill_after_files: int) -> bool:
    """Start the load; SIGKILL it once the target holds ``kill_after_files`` data files. True if it was killed."""
    nowhere = Path(os.devnull)
    proc = python_forks.start_module(
        "hmsrepl.cli", ["repl", "run", command], env, output=nowhere, errors=nowhere
    )
    try:
        while proc.poll() is None:
            if warehouse.exists() and _data_files(warehouse) >= kill_after_files:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return True
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("seed", [3, 8])
def test_killed_loads_converge(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    source = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=str(tmp_path / "src_wh"),
            cmroot=str(tmp_path / "src_cm"),
        )
    )
    Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db",
            warehouse=str(tmp_path / "dst_wh"),
            cmroot=str(tmp_path / "dst_cm"),
        )
    ).close()
    source.catalog.create_database(Database(name="big"))
    table = source.catalog.create_table(make_table("big", "t", partition_keys=("p",)))

    def add_partitions(start: int, count: int) -> None:
        for i in range(start, start + count):
            [part] = source.catalog.add_partitions("big", "t", [make_partition(table, f"p{i:03d}")])
            for f in range(FILES_PER_PARTITION):
                write_file(part.sd.location, f"part-{f}.parquet", os.urandom(rng.randint(1, 64 * 1024)))
            source.catalog.insert("big", "t", [f"p{i:03d}"])

    add_partitions(0, PARTITIONS)
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    env = _cli_env(tmp_path)
    warehouse = tmp_path / "dst_wh"
    total = PARTITIONS * FILES_PER_PARTITION

    def load_with_kills(dump_dir: str, files_expected: int) -> int:
        kills = 0
        command = f"REPL LOAD big_dr FROM '{dump_dir}'"
        for _ in range(3):  # kill up to three times at random points, then let it finish
            done = _data_files(warehouse) if warehouse.exists() else 0
            point = done + rng.randint(1, max(1, files_expected - 1))
            kills += _run_load_until_killed(command, env, warehouse, point)
        finished = python_forks.run_cli(["repl", "run", command], env, timeout=300)
        assert finished.returncode == 0, finished.stderr
        return kills

    bootstrap = engine.execute("REPL DUMP big")
    kills = load_with_kills(bootstrap.dump_dir, total)
    target = Metastore(
        MetastoreConfig(
            db_url=env["HMSREPL_TARGET_DB_URL"], warehouse=str(warehouse), cmroot=env["HMSREPL_TARGET_CMROOT"]
        )
    )
    assert verify(source, "big", target, "big_dr") == []

    add_partitions(PARTITIONS, PARTITIONS // 2)
    source.catalog.drop_partitions("big", "t", [[f"p{i:03d}"] for i in range(0, PARTITIONS, 4)])
    incremental = engine.execute(f"REPL DUMP big FROM {repl_status(target, 'big_dr')}")
    kills += load_with_kills(incremental.dump_dir, PARTITIONS // 2 * FILES_PER_PARTITION)
    assert verify(source, "big", target, "big_dr") == []
    assert repl_status(target, "big_dr") == incremental.last_event_id
    assert not [p for p in warehouse.rglob(f"{STAGING_PREFIX}*")], "staged copies left behind"
    assert kills >= 1, "the loads finished before any kill: make the workload larger"
    target.close()
    source.close()
