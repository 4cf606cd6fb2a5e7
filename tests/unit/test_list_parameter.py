"""A list parameter is a comparison the index serves on every backend, including inside an OR.

The sibling check, the reads around a new table's location and the dump's page reads combine a list
parameter with key ranges. Rendered as ``x IN (...) = 1`` (a boolean value compared with true, as SQLAlchemy
does for a boolean element on backends without a boolean type), the OR defeats the index and each call scans
the whole table: a bootstrap of 10,000 tables spent 94% of its load in that scan, growing with every table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.dialects import mysql, sqlite

from hmsrepl.metastore import bulk_reads, location_policy
from hmsrepl.metastore.catalog import rows
from hmsrepl.metastore.database import upgrade_schema
from hmsrepl.metastore.partitions_named import ByBackend

_RANGES = {f"from{n}": "" for n in range(location_policy._SIBLING_CHUNK)} | {
    f"to{n}": "" for n in range(location_policy._SIBLING_CHUNK)
}
STATEMENTS = {
    "sibling partitions": (location_policy._SIBLINGS, {"above": ["/w/t/", "/w/"], **_RANGES}),
    "tables around a location": (
        location_policy._DATABASES_AND_TABLES,
        {
            "above": ["/w/"],
            "inside_from": "/w/t/",
            "inside_to": "/w/t0",
            "skip_tbl": 0,
            "skip_db": "",
            "own_db": "sales",
        },
    ),
}


@pytest.mark.parametrize("dialect", [sqlite.dialect(), mysql.dialect()], ids=["sqlite", "mysql"])
@pytest.mark.parametrize(
    "statement",
    [location_policy._SIBLINGS, location_policy._DATABASES_AND_TABLES, bulk_reads._PAGE, rows._IDS_NAMED],
)
def test_a_list_parameter_is_rendered_as_a_plain_in(dialect, statement) -> None:
    if isinstance(statement, ByBackend):
        statement = statement.for_dialect(dialect.name)
    sql = str(statement.compile(dialect=dialect))
    assert ") = 1" not in sql and ") = true" not in sql.lower()


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_the_index_serves_the_ranges_and_the_list_together_on_sqlite(tmp_path: Path, name: str) -> None:
    """The plan of the statement as it runs: its list expanded and every parameter bound, as a check binds
    them (rendering literal values instead would plan a different statement)."""
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    upgrade_schema(url)
    statement, params = STATEMENTS[name]
    engine = create_engine(url)

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def explain(conn, cursor, sql, parameters, context, executemany):
        return "EXPLAIN QUERY PLAN " + sql, parameters

    with engine.connect() as conn:
        plan = [row[-1] for row in conn.execute(statement, params)]
    assert plan, "no plan was read"
    full_scans = [step for step in plan if step in ("SCAN partitions", "SCAN tbls")]
    assert not full_scans, plan
