"""Every peer the tests run, fetched side by side (``make peer-jars``):

    python -m tests.peers.fetch_all [downloads | built]

A fresh machine's set-up waits for these fetches, and all of it counts against the test command's budget.
Each runs in a process of its own (``python -m`` of its module, as it runs alone), all at once, so the set-up
waits for the longest one; within one, a locked jar set's jars download side by side (``tests.peers.maven``).

``downloads``: the JVM peers from Central, whose modules import nothing but the standard library, so the
system's Python fetches them while the virtual environment is installed (``make setup`` runs both at once);
``built``: what needs the environment (the Spark Hadoop-API copier's jar, compiled against pyspark's jars).
Neither: both. What is cached is not fetched again.

Each fetch's summary line is printed once it and those listed before it have ended; a failed one prints its
error, and the command ends with a line naming every fetch that failed and exits 1 (after the others ended:
their caches are kept).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

#: ``python -m`` argument lists by group: each module fetches (a no-op when cached) and prints its directory.
FETCHES: dict[str, tuple[tuple[str, ...], ...]] = {
    "downloads": (
        ("tests.peers.hive31",),
        ("tests.peers.s3a",),
        ("tests.peers.hive_metastore", "3.1.3"),
        ("tests.peers.hive_metastore", "4.2.0"),
        ("tests.peers.trino",),
        ("tests.peers.hdfs",),
    ),
    "built": (("hmsrepl.spark.hadoop_jar",),),
}


@dataclass
class Outcome:
    name: str
    code: int
    stderr: str


def run_all(fetches: tuple[tuple[str, ...], ...]) -> list[Outcome]:
    """Start every fetch, then wait for each; their outcomes in ``fetches``' order."""
    running = [
        (
            " ".join(fetch),
            subprocess.Popen(
                [sys.executable, "-m", *fetch], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            ),
        )
        for fetch in fetches
    ]
    outcomes = []
    for name, process in running:
        _, err = process.communicate()
        outcome = Outcome(name, process.returncode, err.strip())
        print(f"{name}: {outcome.stderr or 'done'}", file=sys.stderr)
        outcomes.append(outcome)
    return outcomes


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0] not in FETCHES):
        print(f"usage: python -m tests.peers.fetch_all [{' | '.join(FETCHES)}]", file=sys.stderr)
        return 2
    groups = argv or list(FETCHES)
    started = time.monotonic()
    fetches = tuple(fetch for group in groups for fetch in FETCHES[group])
    failed = [outcome.name for outcome in run_all(fetches) if outcome.code != 0]
    if failed:
        print(f"error: could not fetch {', '.join(failed)} (each one's error is above)", file=sys.stderr)
        return 1
    print(
        f"{' and '.join(groups)}: every peer is fetched ({time.monotonic() - started:.0f} s)", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
