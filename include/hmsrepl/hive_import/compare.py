"""Does hmsrepl now hold what the stock metastore holds? The check that ends an import.

Compared per database: tables, and per table its type, columns, partition keys, storage formats and
parameters (Hive's own ``transient_lastDdlTime`` aside), its partition names, and where its data is: the
same locations in place; after a copy, the same files (relative path and size) under the new locations
(the stock side's listed only below the operator's roots of it, as the import read them). Functions by name
and class. Reads partitions in pages, as the import does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.hive_import.importer import data_files
from hmsrepl.hive_import.reader import StockMetastoreReader
from hmsrepl.hive_source.roots import StockRoots, require_copy_roots
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import StorageDescriptor, TableType
from hmsrepl.storage.base import path_key
from hmsrepl.storage.rooted import RootedFileSystem

VOLATILE_PARAMETERS = frozenset({"transient_lastDdlTime"})


def compare_import(
    reader: StockMetastoreReader,
    store: Metastore,
    databases: Sequence[str] | None = None,
    *,
    copy: bool = False,
    roots: StockRoots | None = None,
) -> list[str]:
    """Every difference between the stock metastore and hmsrepl, one line each (empty: they agree).

    After a copy the stock side's files are listed, so ``roots`` (the operator's roots of the stock
    metastore) are required then, as for the import."""
    listings = _Listings(store, require_copy_roots(reader.uri, roots)) if copy else None
    return list(_differences(reader, store, databases or reader.databases(), listings))


class _Listings:
    """The data files of a copied object on both sides: the stock side's below the operator's roots of it
    (a location outside them is refused, ``StockRootsError``), ours below this metastore's roots."""

    def __init__(self, store: Metastore, roots: StockRoots) -> None:
        self.roots = roots
        self.theirs = RootedFileSystem(roots.data_roots, purpose=f"comparison with {roots.uri}")
        self.ours = store.cm.files

    def differ(self, where: str, their_location: str | None, our_location: str | None) -> bool:
        if their_location:
            self.roots.check_location(where, their_location)
        return _listing(self.theirs, their_location) != _listing(self.ours, our_location)


def _differences(
    reader: StockMetastoreReader, store: Metastore, databases: Sequence[str], listings: _Listings | None
) -> Iterator[str]:
    for db_name in databases:
        try:
            store.catalog.get_database(db_name)
        except NoSuchObjectError:
            yield f"database {db_name}: missing"
            continue
        theirs, ours = set(reader.table_names(db_name)), set(store.catalog.get_tables(db_name))
        for name in sorted(theirs - ours):
            yield f"table {db_name}.{name}: missing"
        for name in sorted(theirs & ours):
            yield from _table_differences(reader, store, db_name, name, listings)
        their_functions = {f.function_name.lower(): f.class_name for f in reader.functions(db_name)}
        our_functions = {
            name: store.catalog.get_function(db_name, name).class_name
            for name in store.catalog.get_functions(db_name)
        }
        for name, class_name in sorted(their_functions.items()):
            if our_functions.get(name) != class_name:
                yield f"function {db_name}.{name}: {our_functions.get(name)!r} here, {class_name!r} there"


def _table_differences(
    reader: StockMetastoreReader, store: Metastore, db_name: str, name: str, listings: _Listings | None
) -> Iterator[str]:
    theirs, ours = reader.table(db_name, name), store.catalog.get_table(db_name, name)
    where = f"table {db_name}.{name}"
    if theirs.table_type != ours.table_type:
        yield f"{where}: type {ours.table_type} here, {theirs.table_type} there"
    if [(c.name, c.type) for c in theirs.sd.cols] != [(c.name, c.type) for c in ours.sd.cols]:
        yield f"{where}: columns differ"
    if [(k.name, k.type) for k in theirs.partition_keys] != [(k.name, k.type) for k in ours.partition_keys]:
        yield f"{where}: partition keys differ"
    if _formats(theirs.sd) != _formats(ours.sd):
        yield f"{where}: storage formats differ ({_formats(ours.sd)} here, {_formats(theirs.sd)} there)"
    if _stable(theirs.parameters) != _stable(ours.parameters):
        yield f"{where}: parameters differ"
    moved = listings if theirs.table_type == TableType.MANAGED_TABLE else None
    if not theirs.partition_keys:
        yield from _data_differences(where, theirs.sd.location, ours.sd.location, moved)
        return
    their_names = reader.partition_names(db_name, name)
    our_names = set(store.catalog.get_partition_names(db_name, name))
    missing = [n for n in their_names if n not in our_names]
    if missing:
        yield f"{where}: {len(missing)} partitions missing (first {missing[0]})"
    extra = our_names - set(their_names)
    if extra:
        yield f"{where}: {len(extra)} partitions not in the stock metastore (first {sorted(extra)[0]})"
    present = [n for n in their_names if n in our_names]
    keys = theirs.partition_key_names
    for page in reader.partitions(db_name, name, present):
        names = [make_partition_name(keys, part.values) for part in page]
        mine = {tuple(p.values): p for p in store.catalog.get_partitions_by_names(db_name, name, names)}
        for part in page:
            our_part = mine.get(tuple(part.values))
            if our_part is None:
                continue
            label = f"{where} partition {part.values}"
            yield from _data_differences(label, part.sd.location, our_part.sd.location, moved)


def _data_differences(
    where: str, their_location: str | None, our_location: str | None, moved: _Listings | None
) -> Iterator[str]:
    """``moved``: the listings of a copied object's files (None: in place, the locations are compared)."""
    if moved is None:
        if path_key(their_location or "") != path_key(our_location or ""):
            yield f"{where}: location {our_location} here, {their_location} there"
        return
    if moved.differ(where, their_location, our_location):
        yield f"{where}: files under {our_location} differ from {their_location}"


def _listing(fs: RootedFileSystem, location: str | None) -> dict[str, int]:
    if not location:
        return {}
    return {relative: status.size for relative, status in data_files(fs, location)}


def _formats(sd: StorageDescriptor) -> tuple[str | None, str | None, str | None]:
    serde = sd.serde_info.serialization_lib if sd.serde_info else None
    return sd.input_format, sd.output_format, serde


def _stable(parameters: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in parameters.items() if k not in VOLATILE_PARAMETERS}
