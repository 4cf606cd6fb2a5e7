"""Dump retention: old dumps go, recent ones and one a replica must still finish loading stay.

Real dumps from a real source metastore; ages are set on the files, the way a week-old dump looks on disk.
After pruning, replication goes on: the next incremental dump starts from the replica's position and never
needs a removed dump.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.retention import dumps_in_use, prune_dumps
from hmsrepl.replication.target import BOOTSTRAP_IN_PROGRESS
from hmsrepl.replication.verify import verify
from tests.helpers import make_table, open_store, write_file

WEEK = 7 * 86400


def _age(directory: str, seconds: float) -> None:
    then = time.time() - seconds
    for path in Path(directory).rglob("*"):
        os.utime(path, (then, then))


def _insert(store, db: str, name: str) -> None:  # type: ignore[no-untyped-def]
    table = store.catalog.get_table(db, "t")
    write_file(table.sd.location or "", name, name.encode())
    store.catalog.insert(db, "t")


def test_old_dumps_are_removed_and_replication_goes_on(tmp_path: Path) -> None:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    dumps = tmp_path / "dumps"
    engine = ReplicationEngine(str(dumps), source, target)
    source.catalog.create_database(Database(name="sales"))
    source.catalog.create_table(make_table("sales", "t"))
    _insert(source, "sales", "f1")
    bootstrap = engine.execute("REPL DUMP sales").dump_dir  # type: ignore[union-attr]
    engine.execute(f"REPL LOAD sales_dr FROM '{bootstrap}'")
    _insert(source, "sales", "f2")
    first = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}").dump_dir  # type: ignore[union-attr]
    engine.execute(f"REPL LOAD sales_dr FROM '{first}'")
    # A second replica whose bootstrap load from an old dump was interrupted: that dump must stay.
    target.catalog.create_database(Database(name="other_dr", parameters={BOOTSTRAP_IN_PROGRESS: bootstrap}))
    _age(bootstrap, 2 * WEEK)
    _age(first, 2 * WEEK)
    _insert(source, "sales", "f3")
    recent = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}").dump_dir  # type: ignore[union-attr]

    assert dumps_in_use(target) == {bootstrap}
    dry = prune_dumps(str(dumps), WEEK, in_use=dumps_in_use(target), dry_run=True)
    assert dry.removed == [first] and Path(first).is_dir()
    result = prune_dumps(str(dumps), WEEK, in_use=dumps_in_use(target))

    assert result.removed == [first] and result.bytes_removed > 0
    assert result.kept_in_use == [bootstrap] and result.kept_recent == [recent]
    assert not Path(first).exists() and Path(bootstrap).is_dir() and Path(recent).is_dir()
    # Replication goes on from the replica's position.
    engine.execute(f"REPL LOAD sales_dr FROM '{recent}'")
    _insert(source, "sales", "f4")
    later = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}").dump_dir  # type: ignore[union-attr]
    engine.execute(f"REPL LOAD sales_dr FROM '{later}'")
    assert verify(source, "sales", target, "sales_dr") == []


def test_prune_dumps_cli(tmp_path: Path) -> None:
    source = open_store(tmp_path, "source")
    dumps = tmp_path / "dumps"
    source.catalog.create_database(Database(name="sales"))
    old = ReplicationEngine(str(dumps), source).execute("REPL DUMP sales").dump_dir  # type: ignore[union-attr]
    _age(old, 2 * WEEK)
    hmsrepl = Path(sys.executable).parent / "hmsrepl"
    done = subprocess.run(
        [str(hmsrepl), "repl", "prune-dumps", "--dump-root", str(dumps), "--retention-seconds", str(WEEK)],
        capture_output=True,
        text=True,
        env={**os.environ, "HMSREPL_TARGET_DB_URL": ""},
    )
    assert done.returncode == 0, done.stderr
    assert "removed 1 dumps" in done.stdout and not Path(old).exists()
