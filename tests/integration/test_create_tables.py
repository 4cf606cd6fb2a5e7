"""Several tables created in one catalog call (what a replication load does with a batch's new tables): their
locations are checked in one read, yet each is refused exactly as creating them one by one would refuse it,
and a refused call creates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.exceptions import AlreadyExistsError, InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Table
from hmsrepl.storage.local import local_path
from tests.helpers import make_table


def _at(metastore: Metastore, name: str, location: str) -> Table:
    table = make_table("c", name)
    return table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})


def test_tables_created_together_are_checked_as_if_created_one_by_one(metastore: Metastore) -> None:
    catalog = metastore.catalog
    catalog.create_database(Database(name="c"))
    root = catalog.default_db_location("c")
    catalog.create_table(_at(metastore, "old", f"{root}/old"))
    before = metastore.events.current_event_id()

    refusals = [
        # the second inside the first's managed directory: a drop of the first would delete its data
        ([_at(metastore, "outer", f"{root}/x"), _at(metastore, "inner", f"{root}/x/y")], InvalidObjectError),
        # the first inside the second's managed directory: found among the batch's earlier tables by key
        ([_at(metastore, "deep", f"{root}/z/y"), _at(metastore, "holder", f"{root}/z")], InvalidObjectError),
        # inside a table that exists already
        ([_at(metastore, "fine", f"{root}/f"), _at(metastore, "under", f"{root}/old/u")], InvalidObjectError),
        # the same name twice
        ([make_table("c", "twice"), make_table("c", "twice")], AlreadyExistsError),
        # a name taken already
        ([make_table("c", "new"), make_table("c", "old")], AlreadyExistsError),
    ]
    messages = []
    for tables, error in refusals:
        with pytest.raises(error) as refused:
            catalog.create_tables(tables)
        messages.append(str(refused.value))
    assert all("\n" not in message for message in messages)
    assert "table 'c.inner'" in messages[0] and "'c.outer'" in messages[0]
    assert "table 'c.holder'" in messages[1] and "'c.deep'" in messages[1]
    assert "table 'c.under'" in messages[2] and "'c.old'" in messages[2]
    assert catalog.get_tables("c") == ["old"]  # nothing created by a refused call
    assert metastore.events.current_event_id() == before

    made = catalog.create_tables([make_table("c", f"t{n}") for n in range(3)])
    assert [t.table_name for t in made] == ["t0", "t1", "t2"]
    assert all(t.id and Path(local_path(t.sd.location or "")).is_dir() for t in made)
    events = metastore.events.next_events(before)
    assert [(e.event_type, e.table_name) for e in events] == [("CREATE_TABLE", f"t{n}") for n in range(3)]
    assert [catalog.get_table("c", f"t{n}").id for n in range(3)] == [t.id for t in made]
    assert metastore.catalog.intents.pending() == []


def test_a_stored_table_or_database_inside_a_new_location_is_found_however_many_are_created(
    metastore: Metastore,
) -> None:
    """The stored objects inside a new table's location are read by key range, those above it by key, for
    all the call's tables at once (on PostgreSQL as arrays, elsewhere 64 ranges a statement): the one
    table overlapping something is found wherever it stands among 150 others, and the call creates none.
    A database's managed location counts as its own location does, as when a table is created alone (the
    batch once compared only the database's own, so a managed table could hold another database's managed
    tables, which its drop would delete)."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="c"))
    root = catalog.default_db_location("c")
    catalog.create_table(_at(metastore, "deep", f"{root}/outer/deep"))
    warehouse = root.rsplit("/", 1)[0]
    catalog.create_database(Database(name="d", location_uri=f"{warehouse}/holder/d.db"))
    catalog.create_database(
        Database(name="e", location_uri=f"{warehouse}/e.db", managed_location_uri=f"{warehouse}/managed/e.db")
    )
    before = metastore.events.current_event_id()
    clashes = {
        "contains_a_table": f"{root}/outer",  # a stored table inside it
        "contains_a_database": f"{warehouse}/holder",  # a stored database inside it
        "contains_a_managed_database": f"{warehouse}/managed",  # a database's managed location inside it
        "inside_a_table": f"{root}/outer/deep/x",  # inside a stored table
    }
    for position in (0, 70, 149):
        for name, location in clashes.items():
            tables = [make_table("c", f"t{n}") for n in range(150)]
            tables[position] = _at(metastore, name, location)
            with pytest.raises(InvalidObjectError) as refused:
                catalog.create_tables(tables)
            message = str(refused.value)
            assert f"'c.{name}'" in message and any(
                other in message for other in ("'c.deep'", "database 'd'", "database 'e'")
            ), message
    assert catalog.get_tables("c") == ["deep"]
    assert metastore.events.current_event_id() == before
    made = catalog.create_tables([make_table("c", f"t{n}") for n in range(150)])
    assert len(made) == 150
