"""Spark on the metastore: a renamed managed table that has no files yet stays readable and writable."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.spark


def test_renamed_empty_managed_table_stays_readable(spark) -> None:
    db = f"ren_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.x0 (a INT) STORED AS PARQUET")
    spark.sql(f"ALTER TABLE {db}.x0 RENAME TO x1")
    assert spark.sql(f"SELECT count(*) FROM {db}.x1").collect()[0][0] == 0
    spark.sql(f"INSERT INTO {db}.x1 VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {db}.x1 RENAME TO x2")
    assert spark.sql(f"SELECT count(*) FROM {db}.x2").collect()[0][0] == 2
    spark.sql(f"DROP DATABASE {db} CASCADE")
