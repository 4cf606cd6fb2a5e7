"""The suite hands its longest files out first (tests/file_order.py): the table is read from JUnit reports,
collection follows it, and ``make test`` keeps xdist from re-sorting the files by test count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.file_order import (
    DURATIONS,
    durations_from_reports,
    file_seconds,
    hand_out_order,
    main,
    measured_seconds,
)
from tests.servers import REPO


def _report(path: Path, cases: list[tuple[str, float]]) -> Path:
    rows = "".join(
        f'<testcase classname="{module}" name="t{i}" time="{t}"/>' for i, (module, t) in enumerate(cases)
    )
    path.write_text(
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{rows}</testsuite></testsuites>'
    )
    return path


def test_the_table_is_each_files_median_over_reports(tmp_path: Path) -> None:
    unit, demo = "tests.unit.test_file_order", "tests.integration.test_demo"
    reports = [
        _report(tmp_path / "a.xml", [(unit, 1.0), (unit, 2.0), (demo, 50.0)]),
        # a test class inside the module: still the module's file
        _report(tmp_path / "b.xml", [(unit, 9.0), (f"{demo}.TestSomething", 70.0)]),
        _report(tmp_path / "c.xml", [(unit, 4.0), (demo, 60.0), ("tests.gone.test_removed", 5.0)]),
    ]
    assert durations_from_reports(reports) == {
        "tests/integration/test_demo.py": 60.0,
        "tests/unit/test_file_order.py": 4.0,
    }


def test_files_missing_from_the_table_are_placed_by_what_they_start(tmp_path: Path) -> None:
    assert measured_seconds(), f"{DURATIONS} is empty: python -m tests.file_order REPORT.xml..."
    new = tmp_path / "test_new.py"
    assert file_seconds(new, starts_jvm=True) > file_seconds(new, starts_jvm=False)
    known = REPO / "tests" / "integration" / "test_demo.py"
    assert file_seconds(known, starts_jvm=False) == measured_seconds()["tests/integration/test_demo.py"]


def test_collection_puts_the_longest_file_first() -> None:
    files = ["tests/unit/test_json_text.py", "tests/unit/test_types.py", "tests/integration/test_demo.py"]
    # JVM options of the caller's: no class archive is built, so nothing is handed out ahead of its turn.
    env = {**os.environ, "SPARK_SUBMIT_OPTS": "-Dhmsrepl.test=order"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    order = list(dict.fromkeys(line.split("::")[0] for line in done.stdout.splitlines() if "::" in line))
    table = measured_seconds()
    assert order == sorted(files, key=lambda name: -table[name])


def test_while_the_archive_builds_files_without_a_jvm_go_first_for_about_its_length() -> None:
    spark, trino, mypy, unit, tiny = (Path(f"tests/test_{name}.py") for name in ("s", "t", "m", "u", "x"))
    seconds = {spark: 120.0, trino: 90.0, mypy: 150.0, unit: 60.0, tiny: 1.0}
    jvm = {spark, trino}
    assert hand_out_order(seconds, jvm, archive_building=False) == [mypy, spark, trino, unit, tiny]
    # 200 s of lead (100 s a worker): the mypy file (150 s), then the unit one (60 s) fills it.
    assert hand_out_order(seconds, jvm, archive_building=True) == [mypy, unit, spark, trino, tiny]


def test_make_test_keeps_the_order_from_xdist() -> None:
    """xdist's default re-sorts files by test count, which would hand the one-test JVM files out last."""
    args = re.search(r"^PYTEST_ARGS \?=(.*)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert args is not None
    assert {"--dist", "loadfile", "--no-loadscope-reorder"} <= set(args.group(1).split())


def test_a_missing_report_is_one_line_and_the_table_is_kept(tmp_path: Path, capsys) -> None:
    before = DURATIONS.read_bytes()
    assert main([str(tmp_path / "nope.xml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such report" in err and "nope.xml" in err
    assert DURATIONS.read_bytes() == before
