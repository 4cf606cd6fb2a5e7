"""The dump's ownership check, done a table at a time, refuses exactly what a check of every pair refuses.

Validation checks each table's partitions that sit below the table when the table is complete, and keeps only
tables and partitions placed elsewhere for the end (so a million-partition dump is checked in one table's
memory). Random dumps of nested, sibling and shared locations are checked both ways: the verdict must agree
with the rule applied to every pair of objects.
"""

from __future__ import annotations

import random

import pytest

from hmsrepl.formats.paths import is_below
from hmsrepl.replication.dump_ownership import DumpOwnership

SEGMENTS = ("a", "a-x", "b", "p=1", "p=1.v", "p=2")


def _location(rng: random.Random) -> str:
    return "/w/" + "/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(1, 3)))


def _breaks_rule(objects: list[tuple[str, str, str | None]]) -> bool:
    """Whether any object is at or inside another's location, other than a partition below its own table."""
    for i, (holder_loc, holder_table, holder_part) in enumerate(objects):
        for j, (loc, table, part) in enumerate(objects):
            if i == j or not is_below(loc, holder_loc):
                continue
            own_table = (
                holder_part is None and part is not None and holder_table == table and loc != holder_loc
            )
            if not own_table:
                return True
    return False


@pytest.mark.parametrize("seed", range(400))
def test_the_table_by_table_check_agrees_with_every_pair(seed: int) -> None:
    rng = random.Random(seed)
    tables = {f"t{n}": _location(rng) for n in range(rng.randint(1, 3))}
    objects: list[tuple[str, str, str | None]] = [(loc, name, None) for name, loc in tables.items()]
    owners = DumpOwnership()
    for name, loc in tables.items():
        owners.table(name, loc)
    for name, loc in tables.items():
        for n in range(rng.randint(0, 4)):
            place = f"{loc}/{rng.choice(SEGMENTS)}" if rng.random() < 0.7 else _location(rng)
            objects.append((place, name, f"p={n}"))
            owners.partition(name, f"p={n}", place)
        if rng.random() < 0.5:
            owners.table_done(name)
    found = owners.conflict()
    assert (found is not None) == _breaks_rule(objects), (objects, found)
    if found is not None:
        assert "would delete the other's data" in found and "\n" not in found


def test_a_clash_inside_a_finished_table_is_still_reported_at_the_end() -> None:
    owners = DumpOwnership()
    owners.table("events", "/w/events")
    owners.partition("events", "dt=a", "/w/events/dt=a")
    owners.partition("events", "dt=b", "/w/events/dt=a/nested")
    owners.table_done("events")
    owners.table("orders", "/w/orders")
    found = owners.conflict()
    assert found is not None and "partition 'events/dt=b'" in found and "lies inside" in found


def test_a_partition_inside_another_table_is_refused_whatever_the_order() -> None:
    owners = DumpOwnership()
    owners.table("events", "/w/events")
    owners.partition("events", "dt=b", "/w/orders/dt=b")  # placed elsewhere: kept for the end
    owners.table_done("events")
    owners.table("orders", "/w/orders")
    owners.table_done("orders")
    found = owners.conflict()
    assert found is not None and "lies inside the location of table 'orders'" in found
