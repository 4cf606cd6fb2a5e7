"""The locks of the tests' jar sets: what Maven resolved for their pins, which fetches then download as is.

    python -m tests.peers.lock              # resolve every set whose lock is missing or stale, write its lock
    python -m tests.peers.lock --all        # resolve and write every lock again
    python -m tests.peers.lock --check      # list the sets whose lock is missing or stale (exit 1 if any)

A lock is written from a resolution in a scratch directory (``tests.peers.maven.write_lock``), the sets side by
side; commit the locks with the pins they were resolved from.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.peers import hdfs, hive31, s3a
from tests.peers.hive_metastore import RELEASES
from tests.peers.maven import FetchError, JarSet, read_lock, write_lock

#: Every jar set the tests fetch.
JAR_SETS: tuple[JarSet, ...] = (
    hive31.CLIENT,
    s3a.JARS,
    s3a.BUNDLE,
    hdfs.JARS,
    *(jar_set for release in RELEASES.values() for jar_set in release.jar_sets),
)


def stale(jar_sets: tuple[JarSet, ...] = JAR_SETS) -> list[JarSet]:
    """The sets whose lock is missing or was resolved from other pins."""
    return [jar_set for jar_set in jar_sets if read_lock(jar_set) is None]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peers.lock", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="resolve every set again, current or not")
    which.add_argument("--check", action="store_true", help="only list the sets whose lock is stale")
    args = parser.parse_args(argv)
    todo = list(JAR_SETS) if args.all else stale()
    if args.check:
        for jar_set in todo:
            print(
                f"{jar_set.name}: its lock is missing or stale: run python -m tests.peers.lock",
                file=sys.stderr,
            )
        return 1 if todo else 0
    failed = False
    with ThreadPoolExecutor(len(todo) or 1) as pool:
        for jar_set, outcome in zip(todo, pool.map(_lock_or_error, todo), strict=True):
            failed |= isinstance(outcome, FetchError)
            print(f"{jar_set.name}: {outcome}", file=sys.stderr)
    return 1 if failed else 0


def _lock_or_error(jar_set: JarSet) -> object:
    try:
        return write_lock(jar_set)
    except FetchError as error:
        return error


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
