"""A MiniDFSCluster (one NameNode, one DataNode, WebHDFS on) on loopback, from Hadoop's pinned client jars.

    python -m tests.peers.hdfs            # fetch the jars (a no-op when cached), print the jar directory
    python -m tests.peers.hdfs --run      # start a cluster under var/, print its addresses, run until Ctrl-C/TERM

``hadoop-client-minicluster`` holds the NameNode and DataNode classes (shaded, with the test-only
``MiniDFSCluster``), ``hadoop-client-api``/``-runtime`` the client they run on, all at the version pyspark's
own Hadoop client has, so a Spark session reaches the cluster with the jars it ships. A small launcher
(``java/HdfsPeer.java``, compiled with ``javac`` into ``var/peers`` on first use) builds the cluster with
``dfs.checksum.combine.mode=COMPOSITE_CRC`` and 1 MiB blocks, prints its addresses as one JSON line and
stops when its standard input closes, so a cluster never outlives the process that started it.

The same jars run Hadoop's shell (``FsShell``: ``hdfs dfs -cp``, ``-checksum``) with ``hadoop_shell``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.peers.maven import PEERS, FetchResult, JarSet, main

HADOOP_VERSION = "3.5.0"  # pyspark/jars/hadoop-client-api-3.5.0.jar
JARS = JarSet(
    name=f"hadoop-minicluster-{HADOOP_VERSION}",
    artifacts=tuple(
        f"org.apache.hadoop:{artifact}:{HADOOP_VERSION}"
        for artifact in ("hadoop-client-minicluster", "hadoop-client-runtime", "hadoop-client-api")
    ),
    transitive=True,
)
LAUNCHER = Path(__file__).with_name("java") / "HdfsPeer.java"
START_TIMEOUT = 180.0
#: The quick compiler alone: the cluster lives one test session and each shell command a second (see
#: ``hive_metastore.JVM_OPTIONS``).
JVM_OPTIONS = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")


def fetch() -> FetchResult:
    from tests.peers import maven

    return maven.fetch(JARS)


def compiled_launcher(jars: Path) -> Path:
    """The launcher's class directory, compiled once per source version (``javac`` must be installed)."""
    source = LAUNCHER.read_bytes()
    classes = PEERS / f"hdfs-launcher-{hashlib.sha256(source).hexdigest()[:12]}"
    if not (classes / "HdfsPeer.class").exists():
        if shutil.which("javac") is None:
            raise RuntimeError("javac is not installed: install a JDK (17+) to run the MiniDFSCluster peer")
        partial = classes.with_name(classes.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        subprocess.run(
            ["javac", "-cp", f"{jars}/*", "-d", str(partial), str(LAUNCHER)], check=True, capture_output=True
        )
        shutil.rmtree(classes, ignore_errors=True)
        partial.rename(classes)
    return classes


def conf_dir(base: Path, namenode: str) -> Path:
    """A Hadoop configuration directory for clients of the cluster (``core-site.xml``: default FS, composite
    CRC checksums); Hadoop's shell refuses to start without one."""
    directory = base / "conf"
    directory.mkdir(parents=True, exist_ok=True)
    props = {"fs.defaultFS": namenode, "dfs.checksum.combine.mode": "COMPOSITE_CRC"}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (directory / "core-site.xml").write_text(
        f'<?xml version="1.0"?>\n<configuration>{body}</configuration>\n'
    )
    return directory


@dataclass
class MiniDfs:
    """A running cluster: ``namenode`` (``hdfs://127.0.0.1:<rpc>``) and ``webhdfs`` (``http://...``)."""

    namenode: str
    webhdfs: str
    process: subprocess.Popen[bytes]
    jars: Path
    conf: Path
    start_seconds: float

    @property
    def endpoints(self) -> str:
        """The ``HMSREPL_WEBHDFS_ENDPOINTS`` value that maps the cluster's NameNode to its WebHDFS."""
        return f"{self.namenode}={self.webhdfs}"

    def classpath(self) -> str:
        return f"{self.conf}:{self.jars}/*"

    def hadoop_shell(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run Hadoop's file system shell (what ``hdfs dfs ...`` runs) against the cluster."""
        command = ["java", *JVM_OPTIONS, "-cp", self.classpath(), "org.apache.hadoop.fs.FsShell", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def stop(self) -> None:
        """Close the launcher's standard input (it shuts the cluster down), kill it if it does not exit."""
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(base: Path) -> MiniDfs:
    """Start a cluster with its data under ``base`` and wait until it serves (raise with its log if not)."""
    started = time.monotonic()
    jars = fetch().jars
    classes = compiled_launcher(jars)
    base.mkdir(parents=True, exist_ok=True)
    log = (base / "minidfs.log").open("wb")
    command = ["java", *JVM_OPTIONS, "-cp", f"{classes}:{jars}/*", "HdfsPeer", str(base / "data")]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    assert process.stdout is not None
    line = process.stdout.readline()  # the launcher prints one line once the cluster is up
    if not line:
        process.wait(timeout=START_TIMEOUT)
        tail = (base / "minidfs.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"MiniDFSCluster did not start (exit {process.returncode}):\n{tail}")
    addresses = json.loads(line)
    return MiniDfs(
        namenode=addresses["rpc"],
        webhdfs=addresses["http"],
        process=process,
        jars=jars,
        conf=conf_dir(base, addresses["rpc"]),
        start_seconds=time.monotonic() - started,
    )


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peers.hdfs", description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="start a cluster and run it until interrupted")
    parser.add_argument("--base", type=Path, default=PEERS.parent / "minidfs", help="the cluster's directory")
    args = parser.parse_args(argv)
    if not args.run:
        return main(JARS)
    # Ctrl-C, or a TERM from a supervisor (a background job ignores SIGINT): both stop the cluster cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cluster = start(args.base)
    print(
        json.dumps(
            {"namenode": cluster.namenode, "webhdfs": cluster.webhdfs, "seconds": cluster.start_seconds}
        )
    )
    print(f"export HMSREPL_WEBHDFS_ENDPOINTS={cluster.endpoints}", file=sys.stderr)
    try:
        cluster.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
