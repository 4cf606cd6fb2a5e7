"""How a bootstrap dump cuts one big table into ranges of partition names (``replication.dump_processes``)."""

from __future__ import annotations

from hmsrepl.replication.dump_processes import (
    MAX_RANGES,
    RANGE_PAGES,
    RANGE_PARTITIONS,
    first_page,
    range_size,
    within_most,
)
from hmsrepl.replication.layout import DumpLayout


def test_a_range_holds_a_fixed_number_of_partitions_until_the_table_needs_more_ranges() -> None:
    assert range_size(1) == range_size(RANGE_PARTITIONS * MAX_RANGES) == RANGE_PARTITIONS
    assert range_size(RANGE_PARTITIONS * MAX_RANGES + 1) == RANGE_PARTITIONS + 1
    assert range_size(3 * RANGE_PARTITIONS * MAX_RANGES) == 3 * RANGE_PARTITIONS


def test_ranges_past_the_most_are_joined_into_an_open_last_one() -> None:
    ranges = [(f"{n:05d}", f"{n + 1:05d}") for n in range(MAX_RANGES + 4)] + [(f"{MAX_RANGES + 4:05d}", None)]
    kept = within_most(ranges)
    assert len(kept) == MAX_RANGES and kept[:-1] == ranges[: MAX_RANGES - 1]
    assert kept[-1] == (ranges[MAX_RANGES - 1][0], None)  # every partition after the last kept bound
    assert within_most(ranges[:3]) == ranges[:3]


def test_every_range_s_pages_sort_in_range_order_after_the_table_s_first_page() -> None:
    last = first_page(MAX_RANGES - 1) + RANGE_PAGES - 1
    names = [DumpLayout.partition_page("db", "t", n) for n in (0, first_page(0), first_page(1) - 1, last)]
    assert names == sorted(names) and len(set(names)) == 4
    assert names[-1].endswith("/999000")  # still six digits: name order is number order
