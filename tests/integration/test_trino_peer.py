"""Trino 476 against our metastore: its Hive and Iceberg connectors write, read, analyze and drop tables, and
the tables replicate and read the same through a second pair of catalogs on the replica.

One Trino server (``tests/peers/trino_server.py``, from Maven Central through ``tests/peers/trino.py``) runs
for the session with four catalogs: ``hive`` and ``iceberg`` on the source's metastore server (SQLite),
``hive_dr`` and ``iceberg_dr`` on the replica's (PostgreSQL when the test server is there). Each test asserts
the rows Trino reads back and the metastore's own state (tables, partitions, statistics, files on disk), and
that the servers answered every call Trino made.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from trino.exceptions import TrinoQueryError

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.peers import trino as trino_peer
from tests.peers.trino_server import TrinoServer, hive_catalog, iceberg_catalog, trino_server
from tests.servers import Hive2Client, RunningMetastore, metastore_server

pytestmark = pytest.mark.trino

#: A replica's catalog settings (docs/clients.md), beside its statistics cache set per connector below.
REPLICA_CATALOG = {"hive.metastore.thrift.client.max-retries": "2"}


@dataclass(frozen=True)
class TrinoSides:
    trino: TrinoServer
    source: RunningMetastore
    replica: RunningMetastore
    dumps: Path


def _replica_backend() -> str:
    """PostgreSQL for the replica when its test server is configured, else SQLite."""
    return "postgres" if os.environ.get("HMSREPL_TEST_POSTGRES_URL") else "sqlite"


@pytest.fixture(scope="session")
def trino_sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoSides]:
    """One Trino for the session, its catalogs on a source and a replica metastore server."""
    if not trino_peer.is_cached() and not trino_peer.central_reachable():
        pytest.skip(
            "Maven Central is unreachable and var/peers holds no Trino server: "
            "run 'python -m tests.peers.trino' where it is reachable"
        )
    try:
        trino_peer.java_home()
    except trino_peer.FetchError as error:
        pytest.skip(str(error))
    root = tmp_path_factory.mktemp("trino")
    for side in ("src", "dst", "trino"):
        (root / side).mkdir()
    with (
        temporary_database("sqlite", str(root / "src")) as src_url,
        metastore_server(root / "src", src_url) as source,
        temporary_database(_replica_backend(), str(root / "dst")) as dst_url,
        metastore_server(root / "dst", dst_url) as replica,
    ):
        catalogs = {
            "hive": hive_catalog(source.uri),
            "iceberg": iceberg_catalog(source.uri, **{"iceberg.expire-snapshots.min-retention": "0s"}),
            # REPL LOAD changes the replica behind Trino's back: no cached statistics (5 minutes by default).
            # Trino retries a refused drop or lock as it would a lost connection (9 times by default, about
            # 18 s before the refusal is shown): on a replica, which refuses every write, two retries.
            "hive_dr": hive_catalog(
                replica.uri, **REPLICA_CATALOG, **{"hive.metastore-stats-cache-ttl": "0s"}
            ),
            "iceberg_dr": iceberg_catalog(replica.uri, **REPLICA_CATALOG),
        }
        with trino_server(root / "trino", catalogs) as trino:
            yield TrinoSides(trino, source, replica, root / "dumps")


@pytest.fixture
def sides(trino_sides: TrinoSides) -> Iterator[TrinoSides]:
    """The session's servers; after each test, neither metastore may have logged a call it did not serve."""
    yield trino_sides
    for server in (trino_sides.source, trino_sides.replica):
        assert unserved_calls(server) == []


@pytest.fixture
def schema(trino_sides: TrinoSides) -> str:
    """A fresh schema name (each test creates its own, so the tests do not depend on one another)."""
    return f"t_{uuid.uuid4().hex[:8]}"


def unserved_calls(server: RunningMetastore) -> list[str]:
    """Log lines of calls the server did not answer as asked: unknown methods and internal errors."""
    lines = server.log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "does not serve" in line or "internal error" in line]


@contextmanager
def opened(server: RunningMetastore) -> Iterator[Metastore]:
    store = Metastore.open(server.config)
    try:
        yield store
    finally:
        store.close()


def stats_by_column(trino: TrinoServer, relation: str) -> dict[str | None, tuple]:
    """SHOW STATS as {column: (data_size, distinct_values, nulls_fraction, row_count, low, high)}."""
    return {
        row[0]: (row[1], row[2], row[3], row[4], row[5], row[6])
        for row in trino.query(f"SHOW STATS FOR {relation}")
    }


def test_hive_table_create_as_insert_analyze_and_drop(sides: TrinoSides, schema: str) -> None:
    trino = sides.trino
    trino.query(f"CREATE SCHEMA hive.{schema}")
    created = trino.query(
        f"CREATE TABLE hive.{schema}.people AS SELECT * FROM (VALUES (1, 'ann'), (2, 'bob')) AS v(id, name)"
    )
    assert created == [[2]]
    assert trino.query(f"INSERT INTO hive.{schema}.people VALUES (3, NULL)") == [[1]]
    assert trino.query(f"SELECT id, name FROM hive.{schema}.people ORDER BY id") == [
        [1, "ann"],
        [2, "bob"],
        [3, None],
    ]

    trino.query(f"ANALYZE hive.{schema}.people")
    stats = stats_by_column(trino, f"hive.{schema}.people")
    assert stats["id"][1:] == (3.0, 0.0, None, "1", "3")
    assert stats["name"][1:3] == (2.0, pytest.approx(1 / 3))
    assert stats[None][3] == 3.0

    with opened(sides.source) as store:
        table = store.catalog.get_table(schema, "people")
        assert table.parameters["numRows"] == "3"
        assert [s.col_name for s in store.stats.table_stats(schema, "people")] == ["id", "name"]
        id_stat = store.stats.table_stats(schema, "people", ["id"])[0]
        assert (id_stat.data["lowValue"], id_stat.data["highValue"], id_stat.data["numNulls"]) == (1, 3, 0)
        directory = Path(local_path(table.sd.location))
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))  # Trino's data files

    trino.query(f"DROP TABLE hive.{schema}.people")
    with opened(sides.source) as store:
        assert store.catalog.get_tables(schema) == []
    assert not directory.exists()  # a managed table's files go with it
    trino.query(f"DROP SCHEMA hive.{schema}")


def test_hive_partitioned_table_write_analyze_and_drop(sides: TrinoSides, schema: str) -> None:
    trino = sides.trino
    trino.query(f"CREATE SCHEMA hive.{schema}")
    trino.query(
        f"CREATE TABLE hive.{schema}.events (id int, name varchar, day varchar) "
        "WITH (format = 'PARQUET', partitioned_by = ARRAY['day'])"
    )
    trino.query(f"INSERT INTO hive.{schema}.events VALUES (1, 'a', 'd1'), (2, 'b', 'd2'), (3, 'c', 'd1')")
    trino.query(f"INSERT INTO hive.{schema}.events VALUES (4, 'd', 'd3')")
    assert trino.query(f"SELECT id, name, day FROM hive.{schema}.events ORDER BY id") == [
        [1, "a", "d1"],
        [2, "b", "d2"],
        [3, "c", "d1"],
        [4, "d", "d3"],
    ]
    assert trino.query(f'SELECT day FROM hive.{schema}."events$partitions" ORDER BY day') == [
        ["d1"],
        ["d2"],
        ["d3"],
    ]
    with opened(sides.source) as store:
        assert store.catalog.get_partition_names(schema, "events") == ["day=d1", "day=d2", "day=d3"]

    trino.query(f"ANALYZE hive.{schema}.events")
    in_d1 = stats_by_column(trino, f"(SELECT * FROM hive.{schema}.events WHERE day = 'd1')")
    assert in_d1["id"][1:] == (2.0, 0.0, None, "1", "3")
    assert in_d1[None][3] == 2.0
    with opened(sides.source) as store:
        partitions = store.catalog.get_partitions_by_names(schema, "events", ["day=d1", "day=d2"])
        assert [p.parameters["numRows"] for p in partitions] == ["2", "1"]
        got = store.stats.partition_stats(schema, "events", ["day=d1"], ["id"])["day=d1"][0]
        assert (got.data["lowValue"], got.data["highValue"]) == (1, 3)

    trino.query(f"DELETE FROM hive.{schema}.events WHERE day = 'd3'")  # a whole partition: Hive can drop it
    assert trino.query(f"SELECT count(*) FROM hive.{schema}.events") == [[3]]
    with opened(sides.source) as store:
        assert store.catalog.get_partition_names(schema, "events") == ["day=d1", "day=d2"]
        location = Path(local_path(store.catalog.get_table(schema, "events").sd.location))
    trino.query(f"DROP TABLE hive.{schema}.events")
    assert not location.exists()
    trino.query(f"DROP SCHEMA hive.{schema}")


def test_iceberg_tables_through_the_hive_metastore_catalog(sides: TrinoSides, schema: str) -> None:
    trino = sides.trino
    trino.query(f"CREATE SCHEMA iceberg.{schema}")
    trino.query(
        f"CREATE TABLE iceberg.{schema}.orders (id bigint, item varchar) WITH (partitioning = ARRAY['item'])"
    )
    trino.query(f"INSERT INTO iceberg.{schema}.orders VALUES (1, 'pen'), (2, 'ink')")
    trino.query(f"INSERT INTO iceberg.{schema}.orders VALUES (3, 'pen')")
    trino.query(f"CREATE TABLE iceberg.{schema}.copy AS SELECT * FROM iceberg.{schema}.orders")
    trino.query(f"DELETE FROM iceberg.{schema}.orders WHERE id = 1")
    assert trino.query(f"SELECT id, item FROM iceberg.{schema}.orders ORDER BY id") == [
        [2, "ink"],
        [3, "pen"],
    ]
    assert trino.query(f"SELECT count(*) FROM iceberg.{schema}.copy") == [[3]]
    trino.query(f"ANALYZE iceberg.{schema}.copy")
    stats = stats_by_column(trino, f"iceberg.{schema}.copy")
    assert stats["id"][1:] == (3.0, 0.0, None, "1", "3")
    assert stats[None][3] == 3.0

    with opened(sides.source) as store:
        table = store.catalog.get_table(schema, "orders")
        assert table.parameters["table_type"].upper() == "ICEBERG"
        metadata = table.parameters["metadata_location"]
        assert Path(local_path(metadata)).is_file()
        assert metadata.startswith(table.sd.location.rstrip("/") + "/metadata/")

    trino.query(f"DROP TABLE iceberg.{schema}.copy")
    trino.query(f"DROP TABLE iceberg.{schema}.orders")
    with opened(sides.source) as store:
        assert store.catalog.get_tables(schema) == []
    trino.query(f"DROP SCHEMA iceberg.{schema}")


# What Spark's ANALYZE TABLE ... COMPUTE STATISTICS FOR COLUMNS id, name, price stores for the rows below,
# through its Hive client (an alter_table adding these parameters; ``test_spark_statistics`` runs Spark).
SPARK_ANALYZED = {
    "spark.sql.statistics.numRows": "3",
    **{
        f"spark.sql.statistics.colStats.id.{k}": v
        for k, v in {"version": "2", "min": "1", "max": "3"}.items()
    },
    **{
        f"spark.sql.statistics.colStats.id.{k}": v
        for k, v in {"nullCount": "0", "distinctCount": "3"}.items()
    },
    **{f"spark.sql.statistics.colStats.name.{k}": v for k, v in {"version": "2", "nullCount": "1"}.items()},
    **{
        f"spark.sql.statistics.colStats.name.{k}": v for k, v in {"distinctCount": "2", "avgLen": "3"}.items()
    },
    "spark.sql.statistics.colStats.name.maxLen": "3",
    **{f"spark.sql.statistics.colStats.price.{k}": v for k, v in {"version": "2", "min": "1.25"}.items()},
    **{f"spark.sql.statistics.colStats.price.{k}": v for k, v in {"max": "3.50", "nullCount": "0"}.items()},
    "spark.sql.statistics.colStats.price.distinctCount": "3",
}


def test_show_stats_after_sparks_analyze_on_both_sides(sides: TrinoSides, schema: str) -> None:
    """Trino reads Hive's column statistics only: those of Spark's ANALYZE, translated, on both sides."""
    trino = sides.trino
    trino.query(f"CREATE SCHEMA hive.{schema}")
    trino.query(
        f"CREATE TABLE hive.{schema}.sales AS SELECT * FROM (VALUES (1, 'ann', DECIMAL '1.25'), "
        "(2, NULL, DECIMAL '2.00'), (3, 'bob', DECIMAL '3.50')) AS v(id, name, price)"
    )
    with opened(sides.source) as store:
        store.stats.delete(schema, "sales")  # as if Trino had not gathered any on write: Spark's alone
    client = Hive2Client(sides.source.port, user="spark")
    try:
        table = client.get_table(schema, "sales")
        table.parameters = {**table.parameters, **SPARK_ANALYZED, "numRows": "3"}
        client.alter_table(schema, "sales", table)
    finally:
        client.close()
    stats = stats_by_column(trino, f"hive.{schema}.sales")
    assert stats["id"][1:] == (3.0, 0.0, None, "1", "3")
    assert stats["name"][1:3] == (2.0, pytest.approx(1 / 3))
    assert stats["price"][1:] == (3.0, 0.0, None, "1.25", "3.5")
    assert stats[None][3] == 3.0
    replicate(sides, schema)
    assert stats_by_column(trino, f"hive_dr.{schema}_dr.sales") == stats


def replicate(sides: TrinoSides, db: str) -> int:
    """One REPL DUMP/LOAD cycle of ``db`` into ``<db>_dr`` (a bootstrap first); the last event id loaded."""
    with opened(sides.source) as src, opened(sides.replica) as dst:
        engine = ReplicationEngine(str(sides.dumps), src, dst)
        last = repl_status(dst, f"{db}_dr")
        dumped = engine.execute(f"REPL DUMP {db}" if last is None else f"REPL DUMP {db} FROM {last}")
        engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
        assert repl_status(dst, f"{db}_dr") == dumped.last_event_id
        assert verify(src, db, dst, f"{db}_dr") == []
        return dumped.last_event_id


def reads(trino: TrinoServer, hive: str, iceberg: str, db: str) -> dict[str, object]:
    """Everything a reader sees of the test's tables through one pair of catalogs."""
    return {
        "plain": trino.query(f"SELECT id, name FROM {hive}.{db}.plain ORDER BY id"),
        "parted": trino.query(f"SELECT id, day FROM {hive}.{db}.parted ORDER BY id"),
        "parted_d1": trino.query(f"SELECT id FROM {hive}.{db}.parted WHERE day = 'd1' ORDER BY id"),
        "partitions": trino.query(f'SELECT day FROM {hive}.{db}."parted$partitions" ORDER BY day'),
        "plain_stats": sorted(map(tuple, trino.query(f"SHOW STATS FOR {hive}.{db}.plain")), key=str),
        "ice": trino.query(f"SELECT id, item FROM {iceberg}.{db}.ice ORDER BY id"),
        "ice_snapshots": trino.query(f'SELECT count(*) FROM {iceberg}.{db}."ice$snapshots"'),
    }


def test_trino_tables_replicate_and_read_the_same_on_the_replica(sides: TrinoSides, schema: str) -> None:
    trino = sides.trino
    trino.query(f"CREATE SCHEMA hive.{schema}")
    trino.query(
        f"CREATE TABLE hive.{schema}.plain AS SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(id, name)"
    )
    trino.query(
        f"CREATE TABLE hive.{schema}.parted (id int, day varchar) WITH (partitioned_by = ARRAY['day'])"
    )
    trino.query(f"INSERT INTO hive.{schema}.parted VALUES (1, 'd1'), (2, 'd2')")
    trino.query(f"CREATE TABLE iceberg.{schema}.ice (id bigint, item varchar)")
    trino.query(f"INSERT INTO iceberg.{schema}.ice VALUES (1, 'pen')")
    trino.query(f"ANALYZE hive.{schema}.plain")

    steps = [
        lambda: None,  # the bootstrap of what is there
        lambda: (
            trino.query(f"INSERT INTO hive.{schema}.plain VALUES (3, 'c')"),
            trino.query(f"INSERT INTO hive.{schema}.parted VALUES (3, 'd1'), (4, 'd3')"),
            trino.query(f"INSERT INTO iceberg.{schema}.ice VALUES (2, 'ink'), (3, 'cap')"),
            trino.query(f"ANALYZE hive.{schema}.plain"),
        ),
        lambda: (  # Trino deletes Iceberg rows with position-delete files, whose rows name data files
            trino.query(f"DELETE FROM hive.{schema}.parted WHERE day = 'd2'"),
            trino.query(f"DELETE FROM iceberg.{schema}.ice WHERE id = 1"),
        ),
        lambda: (  # compaction; the older snapshots and their files go after the commit, so the listing
            # the metastore recorded with it still names them: the next write records their absence
            trino.query(f"ALTER TABLE iceberg.{schema}.ice EXECUTE optimize"),
            trino.query(
                f"ALTER TABLE iceberg.{schema}.ice EXECUTE expire_snapshots(retention_threshold => '0s')"
            ),
            trino.query(f"INSERT INTO iceberg.{schema}.ice VALUES (4, 'cup')"),
        ),
    ]
    event_ids = []
    for step in steps:
        step()
        expected = reads(trino, "hive", "iceberg", schema)
        event_ids.append(replicate(sides, schema))
        assert reads(trino, "hive_dr", "iceberg_dr", f"{schema}_dr") == expected, f"after {event_ids[-1]}"
    assert event_ids == sorted(set(event_ids))
    assert expected["ice"] == [[2, "ink"], [3, "cap"], [4, "cup"]]

    with opened(sides.replica) as dst:
        warehouse = local_path(sides.replica.warehouse)
        for name in ("plain", "parted", "ice"):
            assert local_path(dst.catalog.get_table(f"{schema}_dr", name).sd.location).startswith(warehouse)

    trino.query(f"DROP TABLE hive.{schema}.plain")
    replicate(sides, schema)
    assert [r[0] for r in trino.query(f"SHOW TABLES FROM hive_dr.{schema}_dr")] == ["ice", "parted"]


# Trino passes the metastore's refusal on, or (when it batches metastore operations) names the one refused.
REFUSED = r"is a protected replica of|operations other than the following|delete operations failed"


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path to SHA-256): what must stay untouched."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_trino_writes_to_the_replica_are_refused_and_change_nothing(sides: TrinoSides, schema: str) -> None:
    """The replica changes only through loads: each Trino write fails with the metastore's refusal, and the
    replica's catalog, rows and files stay as the load left them (a refused Iceberg commit leaves orphans)."""
    trino = sides.trino
    trino.query(f"CREATE SCHEMA hive.{schema}")
    trino.query(f"CREATE TABLE hive.{schema}.plain AS SELECT * FROM (VALUES (1, 'a')) AS v(id, name)")
    trino.query(f"CREATE TABLE iceberg.{schema}.ice AS SELECT * FROM (VALUES (1, 'a')) AS v(id, name)")
    replicate(sides, schema)
    replica_db = f"{schema}_dr"
    with opened(sides.replica) as dst:
        files = Path(local_path(dst.catalog.get_database(replica_db).location_uri))
        ice_dir = str(
            Path(local_path(dst.catalog.get_table(replica_db, "ice").sd.location)).relative_to(files)
        )
    before = tree_digest(files)
    tables = (f"hive_dr.{replica_db}.plain", f"iceberg_dr.{replica_db}.ice")
    rows = {name: trino.query(f"SELECT id, name FROM {name}") for name in tables}

    writes = [
        f"INSERT INTO hive_dr.{replica_db}.plain VALUES (2, 'b')",
        f"INSERT INTO iceberg_dr.{replica_db}.ice VALUES (2, 'b')",
        f"CREATE TABLE hive_dr.{replica_db}.extra (id int)",
        f"ANALYZE hive_dr.{replica_db}.plain",
        f"DROP TABLE hive_dr.{replica_db}.plain",
    ]
    for sql in writes:
        with pytest.raises(TrinoQueryError, match=REFUSED):
            trino.query(sql)

    assert {name: trino.query(f"SELECT id, name FROM {name}") for name in tables} == rows
    after = tree_digest(files)
    assert {name: after.get(name) for name in before} == before  # nothing the load wrote changed or went
    # Iceberg writes a commit's files before the metastore refuses its swap: orphans no snapshot names, as
    # after any failed Iceberg commit (remove_orphan_files reclaims them); Hive's writes are rolled back.
    orphans = set(after) - set(before)
    assert all(name.startswith(ice_dir + "/") for name in orphans), orphans
    with opened(sides.source) as src, opened(sides.replica) as dst:  # repl verify names those orphans
        assert [
            p.split(": files differ (missing [], extra [")[0] for p in verify(src, schema, dst, replica_db)
        ] == ["table ice"]
