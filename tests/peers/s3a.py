"""Hadoop's S3A filesystem for pyspark: ``hadoop-aws`` and the AWS SDK v2 bundle it was built with, pinned.

    python -m tests.peers.s3a            # fetch (a no-op when the cache is complete), print the jar directory

pyspark 4.x ships ``hadoop-client-api``/``-runtime`` but no ``hadoop-aws``, so ``s3a://`` has no filesystem.
``hadoop-aws`` must be the exact version of pyspark's Hadoop client (``HADOOP_VERSION``), and the SDK bundle the
version that ``hadoop-aws``'s pom declares (read from its ``dependency:tree``); ``analyticsaccelerator-s3``
is its other compile dependency. The set is fetched without transitive resolution, so every jar is named here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.peers.maven import JarSet, main

HADOOP_VERSION = "3.5.0"  # pyspark/jars/hadoop-client-api-3.5.0.jar
AWS_SDK_VERSION = "2.35.4"  # software.amazon.awssdk:bundle, as org.apache.hadoop:hadoop-aws:3.5.0 declares it

JARS = JarSet(
    name=f"hadoop-aws-{HADOOP_VERSION}",
    artifacts=(
        f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
        f"software.amazon.awssdk:bundle:{AWS_SDK_VERSION}",
        "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1",
    ),
)


def spark_jars(jars: Path) -> str:
    """The ``spark.jars`` value that puts the fetched jars on the driver's and executors' class path."""
    return ",".join(str(jar) for jar in sorted(jars.glob("*.jar")))


def s3a_settings(
    endpoint: str, access_key: str, secret_key: str, *, region: str = "us-east-1"
) -> dict[str, str]:
    """The Spark settings for a warehouse on an S3-compatible store at ``endpoint`` (as the README lists them).

    ``fs.s3.impl`` makes ``s3://`` locations use S3A too: the metastore keeps each location as written
    (``s3a://`` from Spark), but a replica loaded into an ``s3://`` warehouse, or a table another writer
    created, has ``s3://`` ones, which Hadoop has no filesystem for otherwise.
    Path-style access addresses ``endpoint/bucket/key`` (a local or on-premises store has no per-bucket host
    names); TLS follows the endpoint's scheme.
    """
    return {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https:")).lower(),
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.access.key": access_key,
        "spark.hadoop.fs.s3a.secret.key": secret_key,
    }


if __name__ == "__main__":
    sys.exit(main(JARS))
