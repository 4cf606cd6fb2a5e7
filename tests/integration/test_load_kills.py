"""Loads killed with SIGKILL at random steps converge when run again, to exactly the source's state.

Each round changes the source with a random mix of operations (creates, drops, renames onto freed and
re-created names, partition adds and drops, inserts and overwrites; tests/compaction_workload.py) and of
transactional writes to an insert-only ACID table (appends, overwrites, aborts: OPEN/ALLOC/COMMIT_TXN), dumps the
window (event compaction on or off at random), then runs the load as a real OS process (the CLI) that kills
itself with SIGKILL at a random step (``HMSREPL_TEST_KILL_AT_STEP``: every copied or linked file, every
version directory, before and after each batch's commit, during retirement). The killed load is run again,
sometimes killed again, until it finishes. After every round: the replica equals the source (metadata,
checksums, and no leftover file or directory: ``verify``), no staged copy is left anywhere under the
replica's warehouse, and no metrics row stays ``running``. After every kill of an incremental load, the
replica's tables (with the renames a committed batch still owed done, as the next run's start does) are
exactly the source's at the position the replica shows, compaction on or off (holds.py).

15 kills by default (1-2 minutes on a busy 2-core machine), 5 on an HDFS replica; ``HMSREPL_KILL_TEST_ROUNDS=120``
for a long run.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hmsrepl.acid import InsertOnlyWriter
from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.dir_processes import THRESHOLD_ENV as DIR_THRESHOLD_ENV
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failures import KILL_AT_ENV
from hmsrepl.replication.filecopy import is_staging_name
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import RUNNING, MetricsLog
from hmsrepl.replication.replica_versions import STANDBY_MIN_FILES_ENV
from hmsrepl.replication.verify import verify
from tests import python_forks
from tests.compaction_workload import TABLES, apply_ops, create_database, policy_text, random_ops
from tests.helpers import make_partition, make_table, open_store, side_args, write_file
from tests.replica_states import History, States, states

ROUNDS = int(os.environ.get("HMSREPL_KILL_TEST_ROUNDS", "15"))
HDFS_ROUNDS = int(os.environ.get("HMSREPL_KILL_TEST_ROUNDS", "5"))
NO_COMPACTION = " WITH ('hmsrepl.repl.compact.events'='false')"
# More data changes and renames than the uniform mix: they are what a kill can catch half-published.
WEIGHTS = (2, 1.5, 2, 2, 1, 1, 3, 3, 1)
ACID_TABLE = "t9"  # in the policy, outside the workload's name pool: written by transactions only
ACID = {"transactional": "true", "transactional_properties": "insert_only"}


def _load(command: str, target_args: list[str], kill_at: int | None) -> subprocess.CompletedProcess[str]:
    # Appends of several files build their versions from standbys here too (the tables are small), and the
    # empty versions past a writer's second are made by the directory process, which a kill can catch too.
    env = {
        **os.environ,
        "PYTHONPATH": python_forks.PYTHONPATH,
        STANDBY_MIN_FILES_ENV: "1",
        DIR_THRESHOLD_ENV: "2",
    }
    env.pop(KILL_AT_ENV, None)
    if kill_at is not None:
        env[KILL_AT_ENV] = str(kill_at)
    return python_forks.run_cli(["repl", "run", command, *target_args, "--no-progress"], env, timeout=300)


def acid_writes(store: Metastore, db: str, rng: random.Random, tag: str) -> None:
    """0-2 transactional writes (append, overwrite, or aborted) into the ACID table's partitions."""
    for i in range(rng.randint(0, 2)):
        values = [rng.choice("ab")]
        mode = rng.choice(("append", "append", "overwrite"))
        writer = InsertOnlyWriter(store, db, ACID_TABLE, values, mode=mode, heartbeat=False).begin()
        write_file(writer.target_uri, "part-0.txt", f"{tag}-{i} {mode}".encode() * 64)
        if rng.random() < 0.15:
            writer.abort()
        else:
            writer.commit()


def _source_roots(source: Metastore) -> list[str]:
    """The source roots a load trusts come from its own configuration, never from the dump."""
    return ["--source-warehouse", str(source.config.warehouse), "--source-cmroot", str(source.config.cmroot)]


def _staged(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if is_staging_name(p.name)]


def test_killed_loads_converge_to_the_source(tmp_path: Path) -> None:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    killed_loads_converge(source, target, tmp_path, ROUNDS, lambda: _staged(tmp_path / "target_wh"))


def test_killed_loads_into_an_hdfs_replica_converge_to_the_source(
    tmp_path: Path, hdfs_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a replica whose warehouse and cmroot are on HDFS (a MiniDFSCluster): staged copies are
    published by rename there, and a kill between the copy and the rename must converge the same way."""
    from hmsrepl.config import MetastoreConfig
    from hmsrepl.storage import filesystem_for
    from hmsrepl.storage.hdfs import CHECKSUM_ENV

    monkeypatch.setenv(CHECKSUM_ENV, "read")  # small files; no JVM per killed load process
    source = open_store(tmp_path, "source")
    warehouse = f"{hdfs_root}/dst/warehouse"
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db", warehouse=warehouse, cmroot=f"{hdfs_root}/dst/cm"
        )
    )

    def staged() -> list[str]:
        fs = filesystem_for(warehouse)
        return [
            status.uri for status in fs.list_files(warehouse) if is_staging_name(status.uri.rsplit("/", 1)[1])
        ]

    killed_loads_converge(source, target, tmp_path, HDFS_ROUNDS, staged)


def killed_loads_converge(
    source: Metastore,
    target: Metastore,
    tmp_path: Path,
    rounds_of_kills: int,
    staged: Callable[[], list[str]],
) -> None:
    """Random windows of changes, each loaded by processes killed at random steps until one finishes; the
    replica converges after every window and every intermediate state is the source's at its position."""
    rng = random.Random(int(os.environ.get("HMSREPL_KILL_TEST_SEED", "19")))
    target_args = [*side_args("target", target), *_source_roots(source)]
    db, replica = "kdb", "kdb_dr"
    policy = policy_text(db)
    create_database(source, db)
    acid = source.catalog.create_table(make_table(db, ACID_TABLE, partition_keys=("p",), **ACID))
    source.catalog.add_partitions(db, ACID_TABLE, [make_partition(acid, v) for v in ("a", "b")])
    apply_ops(source, db, random_ops(rng, 30, WEIGHTS), tag="b", payload=2048)
    acid_writes(source, db, rng, "b")
    history = History(source, db, TABLES)  # the source's tables at every event id from the bootstrap on
    history.record()
    intermediate: list[tuple[int, States, States | None]] = []  # (position, replica, source there)
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    metrics = MetricsLog(target.engine)
    kills = rounds = 0
    reach = (
        6  # kill steps are drawn from 1..reach: grows while loads get killed, shrinks when they finish first
    )
    dump = engine.execute(f"REPL DUMP {policy}")
    while kills < rounds_of_kills:
        command = f"REPL LOAD {replica} FROM '{dump.dump_dir}'"
        kill_at: int | None = rng.randint(1, reach)
        while True:  # killed at a random step, maybe again while re-running, until a run finishes
            done = _load(command, target_args, kill_at)
            if done.returncode != -9:
                assert done.returncode == 0, done.stderr
                if kill_at is not None:
                    reach = max(3, reach // 2)
                break
            kills += 1
            reach += 3
            if rounds:  # an incremental load (a bootstrap's tables are a mix until it finishes)
                target.complete_file_intents(lease_seconds=0)
                position = repl_status(target, replica) or 0
                intermediate.append((position, states(target, replica, TABLES), history.at(position)))
            kill_at = rng.randint(1, reach) if rng.random() < 0.4 else None
        rounds += 1
        print(f"round {rounds}: {kills} kills so far", flush=True)
        differences = verify(source, db, target, replica, parse_policy(policy))
        assert differences == [], f"round {rounds} (after {kills} kills): {differences}"
        assert repl_status(target, replica) == dump.last_event_id
        assert staged() == [], f"round {rounds}: staged copies left"
        assert not metrics.list(status=RUNNING, limit=None), "a killed run's metrics row stayed 'running'"
        # the next window
        ops = random_ops(rng, rng.randint(3, 12), WEIGHTS)
        apply_ops(source, db, ops, tag=f"r{rounds}-", payload=2048, on_event=history.record)
        acid_writes(source, db, rng, f"r{rounds}")
        options = "" if rng.random() < 0.5 else NO_COMPACTION
        dump = engine.execute(f"REPL DUMP {policy} FROM {repl_status(target, replica)}{options}")
    foreign = [(position, seen) for position, seen, there in intermediate if seen != there]
    print(
        f"{kills} kills in {rounds} rounds: every re-run converged; {len(intermediate)} intermediate states, "
        f"{len(foreign)} not the source's at their position"
    )
    assert foreign == []
    source.close()
    target.close()


def test_rename_then_killed_insert_converges(tmp_path: Path) -> None:
    """The issue's repro: CREATE a, INSERT a, RENAME a TO b, then a large insert; with compaction off (a
    documented setting) the load is killed at every step in turn; each re-run finishes, replica == source."""
    from hmsrepl.metastore.model import Database
    from tests.helpers import make_partition, make_table, write_file

    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    target_args = [*side_args("target", target), *_source_roots(source)]
    source.catalog.create_database(Database(name="r"))
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)
    dump = engine.execute("REPL DUMP r")
    assert _load(f"REPL LOAD r_dr FROM '{dump.dump_dir}'", target_args, None).returncode == 0
    table = source.catalog.create_table(make_table("r", "a", partition_keys=("p",)))
    [part] = source.catalog.add_partitions("r", "a", [make_partition(table, "a b")])
    write_file(part.sd.location, "part-0", b"first")
    source.catalog.insert("r", "a", ["a b"])
    renamed = source.catalog.get_table("r", "a").model_copy(update={"table_name": "b"})
    source.catalog.alter_table("r", "a", renamed)
    part = source.catalog.get_partition("r", "b", ["a b"])
    for i in range(1, 8):
        write_file(part.sd.location, f"part-{i}", os.urandom(4096))
    source.catalog.insert("r", "b", ["a b"])
    dump = engine.execute(f"REPL DUMP r FROM {repl_status(target, 'r_dr')}{NO_COMPACTION}")
    command = f"REPL LOAD r_dr FROM '{dump.dump_dir}'"
    step = 1
    while (done := _load(command, target_args, step)).returncode == -9:  # killed at step 1, 2, ... in turn
        step += 1
    assert done.returncode == 0, done.stderr
    assert step > 3, "the load finished before the kills reached its data"
    assert _load(command, target_args, None).returncode == 0
    assert verify(source, "r", target, "r_dr") == []
    assert _staged(tmp_path / "target_wh") == []


def test_renamed_empty_table_stays_readable_on_source_and_replica(tmp_path: Path) -> None:
    """CREATE TABLE x0; ALTER TABLE x0 RENAME TO x1: x1's directory exists on the source and the replica."""
    from hmsrepl.metastore.model import Database
    from hmsrepl.storage.local import local_path
    from tests.helpers import make_table

    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    source.catalog.create_database(Database(name="e"))
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    engine.execute(f"REPL LOAD e_dr FROM '{engine.execute('REPL DUMP e').dump_dir}'")
    for name, keys in (("x0", ()), ("y0", ("p",))):
        source.catalog.create_table(make_table("e", name, partition_keys=keys))
        renamed = source.catalog.get_table("e", name).model_copy(update={"table_name": name[0] + "1"})
        source.catalog.alter_table("e", name, renamed)
    engine.execute(
        f"REPL LOAD e_dr FROM '{engine.execute('REPL DUMP e FROM ' + str(repl_status(target, 'e_dr'))).dump_dir}'"
    )
    for store, db in ((source, "e"), (target, "e_dr")):
        for name in ("x1", "y1"):
            assert Path(local_path(store.catalog.get_table(db, name).sd.location)).is_dir(), (db, name)
    assert verify(source, "e", target, "e_dr") == []
