"""Partition values and parameters that carry the characters array and JSON literals escape come back as
written, on every backend (PostgreSQL sends a page of new partitions as one JSON document)."""

from __future__ import annotations

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
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
