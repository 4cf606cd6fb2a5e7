"""Hadoop's S3A filesystem for pyspark: ``hadoop-aws`` and the AWS SDK v2 it was built with, pinned.

    python -m tests.peers.s3a            # fetch (a no-op when the cache is complete), print the jar directory
    python -m tests.peers.s3a --bundle   # the same with the SDK's single 690 MB bundle instead of its modules

pyspark 4.x ships ``hadoop-client-api``/``-runtime`` but no ``hadoop-aws``, so ``s3a://`` has no filesystem.
``hadoop-aws`` must be the exact version of pyspark's Hadoop client (``HADOOP_VERSION``), and the SDK the
version that ``hadoop-aws``'s pom declares for its ``software.amazon.awssdk:bundle`` (``AWS_SDK_VERSION``,
read from ``dependency:tree``).

The default set (``JARS``, 36 jars, 13 MB) replaces the bundle by the SDK modules S3A uses: ``s3``,
``s3-transfer-manager``, ``sts`` (assumed-role credentials) and ``apache-client`` (its HTTP client), with their
dependencies, minus what pyspark already ships (Netty, SLF4J, Apache HttpClient, commons-codec/-logging), so
no library is on the class path twice. ``BUNDLE`` is Hadoop's documented set: it adds what the modules leave
out (KMS, the CRT client, S3 Access Grants) at 50 times the size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.peers.maven import JarSet, main

HADOOP_VERSION = "3.5.0"  # pyspark/jars/hadoop-client-api-3.5.0.jar
AWS_SDK_VERSION = "2.35.4"  # software.amazon.awssdk:bundle, as org.apache.hadoop:hadoop-aws:3.5.0 declares it
HADOOP_AWS = f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}"
ANALYTICS_ACCELERATOR = (
    "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1"  # hadoop-aws's
)

JARS = JarSet(
    name=f"hadoop-aws-{HADOOP_VERSION}-sdk-modules",
    artifacts=(
        HADOOP_AWS,
        *(
            f"software.amazon.awssdk:{module}:{AWS_SDK_VERSION}"
            for module in ("s3", "s3-transfer-manager", "sts", "apache-client")
        ),
    ),
    transitive=True,
    exclusions=(
        "software.amazon.awssdk:bundle",
        "org.wildfly.openssl:*",  # hadoop-aws's optional OpenSSL binding; S3A uses the JDK's TLS by default
        "io.netty:*",
        "org.slf4j:*",
        "org.apache.httpcomponents:*",
        "commons-codec:*",
        "commons-logging:*",
    ),
)

BUNDLE = JarSet(
    name=f"hadoop-aws-{HADOOP_VERSION}-sdk-bundle",
    artifacts=(HADOOP_AWS, f"software.amazon.awssdk:bundle:{AWS_SDK_VERSION}", ANALYTICS_ACCELERATOR),
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
    created, has ``s3://`` ones, which Hadoop has no filesystem for otherwise. Path-style access addresses
    ``endpoint/bucket/key`` (a local or on-premises store has no per-bucket host names); TLS follows the
    endpoint's scheme.
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


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peers.s3a", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bundle", action="store_true", help="the SDK's single bundle jar instead of its modules"
    )
    return main(BUNDLE if parser.parse_args(argv).bundle else JARS)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
