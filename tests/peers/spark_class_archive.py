"""A class-data archive for the tests' Spark JVMs: the classes a Spark session loads, mapped instead of parsed.

A Spark JVM that starts a Hive-enabled session and runs its first jobs loads some 15,000 classes; on the 2 cores
the suite runs on, parsing and verifying them is most of a short test's CPU. The JDK's dynamic archive
(``-XX:ArchiveClassesAtExit``) keeps those classes already parsed in a file that later JVMs map
(``-XX:SharedArchiveFile``). It is built once, by a training job that does what the tests' Spark does (a
Hive-enabled session on a real metastore server: tables, partitions, inserts, queries, files), and kept under
``var/`` like the peers' downloads; its name carries a hash of the JDK and of Spark's jars, so another JDK or
another Spark builds a new one.

The archive is only a speed-up: a JVM whose class path differs from the training job's (extra jars on it)
starts without it, silently (``-Xlog:cds=off``), and a failed build leaves the tests on the quick compiler
alone.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHIVES = REPO / "var" / "jvm-archives"
TRAINING_JOB = Path(__file__).with_name("spark_archive_training.py")
# A test's Spark lives seconds: the optimising compiler's threads would take the other test's core.
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
#: The home of the tests' Spark JVMs (``-Duser.home``), one per checkout. Spark's Hive client moves what an
#: INSERT OVERWRITE replaces into Hadoop's trash under the JVM's home, which Java takes from the password file
#: whatever ``HOME`` says, and the tests' metastores adopt it from their trash root (``HMSREPL_TRASH_ROOT``,
#: which tests/conftest.py points at this home's ``.Trash``): so the two agree on any machine, and the tests
#: leave nothing in the user's own ``~/.Trash``.
JVM_HOME = REPO / "var" / "test-home"
#: What every test Spark JVM starts with.
BASE_OPTIONS = f"{QUICK_COMPILER} -Duser.home={JVM_HOME}"
# A JVM that cannot use the archive (another class path) says so on stdout unless told not to.
QUIET_ARCHIVE = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
BUILD_TIMEOUT_SECONDS = 300


def spark_jvm_options() -> str:
    """``SPARK_SUBMIT_OPTS`` for the tests' Spark JVMs: the quick compiler, the tests' home, and the archive
    once it exists."""
    archive = archive_path()
    if archive is None or not archive.is_file():
        return BASE_OPTIONS
    return " ".join((BASE_OPTIONS, f"-XX:SharedArchiveFile={archive}", *QUIET_ARCHIVE))


@functools.cache
def archive_path() -> Path | None:
    """Where the archive for this JDK and this Spark lives, or None without a Java or a pyspark."""
    java = shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    java_binary = Path(java).resolve()
    digest.update(f"{java_binary}:{java_binary.stat().st_mtime_ns}".encode())
    for jar in sorted(jars.glob("*.jar")):
        # The JDK refuses an archive whose class path entries changed since the dump; so does this name.
        digest.update(f"{jar.name}:{jar.stat().st_mtime_ns}:{jar.stat().st_size}".encode())
    return ARCHIVES / f"spark-{pyspark.__version__}-{digest.hexdigest()[:12]}.jsa"


def start_spark_archive_build() -> bool:
    """Start building the archive in a process of its own, unless it exists: the caller goes on at once. True
    when the archive is not there yet (being built).

    Test workers collect at the same time and each starts a build; the first to take the lock builds, the
    others end. Nobody waits for it: xdist hands out no test before every worker has collected, so a build
    run in one worker's collection held both workers for its minute. Each test's JVMs take the archive from
    the moment it exists (``spark_jvm_options`` before every test). The build's output goes to
    ``var/jvm-archives/build.log``; a build that fails leaves no archive.
    """
    archive = archive_path()
    if archive is None or archive.is_file():
        return False
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    with open(ARCHIVES / "build.log", "a") as log:
        subprocess.Popen(
            [sys.executable, "-m", "tests.peers.spark_class_archive"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not the test run's process group: an interrupted run leaves it be
        )
    return True


def build_spark_archive() -> None:
    """Build the archive unless it exists or another process is building it (then return at once)."""
    archive = archive_path()
    if archive is None or archive.is_file():
        return
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    with open(ARCHIVES / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        if not archive.is_file():
            _build(archive)


def _build(archive: Path) -> None:
    """Run the training job under ``spark-submit`` (whose JVM writes the archive as it exits), then move the
    archive into place in one rename, so a JVM never maps half of one."""
    from tests.servers import metastore_server

    with tempfile.TemporaryDirectory(prefix="spark-archive-") as scratch:
        root = Path(scratch)
        partial = root / "classes.jsa"
        env = {
            **os.environ,
            "SPARK_SUBMIT_OPTS": f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        spark_submit = Path(sys.executable).with_name("spark-submit")
        command = [str(spark_submit if spark_submit.exists() else "spark-submit"), "--master", "local[2]"]
        with metastore_server(root, f"sqlite:///{root}/metastore.db") as server:
            command += [str(TRAINING_JOB), server.uri, server.warehouse]
            try:
                done = subprocess.run(
                    command, env=env, cwd=root, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS
                )
            except subprocess.TimeoutExpired:
                warnings.warn(
                    "the Spark class archive's training job timed out: tests run without it", stacklevel=2
                )
                return
        if done.returncode != 0 or not partial.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            warnings.warn(
                f"the Spark class archive was not built ({tail}): tests run without it", stacklevel=2
            )
            return
        shutil.move(partial, archive.with_suffix(".partial"))
        os.replace(archive.with_suffix(".partial"), archive)


if __name__ == "__main__":
    build_spark_archive()
