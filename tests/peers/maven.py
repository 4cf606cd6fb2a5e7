"""A pinned set of jars fetched from Maven Central into ``var/peers/`` (a cache) and checked against SHA-1 sums.

A set is resolved by Maven once, when its pins change (``python -m tests.peers.lock``): Maven resolves with
``--strict-checksums`` (a download whose ``.sha1`` does not match fails), every copied jar is checked again
against the ``.sha1`` Central published for it, and the lock ``locks/<set>.lock`` records each jar's path on
Central, SHA-1 and size, with a digest of the pins it was resolved from. A fetch then downloads the locked jars
side by side and checks each against the lock (``central_file.fetch_many``): Maven resolves artifact after
artifact, so hadoop-aws's 36 jars, 13 MB, took it 68 s and Hive 4's metastore set 158 s of a fresh machine's
set-up. A set without a current lock (its pins changed) is resolved by Maven as before, with a line saying so.

A set is fetched once: a ``complete`` marker in its directory makes later fetches a no-op, and the directory's
name carries a hash of the pins, so changing a pin fetches into a new directory.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.peers.central_file import CENTRAL_URL, FetchError, fetch_many, file_sha1

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "var" / "peers"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
CENTRAL = ("repo.maven.apache.org", 443)
LOCKS = Path(__file__).with_name("locks")
_LOCK_HEADER = "# Written by python -m tests.peers.lock from Maven's resolution; do not edit. Pins: "


@dataclass(frozen=True)
class JarSet:
    """Jars to fetch: ``group:artifact:version`` coordinates and, when ``transitive``, their dependencies
    except ``exclusions`` (``group:artifact``, ``*`` for every artifact of a group)."""

    name: str
    artifacts: tuple[str, ...]
    transitive: bool = False
    exclusions: tuple[str, ...] = ()

    def pins_digest(self) -> str:
        """What the set resolves from, hashed: its cache directory's name and its lock carry it."""
        pins = json.dumps([self.artifacts, self.transitive, self.exclusions, DEPENDENCY_PLUGIN]).encode()
        return hashlib.sha256(pins).hexdigest()

    def cache_dir(self) -> Path:
        """One directory per pinned set: a change to the pins fetches into a new directory."""
        return PEERS / f"{self.name}-{self.pins_digest()[:12]}"

    def lock_file(self) -> Path:
        return LOCKS / f"{self.name}.lock"

    def jars(self) -> Path:
        return self.cache_dir() / "jars"

    def is_cached(self) -> bool:
        """Whether a previous fetch of the pinned set completed (then no network is needed)."""
        return (self.cache_dir() / "complete").exists()


@dataclass(frozen=True)
class LockedJar:
    """One jar of a lock: its path under Central's root (``group/artifact/version/file``), SHA-1 and size."""

    path: str
    sha1: str
    size: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]


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


def verify(jars: Path, m2: Path) -> None:
    """Every jar equals its ``.sha1`` as downloaded from Central into the local repository (raise otherwise)."""
    published = {p.name[: -len(".sha1")]: p for p in m2.rglob("*.jar.sha1")}
    for jar in sorted(jars.glob("*.jar")):
        if jar.name not in published:
            raise FetchError(
                f"{jar.name}: no .sha1 from Maven Central in {m2}; delete {jars.parent} and fetch again"
            )
        expected = published[jar.name].read_text().split()[0].strip().lower()
        if file_sha1(jar) != expected:
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


def read_lock(jar_set: JarSet) -> tuple[LockedJar, ...] | None:
    """The jars ``jar_set``'s lock pins, or ``None`` when it has no lock or one resolved from other pins."""
    try:
        header, *lines = jar_set.lock_file().read_text().splitlines()
    except (FileNotFoundError, ValueError):
        return None
    if header != _LOCK_HEADER + jar_set.pins_digest():
        return None
    jars = []
    for line in lines:
        path, sha1, size = line.split()
        jars.append(LockedJar(path, sha1, int(size)))
    return tuple(jars)


def fetch(jar_set: JarSet) -> FetchResult:
    """The verified jar directory of ``jar_set``, fetching it first unless a previous fetch completed: the
    locked jars side by side, or, without a current lock, through Maven."""
    root, jars = jar_set.cache_dir(), jar_set.jars()
    started = time.monotonic()
    if jar_set.is_cached():
        return _result(jars, started, downloaded=False)
    if jars.exists():
        shutil.rmtree(jars)  # a fetch that stopped half-way
    root.mkdir(parents=True, exist_ok=True)
    locked = read_lock(jar_set)
    if locked is None:
        print(
            f"{jar_set.name}: no lock for these pins, resolving through Maven (slow): "
            "run python -m tests.peers.lock and commit the lock",
            file=sys.stderr,
        )
        resolve(jar_set, root)
    else:
        fetch_many((f"{CENTRAL_URL}/{jar.path}", jars / jar.name, jar.sha1) for jar in locked)
    result = _result(jars, started, downloaded=True)
    summary = {"artifacts": jar_set.artifacts, "jars": result.count, "bytes": result.bytes}
    (root / "complete").write_text(json.dumps(summary) + "\n")
    return result


def resolve(jar_set: JarSet, root: Path) -> tuple[LockedJar, ...]:
    """``jar_set`` resolved by Maven into ``root/jars``, each jar checked against Central's ``.sha1``; the
    jars as a lock lists them.

    Maven's local repository is ``root/m2``, the set's alone: sets are fetched side by side
    (``tests.peers.fetch_all``), and Maven 3.8 does not lock a repository that several processes share (two
    downloading one artifact write the same file)."""
    if shutil.which("mvn") is None:
        raise FetchError(f"mvn is not installed: install Maven to resolve {jar_set.name}")
    jars, m2 = root / "jars", root / "m2"
    (root / "pom.xml").write_text(pom(jar_set))
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
        f"-DexcludeTransitive={str(not jar_set.transitive).lower()}",
    ]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise FetchError(f"mvn could not resolve {jar_set.name}: {_first_error(run)}")
    verify(jars, m2)
    return tuple(_locked(jar, m2) for jar in sorted(jars.glob("*.jar")))


def _locked(jar: Path, m2: Path) -> LockedJar:
    """``jar`` (Maven's copy) as a lock lists it: the path of the same bytes in Maven's repository is its
    path on Central."""
    sha1 = file_sha1(jar)
    for path in m2.rglob(jar.name):
        if file_sha1(path) == sha1:
            return LockedJar(path.relative_to(m2).as_posix(), sha1, jar.stat().st_size)
    raise FetchError(f"{jar.name}: Maven copied it, but its repository {m2} has no such file")


def write_lock(jar_set: JarSet) -> Path:
    """``jar_set`` resolved by Maven in a scratch directory, and its lock written from that resolution."""
    PEERS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=PEERS, prefix=f"{jar_set.name}.locking-") as scratch:
        jars = resolve(jar_set, Path(scratch))
    return save_lock(jar_set, jars)


def save_lock(jar_set: JarSet, jars: tuple[LockedJar, ...]) -> Path:
    """``jars`` written as ``jar_set``'s lock, under the digest of its pins."""
    lines = [_LOCK_HEADER + jar_set.pins_digest(), *(f"{j.path} {j.sha1} {j.size}" for j in jars)]
    jar_set.lock_file().parent.mkdir(exist_ok=True)
    jar_set.lock_file().write_text("\n".join(lines) + "\n")
    return jar_set.lock_file()


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
