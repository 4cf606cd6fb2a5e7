"""pytest fixtures of a MiniDFSCluster (``tests.peers.hdfs``): one cluster per run, a fresh directory per test.

The cluster starts on first use (~10-20 s: a JVM, a NameNode and a DataNode) and stops at the end of the
run; tests skip, saying why, when Java is missing or the jars can be neither found cached nor fetched.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest

from tests.peers import hdfs as peer
from tests.peers.maven import central_reachable


@pytest.fixture(scope="session")
def minidfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[peer.MiniDfs]:
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("a JDK (java and javac) is needed to run a MiniDFSCluster")
    if not peer.JARS.is_cached() and not central_reachable():
        pytest.skip("the Hadoop minicluster jars are not cached and Maven Central is unreachable")
    cluster = peer.start(tmp_path_factory.mktemp("minidfs"))
    yield cluster
    from hmsrepl.storage.hadoop_checksums import stop_gateway

    stop_gateway()
    cluster.stop()


@pytest.fixture
def hdfs_env(minidfs: peer.MiniDfs, monkeypatch: pytest.MonkeyPatch) -> Iterator[peer.MiniDfs]:
    """The cluster, with ``hdfs://`` URIs of its NameNode served through its WebHDFS in this process and in
    processes it starts (the endpoint is in the environment)."""
    from hmsrepl.storage.hdfs import ENDPOINTS_ENV, USER_ENV, reset_hdfs_filesystems

    monkeypatch.setenv(ENDPOINTS_ENV, minidfs.endpoints)
    monkeypatch.setenv(USER_ENV, "hive")
    reset_hdfs_filesystems()
    yield minidfs
    reset_hdfs_filesystems()


@pytest.fixture
def hdfs_root(hdfs_env: peer.MiniDfs) -> str:
    """A directory of its own on the cluster for one test (``hdfs://127.0.0.1:<port>/t-<hex>``)."""
    return f"{hdfs_env.namenode}/t-{uuid.uuid4().hex[:12]}"
