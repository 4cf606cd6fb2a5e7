"""Whole-file CRC32C of HDFS files from the NameNode and DataNodes, without reading the data here.

HDFS keeps a CRC per 512-byte chunk; with ``dfs.checksum.combine.mode=COMPOSITE_CRC`` its client combines
them into the CRC32C of the whole file, independent of block size, which is exactly the CRC of our
``crc32c-<hex>-<size>`` token. WebHDFS cannot give it (its GETFILECHECKSUM always answers the block-size
dependent ``MD5-of-MD5-of-CRC32C``), so the combination is asked of Hadoop's own Java client
(``FileSystem.getFileChecksum``) through a py4j gateway: the running Spark driver's JVM when there is one,
else one JVM per process started by pyspark (``launch_gateway``, ~2-3 s once; then ~10 ms a file). Inside a
Spark task (an executor's Python worker) no JVM is started: the files are read there instead.
Hadoop configuration (HA name services, Kerberos) comes from ``HADOOP_CONF_DIR`` as for any Hadoop client.

When no JVM can be had, or a file's chunks are not CRC32C (written with ``dfs.checksum.type=CRC32``),
``composite_checksum`` answers None and the caller reads and hashes the file instead.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from hmsrepl.storage.checksum import checksum_token

log = logging.getLogger(__name__)

COMPOSITE_CRC32C = "COMPOSITE-CRC32C"
#: Attempts when the file changes between the status and the checksum (a writer replaced it meanwhile).
ATTEMPTS = 3

_lock = threading.Lock()
_gateway: Any = None
_unavailable: str | None = None


def _jvm() -> Any:
    """A py4j JVM view with Hadoop's client on its class path, or None when none can be started."""
    global _gateway, _unavailable
    try:
        from pyspark import SparkContext

        active = SparkContext._active_spark_context
        if active is not None and active._jvm is not None:
            return active._jvm
    except ImportError:
        pass
    if _in_spark_task():
        return None  # a JVM per executor Python worker would cost more than reading the files it checks
    with _lock:
        if _gateway is None and _unavailable is None:
            try:
                from pyspark.java_gateway import launch_gateway

                _gateway = launch_gateway()
            except Exception as exc:  # no Java, no pyspark: checksums are read instead
                _unavailable = f"{type(exc).__name__}: {exc}"
                log.warning("HDFS composite checksums unavailable, files will be read: %s", _unavailable)
        return _gateway.jvm if _gateway is not None else None


def _in_spark_task() -> bool:
    try:
        from pyspark import TaskContext
    except ImportError:
        return False
    return TaskContext.get() is not None


def composite_checksum(uri: str) -> str | None:
    """The token of an HDFS file from its composite CRC32C, or None when HDFS cannot give one.

    Raises FileNotFoundError for a missing file. The size comes from the file's status taken before and
    after the checksum; a file replaced in between is asked again, so size and CRC describe one file.
    """
    jvm = _jvm()
    if jvm is None:
        return None
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("dfs.checksum.combine.mode", "COMPOSITE_CRC")
    path = jvm.org.apache.hadoop.fs.Path(uri)
    try:
        fs = path.getFileSystem(conf)
        for _ in range(ATTEMPTS):
            before = fs.getFileStatus(path)
            found = fs.getFileChecksum(path)
            after = fs.getFileStatus(path)
            if found is None or found.getAlgorithmName() != COMPOSITE_CRC32C:
                return None
            same = before.getModificationTime() == after.getModificationTime()
            if same and before.getLen() == after.getLen():
                crc = int.from_bytes(bytes(found.getBytes()), "big")
                return checksum_token(crc, int(after.getLen()))
        return None
    except Exception as exc:
        if "FileNotFoundException" in str(exc):
            raise FileNotFoundError(uri) from exc
        raise


def stop_gateway() -> None:
    """Stop the JVM this module started (tests, benchmarks); a Spark driver's JVM is never touched."""
    global _gateway, _unavailable
    with _lock:
        if _gateway is not None:
            _gateway.shutdown()
            proc = getattr(_gateway, "proc", None)
            if proc is not None:
                proc.stdin.close()
                proc.wait(timeout=30)
        _gateway, _unavailable = None, None
