"""A batch of statements runs through its text as the driver takes it (``statement_batch``), kept per length
of each list parameter, with the same answers as SQLAlchemy's own execution; a batch whose text SQLAlchemy
must complete first (a default computed in Python) still runs through SQLAlchemy."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, insert, select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore import statement_batch as batches
from hmsrepl.metastore.list_parameter import in_list_parameter
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.schema import dbs, file_intents
from hmsrepl.metastore.statement_batch import StatementBatch, result_sets

pytestmark = pytest.mark.parametrize("backend", ["mysql"], indirect=True)

_NAMED = StatementBatch(
    select(dbs.c.name).where(in_list_parameter(dbs.c.name, "names")).order_by(dbs.c.name),
    select(dbs.c.name).where(dbs.c.name == bindparam("one")),
)


def test_lists_of_any_length_bind_each_of_their_values(metastore: Metastore) -> None:
    for name in ("a", "b", "c"):
        metastore.catalog.create_database(Database(name=name))
    with metastore.engine.connect() as conn:
        for names, expected in ((["b"], ["b"]), (["c", "a", "x"], ["a", "c"]), ([], []), (["a"], ["a"])):
            sets = result_sets(conn, _NAMED, {"names": names, "one": "b"})
            assert [[row[0] for row in found] for found in sets] == [expected, ["b"]]
        texts = batches._TEXTS[conn.dialect]
    assert {lengths for batch, _, lengths in texts if batch is _NAMED} == {(1,), (3,), (0,)}
    assert all(texts[key] is not None for key in texts if key[0] is _NAMED)


def test_a_batch_whose_defaults_are_computed_in_python_runs_through_sqlalchemy(metastore: Metastore) -> None:
    batch = StatementBatch(insert(file_intents).returning(file_intents.c.id), select(file_intents.c.attempts))
    row = {"kind": "makedirs", "payload": "{}", "created_at": 1, "claimed_at": 1}
    with metastore.engine.begin() as conn:
        sets = result_sets(conn, batch, row)
        assert batches._TEXTS[conn.dialect][(batch, frozenset(row), ())] is None
    assert [tuple(found) for found in sets[1]] == [(0,)]  # ``attempts``' default, which SQLAlchemy supplied
