"""A SparkSession on a secured metastore (Kerberos with a keytab, or TLS with a truststore), and a workload.

Run as its own process: Hadoop's login user is per JVM, and the test run's shared SparkSession must not
inherit it. Arguments: metastore URI, warehouse, and a JSON object of extra Spark settings; with
``--kerberos`` a core-site.xml turning on Hadoop security is put on the classpath (HADOOP_CONF_DIR). Prints
one JSON line with the rows read back and the JVM's login user.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

CORE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
</configuration>
"""


def main() -> None:
    uri, warehouse, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from hmsrepl.spark_session import hive_spark_session

    if "--kerberos" in sys.argv[4:]:
        # Hadoop's login (UserGroupInformation) reads core-site.xml from the classpath, not spark.hadoop.*:
        # the launcher puts HADOOP_CONF_DIR on it, as a cluster's client configuration would be.
        conf_dir = Path(tempfile.mkdtemp(prefix="hadoop-conf-"))
        (conf_dir / "core-site.xml").write_text(CORE_SITE)
        os.environ["HADOOP_CONF_DIR"] = str(conf_dir)
    spark = hive_spark_session("hmsrepl-secured", uri, warehouse, extra_conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    db = f"secured_{uuid.uuid4().hex[:8]}"
    try:
        spark.sql(f"CREATE DATABASE {db}")
        spark.sql(
            f"CREATE TABLE {db}.orders (id INT, name STRING) PARTITIONED BY (day STRING) STORED AS PARQUET"
        )
        spark.sql(f"INSERT INTO {db}.orders PARTITION (day='d1') VALUES (1, 'a'), (2, 'b')")
        spark.sql(f"INSERT INTO {db}.orders PARTITION (day='d2') VALUES (3, 'c')")
        rows = spark.sql(f"SELECT id, name, day FROM {db}.orders ORDER BY id").collect()
        user = spark.sparkContext._jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().toString()
        print(json.dumps({"db": db, "rows": [list(r) for r in rows], "ugi": user}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
