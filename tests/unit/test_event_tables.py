"""Every reader of the log has one behaviour per event type, and every event type has one (or is listed as
ignored on purpose); the type groups they use come from ``event_specs``; dump paths come from ``DumpLayout``."""

from __future__ import annotations

import pytest

from hmsrepl.cache import apply as cache_apply
from hmsrepl.metastore import protection
from hmsrepl.metastore.event_specs import DATA_KINDS, DATABASE_KINDS, TXN_KINDS
from hmsrepl.metastore.events import EventType as E
from hmsrepl.replication import acid_replay, compaction, dump, dump_event_checks
from hmsrepl.replication.layout import DATABASE, FUNCTION, PARTITION, TABLE, DumpEntry, DumpLayout

ALL = set(E)


@pytest.mark.parametrize(
    "table",
    [
        compaction.EFFECTS,
        dump.CONSOLIDATE,
        acid_replay.DUMP_PREPARATION,
        cache_apply.SCOPES,
        dump_event_checks.EVENT_FIELDS,
    ],
    ids=["compaction", "consolidation", "dump preparation", "cache scope", "dump validation"],
)
def test_each_consumer_table_covers_every_event_type(table: dict[E, object]) -> None:
    assert set(table) == ALL


def test_the_cache_applies_or_explicitly_ignores_every_event_type() -> None:
    assert set(cache_apply.HANDLERS) | cache_apply.IGNORED == ALL
    assert not set(cache_apply.HANDLERS) & cache_apply.IGNORED


def test_replica_protection_judges_every_database_change_that_has_a_prior_state() -> None:
    assert set(protection.PRIOR_DATABASE) <= DATABASE_KINDS
    assert DATABASE_KINDS - set(protection.PRIOR_DATABASE) == {E.CREATE_DATABASE}


def test_type_groups_are_the_specs_groups() -> None:
    assert {E.CREATE_TABLE} == compaction.TABLE_CREATES
    assert {E.DROP_TABLE} == compaction.TABLE_DROPS
    assert {E.ADD_PARTITION} == compaction.PARTITION_ADDS
    assert {E.DROP_PARTITION} == compaction.PARTITION_DROPS
    assert {E.ALTER_PARTITION, E.INSERT} == compaction.PARTITION_WRITES
    assert {E.DROP_DATABASE} == compaction.DATABASE_DROPS
    assert set(acid_replay.TXN_EVENTS) <= TXN_KINDS and set(acid_replay.HANDLERS) <= TXN_KINDS
    # Only types that may carry data have data fields, in either message format.
    assert all(set(fields) <= DATA_KINDS for fields in dump_event_checks.DATA_FIELDS.values())
    # ACID data is stripped exactly from the types that carry data; the others pass as they are.
    as_is = {k for k, f in acid_replay.DUMP_PREPARATION.items() if f is acid_replay._as_is}
    assert ALL - as_is == DATA_KINDS | {E.COMMIT_TXN}


def test_layout_builds_and_reads_back_every_place() -> None:
    places = {
        DumpLayout.database("db"): DumpEntry(DATABASE),
        DumpLayout.function("db", "f"): DumpEntry(FUNCTION),
        DumpLayout.table("db", "t"): DumpEntry(TABLE, "t"),
        DumpLayout.partition("db", "t", "a=1/b=2"): DumpEntry(PARTITION, "t", "a=1/b=2"),
    }
    for path, entry in places.items():
        assert DumpLayout.entry(path) == entry
    assert DumpLayout.files_of(DumpLayout.partition("db", "t", "a=1")) == "db/t/a=1/_files"
    assert DumpLayout.segment(7) == "events/7/_events"
    assert DumpLayout.event(7) == "events/7/_metadata" and DumpLayout.event_files(7) == "events/7/_files"
    assert DumpLayout.entry("db/_functions/_metadata").kind == ""
    assert DumpLayout.entry("db/t/_files").kind == ""
