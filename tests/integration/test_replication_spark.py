"""Rubber-banding test: a randomised Spark workload on the source, dumps and loads interleaved.

The workload mixes Spark SQL statements on plain tables with transactional writes of DataFrames into an
insert-only ACID table (the foundation's writer: commits, aborts, and a write held open across loads), so
the states compared include ACID snapshots: what a reader with the store's ValidWriteIdList sees, and the
write-id state itself.

After every load the replica must show a state the source really had as of the load's last event id:
equal to the source state recorded at that event id when the load ends on a statement boundary; when LIMIT
cuts inside a statement (a statement can log several events), every object must equal its version just
before or just after that statement - never a version from another time and never a mix within one object
(but for a partition's basic statistics parameters, which follow an append's files one event later).
Half way through, the policy changes (REPL DUMP <new> REPLACE <old>): a table the old policy excluded comes in
with its data, one the new policy excludes is dropped, and later loads follow the new policy.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.acid import InsertOnlyWriter
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.verify import DatabaseState, ObjectState, capture_state, diff_states
from tests.helpers import make_table

pytestmark = pytest.mark.spark
SEEDS = [int(s) for s in os.environ.get("HMSREPL_RUBBER_BAND_SEEDS", "11,29").split(",")]
#: Where each seed's replica lives, in turn: a local disk, then HDFS (a MiniDFSCluster), whose staged copies
#: are published by rename and whose checksums come from the NameNode.
REPLICA_STORES = ("local", "hdfs")
CASES = [(seed, REPLICA_STORES[i % len(REPLICA_STORES)]) for i, seed in enumerate(SEEDS)]
STATEMENTS = int(os.environ.get("HMSREPL_RUBBER_BAND_STATEMENTS", "24"))
ACID_TABLE = "ledger"
ACID_KINDS = ("acid_append", "acid_append", "acid_overwrite", "acid_abort", "acid_hold")


@dataclass
class Workload:
    db: str
    rng: random.Random
    plain: str = "notes"
    counter: int = 0

    def rows(self, n: int = 2) -> str:
        self.counter += n
        return ", ".join(f"({self.counter - i}, 'row-{self.counter - i}')" for i in range(n))

    def next_statement(self) -> str:
        """Spark SQL text, or one of ACID_KINDS for a transactional DataFrame write (see AcidWrites)."""
        db, p = self.db, self.rng.choice(["a", "b", "c", "k:v"])
        kind = self.rng.choice(
            [
                *ACID_KINDS,
                "insert",
                "insert",
                "overwrite",
                "dynamic",
                "drop_part",
                "add_part",
                "plain",
                "plain_overwrite",
                "rename",
                "recreate",
            ]
        )
        if kind in ACID_KINDS:
            return kind
        if kind == "insert":
            return f"INSERT INTO {db}.events PARTITION (p='{p}') VALUES {self.rows()}"
        if kind == "overwrite":
            return f"INSERT OVERWRITE TABLE {db}.events PARTITION (p='{p}') VALUES {self.rows(1)}"
        if kind == "dynamic":
            q = self.rng.choice(["a", "d", "e"])
            self.counter += 2
            return f"INSERT INTO {db}.events PARTITION (p) VALUES ({self.counter}, 'x', '{p}'), ({self.counter - 1}, 'y', '{q}')"
        if kind == "drop_part":
            return f"ALTER TABLE {db}.events DROP IF EXISTS PARTITION (p='{p}')"
        if kind == "add_part":
            return f"ALTER TABLE {db}.events ADD IF NOT EXISTS PARTITION (p='{p}')"
        if kind == "plain":
            return f"INSERT INTO {db}.{self.plain} VALUES {self.rows()}"
        if kind == "plain_overwrite":
            return f"INSERT OVERWRITE TABLE {db}.{self.plain} VALUES {self.rows(1)}"
        if kind == "rename":
            old, self.plain = self.plain, "notes2" if self.plain == "notes" else "notes"
            return f"ALTER TABLE {db}.{old} RENAME TO {db}.{self.plain}"
        return self.rng.choice(
            [
                f"DROP TABLE IF EXISTS {db}.scratch",
                f"CREATE TABLE IF NOT EXISTS {db}.scratch (id INT, name STRING) STORED AS PARQUET",
                f"CREATE TABLE IF NOT EXISTS {db}.scratch (id INT, name STRING) STORED AS PARQUET",
            ]
        )


class Oracle:
    """Source states recorded at statement boundaries, keyed by the event id reached."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.states: list[DatabaseState] = []

    def record(self, event_id: int, state: DatabaseState) -> None:
        if self.ids and self.ids[-1] == event_id:
            self.states[-1] = state
            return
        self.ids.append(event_id)
        self.states.append(state)

    def check(self, replica: DatabaseState, last_id: int, policy: ReplicationPolicy) -> None:
        """The replica against the source states around ``last_id``, as far as ``policy`` includes tables."""
        k = bisect.bisect_right(self.ids, last_id) - 1
        assert k >= 0, f"replica at {last_id} is before the first recorded state {self.ids[0]}"
        if self.ids[k] == last_id or k + 1 == len(self.ids):
            assert diff_states(restrict(self.states[k], policy), replica) == [], f"replica at event {last_id}"
            return
        before, after = restrict(self.states[k], policy), restrict(self.states[k + 1], policy)
        assert before.parameters == replica.parameters or after.parameters == replica.parameters
        for attr in ("functions", "tables", "partitions"):
            mine, old, new = getattr(replica, attr), getattr(before, attr), getattr(after, attr)
            for key in set(mine) | set(old) | set(new):
                got = without_counts(mine.get(key))
                assert got in (without_counts(old.get(key)), without_counts(new.get(key))), (
                    f"replica at event {last_id} (between statements ending {self.ids[k]} and {self.ids[k + 1]}): "
                    f"{attr[:-1]} {key} shows a version the source never had at that point"
                )


#: Hive's basic statistics, which the metastore sets from an object's files (``metastore.basic_stats``).
COUNTS = ("numFiles", "totalSize", "numRows", "rawDataSize", "COLUMN_STATS_ACCURATE")


def without_counts(state: Any) -> Any:
    """An object's state without its basic statistics: a Spark append to a partition records its files in
    an INSERT event and the counts follow in the statement's next event (the alter_partition), so a load cut
    between the two shows the new files beside the old counts, as the source itself did between those
    commits (a table's INSERT carries its counts itself)."""
    if not isinstance(state, ObjectState):
        return state
    params = {k: v for k, v in state.metadata.get("parameters", {}).items() if k not in COUNTS}
    return dataclasses.replace(state, metadata={**state.metadata, "parameters": params})


def restrict(state: DatabaseState, policy: ReplicationPolicy) -> DatabaseState:
    """The part of a source state a replica of ``policy`` holds."""
    return DatabaseState(
        state.parameters,
        state.functions,
        {name: obj for name, obj in state.tables.items() if policy.includes_table(name)},
        {key: obj for key, obj in state.partitions.items() if policy.includes_table(key[0])},
    )


class AcidWrites:
    """Transactional writes of Spark DataFrames into the insert-only table, through InsertOnlyWriter.

    The source state is recorded after each call that changes what readers see (write id allocated,
    committed or aborted), so the oracle knows the state at every event id a LIMIT may cut at.
    """

    def __init__(self, spark, store: Metastore, db: str, record) -> None:
        self.spark, self.store, self.db, self.record = spark, store, db, record
        self.held: InsertOnlyWriter | None = None
        self.counter = self.commits = self.aborts = 0

    def _frame(self, n: int):
        self.counter += n
        rows = [(self.counter - i, f"acid-{self.counter - i}") for i in range(n)]
        return self.spark.createDataFrame(rows, "id INT, name STRING")

    def _begin(self, mode: str) -> InsertOnlyWriter:
        writer = InsertOnlyWriter(self.store, self.db, ACID_TABLE, mode=mode, heartbeat=False).begin()  # type: ignore[arg-type]
        self.record()
        self._frame(2 if mode == "append" else 1).write.format("parquet").mode("append").save(
            writer.target_uri
        )
        return writer

    def run(self, kind: str) -> None:
        if kind == "acid_hold":  # a long write: stays open across dumps and loads, commits later
            if self.held is None:
                self.held = self._begin("append")
                return
            self.held.commit()
            self.held = None
            self.commits += 1
        elif kind == "acid_abort":  # the Spark job wrote files, then the write failed: nothing visible
            self._begin("append").abort("the job failed")
            self.aborts += 1
        else:
            self._begin("overwrite" if kind == "acid_overwrite" else "append").commit()
            self.commits += 1
        self.record()

    def finish(self) -> None:
        if self.held is not None:
            self.run("acid_hold")


@pytest.mark.parametrize(("seed", "replica_store"), CASES)
def test_replica_never_shows_a_state_the_source_never_had(
    spark,
    session_store: Metastore,
    tmp_path: Path,
    seed: int,
    replica_store: str,
    request: pytest.FixtureRequest,
):
    rng = random.Random(seed)
    db = f"rb_{uuid.uuid4().hex[:8]}"
    base = request.getfixturevalue("hdfs_root") if replica_store == "hdfs" else str(tmp_path)
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db",
            warehouse=f"{base}/dst_wh",
            cmroot=f"{base}/dst_cm",
        )
    )
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, target)
    oracle = Oracle()

    def record() -> None:
        oracle.record(session_store.get_current_notification_event_id(), capture_state(session_store, db))

    acid = AcidWrites(spark, session_store, db, record)

    def statement(sql: str) -> None:
        if sql in ACID_KINDS:
            acid.run(sql)
            return
        spark.sql(sql).collect()
        record()

    statement(f"CREATE DATABASE {db}")
    statement(f"CREATE TABLE {db}.events (id INT, name STRING) PARTITIONED BY (p STRING) STORED AS PARQUET")
    statement(f"CREATE TABLE {db}.notes (id INT, name STRING) STORED AS TEXTFILE")
    statement(f"INSERT INTO {db}.events PARTITION (p='a') VALUES (0, 'first')")
    session_store.catalog.create_table(
        make_table(db, ACID_TABLE, transactional="true", transactional_properties="insert_only")
    )
    record()
    statement("acid_append")
    statement("acid_abort")  # the bootstrap carries an aborted write id
    # Before the policy change the replica leaves out 'scratch'; after it, 'events' (dropped on the replica)
    # while 'scratch' comes in, bootstrapped inside the REPLACE dump.
    policy = ReplicationPolicy(db, include=(".*",), exclude=("scratch",))
    replaced_by = ReplicationPolicy(db, include=(".*",), exclude=("events",))
    replica = f"{db}_dr"

    def load(dump_command: str) -> None:
        dumped = engine.execute(dump_command)
        engine.execute(f"REPL LOAD {replica} FROM '{dumped.dump_dir}'")
        oracle.check(capture_state(target, replica), repl_status(target, replica), policy)

    load(f"REPL DUMP {policy.to_text()}")
    workload = Workload(db, rng)
    loads = 0
    statement("acid_hold")  # opened after the bootstrap, open across the first loads
    statement(f"CREATE TABLE IF NOT EXISTS {db}.scratch (id INT, name STRING) STORED AS PARQUET")
    statement(f"INSERT INTO {db}.scratch VALUES (1, 'outside the first policy')")
    for step in range(STATEMENTS):
        if step == STATEMENTS // 2:
            old, policy = policy, replaced_by
            load(f"REPL DUMP {policy.to_text()} REPLACE {old.to_text()} FROM {repl_status(target, replica)}")
            assert "events" not in target.catalog.get_tables(replica)
            in_source = "scratch" in session_store.catalog.get_tables(db)
            assert ("scratch" in target.catalog.get_tables(replica)) == in_source
            loads += 1
        statement(workload.next_statement())
        if rng.random() < 0.4:
            limit = rng.choice([None, 1, 2, 3, 5])
            last = repl_status(target, replica)
            load(f"REPL DUMP {policy.to_text()} FROM {last}" + (f" LIMIT {limit}" if limit else ""))
            loads += 1
    acid.finish()
    while repl_status(target, replica) < session_store.get_current_notification_event_id():
        load(f"REPL DUMP {policy.to_text()} FROM {repl_status(target, replica)} LIMIT 4")
        loads += 1
    assert diff_states(capture_state(session_store, db, policy), capture_state(target, replica)) == []
    assert loads >= 4
    assert acid.commits >= 2 and acid.aborts >= 1
    spark.sql(f"DROP DATABASE {db} CASCADE")
    target.close()
