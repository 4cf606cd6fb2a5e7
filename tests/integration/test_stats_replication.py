"""Column statistics replicate through incremental REPL DUMP / LOAD (Hive replicates them too).

Statistics written after the bootstrap reach the replica with the incremental load, deletes too, and a
table dropped later in the same window does not make the load fail.
"""

from __future__ import annotations

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.statistics import ColumnStat
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.thrift import convert
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import hms
from hmsrepl.thrift.statistics import stat_from_thrift
from tests.helpers import make_table
from tests.integration.test_replication import bootstrap, incremental, seed


def long_stat(col: str, low: int, high: int) -> ColumnStat:
    return ColumnStat(
        col, "int", "longStats", {"lowValue": low, "highValue": high, "numNulls": 0, "numDVs": 3}
    )


def test_statistics_follow_incremental_loads(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    bootstrap(engine)
    stats = source.stats
    stats.update("sales", "plain", [long_stat("id", 1, 9)], last_analyzed=1_700_000_000)
    stats.update("sales", "orders", [long_stat("id", 5, 6)], partition_name="day=d1")
    source.catalog.create_table(make_table("sales", "brief"))
    stats.update("sales", "brief", [long_stat("id", 0, 1)])
    source.catalog.drop_table("sales", "brief")
    incremental(engine)
    assert target.stats.table_stats("sales_dr", "plain", ["id"]) == [long_stat("id", 1, 9)]
    got = target.stats.partition_stats("sales_dr", "orders", ["day=d1"], ["id"])
    assert got == {"day=d1": [long_stat("id", 5, 6)]}

    stats.delete("sales", "plain", "id")
    stats.delete("sales", "orders", "id", partition_name="day=d1")
    incremental(engine)
    assert target.stats.table_stats("sales_dr", "plain", ["id"]) == []
    assert target.stats.partition_stats("sales_dr", "orders", ["day=d1"], ["id"]) == {}


def test_bootstrap_carries_statistics(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    stats = source.stats
    stats.update("sales", "plain", [long_stat("id", 1, 9)], last_analyzed=1_700_000_000)
    stats.update("sales", "plain", [long_stat("id", 2, 3)], engine="impala")
    stats.update("sales", "orders", [long_stat("id", 5, 6)], partition_name="day=d1")
    bootstrap(engine)
    assert target.stats.table_stats("sales_dr", "plain", ["id"]) == [long_stat("id", 1, 9)]
    assert target.stats.table_stats("sales_dr", "plain", ["id"], engine="impala") == [long_stat("id", 2, 3)]
    got = target.stats.partition_stats("sales_dr", "orders", ["day=d1", "day=d2"], ["id"])
    assert got == {"day=d1": [long_stat("id", 5, 6)]}
    # Later changes follow with the incremental load, on top of the bootstrapped ones.
    stats.delete("sales", "plain", "id")
    incremental(engine)
    assert target.stats.table_stats("sales_dr", "plain", ["id"]) == []
    assert target.stats.table_stats("sales_dr", "plain", ["id"], engine="impala") == [long_stat("id", 2, 3)]


def test_statistics_of_a_table_renamed_in_the_same_window(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    bootstrap(engine)
    catalog = source.catalog
    fresh = catalog.create_table(make_table("sales", "fresh"))
    source.stats.update("sales", "fresh", [long_stat("id", 4, 8)])
    catalog.alter_table("sales", "fresh", fresh.model_copy(update={"table_name": "fresh_v2"}))
    source.stats.update("sales", "plain", [long_stat("id", 1, 2)])
    plain = catalog.get_table("sales", "plain")
    catalog.alter_table("sales", "plain", plain.model_copy(update={"table_name": "plain_v2"}))
    incremental(engine)
    assert target.stats.table_stats("sales_dr", "fresh_v2", ["id"]) == [long_stat("id", 4, 8)]
    assert target.stats.table_stats("sales_dr", "plain_v2", ["id"]) == [long_stat("id", 1, 2)]


def test_statistics_translated_from_sparks_parameters_replicate(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    """Spark's ANALYZE through the Thrift API: the replica answers get_table_statistics_req as the source
    does, and carries the same basic statistics parameters."""
    seed(source)
    bootstrap(engine)
    handler = MetastoreHandler(source)
    plain = source.catalog.get_table("sales", "plain")
    analyzed = {
        **plain.parameters,
        "spark.sql.statistics.numRows": "2",
        **{
            f"spark.sql.statistics.colStats.id.{k}": v
            for k, v in (("version", "2"), ("min", "1"), ("max", "2"))
        },
        "spark.sql.statistics.colStats.id.nullCount": "0",
        "spark.sql.statistics.colStats.id.distinctCount": "2",
        "spark.sql.statistics.colStats.name.version": "2",
        "spark.sql.statistics.colStats.name.maxLen": "1",
        "spark.sql.statistics.colStats.name.avgLen": "1",
        "spark.sql.statistics.colStats.name.nullCount": "0",
        "spark.sql.statistics.colStats.name.distinctCount": "2",
    }
    handler.alter_table(
        "sales", "plain", convert.table_to_thrift(plain.model_copy(update={"parameters": analyzed}))
    )
    incremental(engine)

    def answer(store: Metastore, db: str) -> list[ColumnStat]:
        request = hms.TableStatsRequest(dbName=db, tblName="plain", colNames=["id", "name"])
        return [
            stat_from_thrift(o) for o in MetastoreHandler(store).get_table_statistics_req(request).tableStats
        ]

    assert [s.col_name for s in answer(source, "sales")] == ["id", "name"]
    assert answer(target, "sales_dr") == answer(source, "sales")
    basic = ("numRows", "numFiles", "totalSize", "COLUMN_STATS_ACCURATE")
    replica = target.catalog.get_table("sales_dr", "plain").parameters
    assert {k: replica.get(k) for k in basic} == {
        k: source.catalog.get_table("sales", "plain").parameters.get(k) for k in basic
    }
    assert replica["numRows"] == "2"
