"""Policy regexes are operator input run against every table name: a catastrophically backtracking one is
refused before a dump starts (no metrics row at all), and one the static check cannot see is stopped by the
match time limit with the dump's row ending ``failed``, never ``running``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.policy import ReplicationPolicy
from tests.helpers import create_db_and_table, make_table, open_sqlite_source, run_cli, side_args


def repl_run(command: str, source_args: list[str], dump_root: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("repl", "run", command, *source_args, "--dump-root", str(dump_root))


@pytest.mark.parametrize("pattern", ["(a+)+", "(a*)*b", r"(\w+\s?)*x", "((t[0-9]+)+)"])
def test_nested_repeats_are_refused_before_the_dump(tmp_path: Path, pattern: str) -> None:
    source = open_sqlite_source(tmp_path)
    create_db_and_table(source, "victims", "a" * 60)
    try:
        started = time.monotonic()
        result = repl_run(f"REPL DUMP victims.['{pattern}']", side_args("source", source), tmp_path / "dumps")
        assert time.monotonic() - started < 30
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert lines == [
            f"Error: policy for 'victims': '{pattern}' repeats a repeat (like '(a+)+'), which can take exponential "
            "time on a table name; write it with one repeat (e.g. 'a+' instead of '(a+)+')"
        ]
        assert MetricsLog(source.engine).list() == []  # refused before the run was recorded
        assert not (tmp_path / "dumps").exists() or not any((tmp_path / "dumps").iterdir())
    finally:
        source.close()


def test_overlapping_alternatives_hit_the_match_time_limit_and_the_row_ends_failed(tmp_path: Path) -> None:
    source = open_sqlite_source(tmp_path)
    create_db_and_table(source, "victims", "ok")
    source.catalog.create_table(make_table("victims", "a" * 60))
    try:
        started = time.monotonic()
        result = repl_run("REPL DUMP victims.['(a|aa)+b']", side_args("source", source), tmp_path / "dumps")
        assert time.monotonic() - started < 60
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            f"Error: policy for 'victims': pattern '(a|aa)+b' took over 1 s on table name '{'a' * 60}' "
            "(catastrophic backtracking); rewrite it without overlapping repeats"
        ]
        rows = MetricsLog(source.engine).list()
        assert [row.status for row in rows] == ["failed"]
    finally:
        source.close()


def test_ordinary_policies_still_match() -> None:
    policy = ReplicationPolicy("db", ("T[0-9]+", "sales_.*", "(ab){2}c+"), ("t9",))
    assert (
        policy.includes_table("t3") and not policy.includes_table("t3x") and not policy.includes_table("t9")
    )
    assert policy.includes_table("SALES_2024") and policy.includes_table("ababccc")


def test_overlong_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="a pattern of 1001 characters is longer than 1000"):
        ReplicationPolicy("db", ("a" * 1001,))
