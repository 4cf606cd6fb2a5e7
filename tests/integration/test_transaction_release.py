"""An ended metastore transaction is freed by reference counts, not left to the cyclic collector.

A write that records file intents registers callbacks that refer back to its transaction; kept after the
commit, they made every such transaction, with its events and their bodies, a reference cycle: a load batch
left some 1,700 objects a batch for the collector, which a replay runs with the collector paused. What a user
relies on: memory that a busy metastore or a long load frees as it goes, the change committed or not.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_table


@pytest.fixture
def collector_off() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def test_a_committed_write_with_file_intents_is_freed_when_its_caller_lets_go(
    metastore: Metastore, collector_off: None
) -> None:
    metastore.catalog.create_database(Database(name="freed"))
    with metastore.events.transaction() as tx:
        metastore.catalog.create_table(make_table("freed", "t"))  # a managed table: its directory's intent
        assert tx.before_commit and tx.after_commit  # the callbacks that referred back
        ended = weakref.ref(tx)
        events = weakref.ref(tx.events[0])
    del tx
    assert ended() is None and events() is None
    assert metastore.catalog.get_table("freed", "t").table_name == "t"


def test_a_failed_write_with_file_intents_is_freed_too(metastore: Metastore, collector_off: None) -> None:
    metastore.catalog.create_database(Database(name="failed"))
    with pytest.raises(RuntimeError, match="planted"), metastore.events.transaction() as tx:
        metastore.catalog.create_table(make_table("failed", "t"))
        ended = weakref.ref(tx)
        raise RuntimeError("planted")
    del tx
    assert ended() is None
    assert metastore.catalog.get_tables("failed") == []
