"""The jars of Spark's isolated Hive 3.1.3 metastore client, fetched from Maven Central and checksum-verified.

    python -m tests.peers.hive31            # fetch (a no-op when the cache is complete), print the jar directory

Spark 4 talks to a Hive 3.1 metastore with ``spark.sql.hive.metastore.version=3.1.3`` and the jars of that
client (``spark.sql.hive.metastore.jars=path``). The artifacts and exclusions mirror what Spark itself resolves
for ``jars=maven`` (``IsolatedClientLoader.downloadVersion`` and ``HiveVersion.v3_1``), minus Hadoop: Spark's
isolated loader takes every non-Hive ``org.apache.hadoop`` class from its own Hadoop client jars anyway.
Fetching and checking (Central's SHA-1) is ``tests.peers.maven``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.peers.maven import FetchError, FetchResult, JarSet, central_reachable, main

HIVE_VERSION = "3.1.3"

# group:artifact:version, as Spark's maven route resolves them for Hive 3.1.
ARTIFACTS = (
    f"org.apache.hive:hive-metastore:{HIVE_VERSION}",
    f"org.apache.hive:hive-exec:{HIVE_VERSION}",
    f"org.apache.hive:hive-common:{HIVE_VERSION}",
    f"org.apache.hive:hive-serde:{HIVE_VERSION}",
    "org.apache.logging.log4j:log4j-api:2.10.0",
    "org.apache.derby:derby:10.14.1.0",
    "com.google.guava:guava:14.0.1",
)
EXCLUSIONS = (
    "org.apache.calcite:calcite-druid",
    "org.apache.curator:*",
    "org.pentaho:pentaho-aggdesigner-algorithm",
    "org.apache.hive:hive-vector-code-gen",
    "org.apache.hadoop:*",
)
CLIENT = JarSet(f"hive-{HIVE_VERSION}-client", ARTIFACTS, transitive=True, exclusions=EXCLUSIONS)

__all__ = ["CLIENT", "FetchError", "central_reachable", "fetch", "is_cached", "spark_settings"]


def is_cached() -> bool:
    """Whether a previous fetch of the pinned set completed (then no network is needed)."""
    return CLIENT.is_cached()


def fetch() -> FetchResult:
    """The verified jar directory of the client, fetching it first unless a previous fetch completed."""
    from tests.peers import maven

    return maven.fetch(CLIENT)


def spark_settings(jars: Path) -> dict[str, str]:
    """The Spark settings that make a session talk to its metastore through the Hive 3.1.3 client."""
    return {
        "spark.sql.hive.metastore.version": HIVE_VERSION,
        "spark.sql.hive.metastore.jars": "path",
        "spark.sql.hive.metastore.jars.path": f"file://{jars}/*.jar",
    }


if __name__ == "__main__":
    sys.exit(main(CLIENT))
