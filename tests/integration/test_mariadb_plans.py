"""MariaDB reads the tables around a new location through their location key, as its plan shows.

MariaDB's optimizer joined each database to its tables through their (db_id, tbl_name) key and filtered them
by location afterwards, so every check read a row per table of the database (``location_policy``'s
``_tables_by_location`` tells it otherwise). How long a check takes depends on the machine; which index the
plan reads does not, so that is what is asserted, on the statement as it runs (its list expanded and every
parameter bound) over a database holding enough tables for the optimizer to prefer the join.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from hmsrepl.metastore import Metastore, location_policy
from hmsrepl.metastore.model import Database
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import make_table

pytestmark = pytest.mark.mysql

TABLES = 200


@pytest.fixture
def mariadb_store(tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database("mysql", str(tmp_path)) as url:
        store = Metastore.open(make_config(url, tmp_path))
        try:
            yield store
        finally:
            store.close()


def _analyzed(store: Metastore, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The tables read by each part of the overlap query run with ``params``, as ANALYZE reports them."""

    def analyze(conn, cursor, sql, parameters, context, executemany):  # type: ignore[no-untyped-def]
        return "ANALYZE FORMAT=JSON " + sql, parameters

    event.listen(store.engine, "before_cursor_execute", analyze, retval=True)
    try:
        with store.engine.connect() as conn:
            plan = json.loads(conn.execute(location_policy._DATABASES_AND_TABLES, params).scalar_one())
    finally:
        event.remove(store.engine, "before_cursor_execute", analyze)
    parts = plan["query_block"]["union_result"]["query_specifications"]
    return [step["table"] for part in parts for step in part["query_block"].get("nested_loop", [])]


def test_tables_around_a_new_location_are_read_through_their_location_key(mariadb_store: Metastore) -> None:
    mariadb_store.catalog.create_database(Database(name="db"))
    mariadb_store.catalog.create_tables([make_table("db", f"t{n:04d}") for n in range(TABLES)])
    database = (mariadb_store.catalog.get_table("db", "t0000").sd.location or "").rsplit("/", 1)[0]
    params = {
        "above": [database.rsplit("/", 1)[0] + "/", database + "/"],
        "inside_from": database + "/new/",
        "inside_to": database + "/new0",
        "skip_tbl": -1,
        "skip_db": "",
        "own_db": "db",
    }

    reads = [table for table in _analyzed(mariadb_store, params) if table["table_name"] == "tbls"]

    assert [(t["access_type"], t.get("key")) for t in reads] == [("range", "ix_tbls_location_key")], reads
