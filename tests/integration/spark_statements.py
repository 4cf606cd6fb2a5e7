"""Spark SQL statements run in a process of its own, with extra Spark settings (jars, filesystems).

    python tests/integration/spark_statements.py thrift://127.0.0.1:PORT WAREHOUSE SETTINGS_JSON SQL [SQL ...]

A SparkSession's class path is fixed when its JVM starts, and one JVM holds one session: a test that needs
jars the run's shared session does not have (``hadoop-aws`` for ``s3a://``) runs its Spark here. The session
is the product's (``hive_spark_session``: the README's writer settings) plus ``SETTINGS_JSON``. Each statement
prints one line, ``RESULT`` and its rows as JSON (lists, in the statement's order).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "include")]

from hmsrepl.spark_session import hive_spark_session  # noqa: E402

RESULT_PREFIX = "RESULT "


def main(argv: list[str]) -> int:
    uri, warehouse, settings, *statements = argv
    spark = hive_spark_session("hmsrepl-statements", uri, warehouse, extra_conf=json.loads(settings))
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for statement in statements:
            rows = spark.sql(statement).collect()
            print(RESULT_PREFIX + json.dumps([list(row) for row in rows], default=str), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
