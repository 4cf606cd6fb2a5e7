"""The order test files are handed to the workers in: the longest first, from measured durations.

``make test`` runs two workers, each taking one whole file at a time (``--dist loadfile``), the next file in
collection order whenever its current one is nearly done. Which file comes last decides how long one worker
waits for the other: a two-minute file handed out at the end leaves a core idle for up to two minutes. Longest
first (the classic greedy schedule) leaves only short files for the end.

xdist would otherwise re-sort the files by how many tests each has (``--loadscope-reorder``, its default),
which puts the one-test files that start a Spark job or a JVM peer at the very end: the Makefile passes
``--no-loadscope-reorder``.

The durations are a table (``file_durations.json``: file -> seconds, every phase of its tests) measured from
JUnit reports of whole runs: ``python -m tests.file_order REPORT.xml...`` rewrites it with each file's
median over the reports. A file the table does not know (a new one) is placed by its markers: one that
starts a JVM is taken for a long file, any other for a short one. A stale table only costs balance, never a
test.

While the Spark class archive is being built (a minute and more, beside the tests: see
``tests/peers/spark_class_archive.py``), the first files handed out are the longest of those that start no
JVM, about as many seconds of them as the build takes on both workers: a Spark file run during the build pays
for its JVMs' classes without the archive and shares the cores with the build (the two Hive files took 100 s
more of the workers' time when they ran first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DURATIONS = TESTS / "file_durations.json"
#: Seconds assumed for a file missing from the table: one that starts a JVM (Spark, Trino) is usually long.
UNKNOWN_JVM_SECONDS = 60.0
UNKNOWN_SECONDS = 5.0
#: How long the Spark class archive's build takes beside the tests (rehearsal: 101 s).
ARCHIVE_BUILD_SECONDS = 100.0
WORKERS = 2


@cache
def measured_seconds() -> dict[str, float]:
    """The table: a test file's path relative to the repository -> its measured seconds."""
    if not DURATIONS.is_file():
        return {}
    table: dict[str, float] = json.loads(DURATIONS.read_text())
    return table


def file_seconds(path: Path, starts_jvm: bool) -> float:
    """How long the file at ``path`` is expected to take: measured, else guessed from what it starts."""
    try:
        known = measured_seconds().get(path.resolve().relative_to(REPO).as_posix())
    except ValueError:  # a file outside the repository
        known = None
    if known is not None:
        return known
    return UNKNOWN_JVM_SECONDS if starts_jvm else UNKNOWN_SECONDS


def hand_out_order(
    seconds: dict[Path, float], starts_jvm: set[Path], *, archive_building: bool
) -> list[Path]:
    """The files in the order they are handed out: the longest first, after (while the Spark class archive is
    being built) the longest files that start no JVM, ``ARCHIVE_BUILD_SECONDS`` of them for each worker."""
    longest_first = sorted(seconds, key=lambda path: (-seconds[path], str(path)))
    if not archive_building:
        return longest_first
    lead: list[Path] = []
    budget = ARCHIVE_BUILD_SECONDS * WORKERS
    for path in longest_first:
        if budget <= 0:
            break
        if path not in starts_jvm:
            lead.append(path)
            budget -= seconds[path]
    leading = set(lead)
    return lead + [path for path in longest_first if path not in leading]


@cache
def file_of(classname: str) -> str | None:
    """The test file a JUnit ``classname`` names (``tests.integration.test_x[.Class]`` ->
    ``tests/integration/test_x.py``), None when no such file exists any more."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (REPO / candidate).is_file():
            return candidate
    return None


def durations_from_reports(reports: Iterable[Path]) -> dict[str, float]:
    """Each file's median seconds over JUnit reports of whole runs (a report's test cases name their module
    as a dotted ``classname``)."""
    per_report: dict[str, list[float]] = defaultdict(list)
    for report in reports:
        totals: dict[str, float] = defaultdict(float)
        for case in ET.parse(report).iter("testcase"):
            name = file_of(case.get("classname", ""))
            if name is not None:
                totals[name] += float(case.get("time", "0"))
        for name, seconds in totals.items():
            per_report[name].append(seconds)
    return {name: round(statistics.median(times), 1) for name, times in sorted(per_report.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.file_order", description="Rewrite tests/file_durations.json from JUnit reports."
    )
    parser.add_argument("reports", nargs="+", type=Path, help="JUnit XML reports of whole runs")
    args = parser.parse_args(argv)
    missing = [str(report) for report in args.reports if not report.is_file()]
    if missing:
        print(f"tests.file_order: no such report: {', '.join(missing)}", file=sys.stderr)
        return 1
    table = durations_from_reports(args.reports)
    DURATIONS.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"tests.file_order: {len(table)} files, {sum(table.values()):.0f} s in all: {DURATIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
