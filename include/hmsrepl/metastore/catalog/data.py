"""Data changes (INSERT events), the listing reconciliation and the recorded listings a dump reuses."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

from sqlalchemy import Connection, select

from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.formats.json_text import LazyArray
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import listings
from hmsrepl.metastore.applied_files import AppliedListing, applied_checksums
from hmsrepl.metastore.capture import Captured, capture, capture_named, describe_recorded, relative_names
from hmsrepl.metastore.catalog.core import CatalogCore, CatalogFamily
from hmsrepl.metastore.catalog.held import forget_table
from hmsrepl.metastore.catalog.partition_reads import PartitionReads
from hmsrepl.metastore.catalog.rows import _partition_from_row, _partition_name, _snapshot, _table_from_row
from hmsrepl.metastore.catalog.tables import with_gathered_table
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.payloads import AlterPartitionBody, AlterTableBody, InsertBody, format2
from hmsrepl.metastore.protection import refusal
from hmsrepl.metastore.recorded_listing import recorded_listing
from hmsrepl.metastore.recorded_pages import LONG_LISTING, RecordedPages
from hmsrepl.metastore.schema import partitions, tbls


def _named(added: Sequence[str]) -> list[str]:
    """The files an INSERT names as new: its change's ``added``, a list as the body has it; a listing too
    long to hold (a first capture's ``LazyArray``) stays lazy, written with the event a piece at a time."""
    return added if isinstance(added, LazyArray) else list(added)


class DataCatalog(CatalogFamily):
    """What a table's or partition's files are, as recorded and as they change."""

    def __init__(self, core: CatalogCore, reads: PartitionReads) -> None:
        super().__init__(core)
        self.reads = reads

    def insert(
        self,
        db_name: str,
        table_name: str,
        partition_values: Sequence[str] | None = None,
        *,
        new_files: Sequence[str] | None = None,
        replace: bool = False,
        applied_files: AppliedListing | None = None,
        applied_recycled: Sequence[str] = (),
        gather_stats: bool = False,
    ) -> Iterable[str]:
        """Record new data in a table or partition (an INSERT event with files and checksums).

        The event's ``data`` is the diff from the recorded listing (files added or changed, paths removed,
        the listing's count and digest after the change: a reader applying it holds exactly this listing,
        never a mix of old and new data); ``new_files`` what the writer added (``new_files`` argument: those
        files, which must exist; else the files the diff found new). A client whose alter already listed
        its files (an alter_table before the INSERT, from a connection that had not named files yet) logs an
        empty change; into a partition, Spark's INSERT comes first and records the files itself.
        With ``replace`` (INSERT OVERWRITE) every other data file leaves the listing and is recycled into
        cmroot after commit. Returns the encoded URIs of the new files (of a first capture of more files than
        it holds at once, read back from the recorded listing as they are walked).

        A replication load that made the location hold exactly ``applied_files`` records that listing (see
        ``create_table``); it already kept the files it replaced (``applied_recycled``) in this metastore's
        cmroot, so nothing is recycled after commit.

        ``gather_stats``: a client's INSERT into a table (Hive's loadTable fires it after its alter_table):
        the table's ``numFiles``/``totalSize`` follow the recorded files in this transaction, and the event's
        table snapshot carries them, so no alter follows and a replica's load, which puts that snapshot,
        holds the same parameters (``basic_stats``). A partition's counts follow in the alter_partition Hive
        sends next.
        """
        self.core.check_writable(db_name)
        table = self.core.get_table(db_name, table_name)
        partition = self.reads.partition_of(table, partition_values) if partition_values else None
        if table.partition_keys and partition is None:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is partitioned; name the partition written"
            )
        location = (partition.sd if partition else table.sd).location
        applied = None
        if applied_files is not None:
            new_files, replace = None, True
            adopted, applied = list(applied_recycled), applied_checksums(applied_files)
        else:
            adopted = self.trash.adopt(location)
        named = relative_names(location or "", new_files) if new_files is not None else None
        with self.events.transaction() as tx:
            tbl_id, current = self.core.load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            part_id = listings.TABLE_LEVEL
            if partition is not None:
                name = _partition_name(table, partition.values)
                found = self.core.part_ids(tx.conn, tbl_id, [name]).get(name)
                if found is None:
                    raise NoSuchPartitionError(table.db_name, table.table_name, name)
                part_id = found
            key = ObjectKey(tbl_id, part_id)
            got: Captured
            if named is not None and not replace:  # the writer says what it added: look at that only
                got = capture_named(tx.conn, self.cm, key, location, named)
            else:
                got = capture(
                    tx.conn, self.cm, key, location, applied=applied, named=named, only_named=replace
                )
            added = got.named if named is not None else _named(got.change.added)
            if gather_stats and partition is None:
                current = with_gathered_table(tx.conn, tbl_id, current, current.parameters)
                forget_table(tx, tbl_id)
            body = InsertBody(
                table=_snapshot(current),
                partition=_snapshot(partition) if partition else None,
                replace=replace,
                new_files=added,
                recycled=adopted + got.excluded,
                **format2(got.change),
            )
            tx.emit(EventType.INSERT, table.db_name, table.table_name, body)
            self.intents.recycle(tx, got.excluded)
        if isinstance(added, LazyArray):  # read back from the records once asked for, as now committed
            return recorded_listing(self.events.reader, self.cm, key, location or "", len(added))
        return added

    def reconcile_listing(self, key: ObjectKey) -> bool:
        """List an object that declared writes left unlisted and log what no writer named.

        Spark names the files of an append in its INSERT and the alter that follows lists nothing, so a
        file dropped or removed by hand beside it would wait for the next overwrite. This compares the
        recorded listing with the whole location, once for all the appends since the object was marked
        (``listings.mark_unlisted``), and logs the difference in an ALTER_PARTITION (or ALTER_TABLE) event
        whose metadata is unchanged; when the writers told everything, nothing is logged. The table's row is
        locked as by any write. Returns whether an event was logged.
        """
        with self.events.transaction() as tx:
            row = tx.conn.execute(
                select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id)
                .where(tbls.c.tbl_id == key.tbl_id)
                .with_for_update()
            ).first()
            if row is None or listings.unlisted_since(tx.conn, key) is None:
                return False  # dropped, or listed by a write in the meantime
            table = _table_from_row(row)
            if refusal(table.db_name, self.core.load_db(tx.conn, table.db_name).parameters):
                listings.mark_listed(tx.conn, key)  # a protected replica's listing is its loads' business
                return False
            partition = None
            if key.part_id != listings.TABLE_LEVEL:
                found = tx.conn.execute(
                    select(partitions.c.doc, partitions.c.write_id).where(partitions.c.part_id == key.part_id)
                ).first()
                if found is None:
                    return False
                partition = _partition_from_row(found)
            location = (partition.sd if partition is not None else table.sd).location
            change = capture(tx.conn, self.cm, key, location).change
            if change.is_empty:
                return False
            if partition is not None:
                part = _snapshot(partition)
                altered = AlterPartitionBody(
                    table=_snapshot(table), before=part, after=part, recycled=[], **format2(change)
                )
                tx.emit(EventType.ALTER_PARTITION, table.db_name, table.table_name, altered)
            else:
                same = _snapshot(table)
                body = AlterTableBody(before=same, after=same, recycled=[], **format2(change))
                tx.emit(EventType.ALTER_TABLE, table.db_name, table.table_name, body)
        return True

    def describe_data(self, table: Table, partition: Partition | None = None) -> list[str]:
        """Encoded files of a table's (or one of its partitions') location, as a bootstrap dump lists them.

        The checksums come from the recorded listing wherever a file's size and modification time are the
        recorded ones: a bootstrap dump lists the warehouse, it does not read it again (only files changed
        behind the metastore's back, or never recorded, are read).
        """
        location = (partition or table).sd.location
        if not location or table.id is None:
            return describe_files(location, self.cm)
        recorded = self.recorded_listings(table, [partition] if partition is not None else [])
        return describe_recorded(location, self.cm, recorded.get(location, {}))

    def describe_partitions(self, table: Table, parts: Sequence[Partition]) -> list[list[str]]:
        """``describe_data`` of each of a page of the table's partitions, in order: their recorded listings
        come in a few statements for the page (a bootstrap dump of 100,000 partitions would otherwise send
        two per partition)."""
        if table.id is None:
            return [describe_files(part.sd.location, self.cm) for part in parts]
        return self._described(parts, self.recorded_listings(table, parts))

    def _described(
        self, parts: Sequence[Partition], recorded: dict[str, dict[str, FileRecord]]
    ) -> list[list[str]]:
        """``describe_partitions`` of ``parts`` from their records (``recorded``, by location)."""
        batch = self.cm.files.batch()  # the partitions share the table's directories: resolved once
        return [
            describe_recorded(part.sd.location, self.cm, recorded.get(part.sd.location, {}), batch)
            if part.sd.location
            else describe_files(part.sd.location, self.cm)
            for part in parts
        ]

    def dump_listing(self, table: Table) -> list[str] | RecordedPages:
        """``describe_data`` of the table's own location as a bootstrap dump writes it: a long recorded
        listing (more than ``LONG_LISTING`` files) as ``RecordedPages``, walked as its ``_files`` is written."""
        location = table.sd.location
        if location and table.id is not None:
            key = ObjectKey(table.id)
            with self.events.reader() as conn:
                count = listings.summary(conn, key).count
            if count > LONG_LISTING:
                return self._pages(key, location, count, functools.partial(self.describe_data, table))
        return self.describe_data(table)

    def dump_partition_listings(
        self, table: Table, parts: Sequence[Partition]
    ) -> list[list[str] | RecordedPages]:
        """``describe_partitions`` as a bootstrap dump writes them: each long recorded listing (more than
        ``LONG_LISTING`` files) as ``RecordedPages``, the others held as they are described now."""
        if table.id is None or not parts:
            return list(self.describe_partitions(table, parts))
        keys = table.partition_key_names
        names = [make_partition_name(keys, part.values) for part in parts]
        with self.events.reader() as conn:  # one read of the summaries and the short listings' records
            long, by_name = listings.read_listings_named(conn, table.id, names, LONG_LISTING)
        rest = {name: part.sd.location for part, name in zip(parts, names, strict=True) if name not in long}
        recorded = _by_location(by_name, rest)
        held = iter(
            self._described([part for part, name in zip(parts, names, strict=True) if name in rest], recorded)
        )
        out: list[list[str] | RecordedPages] = []
        for part, name in zip(parts, names, strict=True):
            found = long.get(name)
            if found is None or not part.sd.location:
                out.append(next(held) if found is None else [])
                continue
            whole = functools.partial(self.describe_data, table, part)
            out.append(
                self._pages(ObjectKey(table.id, found.part_id), part.sd.location, found.file_count, whole)
            )
        return out

    def _pages(
        self, key: ObjectKey, location: str, count: int, whole: Callable[[], list[str]]
    ) -> RecordedPages:
        return RecordedPages(self.events.reader, self.cm, key, location, count, whole)

    def recorded_listings(
        self, table: Table, partitions: Sequence[Partition] = ()
    ) -> dict[str, dict[str, FileRecord]]:
        """Recorded files (relative path -> record) of the table's own location, or of each partition's.

        What a bootstrap dump needs to list a table without reading the files it recorded (on one process,
        ``describe_data``; on Spark executors, the listings are shipped with the locations). A partition with
        nothing recorded is absent (callers read it as an empty listing).
        """
        if table.id is None:
            return {}
        with self.events.reader() as conn:
            if not partitions:
                location = table.sd.location
                return {location: listings.read(conn, ObjectKey(table.id))} if location else {}
            keys = table.partition_key_names
            locations = {make_partition_name(keys, p.values): p.sd.location for p in partitions}
            return _recorded_named(conn, table.id, locations)


def _recorded_named(
    conn: Connection, tbl_id: int, locations: dict[str, str | None]
) -> dict[str, dict[str, FileRecord]]:
    """The records of a table's partitions named in ``locations`` (name -> location), by location; a
    partition with nothing recorded, or no location, is absent."""
    return _by_location(listings.read_named(conn, tbl_id, list(locations)), locations)


def _by_location(
    recorded: dict[str, dict[str, FileRecord]], locations: dict[str, str | None]
) -> dict[str, dict[str, FileRecord]]:
    """Partitions' records keyed by name (``recorded``) keyed by their location instead (``locations``: name ->
    location); one with nothing recorded, or no location, is absent."""
    return {location: recorded[name] for name, location in locations.items() if location and name in recorded}
