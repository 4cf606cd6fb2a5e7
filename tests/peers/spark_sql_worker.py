"""A SparkSession in a process of its own that runs the SQL statements it reads on stdin, one JSON line each.

    python tests/peers/spark_sql_worker.py thrift://127.0.0.1:PORT WAREHOUSE [KEY=VALUE ...]

The KEY=VALUE pairs are Spark settings (e.g. ``spark.sql.hive.metastore.version=3.1.3``). One JVM holds one
Hive client, so a test that needs another Hive client version than the run's shared session drives Spark
here. Each request is ``{"sql": "..."}``; each answer is one stdout line starting with ``ANSWER_PREFIX``:
``{"columns": [...], "rows": [[...], ...]}`` or ``{"error": "AnalysisException", "message": "..."}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "include")]

from hmsrepl.spark_session import hive_spark_session  # noqa: E402

ANSWER_PREFIX = "@@answer "


def answer(spark, sql: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The statement's rows, or its error's class and message (the session stays usable after an error)."""
    try:
        frame = spark.sql(sql)
        rows = frame.collect()
    except Exception as error:  # reported to the caller, who decides
        return {"error": type(error).__name__, "message": str(error)}
    return {"columns": frame.columns, "rows": [list(row) for row in rows]}


def hive_client_version(spark) -> str:  # type: ignore[no-untyped-def]
    """The version of the Hive metastore client Spark loaded (connecting it first), e.g. ``3.1.3``."""
    client = spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    # Through the HiveClient interface: Py4J cannot list the methods of the isolated implementation class,
    # whose signatures name Hive classes that only the isolated class loader sees.
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    interface = jvm.java.lang.Class.forName("org.apache.spark.sql.hive.client.HiveClient")
    method = interface.getMethod("version", gateway.new_array(jvm.java.lang.Class, 0))
    return str(method.invoke(client, gateway.new_array(jvm.java.lang.Object, 0)).fullVersion())


def main(argv: list[str]) -> int:
    uri, warehouse, *settings = argv
    conf = dict(setting.split("=", 1) for setting in settings)
    spark = hive_spark_session("hmsrepl-peer-sql", uri, warehouse, extra_conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    ready = {"spark": spark.version, "hive_client": hive_client_version(spark)}
    print(ANSWER_PREFIX + json.dumps(ready), flush=True)
    for line in sys.stdin:
        if line.strip():
            reply = answer(spark, json.loads(line)["sql"])
            print(ANSWER_PREFIX + json.dumps(reply, default=str), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
