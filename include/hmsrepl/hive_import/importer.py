"""Creating a stock metastore's catalog in hmsrepl: databases, tables, partitions, functions.

Two modes. **In place** (the usual cutover): every object keeps its location and its files stay where they
are; clients are then pointed at hmsrepl. **Copy**: managed objects get this metastore's default locations
and their files are copied there (each copy's checksum is what the catalog then records); external tables
keep their locations.

A copy reads the stock metastore's files only below the operator's roots of it (``hive_source.roots``:
``--source-warehouse`` and ``--source-external-roots``), never below a location the stock metastore chose:
every object whose files would be copied is checked against them before anything is written (a location
outside them is refused, naming the object and the option to set, and nothing is imported), and the files
are read through a file system bound to those roots, so a symlink leading out of them is not followed.

An import is resumable: every step first asks what hmsrepl already has (a database, a table, the partition
names of a table, a copied file of the same size) and does only the rest, so a rerun after a kill or a
failure finishes the work instead of failing on what exists. Partitions go in pages (one read and one
catalog transaction per page), so memory stays bounded whatever the table holds.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.hive_import.reader import DEFAULT_PAGE, StockMetastoreReader
from hmsrepl.hive_source.roots import StockRoots, StockRootsError, require_copy_roots
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Partition, Table, TableType
from hmsrepl.storage.base import FileStatus, join_uri, path_key, relative_to
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem, copy_files_between

log = logging.getLogger("hmsrepl.hive_import")


class ImportConflictError(HmsReplError):
    """hmsrepl already holds an object of that name that is not the stock metastore's (another location)."""


@dataclass
class ImportOptions:
    databases: Sequence[str] | None = None  # None: every database of the stock metastore
    copy: bool = False
    page: int = DEFAULT_PAGE
    threads: int = 16
    #: The operator's roots of the stock metastore: required to copy (its files are read only below them).
    roots: StockRoots | None = None


@dataclass
class ImportResult:
    databases: int = 0
    tables: int = 0
    partitions: int = 0
    functions: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    already_there: int = 0  # objects a previous (interrupted) run had imported
    notes: list[str] = field(default_factory=list)


class HiveImporter:
    """Imports what ``reader`` reads into ``store``; ``progress`` hears one line per object done."""

    def __init__(
        self,
        reader: StockMetastoreReader,
        store: Metastore,
        options: ImportOptions | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.reader = reader
        self.store = store
        self.options = options or ImportOptions()
        self.progress = progress or (lambda line: log.info("%s", line))
        self.result = ImportResult()
        #: The operator's roots of the stock metastore; a copy is refused here, before any read, without them.
        self.roots = require_copy_roots(reader.uri, self.options.roots) if self.options.copy else None

    def run(self) -> ImportResult:
        available = self.reader.databases()
        wanted = list(self.options.databases) if self.options.databases else available
        missing = sorted(set(wanted) - set(available))
        if missing:
            raise NoSuchObjectError(
                f"the metastore at {self.reader.uri} has no database {', '.join(missing)}; "
                f"it has {', '.join(available) or 'none'}"
            )
        if self.options.copy:
            for db_name in wanted:  # before anything is written: a refusal leaves this metastore as it was
                self._check_copied_locations(db_name)
        for db_name in wanted:
            self._database(db_name)
        return self.result

    def _source_roots(self) -> StockRoots:
        if self.roots is None:  # copy mode requires them (``__init__``); nothing else reads stock files
            raise StockRootsError(f"reading files of the metastore at {self.reader.uri} needs its roots")
        return self.roots

    @functools.cached_property
    def source_files(self) -> RootedFileSystem:
        """The stock metastore's files, bound to the operator's roots of it (symlinks resolved)."""
        return RootedFileSystem(
            self._source_roots().data_roots, purpose=f"import from the stock metastore at {self.reader.uri}"
        )

    def _check_copied_locations(self, db_name: str) -> None:
        """Refuse (``StockRootsError``) when an object whose files a copy reads lies outside the operator's
        roots of the stock metastore: the stock metastore names its locations, the operator what is read."""
        roots = self._source_roots()
        for table_name in self.reader.table_names(db_name):
            source = self.reader.table(db_name, table_name)
            if not self._copies(source):
                continue
            self._check_read(roots, f"table '{db_name}.{table_name}'", source.sd.location or "")
            if not source.partition_keys:
                continue
            names = self.reader.partition_names(db_name, table_name)
            for page in self.reader.partitions(db_name, table_name, names, self.options.page):
                for part in page:
                    if part.sd.location:
                        where = f"partition {part.values} of table '{db_name}.{table_name}'"
                        self._check_read(roots, where, part.sd.location)

    def _check_read(self, roots: StockRoots, what: str, location: str) -> None:
        """``what``'s location below the operator's roots as written, and where it resolves (a directory
        that is a symlink out of them is refused too, before anything is imported)."""
        roots.check_location(what, location)
        try:
            self.source_files.check(location)
        except OutsideRootsError as exc:
            raise StockRootsError(f"{what}: {exc}") from None

    # -- databases and functions -----------------------------------------------------------------------------
    def _database(self, name: str) -> None:
        source = self.reader.database(name)
        existing = self._existing_database(name)
        if existing is None:
            # A copy places the data below this warehouse: the stock database's directories are not its own.
            copied = {"location_uri": None, "managed_location_uri": None}
            wanted = source if not self.options.copy else source.model_copy(update=copied)
            self.store.catalog.create_database(wanted)
            self.result.databases += 1
        elif not self.options.copy and path_key(existing.location_uri or "") != path_key(
            source.location_uri or ""
        ):
            if name != "default":  # every metastore has its own default database; its tables still come
                raise ImportConflictError(
                    f"database '{name}' exists here at {existing.location_uri}, not at {source.location_uri} "
                    "as in the stock metastore; drop it or import with --database to leave it out"
                )
        else:
            self.result.already_there += 1
        for table_name in self.reader.table_names(name):
            self._table(name, table_name)
        have = set(self.store.catalog.get_functions(name))
        for function in self.reader.functions(name):
            if function.function_name.lower() not in have:
                self.store.catalog.create_function(function)
                self.result.functions += 1
        self.progress(f"database {name} done")

    def _existing_database(self, name: str) -> Database | None:
        try:
            return self.store.catalog.get_database(name)
        except NoSuchObjectError:
            return None

    # -- tables ----------------------------------------------------------------------------------------------
    def _table(self, db_name: str, table_name: str) -> None:
        source = self.reader.table(db_name, table_name)
        try:
            table = self.store.catalog.get_table(db_name, table_name)
            self.result.already_there += 1
        except NoSuchObjectError:
            table = self._create_table(source)
            self.result.tables += 1
        if source.partition_keys:
            added = self._partitions(source, table)
            self.progress(f"table {db_name}.{table_name}: {added} partitions imported")
        else:
            self.progress(f"table {db_name}.{table_name} imported")

    def _create_table(self, source: Table) -> Table:
        if not self._copies(source):
            return self.store.catalog.create_table(source)
        db = self.store.catalog.get_database(source.db_name)
        location = join_uri(
            db.location_uri or self.store.catalog.default_db_location(db.name), source.table_name
        )
        if not source.partition_keys and source.sd.location:
            self._copy_tree(f"table '{source.qualified_name}'", source.sd.location, location)
        return self.store.catalog.create_table(
            source.model_copy(update={"sd": source.sd.model_copy(update={"location": location})})
        )

    def _copies(self, table: Table) -> bool:
        """Copy mode moves the data of managed tables only; views have none, external tables stay put."""
        return self.options.copy and table.table_type == TableType.MANAGED_TABLE and bool(table.sd.location)

    # -- partitions ------------------------------------------------------------------------------------------
    def _partitions(self, source: Table, table: Table) -> int:
        db_name, table_name = source.db_name, source.table_name
        have = set(self.store.catalog.get_partition_names(db_name, table_name))
        todo = [name for name in self.reader.partition_names(db_name, table_name) if name not in have]
        self.result.already_there += len(have)
        added = 0
        for page in self.reader.partitions(db_name, table_name, todo, self.options.page):
            if self._copies(source):
                page = [self._copied_partition(part, table) for part in page]
            self.store.catalog.add_partitions(db_name, table_name, page, if_not_exists=True)
            added += len(page)
            self.result.partitions += len(page)
        return added

    def _copied_partition(self, part: Partition, table: Table) -> Partition:
        location = join_uri(
            table.sd.location or "", make_partition_name(table.partition_key_names, part.values)
        )
        if part.sd.location:
            where = f"partition {part.values} of table '{table.qualified_name}'"
            self._copy_tree(where, part.sd.location, location)
        return part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})

    # -- files -----------------------------------------------------------------------------------------------
    def _copy_tree(self, what: str, source_location: str, target_location: str) -> None:
        """Copy every file under ``source_location``, keeping relative paths; files already copied stay.

        Reads stay below the operator's roots of the stock metastore (the location checked against them
        again here; a symlink out of them is refused), writes below this metastore's roots."""
        self._source_roots().check_location(what, source_location)
        src_fs = self.source_files
        dst_fs = self.store.cm.files
        tasks = []
        for relative, status in data_files(src_fs, source_location):
            target = join_uri(target_location, relative)
            done = next(iter(dst_fs.list_files(target)), None)
            if done is not None and done.size == status.size:
                continue  # copied by an earlier, interrupted run
            tasks.append((status.uri, target))
            self.result.bytes_copied += status.size
        dst_fs.makedirs(target_location)
        copy_files_between(src_fs, dst_fs, tasks, threads=self.options.threads)
        self.result.files_copied += len(tasks)


def data_files(fs: RootedFileSystem, location: str) -> Iterator[tuple[str, FileStatus]]:
    """The data files under ``location`` with their paths relative to it.

    Hidden and marker files (``.part-0.crc``, ``_SUCCESS``), and anything under a hidden or underscore
    directory (a writer's ``_temporary``), are not data, as Hive and Spark readers skip them too.
    """
    for status in fs.list_files(location):
        relative = relative_to(status.uri, location)
        if not any(part.startswith((".", "_")) for part in relative.split("/")):
            yield relative, status
