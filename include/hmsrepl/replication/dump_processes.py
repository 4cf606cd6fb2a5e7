"""A bootstrap dump of many tables read by several processes, each handed slices of the table list.

Reading a table into a dump costs Python per object (models built from rows, snapshots encoded, files
written) under one interpreter lock: 10,000 small tables or 1,000 tables of 1,000 partitions kept one core
busy for most of a minute while the others idled. Tables are independent in a bootstrap dump (each is read
and written on its own; the notification-log window the dump consolidates afterwards covers whatever changed
while they were read), so a dump of at least ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS`` tables and partitions
hands slices of ``SLICE_TABLES`` tables to ``HMSREPL_DUMP_PROCESSES`` worker processes (1 to
``MAX_PROCESSES``; default the usable CPUs; 1: none).

One big table cannot be sliced by tables: a table of at least ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS`` partitions
(and more than ``RANGE_PARTITIONS``) is cut into keyset ranges of partition names (``bulk_reads.partition_ranges``,
``RANGE_PARTITIONS`` each), which the dump's own process and ``HMSREPL_DUMP_PROCESSES - 1`` workers read at once
(the dump's process takes the next range whenever it is free, so it reads while the workers start). The dump's
process writes the table's entry first; each range writes its partitions as pages numbered from its own base
(``first_page``), so the pages stay in name order and no two ranges write one page.

Each worker opens the source metastore's database on its own connections (never the caller's: workers come
from ``worker_processes``' forkserver) and the dump directory bound to its own root, and writes its tables
there as the dump itself would; the caller merges their counts and acknowledges the dump once every slice is
written (the acknowledgement syncs the whole directory). A worker that stops fails the dump in one line,
unacknowledged: a load refuses an unacknowledged dump, and the next dump starts a new directory.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, func, select

from hmsrepl.concurrency import bounded_futures
from hmsrepl.config import MetastoreConfig
from hmsrepl.faults import fault_point
from hmsrepl.metastore.bulk_reads import NameRange
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.metastore.service import Metastore
from hmsrepl.replication.dump_tally import DumpTally
from hmsrepl.replication.layout import DumpDir, DumpError
from hmsrepl.replication.replications import count_setting
from hmsrepl.worker_processes import submit_soon, usable_cpus, worker_pool

if TYPE_CHECKING:
    from hmsrepl.replication.dump import DumpEngine

PROCESSES_ENV = "HMSREPL_DUMP_PROCESSES"
MIN_OBJECTS_ENV = "HMSREPL_DUMP_PROCESS_MIN_OBJECTS"
MAX_PROCESSES = 64
#: Starting the workers costs about a second and a half (the forkserver's imports, each worker's engine):
#: below some 100,000 tables and partitions one process is as fast.
DEFAULT_MIN_OBJECTS = 100_000
SLICE_TABLES = 100  # tables a worker reads at a time: its share evens out over many slices
SLICES_PER_PROCESS = 2  # in flight per worker: one being read, one waiting
FAULT_POINT = "dump_process_slice"  # test-only: HMSREPL_FAULT_POINT=dump_process_slice@n kills a worker
#: Partitions of one range of a big table: about half a second of a process's reading, so the ranges even out
#: between the processes and the dump's process starts reading at once.
RANGE_PARTITIONS = 10_000
#: Page numbers of one range: range ``k`` numbers its pages from ``1 + k * RANGE_PAGES`` (page 0 is the table's
#: first, which replaces its entry). A range of more pages (5,000,000 partitions) fails the dump.
RANGE_PAGES = 1_000
#: Ranges of one table at most: their pages' numbers stay within the six digits of a page's name.
MAX_RANGES = 999

#: A database's partitions, counted to decide whether a dump is worth its processes.
_PARTITIONS_OF_DB = (
    select(func.count())
    .select_from(partitions)
    .join(tbls, tbls.c.tbl_id == partitions.c.tbl_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"))
)

#: The database's tables of at least ``least`` partitions, with their counts.
_BIG_TABLES = (
    select(tbls.c.tbl_name, func.count().label("parts"))
    .select_from(partitions)
    .join(tbls, tbls.c.tbl_id == partitions.c.tbl_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"))
    .group_by(tbls.c.tbl_name)
    .having(func.count() >= bindparam("least"))
)


@dataclass(frozen=True)
class DumpProcessSettings:
    """How many processes read a big bootstrap dump's tables, and from how many tables and partitions."""

    processes: int
    min_objects: int


def dump_process_settings() -> DumpProcessSettings:
    """``HMSREPL_DUMP_PROCESSES`` and ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS``; a bad value is refused in one line
    (ReplicationConfigError), before the dump writes anything."""
    processes = count_setting(
        PROCESSES_ENV,
        usable_cpus(MAX_PROCESSES),
        MAX_PROCESSES,
        f"a number of dump processes from 1 to {MAX_PROCESSES}",
    )
    least = count_setting(
        MIN_OBJECTS_ENV,
        DEFAULT_MIN_OBJECTS,
        2**62,
        "a number of tables and partitions (at least 1) from which a bootstrap dump reads in processes",
    )
    return DumpProcessSettings(processes, least)


def worth_processes(
    source: Metastore, db_name: str, tables: Sequence[str], settings: DumpProcessSettings
) -> bool:
    """Whether the dump of ``tables`` of ``db_name`` should use the processes: more than one, more than one
    slice of tables, and at least the minimum of tables and partitions (counted in one statement)."""
    least, processes = settings.min_objects, settings.processes
    if processes <= 1 or len(tables) <= SLICE_TABLES:
        return False
    if len(tables) >= least:
        return True
    with source.events.reader() as conn:
        count = int(conn.execute(_PARTITIONS_OF_DB, {"db_name": db_name.lower()}).scalar() or 0)
    return len(tables) + count >= least


def big_tables(
    source: Metastore, db_name: str, tables: Sequence[str], settings: DumpProcessSettings
) -> dict[str, int]:
    """The tables among ``tables`` (lower case) of at least the minimum of objects (their entry and their
    partitions) and more than one range of partitions, with their counts: each is read in ranges by several
    processes (none with one process). One statement for the database."""
    if settings.processes <= 1:
        return {}
    wanted = {name.lower() for name in tables}
    params = {"db_name": db_name.lower(), "least": max(settings.min_objects - 1, RANGE_PARTITIONS + 1)}
    with source.events.reader() as conn:
        rows = conn.execute(_BIG_TABLES, params).all()
    return {row.tbl_name: int(row.parts) for row in rows if row.tbl_name in wanted}


def range_size(partitions: int) -> int:
    """Partitions per range of a table of ``partitions``: ``RANGE_PARTITIONS``, more for a table that would
    need more than ``MAX_RANGES`` of them."""
    return max(RANGE_PARTITIONS, math.ceil(partitions / MAX_RANGES))


def within_most(ranges: list[NameRange]) -> list[NameRange]:
    """``ranges`` with those past ``MAX_RANGES`` joined into the last (partitions added since they were
    counted)."""
    if len(ranges) <= MAX_RANGES:
        return ranges
    return [*ranges[: MAX_RANGES - 1], (ranges[MAX_RANGES - 1][0], None)]


def first_page(number: int) -> int:
    """The number of the first page range ``number`` writes (``RANGE_PAGES``)."""
    return 1 + number * RANGE_PAGES


def dump_ranges_in_processes(
    config: MetastoreConfig,
    dump_uri: str,
    table: Table,
    ranges: Sequence[NameRange],
    with_data: bool,
    processes: int,
    here: Callable[[int, NameRange], None],
) -> Iterator[DumpTally]:
    """Read the ``ranges`` of ``table``'s partitions into the dump at ``dump_uri``: ``here(number, range)`` in
    this process, the others in ``processes - 1`` workers, each range handed to whichever is free first
    (this process takes one whenever the workers have one each). Yields each worker's counts (this
    process's own are its engine's). Raises the first error, or DumpError when a worker stopped; ranges not
    started then are dropped, and those running finish before this returns."""
    workers = max(1, processes - 1)
    pool = worker_pool(workers)
    todo = deque(enumerate(ranges))
    running: list[tuple[NameRange, Future[DumpTally]]] = []

    def submit(number: int, names: NameRange) -> Future[DumpTally]:
        # The first ones start the workers: submitted from a thread while this process reads its own range.
        submit_to = functools.partial(submit_soon, pool) if number < workers else pool.submit
        return submit_to(_dump_range, config, dump_uri, table, names, first_page(number), with_data)

    try:
        while todo or running:
            for item in [item for item in running if item[1].done()]:
                running.remove(item)
                yield _range_taken(*item, table, dump_uri)
            while todo and len(running) < workers:
                number, names = todo.popleft()
                running.append((names, submit(number, names)))
            if todo:
                here(*todo.popleft())
            elif running:
                yield _range_taken(*running.pop(0), table, dump_uri)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _range_taken(names: NameRange, future: Future[DumpTally], table: Table, dump_uri: str) -> DumpTally:
    upto = "the last" if names[1] is None else f"'{names[1]}'"
    return _counts(
        future, f"the partitions of table '{table.table_name}' after '{names[0]}' up to {upto}", dump_uri
    )


def dump_in_processes(
    config: MetastoreConfig,
    dump_uri: str,
    db_name: str,
    tables: Sequence[str],
    options: tuple[bool, bool],
    processes: int,
) -> Iterator[tuple[list[str], DumpTally]]:
    """Read ``tables`` of ``db_name`` into the dump at ``dump_uri`` in ``processes`` workers, ``options``
    (with data, with external tables) as the dump's; yields each slice's table names and counts as it is
    written. Raises the first error a worker raised, or DumpError when a worker stopped; slices not started
    then are dropped, and those running finish before this returns."""
    pool = worker_pool(processes)
    slices = (list(tables[start : start + SLICE_TABLES]) for start in range(0, len(tables), SLICE_TABLES))

    def submit(names: list[str]) -> Future[DumpTally]:
        return pool.submit(_dump_slice, config, dump_uri, db_name, names, options)

    try:
        for names, future in bounded_futures(slices, submit, processes * SLICES_PER_PROCESS):
            yield _taken(names, future, dump_uri)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _taken(names: list[str], future: Future[DumpTally], dump_uri: str) -> tuple[list[str], DumpTally]:
    return names, _counts(future, f"tables '{names[0]}' to '{names[-1]}'", dump_uri)


def _counts(future: Future[DumpTally], reading: str, dump_uri: str) -> DumpTally:
    """A worker's counts; a worker that stopped fails the dump in one line naming what it was ``reading``."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise DumpError(
            "a dump process stopped (killed, out of memory, or started by a script whose main code lacks an "
            f"if __name__ == '__main__' guard) while reading {reading}; the dump '{dump_uri}' is not acknowledged "
            "and no load will take it: run REPL DUMP again (HMSREPL_DUMP_PROCESSES=1 reads in the dump's own "
            "process)"
        ) from None


# -- in the worker processes ------------------------------------------------------------------------------------
_ENGINES: dict[tuple[str, str], DumpEngine] = {}  # one per source and dump root, for the worker's life


def _dump_slice(
    config: MetastoreConfig, dump_uri: str, db_name: str, names: list[str], options: tuple[bool, bool]
) -> DumpTally:
    """Read ``names`` into the dump; their counts. Any error is raised to the dump as it is."""
    engine = _engine(config, dump_uri)
    dump = DumpDir(dump_uri)
    fault_point(FAULT_POINT)
    engine.dump_tables(dump, db_name, names, *options)
    return engine.take_tally(dump.uri)


def _dump_range(
    config: MetastoreConfig, dump_uri: str, table: Table, names: NameRange, first: int, with_data: bool
) -> DumpTally:
    """Read the partitions of ``table`` in the range ``names`` into the dump; their counts."""
    engine = _engine(config, dump_uri)
    dump = DumpDir(dump_uri)
    fault_point(FAULT_POINT)
    engine.dump_range(dump, table, names, first, with_data)
    return engine.take_tally(dump.uri)


def _engine(config: MetastoreConfig, dump_uri: str) -> DumpEngine:
    """The worker's engine for this source and dump root, made on its first task."""
    from hmsrepl.replication.dump import DumpEngine

    key = (config.model_dump_json(), dump_uri)
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = DumpEngine(Metastore(config), dump_uri.rpartition("/")[0])
    return engine
