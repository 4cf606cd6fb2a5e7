"""A Spark writer without Hadoop trash: INSERT OVERWRITE deletes the old files before the metastore hears of it.

Each file the metastore records is pinned into cmroot by a hard link when it is recorded, so the files an
event names stay fetchable after the writer deleted them: a replica loaded one event window at a time still
equals the source at every replicated event id (compaction off: every overwrite is replayed, including those
whose files a later overwrite deleted).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import DatabaseState, capture_state, diff_states
from tests.helpers import open_store
from tests.servers import REPO, metastore_server

pytestmark = pytest.mark.spark
EVERY_EVENT = "WITH ('hmsrepl.repl.compact.events'='false')"

# A SparkSession as the README documents it, but with Hadoop trash off; it runs the SQL lines it reads.
WRITER = textwrap.dedent(
    """
    import sys
    from hmsrepl.spark_session import hive_spark_session
    spark = hive_spark_session(
        "no-trash-writer", sys.argv[1], sys.argv[2], extra_conf={"spark.hadoop.fs.trash.interval": "0"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    print("ready", flush=True)
    for line in sys.stdin:
        spark.sql(line).collect()
        print("ok", flush=True)
    spark.stop()
    """
)


class Writer:
    """A Spark process writing through the metastore, one statement per call."""

    def __init__(self, uri: str, warehouse: str, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, uri, warehouse],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(root / "writer.log", "w"),  # noqa: SIM115 - closed with the process
            text=True,
            env=env,
            cwd=root,
        )
        assert self._answer() == "ready"

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line, "the Spark writer died; see writer.log"
        return line

    def sql(self, statement: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(statement + "\n")
        self.proc.stdin.flush()
        assert self._answer() == "ok", statement

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def writer_and_source(tmp_path: Path) -> Iterator[tuple[Writer, Metastore, str]]:
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/source.db") as server:
        writer = Writer(server.uri, server.warehouse, tmp_path)
        source = Metastore(server.config)
        try:
            yield writer, source, server.warehouse
        finally:
            writer.close()
            source.close()


def data_files(warehouse: str) -> set[str]:
    return {
        os.path.join(d, f)
        for d, _, files in os.walk(warehouse)
        for f in files
        if not f.startswith((".", "_"))
    }


def test_overwrites_without_trash_replicate_at_every_event_id(
    writer_and_source: tuple[Writer, Metastore, str], tmp_path: Path
) -> None:
    writer, source, warehouse = writer_and_source
    target = open_store(tmp_path, "target")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    writer.sql("CREATE DATABASE nt")
    writer.sql("CREATE TABLE nt.parts (id INT) PARTITIONED BY (p STRING) STORED AS PARQUET")
    writer.sql("CREATE TABLE nt.plain (id INT) STORED AS PARQUET")
    writer.sql("INSERT INTO nt.parts PARTITION (p='a') VALUES (1), (2)")
    writer.sql("INSERT INTO nt.plain VALUES (1)")
    boot = engine.execute("REPL DUMP nt")
    engine.execute(f"REPL LOAD nt_dr FROM '{boot.dump_dir}'")
    states: list[tuple[int, DatabaseState]] = []
    first_files = data_files(warehouse)
    for round_ in range(3):
        writer.sql(f"INSERT OVERWRITE TABLE nt.parts PARTITION (p='a') VALUES ({10 + round_})")
        writer.sql(f"INSERT OVERWRITE TABLE nt.plain VALUES ({20 + round_})")
        states.append((source.get_current_notification_event_id(), capture_state(source, "nt")))
    # No trash: the writer deleted what it overwrote (nothing of the first files is left in the warehouse).
    assert not first_files & data_files(warehouse)
    position = repl_status(target, "nt_dr")
    for event_id, state in states:  # one window per recorded state: each overwrite's files were deleted since
        dumped = engine.execute(f"REPL DUMP nt FROM {position} TO {event_id} {EVERY_EVENT}")
        engine.execute(f"REPL LOAD nt_dr FROM '{dumped.dump_dir}'")
        position = repl_status(target, "nt_dr")
        assert position == event_id
        assert diff_states(state, capture_state(target, "nt_dr")) == [], f"source event {event_id}"
    target.close()
