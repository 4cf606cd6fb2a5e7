"""Statistics Spark writes through its Hive client, as Hive readers (Trino, Impala, Hive) read them over Thrift.

Spark keeps ``ANALYZE ... FOR COLUMNS`` in table parameters; the metastore answers them through
``get_table_statistics_req`` (``metastore.spark_stats_sync``), and statistics another client writes come back
to Spark. After Spark's INSERTs, ``numFiles`` and ``totalSize`` describe the files on disk and a partition's
``numRows`` is never the placeholder 0 (``metastore.basic_stats``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h2

from hmsrepl.metastore import Metastore
from hmsrepl.storage.local import local_path
from tests.servers import Hive2Client, RunningMetastore

pytestmark = pytest.mark.spark


@pytest.fixture
def hive_reader(session_metastore: RunningMetastore) -> Iterator[Hive2Client]:
    client = Hive2Client(session_metastore.port, user="trino")
    yield client
    client.close()


def on_disk(location: str) -> tuple[str, str]:
    """numFiles and totalSize as Hive counts them: data files below the location, hidden ones left out."""
    root = Path(local_path(location))
    files = [
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    ]
    return str(len(files)), str(sum(p.stat().st_size for p in files))


def test_spark_statistics_read_by_hive_readers(spark, session_store: Metastore, hive_reader) -> None:
    db = f"stats_{uuid.uuid4().hex[:8]}"
    catalog = session_store.catalog
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.t (a INT, b STRING, e DECIMAL(10,2)) STORED AS PARQUET")
    for rows in ("(1, 'xy', 1.25), (2, NULL, 3.50)", "(2, 'z', NULL)"):  # the second append is declared
        spark.sql(f"INSERT INTO {db}.t VALUES {rows}")
        table = catalog.get_table(db, "t")
        params = table.parameters
        assert (params["numFiles"], params["totalSize"]) == on_disk(table.sd.location)
        assert params.get("numRows", "-1") == "-1", "nobody counted the rows yet"

    spark.sql(f"ANALYZE TABLE {db}.t COMPUTE STATISTICS FOR COLUMNS a, b, e")
    request = h2.TableStatsRequest(dbName=db, tblName="t", colNames=["a", "b", "e"])
    a, b, e = hive_reader.get_table_statistics_req(request).tableStats
    assert (a.colName, a.colType) == ("a", "int")
    long = a.statsData.longStats
    assert (long.lowValue, long.highValue, long.numNulls, long.numDVs) == (1, 2, 0, 2)
    text = b.statsData.stringStats
    assert (text.maxColLen, text.avgColLen, text.numNulls, text.numDVs) == (2, 2.0, 1, 3), "null is one more"
    dec = e.statsData.decimalStats
    assert (dec.lowValue.unscaled, dec.lowValue.scale, dec.highValue.unscaled, dec.numNulls) == (
        (125).to_bytes(1, "big"),
        2,
        (350).to_bytes(2, "big"),
        1,
    )
    assert catalog.get_table(db, "t").parameters["numRows"] == "3"

    # Statistics a Hive reader writes (Trino's ANALYZE) are what Spark plans with next.
    desc = h2.ColumnStatisticsDesc(isTblLevel=True, dbName=db, tableName="t")
    data = h2.ColumnStatisticsData(
        longStats=h2.LongColumnStatsData(lowValue=-5, highValue=90, numNulls=0, numDVs=3)
    )
    obj = h2.ColumnStatisticsObj(colName="a", colType="int", statsData=data)
    hive_reader.update_table_column_statistics(h2.ColumnStatistics(statsDesc=desc, statsObj=[obj]))
    described = {row[0]: row[1] for row in spark.sql(f"DESCRIBE EXTENDED {db}.t a").collect()}
    assert (described["min"], described["max"], described["distinct_count"]) == ("-5", "90", "3")

    # Partitioned: after each INSERT the partition's counts describe its files; numRows is unknown, not 0.
    spark.sql(f"CREATE TABLE {db}.p (a INT) PARTITIONED BY (day STRING) STORED AS PARQUET")
    for rows in ("(1), (2), (3)", "(4)"):
        spark.sql(f"INSERT INTO {db}.p PARTITION (day='d1') VALUES {rows}")
        part = catalog.get_partition(db, "p", ["d1"])
        params = part.parameters
        assert (params["numFiles"], params["totalSize"]) == on_disk(part.sd.location)
        assert params["numRows"] == "-1"
