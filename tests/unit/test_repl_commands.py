"""REPL command grammar and replication policies (seed 003's examples)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.replication.commands import CommandError, DumpCommand, LoadCommand, StatusCommand, parse_command
from hmsrepl.replication.policy import ReplicationPolicy


def test_seed_examples_parse() -> None:
    a = parse_command("REPL DUMP sales;")
    assert a == DumpCommand(ReplicationPolicy("sales"))
    assert parse_command("REPL DUMP sales.['.*?']").policy == a.policy
    b = parse_command("REPL DUMP sales.['T3', '[a-z]+']").policy
    assert [b.includes_table(t) for t in ("T3", "t3", "orders", "T4", "o1")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    c = parse_command("REPL DUMP sales.['.*?'].['T[0-9]+', 'Q4']").policy
    assert [c.includes_table(t) for t in ("T3", "t400", "q4", "orders", "Q5")] == [
        False,
        False,
        False,
        True,
        True,
    ]
    d = parse_command("REPL DUMP sales.[]").policy
    assert d.functions_only and not d.includes_table("anything")
    e = parse_command("REPL DUMP sales FROM 200 TO 1400")
    assert (e.from_event_id, e.to_event_id, e.limit) == (200, 1400, None)
    g = parse_command("repl dump sales from 200 limit 100")
    assert (g.from_event_id, g.to_event_id, g.limit) == (200, None, 100)
    h = parse_command("REPL DUMP sales.['[a-z]+'] REPLACE sales FROM 200")
    assert h.replaced_policy == ReplicationPolicy("sales") and h.from_event_id == 200
    i = parse_command(
        "REPL DUMP sales WITH ('hive.repl.include.external.tables'='false', 'hive.repl.dump.metadata.only'='true')"
    )
    assert i.settings == {
        "hive.repl.include.external.tables": "false",
        "hive.repl.dump.metadata.only": "true",
    }


def test_load_and_status_parse() -> None:
    assert parse_command("REPL LOAD sales_dr FROM '/dumps/x' WITH ('k'='v')") == LoadCommand(
        "/dumps/x", "sales_dr", {"k": "v"}
    )
    assert parse_command('REPL LOAD FROM "s3://b/dumps/it\'s"') == LoadCommand("s3://b/dumps/it's", None, {})
    assert parse_command("REPL STATUS Sales_DR") == StatusCommand("sales_dr")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("REPL DUMP", "it ends early"),
        ("REPL DUMP sales FROM x", "at column 22"),
        ("REPL DUMP sales FROM 10 TO 5", "TO 5 is before FROM 10"),
        ("REPL DUMP sales FROM 1 LIMIT 0", "LIMIT must be positive"),
        ("REPL DUMP sales.['(unclosed'] ", "not a valid regex"),
        ("REPL DUMP a.['x'] REPLACE b FROM 1", "REPLACE policy is for database 'b'"),
        ("REPL DUMP a REPLACE a", "REPLACE needs FROM"),
        ("REPL LOAD FROM", "cannot parse"),
        ("DUMP sales", "cannot parse"),
    ],
)
def test_bad_commands_are_rejected_clearly(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        parse_command(text)


names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
patterns = st.lists(st.sampled_from(["[a-z]+", "t[0-9]+", "orders", "q4", "x.*", "it's"]), max_size=3)


@given(names, st.none() | patterns.map(tuple), patterns.map(tuple))
def test_policy_text_round_trips(db: str, include: tuple[str, ...] | None, exclude: tuple[str, ...]) -> None:
    policy = ReplicationPolicy(db, include, exclude)
    again = parse_command(f"REPL DUMP {policy.to_text()}").policy
    for table in ("orders", "t1", "q4", "xy", "abc1", "it's"):
        assert again.includes_table(table) == policy.includes_table(table)
