"""Insert-only transactional tables: writer, reader, their events, and the Spark helpers.

Writer/reader tests run on every metastore backend; Spark tests use the SQLite metastore and the one
session-wide SparkSession. Expected paths, directory names, checksums and rows are built by hand from
what each test wrote, never taken from the code under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import google_crc32c
import pytest

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter, visible_files
from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError, NoSuchPartitionError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, FieldSchema, SerDeInfo, StorageDescriptor, Table

INSERT_ONLY = {"transactional": "true", "transactional_properties": "insert_only"}
PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"


# -- helpers ----------------------------------------------------------------------------------------------


def create_table(
    store: Metastore,
    name: str,
    *,
    params: dict[str, str] | None = None,
    cols: tuple[tuple[str, str], ...] = (("line", "string"),),
    partition_keys: tuple[str, ...] = (),
    input_format: str | None = None,
    serde_lib: str | None = None,
) -> Table:
    table = Table(
        db_name="sales",
        table_name=name,
        sd=StorageDescriptor(
            cols=[FieldSchema(name=n, type=t) for n, t in cols],
            input_format=input_format,
            serde_info=SerDeInfo(serialization_lib=serde_lib) if serde_lib else None,
        ),
        partition_keys=[FieldSchema(name=k, type="string") for k in partition_keys],
        parameters=dict(INSERT_ONLY if params is None else params),
    )
    return store.catalog.create_table(table)


@pytest.fixture
def store(metastore: Metastore) -> Metastore:
    metastore.catalog.create_database(Database(name="sales"))
    create_table(metastore, "events")
    create_table(metastore, "daily", partition_keys=("ds",))
    return metastore


def table_dir(store: Metastore, table: str) -> str:
    """Where the catalog puts a table of database 'sales' by default: <warehouse>/sales.db/<table>."""
    return os.path.join(store.config.warehouse, "sales.db", table)


def put(directory: str, name: str, lines: list[str]) -> str:
    """Write a data file the way any engine would (plain file I/O); returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as out:
        out.write("".join(f"{line}\n" for line in lines))
    return path


def rows_of(paths: list[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as src:
            out.extend(src.read().splitlines())
    return sorted(out)


def append(store: Metastore, table: str, lines: list[str], partition: list[str] | None = None) -> str:
    """One committed append of one file; returns the file's path."""
    with InsertOnlyWriter(store, "sales", table, partition) as writer:
        path = put(writer.target_uri, "part-00000", lines)
    return path


def events_of(store: Metastore, event_type: str, after: int = 0) -> list:
    return [e for e in store.get_next_notification(after) if e.event_type == event_type]


def crc32c_token(path: str) -> str:
    """The checksum token format documented for events: crc32c-<8 hex>-<size>."""
    data = Path(path).read_bytes()
    return f"crc32c-{google_crc32c.value(data):08x}-{len(data)}"


# -- writer and reader ------------------------------------------------------------------------------------


def test_reader_sees_exactly_the_committed_writes(store: Metastore) -> None:
    loc = table_dir(store, "events")
    first = append(store, "events", ["a", "b"])
    second = append(store, "events", ["c"])
    with pytest.raises(RuntimeError, match="job failed"), InsertOnlyWriter(store, "sales", "events") as w3:
        aborted = put(w3.target_uri, "part-00000", ["never"])
        raise RuntimeError("job failed")

    assert first == os.path.join(loc, "delta_0000001_0000001_0000", "part-00000")
    assert second == os.path.join(loc, "delta_0000002_0000002_0000", "part-00000")
    assert visible_files(store, "sales", "events") == [first, second]
    assert rows_of(visible_files(store, "sales", "events")) == ["a", "b", "c"]
    # The aborted write's file is left in place, invisible, and its txn is recorded as aborted.
    assert os.path.exists(aborted) and aborted.startswith(os.path.join(loc, "delta_0000003_0000003_0000"))
    assert store.txns.txn_state(w3.txn_id) == "aborted"
    assert w3.state == "aborted"


def test_hidden_files_are_neither_read_nor_recorded(store: Metastore) -> None:
    with InsertOnlyWriter(store, "sales", "events") as writer:
        data = put(writer.target_uri, "part-00000", ["x"])
        put(writer.target_uri, "_SUCCESS", [])
        put(writer.target_uri, ".part-00000.crc", ["crc"])
        put(os.path.join(writer.target_uri, "_temporary", "0"), "part-00001", ["half-written"])
    assert visible_files(store, "sales", "events") == [data]
    assert [EncodedFileUri.decode(f).file_uri for f in writer.files] == [data]


def test_open_txn_is_invisible_until_it_commits(store: Metastore) -> None:
    slow = InsertOnlyWriter(store, "sales", "events").begin()
    slow_file = put(slow.target_uri, "part-00000", ["slow"])
    fast_file = append(store, "events", ["fast"])  # write id 2 commits while write id 1 is open

    assert slow.write_id == 1
    assert visible_files(store, "sales", "events") == [fast_file]
    slow.commit()
    assert visible_files(store, "sales", "events") == [slow_file, fast_file]
    assert rows_of(visible_files(store, "sales", "events")) == ["fast", "slow"]


def test_overwrite_hides_earlier_deltas_but_not_later_ones(store: Metastore) -> None:
    loc = table_dir(store, "events")
    append(store, "events", ["old1"])
    append(store, "events", ["old2"])
    with InsertOnlyWriter(store, "sales", "events", mode="overwrite") as writer:
        base_file = put(writer.target_uri, "part-00000", ["new"])
    later = append(store, "events", ["later"])

    assert writer.target_uri == os.path.join(loc, "base_0000003")
    assert visible_files(store, "sales", "events") == [base_file, later]
    assert rows_of(visible_files(store, "sales", "events")) == ["later", "new"]


def test_aborted_overwrite_hides_nothing(store: Metastore) -> None:
    kept = append(store, "events", ["kept"])
    with pytest.raises(ValueError), InsertOnlyWriter(store, "sales", "events", mode="overwrite") as writer:
        put(writer.target_uri, "part-00000", ["replacement"])
        raise ValueError("bad input")
    assert visible_files(store, "sales", "events") == [kept]


def test_empty_overwrite_empties_the_table(store: Metastore) -> None:
    append(store, "events", ["gone"])
    with InsertOnlyWriter(store, "sales", "events", mode="overwrite"):
        pass  # e.g. INSERT OVERWRITE ... SELECT that matched no rows
    assert visible_files(store, "sales", "events") == []
    later = append(store, "events", ["after"])
    assert visible_files(store, "sales", "events") == [later]


def test_old_snapshot_keeps_seeing_what_it_saw(store: Metastore) -> None:
    first = append(store, "events", ["v1"])
    [entry] = store.txns.get_valid_write_ids(["sales.events"])
    old_snapshot = entry.write_ids
    append(store, "events", ["v2"])
    with InsertOnlyWriter(store, "sales", "events", mode="overwrite") as writer:
        put(writer.target_uri, "part-00000", ["v3"])

    assert visible_files(store, "sales", "events", valid_write_ids=old_snapshot) == [first]
    assert rows_of(visible_files(store, "sales", "events", valid_write_ids=old_snapshot)) == ["v1"]
    assert rows_of(visible_files(store, "sales", "events")) == ["v3"]


def test_snapshot_taken_while_a_writer_is_open_never_sees_it(store: Metastore) -> None:
    writer = InsertOnlyWriter(store, "sales", "events").begin()
    put(writer.target_uri, "part-00000", ["in flight"])
    reader = InsertOnlyReader(store, "sales", "events")  # snapshot fixed now
    writer.commit()
    assert reader.files() == []
    assert rows_of(InsertOnlyReader(store, "sales", "events").files()) == ["in flight"]


def test_concurrent_writers_get_distinct_write_ids_and_both_commit(store: Metastore) -> None:
    one = InsertOnlyWriter(store, "sales", "events").begin()
    two = InsertOnlyWriter(store, "sales", "events").begin()
    put(one.target_uri, "part-00000", ["one"])
    put(two.target_uri, "part-00000", ["two"])
    two.commit()
    one.commit()
    assert (one.write_id, two.write_id) == (1, 2)
    assert rows_of(visible_files(store, "sales", "events")) == ["one", "two"]


def test_commit_event_lists_write_id_and_files_with_checksums(store: Metastore) -> None:
    start = store.get_current_notification_event_id()
    with InsertOnlyWriter(store, "sales", "events") as writer:
        first = put(writer.target_uri, "part-00000", ["a", "b"])
        second = put(writer.target_uri, "part-00001", ["c"])
        put(writer.target_uri, "_SUCCESS", [])
    subdir = "delta_0000001_0000001_0000"
    expected_files = [
        (first, crc32c_token(first), store.config.cmroot, subdir),
        (second, crc32c_token(second), store.config.cmroot, subdir),
    ]

    [commit] = events_of(store, "COMMIT_TXN", start)
    body = commit.body()
    assert body["txn_id"] == writer.txn_id
    assert body["write_ids"] == [{"db": "sales", "table": "events", "write_id": 1}]
    [write] = body["writes"]
    assert (write["db"], write["table"], write["partition"], write["write_id"]) == (
        "sales",
        "events",
        None,
        1,
    )
    decoded = sorted((EncodedFileUri.decode(f) for f in write["files"]), key=lambda d: d.file_uri)
    assert [(d.file_uri, d.checksum, d.cmroot, d.subdir) for d in decoded] == expected_files

    [acid_write] = events_of(store, "ACID_WRITE", start)
    assert (acid_write.db_name, acid_write.table_name) == ("sales", "events")
    assert acid_write.body()["write_id"] == 1
    assert sorted(acid_write.body()["files"]) == sorted(write["files"])
    # One txn, in Hive's order: open, allocate, write, commit.
    order = [e.event_type for e in store.get_next_notification(start)]
    assert order == ["OPEN_TXN", "ALLOC_WRITE_ID", "ACID_WRITE", "COMMIT_TXN"]


def test_abort_records_no_files(store: Metastore) -> None:
    start = store.get_current_notification_event_id()
    writer = InsertOnlyWriter(store, "sales", "events").begin()
    put(writer.target_uri, "part-00000", ["x"])
    writer.abort()
    order = [e.event_type for e in store.get_next_notification(start)]
    assert order == ["OPEN_TXN", "ALLOC_WRITE_ID", "ABORT_TXN"]
    [abort] = events_of(store, "ABORT_TXN", start)
    assert abort.body()["txn_id"] == writer.txn_id
    with pytest.raises(InvalidOperationError):
        writer.commit()


def test_plain_and_full_acid_tables_are_refused_before_any_txn(store: Metastore) -> None:
    create_table(store, "plain", params={})
    create_table(store, "full_acid", params={"transactional": "true"})
    start = store.get_current_notification_event_id()

    with pytest.raises(InvalidObjectError) as plain:
        InsertOnlyWriter(store, "sales", "plain").begin()
    message = str(plain.value)
    assert "sales.plain" in message and "'transactional_properties'='insert_only'" in message
    with pytest.raises(InvalidObjectError, match=r"sales\.full_acid.*full ACID"):
        InsertOnlyWriter(store, "sales", "full_acid").begin()
    with pytest.raises(InvalidObjectError, match=r"sales\.plain"):
        visible_files(store, "sales", "plain")
    # Refused up front: no txn was opened, so nothing is left to abort or replicate.
    assert store.get_next_notification(start) == []


def test_property_values_are_case_insensitive_like_hives(store: Metastore) -> None:
    create_table(store, "shouty", params={"transactional": "TRUE", "transactional_properties": "INSERT_ONLY"})
    written = append(store, "shouty", ["ok"])
    assert visible_files(store, "sales", "shouty") == [written]


def test_pre_acid_originals_are_read_until_an_overwrite(store: Metastore) -> None:
    loc = table_dir(store, "events")
    original = put(loc, "000000_0", ["legacy"])
    delta = append(store, "events", ["new"])
    assert visible_files(store, "sales", "events") == [original, delta]
    with InsertOnlyWriter(store, "sales", "events", mode="overwrite") as writer:
        base_file = put(writer.target_uri, "part-00000", ["rewritten"])
    assert visible_files(store, "sales", "events") == [base_file]


def test_partitioned_writes_read_per_partition_and_whole_table(store: Metastore) -> None:
    loc = table_dir(store, "daily")
    jan1 = append(store, "daily", ["jan1"], ["2024-01-01"])
    odd = append(store, "daily", ["odd"], ["k:v"])
    with pytest.raises(RuntimeError), InsertOnlyWriter(store, "sales", "daily", ["2024-01-02"]) as writer:
        put(writer.target_uri, "part-00000", ["aborted"])
        raise RuntimeError("boom")

    # Missing partitions were added; Hive escapes ':' in the directory name, and it is never decoded.
    assert store.catalog.get_partition_names("sales", "daily") == [
        "ds=2024-01-01",
        "ds=2024-01-02",
        "ds=k%3Av",
    ]
    assert jan1 == os.path.join(loc, "ds=2024-01-01", "delta_0000001_0000001_0000", "part-00000")
    assert odd == os.path.join(loc, "ds=k%3Av", "delta_0000002_0000002_0000", "part-00000")
    assert visible_files(store, "sales", "daily", ["2024-01-01"]) == [jan1]
    assert visible_files(store, "sales", "daily", ["2024-01-02"]) == []
    assert visible_files(store, "sales", "daily", ["k:v"]) == [odd]
    assert sorted(visible_files(store, "sales", "daily")) == sorted([jan1, odd])
    by_partition = {
        tuple(p.values): files for p, files in InsertOnlyReader(store, "sales", "daily").partition_files()
    }
    assert by_partition == {("2024-01-01",): [jan1], ("2024-01-02",): [], ("k:v",): [odd]}

    [commit] = [e for e in events_of(store, "COMMIT_TXN") if e.body()["writes"][0]["write_id"] == 2]
    [write] = commit.body()["writes"]
    assert write["partition"] == "ds=k%3Av"
    assert EncodedFileUri.decode(write["files"][0]).subdir == "delta_0000002_0000002_0000"


def test_partitioned_table_needs_partition_values(store: Metastore) -> None:
    with pytest.raises(InvalidObjectError, match=r"sales\.daily.*partitioned"):
        InsertOnlyWriter(store, "sales", "daily").begin()
    with pytest.raises(InvalidObjectError, match="not partitioned"):
        InsertOnlyWriter(store, "sales", "events", ["x"]).begin()
    with pytest.raises(InvalidObjectError):
        InsertOnlyWriter(store, "sales", "daily", ["2024", "extra"]).begin()
    with pytest.raises(NoSuchPartitionError):
        visible_files(store, "sales", "daily", ["never-written"])


def test_writer_misuse_is_reported(store: Metastore) -> None:
    writer = InsertOnlyWriter(store, "sales", "events")
    with pytest.raises(InvalidOperationError, match="begin"):
        _ = writer.target_uri
    with pytest.raises(InvalidOperationError, match="begin"):
        writer.commit()
    with pytest.raises(ValueError, match="mode"):
        InsertOnlyWriter(store, "sales", "events", mode="upsert")  # type: ignore[arg-type]
    with writer:
        writer.heartbeat()
    with pytest.raises(InvalidOperationError, match="committed"):
        writer.commit()
    with pytest.raises(InvalidOperationError, match="already started"):
        writer.begin()


def test_reader_refuses_a_snapshot_of_another_table(store: Metastore) -> None:
    [other] = store.txns.get_valid_write_ids(["sales.daily"])
    with pytest.raises(InvalidObjectError, match=r"sales\.daily"):
        visible_files(store, "sales", "events", valid_write_ids=other.write_ids)


# -- Spark ------------------------------------------------------------------------------------------------


@pytest.fixture
def spark_store(sqlite_metastore: Metastore) -> Metastore:
    sqlite_metastore.catalog.create_database(Database(name="sales"))
    return sqlite_metastore


def collected(df) -> list[tuple]:
    return sorted(tuple(row) for row in df.collect())


@pytest.mark.spark
def test_spark_round_trip_append_abort_overwrite(spark, spark_store: Metastore) -> None:
    from hmsrepl.acid.spark import read_insert_only, write_insert_only

    create_table(spark_store, "orders", cols=(("id", "int"), ("name", "string")), input_format=PARQUET_IN)
    rows1 = [(1, "a"), (2, "b")]
    rows2 = [(3, "c")]
    rows3 = [(99, "aborted")]
    rows4 = [(10, "x"), (11, None)]
    schema = "id int, name string"

    assert write_insert_only(spark.createDataFrame(rows1, schema), spark_store, "sales", "orders") == 1
    assert write_insert_only(spark.createDataFrame(rows2, schema), spark_store, "sales", "orders") == 2
    with (
        pytest.raises(RuntimeError, match="after writing"),
        InsertOnlyWriter(spark_store, "sales", "orders") as writer,
    ):
        spark.createDataFrame(rows3, schema).write.mode("append").parquet(writer.target_uri)
        raise RuntimeError("failed after writing")
    assert any(name.endswith(".parquet") for name in os.listdir(writer.target_uri))  # on disk, yet invisible

    assert collected(read_insert_only(spark, spark_store, "sales", "orders")) == sorted(rows1 + rows2)
    files = visible_files(spark_store, "sales", "orders")
    assert files and all(os.path.basename(f).startswith("part-") and f.endswith(".parquet") for f in files)

    before_overwrite = spark_store.txns.get_valid_write_ids(["sales.orders"])[0].write_ids
    assert (
        write_insert_only(
            spark.createDataFrame(rows4, schema), spark_store, "sales", "orders", mode="overwrite"
        )
        == 4
    )
    assert collected(read_insert_only(spark, spark_store, "sales", "orders")) == sorted(rows4)
    old = read_insert_only(spark, spark_store, "sales", "orders", valid_write_ids=before_overwrite)
    assert collected(old) == sorted(rows1 + rows2)


@pytest.mark.spark
def test_spark_job_failure_aborts_the_txn(spark, spark_store: Metastore) -> None:
    from pyspark.sql import functions as F

    from hmsrepl.acid.spark import read_insert_only, write_insert_only

    create_table(spark_store, "orders", cols=(("id", "int"), ("name", "string")), input_format=PARQUET_IN)
    write_insert_only(
        spark.createDataFrame([(1, "kept")], "id int, name string"), spark_store, "sales", "orders"
    )

    @F.udf("string")
    def explode_on_three(value):
        if value == 3:
            raise ValueError("poison row")
        return str(value)

    bad = spark.range(5).select(F.col("id").cast("int").alias("id"), explode_on_three("id").alias("name"))
    start = spark_store.get_current_notification_event_id()
    with pytest.raises(Exception, match="poison row"):
        write_insert_only(bad, spark_store, "sales", "orders")
    assert [e.event_type for e in spark_store.get_next_notification(start)] == [
        "OPEN_TXN",
        "ALLOC_WRITE_ID",
        "ABORT_TXN",
    ]
    assert collected(read_insert_only(spark, spark_store, "sales", "orders")) == [(1, "kept")]


@pytest.mark.spark
def test_spark_refuses_a_mismatched_dataframe_before_opening_a_txn(spark, spark_store: Metastore) -> None:
    from hmsrepl.acid.spark import write_insert_only

    create_table(spark_store, "orders", cols=(("id", "int"), ("name", "string")), input_format=PARQUET_IN)
    start = spark_store.get_current_notification_event_id()
    df = spark.createDataFrame([(1, 2.0)], "id int, price double")
    with pytest.raises(InvalidObjectError, match=r"missing \['name'\].*\['price'\]"):
        write_insert_only(df, spark_store, "sales", "orders")
    assert spark_store.get_next_notification(start) == []


@pytest.mark.spark
def test_spark_partitioned_round_trip(spark, spark_store: Metastore) -> None:
    from hmsrepl.acid.spark import read_insert_only, write_insert_only

    create_table(
        spark_store,
        "daily",
        cols=(("id", "int"), ("amount", "double")),
        partition_keys=("ds",),
        input_format=PARQUET_IN,
    )
    schema = "id int, amount double"
    empty = read_insert_only(spark, spark_store, "sales", "daily")
    assert empty.dtypes == [("id", "int"), ("amount", "double"), ("ds", "string")]
    assert empty.count() == 0

    write_insert_only(
        spark.createDataFrame([(1, 1.5)], schema), spark_store, "sales", "daily", ["2024-01-01"]
    )
    # A partition column in the DataFrame is ignored: the partition written is the one named.
    with_ds = spark.createDataFrame([(2, 2.5, "ignored")], "id int, amount double, ds string")
    write_insert_only(with_ds, spark_store, "sales", "daily", ["k:v"])
    with (
        pytest.raises(RuntimeError),
        InsertOnlyWriter(spark_store, "sales", "daily", ["2024-01-01"]) as writer,
    ):
        spark.createDataFrame([(3, 3.5)], schema).write.mode("append").parquet(writer.target_uri)
        raise RuntimeError("abort")

    expected = [(1, 1.5, "2024-01-01"), (2, 2.5, "k:v")]
    assert collected(read_insert_only(spark, spark_store, "sales", "daily")) == expected
    one = read_insert_only(spark, spark_store, "sales", "daily", partition_values=["k:v"])
    assert collected(one) == [(2, 2.5, "k:v")]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("serde", "extension"),
    [("org.apache.hive.hcatalog.data.JsonSerDe", ".json"), (None, ".csv")],
    ids=["json-serde", "lazy-simple-serde"],
)
def test_spark_text_tables_use_the_serdes_format(
    spark, spark_store: Metastore, serde, extension: str
) -> None:
    from hmsrepl.acid.spark import read_insert_only, write_insert_only

    create_table(
        spark_store,
        "logs",
        cols=(("id", "bigint"), ("msg", "varchar(20)")),
        input_format=TEXT_IN,
        serde_lib=serde,
    )
    rows = [(1, "hello, world"), (2, None)]
    write_insert_only(spark.createDataFrame(rows, "id bigint, msg string"), spark_store, "sales", "logs")
    data_files = visible_files(spark_store, "sales", "logs")
    assert data_files and all(f.endswith(extension) for f in data_files)
    assert collected(read_insert_only(spark, spark_store, "sales", "logs")) == sorted(rows)
    if serde is None:  # Hive's LazySimpleSerDe layout: Ctrl-A between fields, \N for NULL
        lines = [line for f in data_files for line in Path(f).read_text().splitlines()]
        assert sorted(lines) == ["1\x01hello, world", "2\x01\\N"]


def test_spark_format_follows_the_table_definition(spark_store: Metastore) -> None:
    from hmsrepl.acid.spark import spark_format

    names = iter(range(100))

    def fmt(**kwargs: object) -> str:
        return spark_format(create_table(spark_store, f"t{next(names)}", **kwargs)).name  # type: ignore[arg-type]

    assert fmt() == "parquet"
    assert fmt(input_format=PARQUET_IN) == "parquet"
    assert fmt(input_format="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat") == "orc"
    assert fmt(input_format=TEXT_IN, serde_lib="org.apache.hadoop.hive.serde2.JsonSerDe") == "json"
    assert fmt(input_format=TEXT_IN) == "csv"
    assert fmt(input_format=PARQUET_IN, params={**INSERT_ONLY, "hmsrepl.format": "ORC"}) == "orc"
    with pytest.raises(InvalidObjectError, match=r"hmsrepl\.format"):
        fmt(input_format="org.apache.hadoop.mapred.SequenceFileInputFormat")
