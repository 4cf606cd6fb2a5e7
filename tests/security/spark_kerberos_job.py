"""A SparkSession that authenticates to a Kerberos-enabled metastore with a keytab, and a small workload.

Run as its own process (one JVM per Kerberos login: Hadoop's login user is per JVM, and the test run's shared
SparkSession must not inherit it). Arguments: metastore URI, warehouse, server principal, client principal,
keytab, krb5.conf. Prints one JSON line with the rows read back.
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
    uri, warehouse, server_principal, principal, keytab, krb5_conf = sys.argv[1:7]
    from hmsrepl.spark_session import hive_spark_session

    # Hadoop's login (UserGroupInformation) reads core-site.xml from the classpath, not spark.hadoop.*: the
    # launcher puts HADOOP_CONF_DIR on it, as a cluster's client configuration would be.
    conf_dir = Path(tempfile.mkdtemp(prefix="hadoop-conf-"))
    (conf_dir / "core-site.xml").write_text(CORE_SITE)
    os.environ["HADOOP_CONF_DIR"] = str(conf_dir)

    java_opts = f"-Djava.security.krb5.conf={krb5_conf}"
    spark = hive_spark_session(
        "hmsrepl-kerberos",
        uri,
        warehouse,
        extra_conf={
            "spark.hadoop.hive.metastore.sasl.enabled": "true",
            "spark.hadoop.hive.metastore.kerberos.principal": server_principal,
            "spark.hadoop.hadoop.security.authentication": "kerberos",
            "spark.kerberos.principal": principal,
            "spark.kerberos.keytab": keytab,
            # Reading a Hive table through Hadoop's InputFormat with security on asks for delegation tokens and
            # needs a token renewer's name (a cluster's yarn-site.xml sets it); local files issue no tokens.
            "spark.hadoop.yarn.resourcemanager.principal": f"yarn/_HOST@{principal.partition('@')[2]}",
            "spark.driver.extraJavaOptions": java_opts,
            "spark.executor.extraJavaOptions": java_opts,
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    db = f"kerberized_{uuid.uuid4().hex[:8]}"
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
