"""Column statistics replicate through incremental REPL DUMP / LOAD (Hive replicates them too).

Statistics written after the bootstrap reach the replica with the incremental load, deletes too, and a
table dropped later in the same window does not make the load fail.
"""

from __future__ import annotations

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.statistics import ColumnStat
from hmsrepl.replication.engine import ReplicationEngine
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
