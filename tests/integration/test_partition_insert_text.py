"""Partition values and parameters that carry the characters array and JSON literals escape come back as
written, on every backend (PostgreSQL and MariaDB send a page of new partitions, and a transaction's events
and file intents, as JSON documents)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.exceptions import AlreadyExistsError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import JSON_FORMAT
from hmsrepl.metastore.mariadb_append import MAX_INTENTS
from hmsrepl.metastore.model import Database, Table
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.conftest import make_config
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
    "null",
    "emoji 😀 clef 𝄞",  # four bytes in UTF-8
    "escaped \\n and \\u0000 and \\'",
    "long " + "ab" * 120,  # near the longest a directory name allows
]
# Longer than any name or value column, as a partition's parameters may be: it travels inside the document.
LONG_TEXT = "€😀\\\"'\t" * 5000


def test_awkward_values_and_parameters_round_trip_in_order(metastore: Metastore) -> None:
    _awkward_partitions_round_trip(metastore, AWKWARD)


@pytest.mark.mysql
def test_partitions_and_their_values_round_trip_in_a_case_insensitive_database(tmp_path: Path) -> None:
    """A MariaDB metastore created in a database whose collation is case- and accent-insensitive (not the
    binary one the other tests use) adds and reads back the same partitions, each key value under its own
    partition; a name that differs only by case is the same partition there, and adding it is refused as it
    exists."""
    with temporary_database("mysql", str(tmp_path), mysql_collation="utf8mb4_unicode_ci") as url:
        metastore = Metastore.open(make_config(url, tmp_path))
        try:
            # Values that differ only by case are equal there (a partial spec finds both): one of them.
            table = _awkward_partitions_round_trip(metastore, [v for v in AWKWARD if v != "null"])
            with pytest.raises(AlreadyExistsError):
                metastore.catalog.add_partitions("db", "t", [make_partition(table, AWKWARD[5].upper(), "5")])
        finally:
            metastore.close()


def _awkward_partitions_round_trip(metastore: Metastore, values: list[str]) -> Table:
    """Add a partition per value to a new table ``db.t``; check their ids grow in the order given and each
    comes back as written, its key values found by a partial spec; return the table."""
    metastore.catalog.create_database(Database(name="db"))
    table = metastore.catalog.create_table(make_table("db", "t", partition_keys=("p", "q")))
    parts = []
    for n, value in enumerate(values):
        part = make_partition(table, value, f"{n}")
        part.parameters = {
            "note": value,
            'k"ey\\': value[::-1],
            "lines": f"tab\t{n}\nline\r\n",
            "long": LONG_TEXT,
            "none": "None",
        }
        parts.append(part)

    ids: dict[str, int] = {}
    added = metastore.catalog.add_partitions("db", "t", parts, new_ids=ids)

    assert [p.values for p in added] == [[v, f"{n}"] for n, v in enumerate(values)]
    read = metastore.catalog.get_partitions("db", "t")
    by_values = {tuple(p.values): p for p in read}
    assert set(by_values) == {(v, f"{n}") for n, v in enumerate(values)}
    for n, value in enumerate(values):
        part = by_values[(value, f"{n}")]
        assert part.parameters["note"] == value
        assert part.parameters['k"ey\\'] == value[::-1]
        assert part.parameters["lines"] == f"tab\t{n}\nline\r\n"
        assert part.parameters["long"] == LONG_TEXT
        assert part.parameters["none"] == "None"
    assert len(metastore.catalog.get_partition_names("db", "t")) == len(values)
    names: list[str] = []
    for n, value in enumerate(values):  # each key value under its own partition, and only it
        by_first = metastore.catalog.get_partition_names_ps("db", "t", [value, ""])
        assert len(by_first) == 1
        assert metastore.catalog.get_partition_names_ps("db", "t", ["", f"{n}"]) == by_first
        names.append(by_first[0])
    in_order = [ids[name] for name in names]
    assert in_order == sorted(in_order) and len(ids) == len(values)
    return table


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
