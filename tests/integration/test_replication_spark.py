"""Rubber-banding test: a randomised Spark SQL workload on the source, dumps and loads interleaved.

After every load the replica must show a state the source really had as of the load's last event id:
equal to the source state recorded at that event id when the load ends on a statement boundary; when LIMIT
cuts inside a statement (a statement can log several events), every object must equal its version just
before or just after that statement - never a version from another time and never a mix within one object.
"""

from __future__ import annotations

import bisect
import os
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import DatabaseState, capture_state, diff_states

pytestmark = pytest.mark.spark
SEEDS = [int(s) for s in os.environ.get("HMSREPL_RUBBER_BAND_SEEDS", "11,29").split(",")]
STATEMENTS = int(os.environ.get("HMSREPL_RUBBER_BAND_STATEMENTS", "24"))


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
        db, p = self.db, self.rng.choice(["a", "b", "c", "k:v"])
        kind = self.rng.choice(
            [
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

    def check(self, replica: DatabaseState, last_id: int) -> None:
        k = bisect.bisect_right(self.ids, last_id) - 1
        assert k >= 0, f"replica at {last_id} is before the first recorded state {self.ids[0]}"
        if self.ids[k] == last_id or k + 1 == len(self.ids):
            assert diff_states(self.states[k], replica) == [], f"replica at event {last_id}"
            return
        before, after = self.states[k], self.states[k + 1]
        assert before.parameters == replica.parameters or after.parameters == replica.parameters
        for attr in ("functions", "tables", "partitions"):
            mine, old, new = getattr(replica, attr), getattr(before, attr), getattr(after, attr)
            for key in set(mine) | set(old) | set(new):
                got = mine.get(key)
                assert got in (old.get(key), new.get(key)), (
                    f"replica at event {last_id} (between statements ending {self.ids[k]} and {self.ids[k + 1]}): "
                    f"{attr[:-1]} {key} shows a version the source never had at that point"
                )


@pytest.mark.parametrize("seed", SEEDS)
def test_replica_never_shows_a_state_the_source_never_had(
    spark, session_store: Metastore, tmp_path: Path, seed: int
):
    rng = random.Random(seed)
    db = f"rb_{uuid.uuid4().hex[:8]}"
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db",
            warehouse=str(tmp_path / "dst_wh"),
            cmroot=str(tmp_path / "dst_cm"),
        )
    )
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, target)
    oracle = Oracle()

    def statement(sql: str) -> None:
        spark.sql(sql).collect()
        oracle.record(session_store.get_current_notification_event_id(), capture_state(session_store, db))

    statement(f"CREATE DATABASE {db}")
    statement(f"CREATE TABLE {db}.events (id INT, name STRING) PARTITIONED BY (p STRING) STORED AS PARQUET")
    statement(f"CREATE TABLE {db}.notes (id INT, name STRING) STORED AS TEXTFILE")
    statement(f"INSERT INTO {db}.events PARTITION (p='a') VALUES (0, 'first')")
    dumped = engine.execute(f"REPL DUMP {db}")
    engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
    oracle.check(capture_state(target, f"{db}_dr"), repl_status(target, f"{db}_dr"))

    workload = Workload(db, rng)
    loads = 0
    for _ in range(STATEMENTS):
        statement(workload.next_statement())
        if rng.random() < 0.4:
            limit = rng.choice([None, 1, 2, 3, 5])
            last = repl_status(target, f"{db}_dr")
            dumped = engine.execute(f"REPL DUMP {db} FROM {last}" + (f" LIMIT {limit}" if limit else ""))
            engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
            oracle.check(capture_state(target, f"{db}_dr"), repl_status(target, f"{db}_dr"))
            loads += 1
    while repl_status(target, f"{db}_dr") < session_store.get_current_notification_event_id():
        dumped = engine.execute(f"REPL DUMP {db} FROM {repl_status(target, f'{db}_dr')} LIMIT 4")
        engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
        oracle.check(capture_state(target, f"{db}_dr"), repl_status(target, f"{db}_dr"))
        loads += 1
    assert diff_states(capture_state(session_store, db), capture_state(target, f"{db}_dr")) == []
    assert loads >= 3
    spark.sql(f"DROP DATABASE {db} CASCADE")
    target.close()
