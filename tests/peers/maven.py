"""A pinned set of jars fetched from Maven Central into ``var/peers/`` (a cache) and checked against Central's SHA-1.

Maven resolves with ``--strict-checksums`` (a download whose ``.sha1`` does not match fails) into a local
repository of the set's own (``JarSet.local_repository``); every copied jar is then checked again against the
``.sha1`` Central published for it. A set is fetched once: a ``complete`` marker in its directory makes later
fetches a no-op, and the directory's name carries a hash of the pins, so changing a pin fetches into a new
directory.
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
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
CENTRAL = ("repo.maven.apache.org", 443)


class FetchError(RuntimeError):
    """The jars could not be fetched or verified; the message names the artifact or the cause."""


@dataclass(frozen=True)
class JarSet:
    """Jars to fetch: ``group:artifact:version`` coordinates and, when ``transitive``, their dependencies
    except ``exclusions`` (``group:artifact``, ``*`` for every artifact of a group)."""

    name: str
    artifacts: tuple[str, ...]
    transitive: bool = False
    exclusions: tuple[str, ...] = ()

    def cache_dir(self) -> Path:
        """One directory per pinned set: a change to the pins fetches into a new directory."""
        pins = json.dumps([self.artifacts, self.transitive, self.exclusions, DEPENDENCY_PLUGIN]).encode()
        return PEERS / f"{self.name}-{hashlib.sha256(pins).hexdigest()[:12]}"

    def jars(self) -> Path:
        return self.cache_dir() / "jars"

    def local_repository(self) -> Path:
        """Maven's local repository for this set alone: sets are fetched side by side
        (``tests.peers.fetch_all``), and Maven 3.8 does not lock a repository that several processes share
        (two downloading one artifact write the same file). Removing the set's directory removes it too, so
        a fetch asked again after a bad download starts clean."""
        return self.cache_dir() / "m2"

    def is_cached(self) -> bool:
        """Whether a previous fetch of the pinned set completed (then no network is needed)."""
        return (self.cache_dir() / "complete").exists()


@dataclass(frozen=True)
class FetchResult:
    jars: Path
    count: int
    bytes: int
    seconds: float
    downloaded: bool


def central_reachable(timeout: float = 5.0) -> bool:
    """Whether Maven Central answers a TCP connection (tests skip, with this reason, only when it does not)."""
    try:
        with socket.create_connection(CENTRAL, timeout=timeout):
            return True
    except OSError:
        return False


def pom(jar_set: JarSet) -> str:
    """A pom that depends on the pinned artifacts, each with the set's exclusions, for Maven to download
    (and check) them."""
    excludes = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in jar_set.exclusions)
    )
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        f"<exclusions>{excludes}</exclusions></dependency>\n"
        for g, a, v in (c.split(":") for c in jar_set.artifacts)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
        f"<groupId>hmsrepl.peers</groupId><artifactId>{jar_set.name}</artifactId><version>1</version>"
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


def _result(jars: Path, started: float, *, downloaded: bool) -> FetchResult:
    sizes = [p.stat().st_size for p in jars.glob("*.jar")]
    return FetchResult(jars, len(sizes), sum(sizes), time.monotonic() - started, downloaded=downloaded)


def fetch(jar_set: JarSet) -> FetchResult:
    """The verified jar directory of ``jar_set``, fetching it first unless a previous fetch completed."""
    root, jars = jar_set.cache_dir(), jar_set.jars()
    started = time.monotonic()
    if jar_set.is_cached():
        return _result(jars, started, downloaded=False)
    if shutil.which("mvn") is None:
        raise FetchError(f"mvn is not installed: install Maven to fetch {jar_set.name}")
    if jars.exists():
        shutil.rmtree(jars)  # a fetch that stopped half-way
    root.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text(pom(jar_set))
    command = [
        "mvn",
        "-B",
        "-q",
        "--strict-checksums",
        f"-Dmaven.repo.local={jar_set.local_repository()}",
        "-f",
        str(root / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={jars}",
        "-DincludeScope=runtime",
        f"-DexcludeTransitive={str(not jar_set.transitive).lower()}",
    ]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise FetchError(f"mvn could not resolve {jar_set.name}: {_first_error(run)}")
    verify(jars, jar_set.local_repository())
    result = _result(jars, started, downloaded=True)
    summary = {"artifacts": jar_set.artifacts, "jars": result.count, "bytes": result.bytes}
    (root / "complete").write_text(json.dumps(summary) + "\n")
    return result


def main(jar_set: JarSet) -> int:
    """Fetch ``jar_set`` and print its jar directory (one line on stdout; a summary or the error on stderr)."""
    try:
        result = fetch(jar_set)
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
