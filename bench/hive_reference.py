"""Start and stop the real Hive Metastore 2.3.10 that ships in pyspark's jars, on Derby.

It is the reference oracle (what a real HMS returns) and the baseline of latency benchmarks; see DESIGN.md,
"The real Hive Metastore as a reference oracle". Booting takes ~30 s, so ``start()`` only launches the JVM
and ``wait_ready()`` blocks: a caller can prepare other work while Hive boots.

The JVM runs in its own process group, and everything in that group is killed on ``stop()``, on leaving the
``with`` block (also on Ctrl-C and errors) and, as a last resort, at interpreter exit (atexit): a benchmark
must never leave a Java process behind on a shared machine.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import escape

READY_TIMEOUT_SECONDS = 90.0
STOP_GRACE_SECONDS = 10.0
MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"


def pyspark_jars_dir() -> Path:
    """The ``jars`` directory of the installed pyspark, which contains hive-metastore-2.3.x and Derby."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise RuntimeError(f"no hive-metastore jar in {jars}: install pyspark (see requirements-dev.txt)")
    return jars


def hive_version() -> str:
    """The Hive Metastore version, read from the jar name (e.g. ``2.3.10``)."""
    [jar] = sorted(pyspark_jars_dir().glob("hive-metastore-*.jar"))[-1:]
    return jar.name.removeprefix("hive-metastore-").removesuffix(".jar")


def java_version(java: str = "java") -> str:
    """First line of ``java -version``, to print with benchmark figures (JIT and GC differ by release)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


#: A stand-in for hcatalog's DbNotificationListener (absent from pyspark's jars), compiled by
#: ``compile_notification_listener``: with it, the metastore keeps a notification log (replication source).
LISTENER_SOURCE = (
    Path(__file__).resolve().parents[1] / "tests/integration/hive_listener/DbNotificationListener.java"
)
LISTENER_CLASS = "hmsrepl.test.DbNotificationListener"
LISTENER_SETTING = "hive.metastore.transactional.event.listeners"


def compile_notification_listener(out: Path) -> Path:
    """Compile the listener against pyspark's jars into ``out``: a class directory for ``classpath``."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["javac", "-nowarn", "-cp", f"{pyspark_jars_dir()}/*", "-d", str(out), str(LISTENER_SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed on {LISTENER_SOURCE}:\n{done.stderr[-3000:]}")
    return out


def hive_site_xml(root: Path, extra: dict[str, str] | None = None) -> str:
    """hive-site.xml with the settings DESIGN.md lists (Derby under ``root``, no async logging), plus
    ``extra`` (e.g. a notification listener for replication tests)."""
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "hive.metastore.warehouse.dir": str(root / "warehouse"),
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.async.log.enabled": "false",  # else it dies on a missing log4j async class
        **(extra or {}),
    }
    body = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}\n</configuration>\n'


def free_port() -> int:
    """A free loopback port (the OS picks it; the tiny race until Java binds it is acceptable here)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _thrift_answers(port: int) -> bool:
    """A real call, not only an open port: Hive binds the port before its Derby schema is usable."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(30_000)
    transport = TTransport.TBufferedTransport(sock)
    try:
        transport.open()
        client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return "default" in client.get_all_databases()
    except Exception:  # any failure means "not ready yet"; the timeout reports the log
        return False
    finally:
        transport.close()


class HiveReferenceMetastore:
    """One Hive Metastore JVM on Derby in ``root`` (hive-site.xml, Derby files, warehouse, log)."""

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        heap: str = "1g",
        *,
        properties: dict[str, str] | None = None,
        classpath: tuple[str, ...] = (),
        jars: tuple[str, ...] | None = None,
        java: str = "java",
        derby_template: Path | None = None,
        jvm_options: tuple[str, ...] = (),
    ) -> None:
        """``properties`` go into hive-site.xml; ``classpath`` entries come before the metastore's ``jars``
        (default: pyspark's, i.e. Hive 2.3); ``java`` runs it; ``derby_template``, a Derby database whose
        schema Hive's schematool created, is copied in before the first start (Hive 3 and later need the
        tables DataNucleus does not create, such as the transaction tables)."""
        self.root = Path(root)
        self.port = port or free_port()
        self.heap = heap
        self.properties = dict(properties or {})
        self.classpath = classpath
        self.jars = jars
        self.java = java
        self.derby_template = derby_template
        self.jvm_options = jvm_options
        self.log_path = self.root / "hive-metastore.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self) -> HiveReferenceMetastore:
        """Launch the JVM and return at once; call ``wait_ready`` before the first request."""
        if self.proc is not None:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "warehouse").mkdir(exist_ok=True)
        (self.root / "hive-site.xml").write_text(hive_site_xml(self.root, self.properties))
        if self.derby_template is not None and not (self.root / "metastore_db").exists():
            shutil.copytree(self.derby_template, self.root / "metastore_db")
        jars = self.jars if self.jars is not None else (f"{pyspark_jars_dir()}/*",)
        classpath = os.pathsep.join([str(self.root), *self.classpath, *jars])
        command = [
            self.java,
            f"-Xmx{self.heap}",
            *self.jvm_options,
            "-cp",
            classpath,
            MAIN_CLASS,
            "-p",
            str(self.port),
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,  # derby.log lands here, not in the caller's directory
                start_new_session=True,  # own process group: stop() kills the JVM and anything it forked
            )
        atexit.register(self.stop)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Block until the metastore answers a Thrift call; raise with the log tail if it dies or times out."""
        if self.proc is None:
            raise RuntimeError("HiveReferenceMetastore.wait_ready called before start()")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the Hive Metastore exited with code {self.proc.returncode} while starting; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if _port_answers(self.port) and _thrift_answers(self.port):
                return
            time.sleep(0.5)  # polling a booting JVM, not timing anything
        raise RuntimeError(
            f"the Hive Metastore did not answer on port {self.port} within {timeout:.0f} s; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Kill the JVM's whole process group (TERM, then KILL after a grace period); safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        pgid = proc.pid  # start_new_session made the JVM the leader of its own group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_SECONDS)
        with contextlib.suppress(ProcessLookupError):  # the leader may be gone while children linger
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_SECONDS)

    def __enter__(self) -> HiveReferenceMetastore:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "HiveReferenceMetastore",
    "compile_notification_listener",
    "hive_version",
    "java_version",
    "pyspark_jars_dir",
]
