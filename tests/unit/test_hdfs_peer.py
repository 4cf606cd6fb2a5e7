"""The MiniDFSCluster peer runs the Hadoop version of pyspark's own client, so Spark reaches it natively."""

from __future__ import annotations

from pathlib import Path

import pyspark

from tests.peers import hdfs


def test_the_cluster_is_the_version_of_pysparks_hadoop_client() -> None:
    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{hdfs.HADOOP_VERSION}.jar").exists()
    assert all(coordinate.endswith(f":{hdfs.HADOOP_VERSION}") for coordinate in hdfs.JARS.artifacts)


def test_the_client_configuration_asks_for_composite_crc(tmp_path: Path) -> None:
    site = (hdfs.conf_dir(tmp_path, "hdfs://127.0.0.1:1") / "core-site.xml").read_text()
    assert "<name>dfs.checksum.combine.mode</name><value>COMPOSITE_CRC</value>" in site
    assert "<name>fs.defaultFS</name><value>hdfs://127.0.0.1:1</value>" in site
