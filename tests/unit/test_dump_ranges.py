"""How a bootstrap dump cuts one big table into ranges of partition names (``replication.dump_processes``), and
reads them in its own process while its workers start."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore.bulk_reads import NameRange
from hmsrepl.replication import dump_processes
from hmsrepl.replication.dump_processes import (
    MAX_RANGES,
    RANGE_PAGES,
    RANGE_PARTITIONS,
    dump_ranges_in_processes,
    first_page,
    range_size,
    within_most,
)
from hmsrepl.replication.dump_tally import DumpTally
from hmsrepl.replication.layout import DumpLayout
from tests.helpers import make_table


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


class _StartingPool:
    """A pool whose first worker starts only once the dump's own process has begun a range of its own: a dump
    held up in the submit that starts it never gets there, and the test fails after ``WAIT`` seconds."""

    WAIT = 10.0

    def __init__(self, reading: threading.Event) -> None:
        self.reading = reading
        self.ranges: list[NameRange] = []
        self.started = False

    def submit(self, fn: Callable[..., DumpTally], *args: Any) -> Future[DumpTally]:
        if not self.started:
            self.started = self.reading.wait(self.WAIT)
            assert self.started, "the dump's process read nothing while its worker started"
        self.ranges.append(args[3])  # (config, dump_uri, table, names, first page, with_data)
        done: Future[DumpTally] = Future()
        done.set_result(DumpTally())
        return done

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_the_dump_s_process_reads_a_range_while_its_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    reading = threading.Event()
    pool = _StartingPool(reading)
    monkeypatch.setattr(dump_processes, "worker_pool", lambda processes: pool)
    ranges: list[NameRange] = [(f"p={n}", f"p={n + 1}") for n in range(5)] + [("p=5", None)]
    here: list[NameRange] = []

    def read_here(number: int, names: NameRange) -> None:
        here.append(names)
        reading.set()

    table = make_table("db", "t", partition_keys=("p",))
    config = MetastoreConfig(db_url="sqlite://", warehouse="/tmp/wh", cmroot="/tmp/cm")
    list(dump_ranges_in_processes(config, "/tmp/dumps/d", table, ranges, False, 2, read_here))
    assert pool.started and here  # the first range went to the worker, whose start did not hold the dump up
    assert sorted(here + pool.ranges) == sorted(ranges)  # every range read once, by one of the two
