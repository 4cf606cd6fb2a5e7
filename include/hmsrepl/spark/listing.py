"""Listing and checksumming on Spark executors: bootstrap dumps (``spark_describe``) and cmroot retention.

A bootstrap dump describes every data file of a database (path, CRC32C checksum, version): for a table of
thousands of partitions on an object store that is thousands of LIST calls, the part of a dump that grows
with the data. ``spark_describe`` spreads the locations over the executors, each running the same
``file_capture.describe_known`` the single-process engine uses (``Catalog.describe_data``): each location
ships with its recorded listing, so a file whose size and modification time are the recorded ones keeps its
recorded checksum and only new or changed files are read. The ChangeManager is rebuilt from the cmroot
string (it holds no connection, so nothing else needs shipping).

``SparkDumpEngine`` prototypes the hook this needs in ``DumpEngine`` (see ``_read_entry``): one describe call
per table for all its partitions at once. Small tables are described on the driver, so a database of many
small tables does not pay a Spark job (~0.1 s) per table, and Spark starts only when a table is big enough.

cmroot retention (``cleanup_cmroot``) lists on the driver and deletes on the executors when there are many
expired files; each file's age is checked again just before it is deleted, because recycling the same
content again restarts its retention (``ChangeManager.recycle`` touches it) and a replay may need it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from hmsrepl.exceptions import StorageError
from hmsrepl.metastore.capture import describe_recorded
from hmsrepl.metastore.change_manager import ChangeManager, CleanupResult
from hmsrepl.metastore.listings import FileRecord
from hmsrepl.replication.dump import DumpEngine, TableEntry
from hmsrepl.spark.copy import FileFailure, distribute, failure_reason, group_count
from hmsrepl.storage.base import store_traits
from hmsrepl.storage.rooted import RootedFileSystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from hmsrepl.metastore.model import Partition, Table
    from hmsrepl.replication.source import ReplicationSource

log = logging.getLogger(__name__)

#: A location is one LIST plus a checksum per file; weigh them alike when packing (file counts are unknown).
LOCATION_COST = 1
#: Groups per executor core for describing: file counts per location are unknown, so smaller groups balance.
DESCRIBE_GROUPS_PER_CORE = 4
#: Below this many locations a table is described on the driver: a Spark job costs more than it saves.
DEFAULT_MIN_SPARK_LOCATIONS = 32
#: Below this many expired cmroot files they are deleted on the driver.
DEFAULT_MIN_SPARK_DELETES = 5_000


class SparkListingError(StorageError):
    """Some locations could not be listed or checksummed on the executors."""


# -- describe ----------------------------------------------------------------------------------------------
def spark_describe(
    spark: SparkSession,
    locations: Sequence[str | None],
    cm: ChangeManager,
    *,
    recorded: Mapping[str, Mapping[str, FileRecord]] | None = None,
    partitions: int | None = None,
    threads: int | None = None,
) -> dict[str, list[str]]:
    """Encoded file URIs (``fileuri#checksum#cmroot#subdir[#version]``) of the data files of each location.

    Exactly what ``describe_files(location, cm)`` returns for each, computed on the executors, reading only
    the files that ``recorded`` (location -> relative path -> record) has no current record of; empty and
    ``None`` locations are left out (they have no files). Raises SparkListingError naming the locations
    that failed.
    """
    unique = list(dict.fromkeys(location for location in locations if location))
    if not unique:
        return {}
    known = recorded or {}
    items = [(location, dict(known.get(location, {}))) for location in unique]
    work = _Describe(cm.cmroot, cm.enabled, cm.roots)
    threads = threads or store_traits(unique[0]).io_parallelism
    slots = spark.sparkContext.defaultParallelism * DESCRIBE_GROUPS_PER_CORE
    outcomes = distribute(
        spark,
        items,
        [LOCATION_COST] * len(unique),
        work,
        partitions or group_count(len(unique), slots),
        threads,
        f"hmsrepl describe: {len(unique)} locations",
    )
    failures = [o for o in outcomes if isinstance(o, FileFailure)]
    if failures:
        first = failures[0]
        raise SparkListingError(
            f"listing and checksumming {len(failures)} of {len(unique)} locations failed; first: "
            f"'{first.uri}': {first.reason}"
        )
    return dict(zip(unique, outcomes, strict=True))  # type: ignore[arg-type]


class _Describe:
    """The executor side of ``spark_describe``: a picklable callable holding only the cmroot settings and the
    metastore's data roots (what the executors may read)."""

    def __init__(self, cmroot: str, enabled: bool, roots: Sequence[str]) -> None:
        self.cmroot, self.enabled, self.roots = cmroot, enabled, tuple(roots)

    def __call__(self, item: tuple[str, dict[str, FileRecord]]) -> list[str] | FileFailure:
        location, records = item
        try:
            cm = ChangeManager(self.cmroot, enabled=self.enabled, roots=self.roots)
            return describe_recorded(location, cm, records)
        except Exception as exc:  # reported with the location on the driver
            return FileFailure(location, failure_reason(exc))


class SparkDumpEngine(DumpEngine):
    """A DumpEngine whose bootstrap describes each big table's files on Spark (incremental dumps unchanged).

    ``spark`` is called the first time a table has at least ``min_spark_locations`` locations (its own, or
    its partitions'), so a dump that never needs Spark never starts it.
    """

    reads_in_processes = False  # its tables' files are described on Spark, from this driver

    def __init__(
        self,
        source: ReplicationSource,
        dump_root: str,
        spark: Callable[[], SparkSession],
        *,
        min_spark_locations: int = DEFAULT_MIN_SPARK_LOCATIONS,
        on_table_dumped: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(source, dump_root, on_table_dumped)
        self.spark = spark
        self.min_spark_locations = min_spark_locations
        self.locations_on_spark = 0
        self.locations_on_driver = 0

    def describe(
        self, locations: list[str | None], recorded: Mapping[str, Mapping[str, FileRecord]]
    ) -> dict[str, list[str]]:
        """Encoded files of one table's locations, reading only files without a current record."""
        unique = list(dict.fromkeys(location for location in locations if location))
        if len(unique) >= self.min_spark_locations:
            self.locations_on_spark += len(unique)
            return spark_describe(self.spark(), unique, self.source.cm, recorded=recorded)
        self.locations_on_driver += len(unique)
        batch = self.source.cm.files.batch()  # the locations share the table's directories: resolved once
        return {
            location: describe_recorded(location, self.source.cm, recorded.get(location, {}), batch)
            for location in unique
        }

    def _read_entry(self, table: Table, with_data: bool, parts: list[Partition] | None = None) -> TableEntry:
        """``DumpEngine._read_entry`` with one describe call per table instead of one per location."""
        entry = TableEntry(table.model_dump(mode="json"))
        # As in DumpEngine: ACID tables are listed once the dump's txn snapshot is known.
        with_data = with_data and not table.is_transactional
        catalog = self.source.catalog
        if parts is None:
            parts = catalog.get_partitions(table.db_name, table.table_name) if table.partition_keys else []
        locations = [p.sd.location for p in parts] if table.partition_keys else [table.sd.location]
        described = self.describe(locations, catalog.recorded_listings(table, parts)) if with_data else {}

        def files(location: str | None) -> list[str] | None:
            return described.get(location or "", []) if with_data else None

        if not table.partition_keys:
            entry.files = files(table.sd.location)
            return entry
        for part in parts:
            snapshot = part.model_dump(mode="json")
            entry.partitions[entry.partition_name(snapshot)] = (snapshot, files(part.sd.location))
        return entry


# -- cmroot retention ----------------------------------------------------------------------------------------
def cleanup_cmroot(
    cmroot: str,
    retention_seconds: int,
    *,
    spark: Callable[[], SparkSession] | None = None,
    min_spark_files: int = DEFAULT_MIN_SPARK_DELETES,
    now: float | None = None,
    threads: int | None = None,
) -> tuple[CleanupResult, list[FileFailure]]:
    """Delete cmroot files older than the retention, as ``ChangeManager.cleanup`` does, in parallel.

    The driver lists cmroot; with at least ``min_spark_files`` expired files (and a ``spark`` factory) the
    deletes run on the executors, else on driver threads. A file renewed since the listing is kept. Returns
    the counts and the files that could not be deleted (the others are deleted regardless).
    """
    cutoff = (time.time() if now is None else now) - retention_seconds
    fs = RootedFileSystem([cmroot], purpose=f"cmroot retention of '{cmroot}'")
    expired, kept = [], 0
    for status in fs.list_files(cmroot):
        if status.mtime < cutoff:
            expired.append(status.uri)
        else:
            kept += 1
    work = _DeleteExpired(cmroot, cutoff)
    threads = threads or fs.io_parallelism
    if spark is not None and len(expired) >= min_spark_files:
        outcomes = distribute(
            spark(), expired, [1] * len(expired), work, None, threads, f"hmsrepl cmroot cleanup: {cmroot}"
        )
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            outcomes = list(pool.map(work, expired))
    failures = [o for o in outcomes if isinstance(o, FileFailure)]
    sizes = [o for o in outcomes if isinstance(o, int)]
    deleted = [size for size in sizes if size >= 0]
    renewed = len(sizes) - len(deleted)
    return CleanupResult(len(deleted), kept + renewed + len(failures), sum(deleted)), failures


class _DeleteExpired:
    """Executor side of ``cleanup_cmroot``: delete a file if it is still older than the cutoff.

    Returns the size deleted, -1 for a file renewed (or gone) since the listing, or the failure.
    """

    def __init__(self, cmroot: str, cutoff: float) -> None:
        self.cmroot, self.cutoff = cmroot, cutoff

    def __call__(self, uri: str) -> int | FileFailure:
        try:
            fs = RootedFileSystem([self.cmroot], purpose=f"cmroot retention of '{self.cmroot}'")
            for status in fs.list_files(uri):
                if status.uri.rstrip("/") == uri.rstrip("/") and status.mtime < self.cutoff:
                    fs.delete(uri)
                    return status.size
            return -1
        except Exception as exc:  # one bad file must not stop retention; reported on the driver
            return FileFailure(uri, failure_reason(exc))
