"""The jars of Spark's isolated Hive 3.1.3 metastore client, fetched from Maven Central and checksum-verified.

    python -m tests.peers.hive31            # fetch (a no-op when the cache is complete), print the jar directory

Spark 4 talks to a Hive 3.1 metastore with ``spark.sql.hive.metastore.version=3.1.3`` and the jars of that
client (``spark.sql.hive.metastore.jars=path``). The artifacts and exclusions mirror what Spark itself resolves
for ``jars=maven`` (``IsolatedClientLoader.downloadVersion`` and ``HiveVersion.v3_1``), minus Hadoop: Spark's
isolated loader takes every non-Hive ``org.apache.hadoop`` class from its own Hadoop client jars anyway.

Maven resolves with ``--strict-checksums`` (a download whose ``.sha1`` does not match fails), into a local
repository under ``var/peers/m2``; every copied jar is then checked again against its ``.sha1`` here.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "var" / "peers"
HIVE_VERSION = "3.1.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
CENTRAL = ("repo.maven.apache.org", 443)

# group:artifact:version, as Spark's maven route resolves them for Hive 3.1.
ARTIFACTS = (
    f"org.apache.hive:hive-metastore:{HIVE_VERSION}",
    f"org.apache.hive:hive-exec:{HIVE_VERSION}",
    f"org.apache.hive:hive-common:{HIVE_VERSION}",
    f"org.apache.hive:hive-serde:{HIVE_VERSION}",
    "org.apache.logging.log4j:log4j-api:2.10.0",
    "org.apache.derby:derby:10.14.1.0",
    "com.google.guava:guava:14.0.1",
)
EXCLUSIONS = (
    "org.apache.calcite:calcite-druid",
    "org.apache.curator:*",
    "org.pentaho:pentaho-aggdesigner-algorithm",
    "org.apache.hive:hive-vector-code-gen",
    "org.apache.hadoop:*",
)


class FetchError(RuntimeError):
    """The jars could not be fetched or verified; the message names the artifact or the cause."""


@dataclass(frozen=True)
class FetchResult:
    jars: Path
    count: int
    bytes: int
    seconds: float
    downloaded: bool


def cache_dir() -> Path:
    """One directory per pinned set: a change to the pins fetches into a new directory."""
    key = hashlib.sha256(json.dumps([ARTIFACTS, EXCLUSIONS, DEPENDENCY_PLUGIN]).encode()).hexdigest()[:12]
    return PEERS / f"hive-{HIVE_VERSION}-client-{key}"


def is_cached() -> bool:
    """Whether a previous fetch of the pinned set completed (then no network is needed)."""
    return (cache_dir() / "complete").exists()


def spark_settings(jars: Path) -> dict[str, str]:
    """The Spark settings that make a session talk to its metastore through the Hive 3.1.3 client."""
    return {
        "spark.sql.hive.metastore.version": HIVE_VERSION,
        "spark.sql.hive.metastore.jars": "path",
        "spark.sql.hive.metastore.jars.path": f"file://{jars}/*.jar",
    }


def central_reachable(timeout: float = 5.0) -> bool:
    """Whether Maven Central answers a TCP connection (tests skip, with this reason, only when it does not)."""
    try:
        with socket.create_connection(CENTRAL, timeout=timeout):
            return True
    except OSError:
        return False


def pom() -> str:
    """A pom that depends on the pinned artifacts with Spark's exclusions, to let Maven resolve the closure."""
    excludes = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in EXCLUSIONS)
    )
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        f"<exclusions>{excludes}</exclusions></dependency>\n"
        for g, a, v in (c.split(":") for c in ARTIFACTS)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
        "<groupId>hmsrepl.peers</groupId><artifactId>hive31-client</artifactId><version>1</version>"
        "<packaging>pom</packaging>\n"
        f"<dependencies>\n{deps}</dependencies></project>\n"
    )


def sha1(path: Path) -> str:
    digest = hashlib.sha1()  # Maven Central publishes SHA-1 sums: a check, not a secret
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(jars: Path, m2: Path) -> None:
    """Every jar equals its ``.sha1`` as downloaded from Central into the local repository (raise otherwise)."""
    published = {p.name[: -len(".sha1")]: p for p in m2.rglob("*.jar.sha1")}
    for jar in sorted(jars.glob("*.jar")):
        if jar.name not in published:
            raise FetchError(
                f"{jar.name}: no .sha1 from Maven Central in {m2}; delete {jars.parent} and fetch again"
            )
        expected = published[jar.name].read_text().split()[0].strip().lower()
        if sha1(jar) != expected:
            raise FetchError(
                f"{jar.name}: SHA-1 differs from Maven Central's; delete {jars.parent} and fetch again"
            )


def _first_error(run: subprocess.CompletedProcess[str]) -> str:
    """Maven's first error line, without its colour codes and its pointer to the help pages."""
    for line in run.stdout.splitlines():
        text = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if text.startswith("[ERROR]") and text.removeprefix("[ERROR]").strip():
            return text.removeprefix("[ERROR]").split(" -> [Help")[0].strip()
    return run.stderr.strip()[-500:] or f"mvn exited with status {run.returncode}"


def fetch() -> FetchResult:
    """The verified jar directory, fetching it first unless a previous fetch completed."""
    root = cache_dir()
    jars, done = root / "jars", root / "complete"
    started = time.monotonic()
    if is_cached():
        sizes = [p.stat().st_size for p in jars.glob("*.jar")]
        return FetchResult(jars, len(sizes), sum(sizes), time.monotonic() - started, downloaded=False)
    if shutil.which("mvn") is None:
        raise FetchError("mvn is not installed: install Maven to fetch the Hive 3.1 client jars")
    if jars.exists():
        shutil.rmtree(jars)  # a fetch that stopped half-way
    root.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text(pom())
    m2 = PEERS / "m2"
    command = [
        "mvn",
        "-B",
        "-q",
        "--strict-checksums",
        f"-Dmaven.repo.local={m2}",
        "-f",
        str(root / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={jars}",
        "-DincludeScope=runtime",
    ]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise FetchError(f"mvn could not resolve the Hive {HIVE_VERSION} client: {_first_error(run)}")
    verify(jars, m2)
    sizes = [p.stat().st_size for p in jars.glob("*.jar")]
    done.write_text(json.dumps({"artifacts": ARTIFACTS, "jars": len(sizes), "bytes": sum(sizes)}) + "\n")
    return FetchResult(jars, len(sizes), sum(sizes), time.monotonic() - started, downloaded=True)


def main() -> int:
    try:
        result = fetch()
    except FetchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    verb = "fetched" if result.downloaded else "cached"
    print(
        f"{verb} {result.count} jars, {result.bytes / 1e6:.1f} MB in {result.seconds:.1f} s: {result.jars}",
        file=sys.stderr,
    )
    print(result.jars)
    return 0


if __name__ == "__main__":
    sys.exit(main())
