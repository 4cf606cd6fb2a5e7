"""Hive 4's own metastore client (``HiveMetaStoreClient`` of Hive 4.2.0) as a peer: a scripted session against
a metastore, one line per step.

    python -m tests.peers.hive4_client thrift://127.0.0.1:9083 /warehouse db   # fetch, compile, run once

The client is the one inside ``hive-exec-4.2.0.jar``, with the jars of the Hive 4 metastore peer
(``tests.peers.hive_metastore.HIVE_4``: fetched from Maven Central, pinned, SHA-1 checked, into ``var/peers``).
``java/Hive4Client.java`` is compiled with the Temurin 25 JDK's ``javac`` once per source version. It prints
``STEP <name> OK <value>`` or ``STEP <name> ERROR <exception>: <message>`` for each step, so a test asserts
what a real Hive 4 client's calls give, one step failing without hiding the others.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.peers import maven
from tests.peers.hive_metastore import HIVE_4, JVM_OPTIONS, java
from tests.peers.maven import PEERS

SOURCE = Path(__file__).with_name("java") / "Hive4Client.java"
RUN_TIMEOUT = 180.0


@dataclass(frozen=True)
class Step:
    ok: bool
    value: str


def classpath() -> list[str]:
    """The Hive 4 metastore peer's jars (fetched unless cached), as classpath wildcards."""
    return [f"{maven.fetch(jar_set).jars}/*" for jar_set in HIVE_4.jar_sets]


def compiled(jars: list[str]) -> Path:
    """The client's class directory, compiled once per source version with the JDK that runs Hive 4."""
    source = SOURCE.read_bytes()
    classes = PEERS / f"hive4-client-{hashlib.sha256(source).hexdigest()[:12]}"
    if not (classes / "Hive4Client.class").exists():
        javac = Path(java(HIVE_4)).with_name("javac")
        partial = classes.with_name(classes.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        subprocess.run(
            [str(javac), "-cp", ":".join(jars), "-d", str(partial), str(SOURCE)],
            check=True,
            capture_output=True,
        )
        shutil.rmtree(classes, ignore_errors=True)
        partial.rename(classes)
    return classes


def run(uri: str, warehouse: str, db: str) -> dict[str, Step]:
    """The scripted session against ``uri``: each step's outcome by name."""
    jars = classpath()
    classes = compiled(jars)
    done = subprocess.run(
        [
            java(HIVE_4),
            *JVM_OPTIONS,
            "-cp",
            ":".join([str(classes), *jars]),
            "Hive4Client",
            uri,
            warehouse,
            db,
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    steps = {}
    for line in done.stdout.splitlines():
        if line.startswith("STEP "):
            _, name, outcome, *value = line.split(" ", 3)
            steps[name] = Step(outcome == "OK", value[0] if value else "")
    if not steps:
        raise RuntimeError(f"Hive 4's client ran no step (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return steps


if __name__ == "__main__":
    for name, outcome in run(*sys.argv[1:4]).items():
        print(name, "OK" if outcome.ok else "ERROR", outcome.value)
