"""Partition values and parameters that carry the characters array and JSON literals escape come back as
written, on every backend (PostgreSQL sends a page of new partitions as one JSON document, PostgreSQL and
MariaDB a transaction's events and file intents)."""

from __future__ import annotations

from pathlib import Path

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import JSON_FORMAT
from hmsrepl.metastore.mariadb_append import MAX_INTENTS
from hmsrepl.metastore.model import Database
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table

AWKWARD = [
    'quote"d',
    "back\\slash",
    "{brace}",
    "comma,and space",
    " padded ",
    "ünïcødé ✓",
    'json {"k": "v\\n"}',
    "NULL",
]


def test_awkward_values_and_parameters_round_trip_in_order(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="db"))
    table = metastore.catalog.create_table(make_table("db", "t", partition_keys=("p", "q")))
    parts = []
    for n, value in enumerate(AWKWARD):
        part = make_partition(table, value, f"{n}")
        part.parameters = {"note": value, 'k"ey\\': value[::-1], "lines": f"tab\t{n}\nline"}
        parts.append(part)

    added = metastore.catalog.add_partitions("db", "t", parts)

    assert [p.values for p in added] == [[v, f"{n}"] for n, v in enumerate(AWKWARD)]
    read = metastore.catalog.get_partitions("db", "t")
    by_values = {tuple(p.values): p for p in read}
    assert set(by_values) == {(v, f"{n}") for n, v in enumerate(AWKWARD)}
    for n, value in enumerate(AWKWARD):
        part = by_values[(value, f"{n}")]
        assert part.parameters["note"] == value
        assert part.parameters['k"ey\\'] == value[::-1]
        assert part.parameters["lines"] == f"tab\t{n}\nline"
    assert len(metastore.catalog.get_partition_names("db", "t")) == len(AWKWARD)


def test_awkward_text_in_events_and_file_intents_round_trips(metastore: Metastore, tmp_path: Path) -> None:
    """The events of a transaction and its file intents travel as JSON documents on PostgreSQL and MariaDB:
    a table whose parameters carry the awkward values, and whose location's directory name carries quotes,
    backslashes and other letters, comes back in its event as written, and its directory is made where the
    location says (the intent's payload kept the name intact). The event is small enough to be stored as
    plain JSON text, not compressed, so its letters travel as they are. In one transaction, more tables than
    ride with the append on MariaDB keep their events in order all the same."""
    metastore.catalog.create_database(Database(name="db"))
    before = metastore.events.current_event_id()
    table = make_table("db", "t", u=AWKWARD[5], q=AWKWARD[0], b=AWKWARD[1], n=AWKWARD[7], e="")
    table.parameters['k"ey\\'] = "tab\tline\nnull"
    table.sd.location = str(tmp_path / "warehouse" / "db.db" / "we'ird \"dir\\ ü ✓ NULL")
    made = metastore.catalog.create_table(table)

    assert Path(local_path(made.sd.location or "")).is_dir()
    assert metastore.catalog.intents.pending() == []
    (event,) = metastore.events.next_events(before)
    assert (event.db_name, event.table_name, event.message_format) == ("db", "t", JSON_FORMAT)
    assert AWKWARD[5] in event.message
    logged = parse_event(event).table
    assert logged is not None and logged.parameters == made.parameters
    assert logged.sd.location == made.sd.location

    names = [f"many{n}" for n in range(MAX_INTENTS + 2)]
    start = metastore.events.current_event_id()
    with metastore.events.transaction():
        batch = [metastore.catalog.create_table(make_table("db", name, note=AWKWARD[0])) for name in names]
    assert all(Path(local_path(t.sd.location or "")).is_dir() for t in batch)
    assert metastore.catalog.intents.pending() == []
    events = metastore.events.next_events(start)
    assert [e.table_name for e in events] == names
    assert [e.event_id for e in events] == list(range(start + 1, start + 1 + len(names)))
