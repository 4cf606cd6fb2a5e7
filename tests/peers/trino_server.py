"""A single-node Trino (coordinator and worker in one JVM) on loopback, with catalogs given by the test.

The server runs from the cached distribution (``tests.peers.trino``) with its configuration in a directory of
the test's own; Java runs it directly, not through Trino's launcher, so the process the test starts is the
one it stops (and reaps). ``query`` goes through the ``trino`` Python client, Trino's HTTP protocol.

Files are read and written through Trino's Hadoop file system (``fs.hadoop.enabled``), which serves plain
paths and ``file:`` URIs: the locations our metastore hands out for a local warehouse. Trino's native local
file system (``fs.native-local.enabled``) only serves ``local://`` URIs under one root, a scheme that the
metastore, Spark and Hive do not know.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hmsrepl.thrift.process import free_port, stop_process
from tests.peers import trino as trino_peer

STARTUP_SECONDS = 180.0
# Trino's uniform node selector memoizes its map of active nodes for 5 s (UniformNodeSelectorFactory): one
# refresh made while the only node's announcement lapsed refuses every query until the next refresh.
NODE_MAP_SECONDS = 6.0
NO_NODE_ATTEMPTS = 4
JVM_OPTIONS = (
    "-Xmx1G",
    "-XX:+UseSerialGC",  # few GC threads: the machine is small and shared
    "-XX:TieredStopAtLevel=1",  # C1 only: a test's queries are short, start-up dominates
    "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.attach.allowAttachSelf=true",
    "-XX:+EnableDynamicAgentLoading",
    "-Dfile.encoding=UTF-8",
    "--enable-native-access=ALL-UNNAMED",
)


def hive_catalog(metastore_uri: str, **extra: str) -> dict[str, str]:
    """A Hive connector on a metastore at ``thrift://host:port``, reading and writing the local file system."""
    return {
        "connector.name": "hive",
        "hive.metastore.uri": metastore_uri,
        "fs.hadoop.enabled": "true",
        "hive.non-managed-table-writes-enabled": "true",
        **extra,
    }


def iceberg_catalog(metastore_uri: str, **extra: str) -> dict[str, str]:
    """An Iceberg connector whose catalog is the Hive metastore at ``metastore_uri``."""
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "hive_metastore",
        "hive.metastore.uri": metastore_uri,
        "fs.hadoop.enabled": "true",
        **extra,
    }


@dataclass
class TrinoServer:
    port: int
    root: Path
    log_path: Path

    def query(self, sql: str, catalog: str | None = None, schema: str | None = None) -> list[list[Any]]:
        """The rows of one statement (DDL and DML answer their row count, as Trino's CLI shows).

        A statement refused with NO_NODES_AVAILABLE never started (the one node missed its announcement on
        a starved machine): it is run again once the node lists itself as active, as a client would retry.
        The scheduler keeps the node map it last built for NODE_MAP_SECONDS, so a retry sooner than that is
        refused from the same stale map even when the node is back: each retry waits that long first.
        """
        from trino.exceptions import TrinoQueryError

        for attempt in range(NO_NODE_ATTEMPTS):
            try:
                return self._query_once(sql, catalog, schema)
            except TrinoQueryError as exc:
                if exc.error_name != "NO_NODES_AVAILABLE" or attempt == NO_NODE_ATTEMPTS - 1:
                    raise
                refused = time.monotonic()
                _wait_for_a_worker(self, refused + 60)
                time.sleep(max(0.0, refused + NODE_MAP_SECONDS - time.monotonic()))
        raise AssertionError("unreachable")

    def _query_once(self, sql: str, catalog: str | None, schema: str | None) -> list[list[Any]]:
        import trino

        connection = trino.dbapi.connect(
            host="127.0.0.1", port=self.port, user="hmsrepl", catalog=catalog, schema=schema
        )
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            return cursor.fetchall()
        finally:
            connection.close()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the JVM's output and of the server's log (where a failed start says why)."""
        texts = [
            p.read_text(errors="replace") for p in (self.root / "launcher.log", self.log_path) if p.exists()
        ]
        return "\n".join("\n".join(text.splitlines()[-lines:]) for text in texts)


def write_config(root: Path, port: int, server: Path, catalogs: dict[str, dict[str, str]]) -> Path:
    """The server's ``etc`` directory under ``root``: the node and server properties (one file, as the
    launcher would pass them) and one file per catalog."""
    etc = root / "etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    node = {
        "node.environment": "hmsrepl_test",
        "node.id": uuid.uuid4().hex,
        "node.internal-address": "127.0.0.1",
        "node.bind-ip": "127.0.0.1",
    }
    config = {
        **node,
        "coordinator": "true",
        "node-scheduler.include-coordinator": "true",
        # One node that is its own worker: a heartbeat missed on a loaded machine must not take the only
        # worker away (NO_NODES_AVAILABLE); Trino's own testing servers turn the detector off likewise.
        "failure-detector.enabled": "false",
        "http-server.http.port": str(port),
        "discovery.uri": f"http://127.0.0.1:{port}",
        "log.path": str(root / "server.log"),
        "plugin.dir": str(server / "plugin"),
        "catalog.config-dir": str(etc / "catalog"),
        "query.max-memory": "400MB",
        "query.max-memory-per-node": "400MB",
        "task.concurrency": "2",
        "task.max-worker-threads": "4",
    }
    _write_properties(etc / "config.properties", config)
    _write_properties(etc / "log.properties", {"io.trino": "INFO"})
    for name, properties in catalogs.items():
        _write_properties(etc / "catalog" / f"{name}.properties", properties)
    return etc


def _write_properties(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))


def _started(port: int) -> bool:
    """Whether the server answers ``/v1/info`` and says it finished starting."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/info", timeout=2) as reply:
            return not json.load(reply).get("starting", True)
    except OSError:
        return False


def _wait_for_a_worker(running: TrinoServer, deadline: float) -> None:
    """Trino says it started before its node manager lists the coordinator as an active worker; a query in
    between fails with NO_NODES_AVAILABLE. Wait until one runs."""
    while True:
        try:
            rows = running._query_once(
                "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'", None, None
            )
            if rows and rows[0][0] >= 1:
                return
            why = "no active node yet"
        except Exception as exc:  # the client's error for NO_NODES_AVAILABLE, or the server still warming
            why = str(exc)
        if time.monotonic() > deadline:
            raise TimeoutError(f"Trino started but runs no query: {why}\n{running.log_tail()}")
        time.sleep(0.5)


@contextmanager
def trino_server(root: Path, catalogs: dict[str, dict[str, str]]) -> Iterator[TrinoServer]:
    """Run Trino with ``catalogs`` (name to properties) until the block ends; raise if it does not start."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = trino_peer.fetch()
    etc = write_config(root, port, server, catalogs)
    java = trino_peer.java_home() / "bin" / "java"
    command = [
        str(java),
        *JVM_OPTIONS,
        f"-Dconfig={etc / 'config.properties'}",
        f"-Dlog.levels-file={etc / 'log.properties'}",
        "-cp",
        str(server / "lib" / "*"),
        "io.trino.server.TrinoServer",
    ]
    with (root / "launcher.log").open("wb") as output:  # the JVM's own output; the server logs to log.path
        proc = subprocess.Popen(command, cwd=root, stdout=output, stderr=subprocess.STDOUT)
    running = TrinoServer(port, root, root / "server.log")
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _started(port):
            if proc.poll() is not None:
                raise RuntimeError(f"Trino exited with status {proc.returncode}:\n{running.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Trino did not start in {STARTUP_SECONDS:g} s:\n{running.log_tail()}")
            time.sleep(0.5)
        _wait_for_a_worker(running, deadline)
        yield running
    finally:
        stop_process(proc)
