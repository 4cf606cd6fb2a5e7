"""Column statistics through the Thrift calls Trino and Hive make, with Hive 2 and Hive 4 client bindings.

Hive 2.x: ``hmsclient`` (PyPI). Hive 4: the ``hive_metastore`` bindings pyiceberg ships (PyPI). Statistics
written with one read back exactly; renames keep them, drops remove them, every change is an event.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2
from hmsclient.genthrift.hive_metastore import ttypes as h2
from sqlalchemy import func, select
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.schema import column_stats
from tests.backends import temporary_database
from tests.servers import RunningMetastore, metastore_server

COLUMNS = [
    ("id", "bigint"),
    ("name", "string"),
    ("price", "decimal(10,2)"),
    ("day", "date"),
    ("flag", "boolean"),
    ("score", "double"),
    ("blob", "binary"),
    ("ts", "timestamp"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp(f"stats-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


def _connect(service: type, port: int) -> tuple[object, TTransport.TBufferedTransport]:
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
    client = service.Client(TBinaryProtocol.TBinaryProtocol(transport))
    transport.open()
    client.set_ugi("hive", [])
    return client, transport


@pytest.fixture
def hive2(server: RunningMetastore) -> Iterator[Hive2.Client]:
    client, transport = _connect(Hive2, server.port)
    yield client
    transport.close()


@pytest.fixture
def hive4(server: RunningMetastore) -> Iterator[Hive4.Client]:
    client, transport = _connect(Hive4, server.port)
    yield client
    transport.close()


def _table(db: str, name: str, partitioned: bool) -> h2.Table:
    sd = h2.StorageDescriptor(
        cols=[h2.FieldSchema(n, t, None) for n, t in COLUMNS],
        location=None,
        inputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        serdeInfo=h2.SerDeInfo(None, "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    keys = [h2.FieldSchema("ds", "string", None)] if partitioned else []
    return h2.Table(
        tableName=name,
        dbName=db,
        owner="hive",
        sd=sd,
        partitionKeys=keys,
        parameters={},
        tableType="MANAGED_TABLE",
    )


def _setup(hive2: Hive2.Client, db: str, partitioned: bool = False) -> None:
    hive2.create_database(h2.Database(name=db, description=None, locationUri=None, parameters={}))
    hive2.create_table(_table(db, "t", partitioned))
    if partitioned:
        for ds in ("1", "2"):
            hive2.add_partition(h2.Partition(values=[ds], dbName=db, tableName="t", sd=None, parameters={}))


def _hive2_stats() -> list[h2.ColumnStatisticsObj]:
    d = h2.ColumnStatisticsData
    return [
        h2.ColumnStatisticsObj(
            "id", "bigint", d(longStats=h2.LongColumnStatsData(1, 900, 0, 850, "FMSketch"))
        ),
        h2.ColumnStatisticsObj("name", "string", d(stringStats=h2.StringColumnStatsData(12, 5.5, 3, 700))),
        h2.ColumnStatisticsObj(
            "price",
            "decimal(10,2)",
            d(
                decimalStats=h2.DecimalColumnStatsData(
                    h2.Decimal(b"\xff\x38", 2), h2.Decimal(b"\x27\x10", 2), 1, 90
                )
            ),
        ),
        h2.ColumnStatisticsObj(
            "day", "date", d(dateStats=h2.DateColumnStatsData(h2.Date(18000), h2.Date(19000), 0, 365))
        ),
        h2.ColumnStatisticsObj("flag", "boolean", d(booleanStats=h2.BooleanColumnStatsData(10, 20, 1))),
        h2.ColumnStatisticsObj(
            "score", "double", d(doubleStats=h2.DoubleColumnStatsData(-1.5, 99.25, 2, 80))
        ),
        h2.ColumnStatisticsObj("blob", "binary", d(binaryStats=h2.BinaryColumnStatsData(64, 12.0, 4))),
    ]


def test_table_statistics_round_trip_hive2(hive2: Hive2.Client, server: RunningMetastore) -> None:
    _setup(hive2, "st2")
    sent = _hive2_stats()
    desc = h2.ColumnStatisticsDesc(isTblLevel=True, dbName="st2", tableName="t", lastAnalyzed=1_700_000_000)
    before = hive2.get_current_notificationEventId().eventId
    assert hive2.update_table_column_statistics(h2.ColumnStatistics(desc, sent)) is True
    names = [c for c, _ in COLUMNS[:7]]
    got = hive2.get_table_statistics_req(h2.TableStatsRequest("st2", "t", names)).tableStats
    assert got == sent
    one = hive2.get_table_column_statistics("st2", "t", "score")
    assert one.statsObj == [sent[5]] and one.statsDesc.isTblLevel
    events = hive2.get_next_notification(h2.NotificationEventRequest(lastEvent=before)).events
    assert [e.eventType for e in events] == ["UPDATE_TABLE_COLUMN_STAT"]

    # Rename keeps them; deleting one column's statistics leaves the others.
    table = hive2.get_table("st2", "t")
    table.tableName = "renamed"
    hive2.alter_table("st2", "t", table)
    assert hive2.get_table_statistics_req(h2.TableStatsRequest("st2", "renamed", names)).tableStats == sent
    assert hive2.delete_table_column_statistics("st2", "renamed", "name") is True
    left = hive2.get_table_statistics_req(h2.TableStatsRequest("st2", "renamed", names)).tableStats
    assert [o.colName for o in left] == ["id", "price", "day", "flag", "score", "blob"]
    with pytest.raises(h2.NoSuchObjectException, match="no statistics"):
        hive2.get_table_column_statistics("st2", "renamed", "name")

    # A column dropped or retyped by alter_table has no statistics any more; the others keep theirs.
    table = hive2.get_table("st2", "renamed")
    table.sd.cols = [c for c in table.sd.cols if c.name != "blob"]
    next(c for c in table.sd.cols if c.name == "score").type = "float"
    hive2.alter_table("st2", "renamed", table)
    left = hive2.get_table_statistics_req(h2.TableStatsRequest("st2", "renamed", names)).tableStats
    assert [o.colName for o in left] == ["id", "price", "day", "flag"]

    # A drop removes them from the database (no orphan rows).
    rows = _stat_rows(server)
    hive2.drop_table("st2", "renamed", True)
    assert _stat_rows(server) == rows - 6


def _stat_rows(server: RunningMetastore) -> int:
    store = Metastore(server.config)
    try:
        with store.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(column_stats)).scalar_one()
    finally:
        store.close()


def test_partition_statistics_and_aggregation_hive4(
    hive2: Hive2.Client, hive4: Hive4.Client, server: RunningMetastore
) -> None:
    _setup(hive2, "st4", partitioned=True)
    d = h4.ColumnStatisticsData
    per_part = {
        "ds=1": [
            h4.ColumnStatisticsObj(
                "id",
                "bigint",
                d(longStats=h4.LongColumnStatsData(lowValue=5, highValue=50, numNulls=1, numDVs=40)),
            ),
            h4.ColumnStatisticsObj(
                "ts",
                "timestamp",
                d(timestampStats=h4.TimestampColumnStatsData(h4.Timestamp(100), h4.Timestamp(200), 0, 10)),
            ),
        ],
        "ds=2": [
            h4.ColumnStatisticsObj(
                "id",
                "bigint",
                d(longStats=h4.LongColumnStatsData(lowValue=-3, highValue=20, numNulls=2, numDVs=60)),
            ),
            h4.ColumnStatisticsObj(
                "ts",
                "timestamp",
                d(timestampStats=h4.TimestampColumnStatsData(h4.Timestamp(150), h4.Timestamp(300), 1, 5)),
            ),
        ],
    }
    for part, objs in per_part.items():
        desc = h4.ColumnStatisticsDesc(
            isTblLevel=False, dbName="st4", tableName="t", partName=part, catName="hive"
        )
        assert (
            hive4.update_partition_column_statistics(h4.ColumnStatistics(desc, objs, engine="hive")) is True
        )
    request = h4.PartitionsStatsRequest("st4", "t", ["id", "ts"], ["ds=1", "ds=2"], engine="hive")
    assert hive4.get_partitions_statistics_req(request).partStats == per_part
    assert hive4.get_partition_column_statistics("st4", "t", "ds=2", "ts").statsObj == [per_part["ds=2"][1]]

    aggr = hive4.get_aggr_stats_for(request)
    assert aggr.partsFound == 2
    by_name = {o.colName: o.statsData for o in aggr.colStats}
    assert by_name["id"].longStats == h4.LongColumnStatsData(lowValue=-3, highValue=50, numNulls=3, numDVs=60)
    assert by_name["ts"].timestampStats == h4.TimestampColumnStatsData(
        h4.Timestamp(100), h4.Timestamp(300), 1, 10
    )

    # set_aggr_stats_for with needMerge merges into what is stored.
    extra = h4.ColumnStatisticsObj(
        "id", "bigint", d(longStats=h4.LongColumnStatsData(lowValue=7, highValue=99, numNulls=4, numDVs=10))
    )
    desc = h4.ColumnStatisticsDesc(isTblLevel=False, dbName="st4", tableName="t", partName="ds=1")
    assert hive4.set_aggr_stats_for(
        h4.SetPartitionsStatsRequest([h4.ColumnStatistics(desc, [extra])], needMerge=True)
    )
    merged = hive4.get_partition_column_statistics("st4", "t", "ds=1", "id").statsObj[0].statsData.longStats
    assert merged == h4.LongColumnStatsData(lowValue=5, highValue=99, numNulls=5, numDVs=40)

    # Dropping a partition drops its statistics; deleting by partition works with Hive 2's call shape.
    hive2.drop_partition("st4", "t", ["2"], True)
    assert set(hive4.get_partitions_statistics_req(request).partStats) == {"ds=1"}
    assert hive2.delete_partition_column_statistics("st4", "t", "ds=1", "ts") is True
    assert [o.colName for o in hive4.get_partitions_statistics_req(request).partStats["ds=1"]] == ["id"]


def test_bad_statistics_change_nothing(hive2: Hive2.Client, server: RunningMetastore) -> None:
    _setup(hive2, "stbad", partitioned=True)
    good = _hive2_stats()[:1]
    desc = h2.ColumnStatisticsDesc(isTblLevel=True, dbName="stbad", tableName="t")
    hive2.update_table_column_statistics(h2.ColumnStatistics(desc, good))
    before_event = hive2.get_current_notificationEventId().eventId
    rows = _stat_rows(server)
    bogus = h2.ColumnStatisticsObj(
        "nosuchcol", "bigint", h2.ColumnStatisticsData(longStats=h2.LongColumnStatsData(1, 2, 0, 1))
    )
    with pytest.raises(h2.InvalidInputException, match=r"'nosuchcol' is not a column of table 'stbad\.t'"):
        hive2.update_table_column_statistics(h2.ColumnStatistics(desc, [*good, bogus]))
    with pytest.raises(h2.NoSuchObjectException, match=r"'stbad\.nosuch' does not exist"):
        hive2.update_table_column_statistics(
            h2.ColumnStatistics(h2.ColumnStatisticsDesc(True, "stbad", "nosuch"), good)
        )
    part_desc = h2.ColumnStatisticsDesc(isTblLevel=False, dbName="stbad", tableName="t", partName="ds=9")
    with pytest.raises(h2.NoSuchObjectException, match="partition 'ds=9'"):
        hive2.update_partition_column_statistics(h2.ColumnStatistics(part_desc, good))
    with pytest.raises(h2.NoSuchObjectException, match="has no statistics"):
        hive2.delete_table_column_statistics("stbad", "t", "name")
    assert _stat_rows(server) == rows
    assert hive2.get_current_notificationEventId().eventId == before_event
    assert hive2.get_table_statistics_req(h2.TableStatsRequest("stbad", "t", ["id"])).tableStats == good
