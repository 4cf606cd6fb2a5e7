"""Major compaction with Spark of a parquet insert-only table after 200 appends: same rows for every reader.

The 200 appends are 200 committed insert-only writes, each of one parquet file that one Spark job wrote
beforehand (200 Spark jobs would take minutes here); one more append goes through the Spark writer. Rows are
compared by a hash of the sorted rows Spark reads before, during (an older snapshot, and a reader holding a
txn) and after the compaction and its cleaning.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hmsrepl.acid import InsertOnlyWriter, visible_files
from hmsrepl.acid.cleaner import Cleaner
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.integration.test_insert_only import PARQUET_IN, create_table, table_dir

APPENDS = 200


@pytest.fixture
def spark_store(sqlite_metastore: Metastore) -> Metastore:
    sqlite_metastore.catalog.create_database(Database(name="sales"))
    return sqlite_metastore


def row_hash(df) -> str:
    rows = sorted(tuple(row) for row in df.collect())
    return hashlib.sha256(repr(rows).encode()).hexdigest() + f"/{len(rows)}"


@pytest.mark.spark
def test_spark_compaction_of_200_appends_keeps_every_readers_rows(
    spark, spark_store: Metastore, tmp_path: Path
) -> None:
    from hmsrepl.acid.spark import read_insert_only, spark_rewriter, write_insert_only

    store = spark_store
    create_table(store, "clicks", cols=(("id", "bigint"), ("note", "string")), input_format=PARQUET_IN)
    staging = str(tmp_path / "staging")
    spark.range(0, APPENDS * 5, numPartitions=APPENDS).selectExpr(
        "id", "concat('n', id) as note"
    ).write.parquet(staging)
    files = sorted(name for name in os.listdir(staging) if name.endswith(".parquet"))
    assert len(files) == APPENDS
    for name in files:
        with InsertOnlyWriter(store, "sales", "clicks", heartbeat=False) as writer:
            os.rename(os.path.join(staging, name), os.path.join(writer.target_uri, name))
    extra = spark.createDataFrame([(10_000, "spark")], "id bigint, note string")
    write_insert_only(extra, store, "sales", "clicks")
    with pytest.raises(RuntimeError), InsertOnlyWriter(store, "sales", "clicks") as aborted:
        spark.createDataFrame([(-1, "aborted")], "id bigint, note string").write.mode("append").parquet(
            aborted.target_uri
        )
        raise RuntimeError("abort this write")

    before = row_hash(read_insert_only(spark, store, "sales", "clicks"))
    assert before.endswith(f"/{APPENDS * 5 + 1}")
    files_before = len(visible_files(store, "sales", "clicks"))
    snapshot = store.txns.get_valid_write_ids(["sales.clicks"])[0].write_ids
    [query_txn] = store.txns.open_txns(1)

    report = run_cycle(store, rewriter=spark_rewriter(spark), delta_threshold=10, cleaner_delay_seconds=0)
    [outcome] = report.compacted
    assert outcome.state == "ready for cleaning" and outcome.input_dirs == APPENDS + 1
    assert row_hash(read_insert_only(spark, store, "sales", "clicks")) == before
    assert row_hash(read_insert_only(spark, store, "sales", "clicks", snapshot)) == before
    files_after = visible_files(store, "sales", "clicks")
    assert {Path(f).parent.name for f in files_after} == {outcome.base_dir}
    assert files_before > APPENDS and len(files_after) == 1  # the Spark append wrote a file per task

    store.txns.commit_txn(query_txn)
    [cleaned] = Cleaner(store, delay_seconds=0).run_all()
    assert cleaned.cleaned and cleaned.dirs_removed == APPENDS + 2  # with the aborted write's directory
    assert sorted(os.listdir(table_dir(store, "clicks"))) == [outcome.base_dir]
    assert row_hash(read_insert_only(spark, store, "sales", "clicks")) == before
