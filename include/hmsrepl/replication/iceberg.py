"""Iceberg tables on a replica: metadata that names the replica's own copies of the table's files.

An Iceberg table in the metastore is a table with ``table_type=ICEBERG`` whose ``metadata_location`` names a
metadata JSON, which names manifest lists, which name manifests, which name data files, all by absolute
path. The replication copies every file under the table's location like any external table's (listed and
checksummed with the event, copied and verified into the new version directory of the replica's table), so
the files are there; only their paths name the source.

Choice: rewrite the paths, as Iceberg's ``rewrite_table_path`` procedure does. A same-path layout cannot
work here: the replica's warehouse is another directory, and every data change of a replicated table gets
a new version directory (``<table>.hmsrepl-v<event>``, see ``target``). The copies stay byte for byte
what the source wrote (verified, and compared by checksum with the next event's list); the rewritten
metadata JSON, manifest lists and manifests go beside them under ``_hmsrepl_iceberg/`` in the same version
directory (a hidden name: not data, never listed or compared with the source's files), with the same
relative paths and file names. Data files (and statistics files, and older metadata JSONs in the
metadata log) are named at their verified copies. All of it is written into the new version directory
before the load's metadata commit names that directory, and the metadata JSON last: an Iceberg reader of
the replica sees the previous snapshot or the new one, whole, never a part.

Every snapshot the metadata keeps is rewritten (time travel works on the replica), once per version
directory: O(manifests) per replicated change of the table. Position-delete files (Trino's and Spark's
row-level DELETE) name data files inside their Parquet rows: they are rewritten too, beside the manifests
(``iceberg_deletes``); equality deletes hold no paths and are named at their copies.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats import iceberg_tables
from hmsrepl.formats.bounded import loads_bounded, read_capped
from hmsrepl.formats.iceberg_tables import METADATA_LOCATION, PREVIOUS_METADATA_LOCATION, path_below
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.replication.iceberg_deletes import entry_updates, rewrite_position_deletes
from hmsrepl.storage.base import join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

if TYPE_CHECKING:  # pyiceberg is imported when an Iceberg table is replicated, not by every load
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record

log = logging.getLogger(__name__)

LOCALIZED_DIR = "_hmsrepl_iceberg"
AVRO_SCHEMA = "avro.schema"  # header key; pyiceberg's writer writes it from the schema it is given
POSITION_DELETES = 1  # data_file.content of a position-delete file
DELETED = 2  # manifest entry status of a file the entry's snapshot removed: no reader opens it
# Table properties that may hold a path under the table's location.
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path")


class IcebergReplicationError(HmsReplError):
    """An Iceberg table whose metadata cannot be made to name the replica's copies."""


def is_iceberg(table: Table) -> bool:
    return iceberg_tables.is_iceberg(table.parameters)


def localize(table: Table, source_location: str | None) -> Table:
    """The replica's ``table`` with ``metadata_location`` naming metadata rewritten for its location.

    ``table.sd.location`` is the replica's directory holding the copies (a new version or the current one);
    ``source_location`` is the source table's location as the source metastore has it. Tables that are not
    Iceberg, and loads that copied no files (metadata-only dumps) come back unchanged.
    """
    params = table.parameters
    metadata = params.get(METADATA_LOCATION)
    if not is_iceberg(table) or not metadata or not source_location or not table.sd.location:
        return table
    reason = iceberg_tables.metadata_refusal(table.qualified_name, params, source_location)
    if reason:  # checked before any file is read: the copy of a path outside would be outside too
        raise IcebergReplicationError(f"{reason}; it is not replicated")
    copies = _Copies(table.qualified_name, source_location, table.sd.location)
    copied_metadata = copies.copy_of(metadata)
    updated = {**params, METADATA_LOCATION: copied_metadata}
    previous = params.get(PREVIOUS_METADATA_LOCATION)
    if previous:
        updated[PREVIOUS_METADATA_LOCATION] = copies.copy_of(previous)
    rewrite = _Rewrite(copies)
    if rewrite.fs.exists(copied_metadata):
        updated[METADATA_LOCATION] = rewrite.metadata(copied_metadata)
    else:
        log.warning(
            "Iceberg table %s: no copy of its metadata %s in %s (metadata-only load?): its metadata "
            "location names where the copy would be",
            table.qualified_name,
            metadata,
            table.sd.location,
        )
    return table.model_copy(update={"parameters": updated})


def comparable_parameters(table: Table | Partition) -> dict[str, str]:
    """The object's parameters with an Iceberg table's metadata paths relative to its location (a rewritten
    copy's without ``_hmsrepl_iceberg/``): what is equal on a source and its replica, for ``verify``."""
    params = dict(table.parameters)
    location = table.sd.location
    if not isinstance(table, Table) or not is_iceberg(table) or not location:
        return params
    for key in (METADATA_LOCATION, PREVIOUS_METADATA_LOCATION):
        rel = path_below(params[key], location) if key in params else None
        if rel is not None:
            params[key] = rel.removeprefix(LOCALIZED_DIR + "/")
    return params


@dataclass(frozen=True)
class _Copies:
    """Where the replica holds the copy of a file the source table named (same path below the location)."""

    table: str
    source_location: str
    location: str

    def copy_of(self, path: str) -> str:
        """The copy of a file named by the source's metastore (checked below the source's location); a
        source that is itself a replica names its rewritten metadata, whose original is the copy at the same
        path without ``_hmsrepl_iceberg``."""
        rel = path_below(path, self.source_location)
        if rel is None:
            raise IcebergReplicationError(
                f"Iceberg table '{self.table}': {path!r} is not below its location {self.source_location!r}"
            )
        return join_uri(self.location, rel.removeprefix(LOCALIZED_DIR + "/"))


class _Rewrite:
    """One metadata JSON and the manifest lists and manifests it names, rewritten into ``_hmsrepl_iceberg``.

    Paths inside the files are rewritten from the location the Iceberg writer recorded in the metadata
    (its ``location`` field: on a chain of replicas still the first source's) to the replica's location.
    """

    def __init__(self, copies: _Copies) -> None:
        self.copies = copies
        self.location = copies.location.rstrip("/")
        # Every read and write stays below the replica's copy of the table (a symlink out of it is refused).
        self.fs = RootedFileSystem([self.location], purpose=f"Iceberg metadata of '{copies.table}'")
        self.written: dict[str, tuple[str, int]] = {}  # manifest -> rewrite and its length (in many lists)
        self._data: set[str] | None = None
        self.writer_location = ""

    def metadata(self, copied: str) -> str:
        target = join_uri(self.location, LOCALIZED_DIR, relative_to(copied, self.location))
        if self.fs.exists(target):
            return target  # made by an earlier run of this load (written last, so it is whole)
        what = f"Iceberg metadata '{copied}'"
        with self.fs.open_read(copied) as stream:
            doc = loads_bounded(read_capped(stream, what), what)
        self.writer_location = str(doc.get("location", "")).rstrip("/")
        doc["location"] = self.location
        for snapshot in doc.get("snapshots", []):
            if "manifest-list" in snapshot:
                snapshot["manifest-list"] = self._manifest_list(snapshot["manifest-list"])
            if "manifests" in snapshot:  # format v1 without manifest lists
                snapshot["manifests"] = [self._manifest(path)[0] for path in snapshot["manifests"]]
        for entry in doc.get("metadata-log", []):
            entry["metadata-file"] = self._copy(entry["metadata-file"], check=False)
        for key in ("statistics", "partition-statistics"):
            for entry in doc.get(key, []):
                entry["statistics-path"] = self._copy(entry["statistics-path"])
        properties = doc.get("properties", {})
        for key in PATH_PROPERTIES:
            if key in properties and path_below(properties[key], self.writer_location) is not None:
                properties[key] = self._copy(properties[key], check=False)
        self.fs.write_bytes(target, json.dumps(doc, indent=2).encode())
        return target

    def _manifest_list(self, path: str) -> str:
        def rewrite(records: list[Record], schema: Schema) -> None:
            names = [f.name for f in schema.fields]
            at_path, at_length = names.index("manifest_path"), names.index("manifest_length")
            for record in records:  # a rewritten manifest has another length, which readers rely on
                record[at_path], record[at_length] = self._manifest(record[at_path])

        return self._avro(path, rewrite)[0]

    def _manifest(self, path: str) -> tuple[str, int]:
        if path not in self.written:
            self.written[path] = self._avro(path, self._rewrite_entries)
        return self.written[path]

    def _rewrite_entries(self, records: list[Record], schema: Schema) -> None:
        """Each entry names the replica's copy. An entry of a file its snapshot removed (compaction, an
        overwrite) is history: it is renamed without a copy (an expired snapshot's files are gone from the
        source too) and a removed position-delete file no longer needs its rows' paths rewritten."""
        entry_fields = [f.name for f in schema.fields]
        at_status, at_data_file = entry_fields.index("status"), entry_fields.index("data_file")
        fields = [f.name for f in schema.find_field("data_file").field_type.fields]  # type: ignore[attr-defined]
        paths = [fields.index(name) for name in ("file_path", "referenced_data_file") if name in fields]
        for record in records:
            entry, removed = record[at_data_file], record[at_status] == DELETED
            if removed:
                for at in paths:
                    if entry[at] is not None:
                        entry[at] = self._copy(entry[at], check=False)
                continue
            if entry[fields.index("content")] == POSITION_DELETES:
                self._rewrite_position_deletes(entry, fields)
                continue
            for at in paths:
                if entry[at] is not None:
                    entry[at] = self._copy(entry[at])

    def _avro(self, path: str, rewrite: Callable[[list[Record], Schema], None]) -> tuple[str, int]:
        """Read the copy of an Avro file, rewrite its records, write it under ``_hmsrepl_iceberg``."""
        from pyiceberg.avro.file import AvroFile, AvroOutputFile

        source = self._copy(path)
        target = join_uri(self.location, LOCALIZED_DIR, relative_to(source, self.location))
        with self.fs.open_read(source) as stream:
            data = read_capped(stream, f"Iceberg manifest '{source}'")
        with AvroFile(_MemoryInput(source, data)) as reader:  # type: ignore[arg-type]
            schema, meta = reader.schema, dict(reader.header.meta)
            records = list(reader)
        rewrite(records, schema)
        name = json.loads(meta.pop(AVRO_SCHEMA)).get("name", "record")
        output = _MemoryOutput(target)
        with AvroOutputFile(output, schema, name, metadata=meta) as writer:  # type: ignore[arg-type]
            writer.write_block(records)
        self.fs.write_bytes(target, output.data)
        return target, len(output.data)

    def _rewrite_position_deletes(self, entry: Record, fields: list[str]) -> None:
        """Name the rewritten copy of a live position-delete file (its rows name the replica's data files)."""
        at_path = fields.index("file_path")
        source = self._copy(entry[at_path])
        target = join_uri(self.location, LOCALIZED_DIR, relative_to(source, self.location))
        with self.fs.open_read(source) as stream:
            data = read_capped(stream, f"Iceberg position-delete file '{source}'")
        try:
            rewritten = rewrite_position_deletes(data, lambda path: self._copy(path, check=False))
        except (ValueError, OSError) as error:  # pyarrow's errors are both
            raise IcebergReplicationError(
                f"Iceberg table '{self.copies.table}': position-delete file '{entry[at_path]}' is not one "
                f"({error}); the load stops before the replica names it"
            ) from error
        self.fs.write_bytes(target, rewritten)
        entry[at_path] = target
        bounds = [
            entry[fields.index(name)] if name in fields else None for name in ("lower_bounds", "upper_bounds")
        ]
        for name, value in entry_updates(len(rewritten), *bounds).items():
            if name in fields:
                entry[fields.index(name)] = value
        if "referenced_data_file" in fields and entry[fields.index("referenced_data_file")] is not None:
            at = fields.index("referenced_data_file")
            entry[at] = self._copy(entry[at], check=False)

    def _copy(self, path: str, *, check: bool = True) -> str:
        """The verified copy of a file the metadata names (it must have been copied: else no snapshot).

        The path must lie below the writer's location after normalisation (no ``.``/``..`` segment), so its
        copy lies below the replica's location whatever the metadata says."""
        rel = path_below(path, self.writer_location) if isinstance(path, str) else None
        if rel is None:
            raise IcebergReplicationError(
                f"Iceberg table '{self.copies.table}' names '{path}', outside its location "
                f"'{self.writer_location}': only files below the table's location are replicated"
            )
        copy = join_uri(self.location, rel)
        if check and rel not in self._data_files():
            raise IcebergReplicationError(
                f"Iceberg table '{self.copies.table}': '{path}' was not copied with the table's files "
                f"(no '{copy}'); the load stops before the replica names an incomplete snapshot"
            )
        return copy

    def _data_files(self) -> set[str]:
        if self._data is None:
            self._data = {relative_to(s.uri, self.location) for s in list_data_files(self.fs, self.location)}
        return self._data


class _MemoryInput:
    """An input file for pyiceberg's Avro reader (which reads the whole file anyway) over bytes we read."""

    def __init__(self, location: str, data: bytes) -> None:
        self.location = location
        self.data = data

    def open(self, seekable: bool = True) -> io.BytesIO:
        return io.BytesIO(self.data)


class _MemoryOutput:
    """An output file for pyiceberg's Avro writer: collects the bytes, which our storage layer writes."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.data = b""

    def create(self, overwrite: bool = False) -> io.BytesIO:
        output = self

        class Collector(io.BytesIO):
            def close(self) -> None:
                output.data = self.getvalue()
                super().close()

        return Collector()
