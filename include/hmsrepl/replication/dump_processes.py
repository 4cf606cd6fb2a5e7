"""A bootstrap dump of many tables read by several processes, each handed slices of the table list.

Reading a table into a dump costs Python per object (models built from rows, snapshots encoded, files
written) under one interpreter lock: 10,000 small tables or 1,000 tables of 1,000 partitions kept one core
busy for most of a minute while the others idled. Tables are independent in a bootstrap dump (each is read
and written on its own; the notification-log window the dump consolidates afterwards covers whatever changed
while they were read), so a dump of at least ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS`` tables and partitions
hands slices of ``SLICE_TABLES`` tables to ``HMSREPL_DUMP_PROCESSES`` worker processes (1 to
``MAX_PROCESSES``; default the usable CPUs; 1: none).

Each worker opens the source metastore's database on its own connections (never the caller's: workers come
from ``worker_processes``' forkserver) and the dump directory bound to its own root, and writes its tables
there as the dump itself would; the caller merges their counts and acknowledges the dump once every slice is
written (the acknowledgement syncs the whole directory). A worker that stops fails the dump in one line,
unacknowledged: a load refuses an unacknowledged dump, and the next dump starts a new directory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, func, select

from hmsrepl.concurrency import bounded_futures
from hmsrepl.config import MetastoreConfig
from hmsrepl.faults import fault_point
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.metastore.service import Metastore
from hmsrepl.replication.dump_tally import DumpTally
from hmsrepl.replication.layout import DumpDir, DumpError
from hmsrepl.replication.replications import count_setting
from hmsrepl.worker_processes import usable_cpus, worker_pool

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

#: A database's partitions, counted to decide whether a dump is worth its processes.
_PARTITIONS_OF_DB = (
    select(func.count())
    .select_from(partitions)
    .join(tbls, tbls.c.tbl_id == partitions.c.tbl_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"))
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
    try:
        return names, future.result()
    except BrokenProcessPool:
        raise DumpError(
            "a dump process stopped (killed, out of memory, or started by a script whose main code lacks an "
            f"if __name__ == '__main__' guard) while reading tables '{names[0]}' to "
            f"'{names[-1]}'; the dump '{dump_uri}' is not acknowledged and no load will take it: run REPL DUMP "
            "again (HMSREPL_DUMP_PROCESSES=1 reads in the dump's own process)"
        ) from None


# -- in the worker processes ------------------------------------------------------------------------------------
_ENGINES: dict[tuple[str, str], DumpEngine] = {}  # one per source and dump root, for the worker's life


def _dump_slice(
    config: MetastoreConfig, dump_uri: str, db_name: str, names: list[str], options: tuple[bool, bool]
) -> DumpTally:
    """Read ``names`` into the dump; their counts. Any error is raised to the dump as it is."""
    from hmsrepl.replication.dump import DumpEngine

    key = (config.model_dump_json(), dump_uri)
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = DumpEngine(Metastore(config), dump_uri.rpartition("/")[0])
    dump = DumpDir(dump_uri)
    fault_point(FAULT_POINT)
    engine.dump_tables(dump, db_name, names, *options)
    return engine.take_tally(dump.uri)
