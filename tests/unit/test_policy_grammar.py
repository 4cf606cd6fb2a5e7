"""Replication policies as Hive 4 users write them (``db.'inc'.'exc'``), the list form, and Hive's refusals.

The accepted and refused forms are the ones Hive's own table-level replication tests use
(TestTableLevelReplicationScenarios): what Hive replicates for a policy, this parser's policy includes.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.replication.commands import HIVE_PATTERN_ERROR, CommandError, parse_command, parse_policy
from hmsrepl.replication.policy import ReplicationPolicy


def _included(policy: str, tables: list[str]) -> list[str]:
    parsed = parse_policy(policy)
    return [t for t in tables if parsed.includes_table(t)]


@pytest.mark.parametrize(
    ("policy", "tables", "replicated"),
    [
        ("db.'(t1*)|(t3)'.'t100'", ["t1", "t11", "t2", "t3", "t100"], ["t1", "t11", "t3"]),
        ("db.'t1|t5'", ["t1", "t2", "t3", "t4", "t5"], ["t1", "t5"]),
        ("db.'(t1+)|(t2)'.'t11|t3'", ["t1", "t11", "t2", "t3", "t111"], ["t1", "t2", "t111"]),
        ("DB.'(.*a1+)|(cc3)|(B2)'.'(AA1+)|(b2)'", ["a1", "aA11", "B2", "Cc3"], ["a1", "Cc3"]),
        ("db.'(a[0-9]+)|(b2)'.'a1'", ["a1", "b2", "a2", "b1"], ["b2", "a2"]),
        ("db.'.*?'.'t[3-5]+'", ["t1", "t2", "t3", "t4", "t5", "t6"], ["t1", "t2", "t6"]),
        ("db.'.*?'", ["t1", "t200", "t3333"], ["t1", "t200", "t3333"]),
        ('db."t1|t5"', ["t1", "t5", "t6"], ["t1", "t5"]),  # Hive's string literals take either quote
        ("db", ["t1", "t200"], ["t1", "t200"]),
        ("db.['t1+', 't2'].['t11', 't3']", ["t1", "t11", "t2", "t3", "t111"], ["t1", "t2", "t111"]),
        ("db.['.*?'].['t[3-5]+']", ["t1", "t3", "t6"], ["t1", "t6"]),
    ],
)
def test_hive_documented_policies_replicate_what_hive_replicates(
    policy: str, tables: list[str], replicated: list[str]
) -> None:
    assert _included(policy, tables) == replicated


def test_full_database_forms_are_one_policy() -> None:
    assert parse_policy("sales") == parse_policy("sales.'.*?'") == parse_policy("sales.['.*']")
    assert parse_policy("sales").to_text() == "sales"


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        # Hive: ParseException
        ("db.t1.t2", "write db.'t1'.'t2'"),
        ("db.'t1'.t2", "write db.'t1'.'t2'"),
        ("db.t1.'t2'", "write db.'t1'.'t2'"),
        ("db.'t1+'.", "ends early"),
        ("db..''", "at column 4"),
        ("db.'t1'.'tt2'.'t3'", "at column 14"),
        # Hive: SemanticException REPL_INVALID_DB_OR_TABLE_PATTERN
        ("db.''.'t2'", "an empty regex matches no table"),
        ("db.'t1'.''", "an empty regex matches no table"),
        ("db.[t1].[t2]", "write db.'t1'.'t2'"),
        ("db.[t1|t2]", "write db.'t1|t2'"),
        ("db.[t1, t2]", "write db.'t1|t2'"),
        ("db.[t[0-9]+]", "write db.'t[0-9]+'"),
        ("db.'(unclosed'", "not a valid regex"),
    ],
)
def test_policies_hive_refuses_are_refused_in_one_line(policy: str, fragment: str) -> None:
    with pytest.raises(CommandError, match=re.escape(fragment)) as caught:
        parse_policy(policy)
    assert "\n" not in str(caught.value)


def test_unquoted_filters_get_hives_message_and_the_form_to_write() -> None:
    with pytest.raises(CommandError) as caught:
        parse_command("REPL DUMP sales.[orders|t1] FROM 5")
    assert HIVE_PATTERN_ERROR in str(caught.value) and "write sales.'orders|t1'" in str(caught.value)
    fix = str(caught.value).rsplit("write ", 1)[1]
    assert _included(fix, ["orders", "t1", "t2"]) == ["orders", "t1"]


def test_hive_forms_work_in_every_place_a_policy_goes() -> None:
    command = parse_command("REPL DUMP sales.'t1|t3' REPLACE sales.'t1' FROM 10 WITH ('k'='v')")
    assert command.policy == ReplicationPolicy("sales", ("t1|t3",))
    assert command.replaced_policy == ReplicationPolicy("sales", ("t1",))


# -- properties -----------------------------------------------------------------------------------------------
names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
atoms = st.sampled_from(
    ["t1", "t[0-9]+", "[a-z]+", "orders", "q_4", "a1+", "it's", r"x\d", 'say"hi', "(t1*)", "b{2}"]
)
regexes = st.lists(atoms, min_size=1, max_size=3).map("|".join)
tables = st.lists(st.sampled_from(["t1", "t22", "orders", "q_4", "a111", "it's", "x7", 'say"hi', "bb", "zz"]))


SQ, DQ = "'", '"'


def hive_quote(pattern: str, quote: str) -> str:
    """A regex as a Hive string literal in either quote character (backslash escapes)."""
    return quote + pattern.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


@given(names, regexes, st.none() | regexes, st.sampled_from("'\""))
def test_hive_form_parses_to_its_regexes_and_round_trips(
    db: str, include: str, exclude: str | None, quote: str
) -> None:
    text = f"{db}.{hive_quote(include, quote)}" + (f".{hive_quote(exclude, quote)}" if exclude else "")
    policy = parse_policy(text)
    assert policy == ReplicationPolicy(db, (include,), (exclude,) if exclude else ())
    assert parse_policy(policy.to_text()) == policy


@given(names, regexes, st.none() | regexes, tables)
def test_hive_form_and_one_element_lists_are_the_same_policy(
    db: str, include: str, exclude: str | None, names_: list[str]
) -> None:
    tail = f".{hive_quote(exclude, SQ)}" if exclude else ""
    hive = parse_policy(f"{db}.{hive_quote(include, SQ)}{tail}")
    listed = parse_policy(
        f"{db}.[{hive_quote(include, DQ)}]" + (f".[{hive_quote(exclude, SQ)}]" if exclude else "")
    )
    assert hive == listed
    assert [hive.includes_table(t) for t in names_] == [listed.includes_table(t) for t in names_]


@given(names, st.none() | st.lists(regexes, max_size=3).map(tuple), st.lists(regexes, max_size=2).map(tuple))
def test_any_policy_round_trips_through_its_text(
    db: str, include: tuple[str, ...] | None, exclude: tuple[str, ...]
) -> None:
    policy = ReplicationPolicy(db, include, exclude)
    assert parse_policy(policy.to_text()) == policy


@given(names, st.lists(st.from_regex(r"[a-z][a-z0-9_|*+]{0,8}", fullmatch=True), min_size=1, max_size=3))
def test_unquoted_lists_are_always_refused_with_a_fix_that_parses(db: str, words: list[str]) -> None:
    text = f"{db}.[{', '.join(words)}]"
    with pytest.raises(CommandError, match=re.escape("enclosed within single or double quotes")) as caught:
        parse_policy(text)
    fix = str(caught.value).rsplit("write ", 1)[1]
    try:
        assert parse_policy(fix).include == ("|".join(words),)
    except CommandError as exc:  # the words joined are no regex (``a**``): the fix says so itself
        assert "not a valid regex" in str(exc) or "repeats a repeat" in str(exc)
