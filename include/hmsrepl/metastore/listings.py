"""The recorded listing of each table and partition (``data_files``), and the diff a write makes to it.

A write compares what its object's location holds now with what the metastore recorded last time. A file
whose size and modification time are unchanged keeps its recorded checksum: only new or changed files are
read. The difference is what the write's event carries (``messages.DataChange``) and what is written back
here, so the cost of a write follows the files it added or removed, not the files the object holds.

The replica side uses the same table: a load records the listing it verified and published, and applies the
next event's deltas to it without reading a file it already verified (only a cheap size and modification-
time check of the files it keeps; ``repl verify`` still reads everything).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    Select,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)

from hmsrepl.exceptions import MetastoreError
from hmsrepl.formats import listing_digest
from hmsrepl.metastore import bulk_rows, database
from hmsrepl.metastore.partitions_named import ByBackend, NamedPartitions
from hmsrepl.metastore.schema import data_files, data_listings

TABLE_LEVEL = 0  # ``part_id`` of a table's own location
CHUNK = 500
STREAM_ROWS = 5_000  # rows fetched at a time when a listing is streamed (a 1,000,000-file partition)
# The columns of a ``FileRecord``, in its field order.
RECORD_COLUMNS = (
    data_files.c.rel_path,
    data_files.c.size,
    data_files.c.mtime_ns,
    data_files.c.checksum,
    data_files.c.version_id,
)
#: The columns a write compares with its listing (relative path, size, modification time).
STAT_COLUMNS = RECORD_COLUMNS[:3]
#: ``data_files``' columns in the order ``apply`` writes a record's row (its key, then ``RECORD_COLUMNS``).
ROW_COLUMNS = ("tbl_id", "part_id", "rel_path", "size", "mtime_ns", "checksum", "version_id")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One recorded file: where it sits below its object, its identity at record time and its checksum."""

    rel_path: str
    size: int
    mtime_ns: int
    checksum: str
    version_id: str | None = None

    def same_identity(self, size: int, mtime_ns: int) -> bool:
        """The file at the path is, by size and modification time, still the one recorded."""
        return self.size == size and self.mtime_ns == mtime_ns


@dataclass(frozen=True)
class ObjectKey:
    """A table (``part_id`` 0) or one of its partitions, by the metastore's ids (stable across renames)."""

    tbl_id: int
    part_id: int = TABLE_LEVEL


@dataclass(frozen=True)
class Summary:
    """A recorded listing's file count, digest (``formats.listing_digest``) and byte total, kept up to date
    per diff (``size`` None: a summary kept before byte totals were, summed on first need by ``totals``)."""

    count: int = 0
    digest: str = listing_digest.EMPTY
    size: int | None = 0


def read(conn: Connection, key: ObjectKey) -> dict[str, FileRecord]:
    """The object's recorded files by relative path (empty: nothing recorded yet)."""
    return {record.rel_path: record for record in stream(conn, key)}


# Built once, one shape per backend (``partitions_named``): a bootstrap dump asks it for every table.
_RECORDED_NAMED = ByBackend(
    lambda named: (
        select(named.rows.c.part_name, *RECORD_COLUMNS)
        .select_from(
            named.source.join(
                data_files,
                (data_files.c.tbl_id == named.rows.c.tbl_id) & (data_files.c.part_id == named.rows.c.part_id),
            )
        )
        .where(named.picked)
    )
)


def read_named(conn: Connection, tbl_id: int, names: Sequence[str]) -> dict[str, dict[str, FileRecord]]:
    """The recorded files of a table's partitions named ``names`` (partition name -> relative path -> record),
    found by name in the same statement that reads them: one statement per CHUNK of names, where looking
    up the partitions' ids first cost one more per table of a bootstrap dump (a round trip on a server
    database). Partitions with nothing recorded, or not there, are absent."""
    out: dict[str, dict[str, FileRecord]] = {}
    statement = _RECORDED_NAMED.for_(conn)
    for start in range(0, len(names), CHUNK):
        rows = conn.execute(statement, {"tbl_id": tbl_id, "names": list(names[start : start + CHUNK])})
        for part_name, *record in rows:
            out.setdefault(part_name, {})[record[0]] = FileRecord(*record)
    return out


class LongListing(NamedTuple):
    """A partition whose recorded listing is long: its id and file count (read in pages, not held)."""

    part_id: int
    file_count: int


# Built once, one shape per backend (``partitions_named``; a bootstrap dump asks it for every table): each
# named partition's summary, and the records of those whose listing is not long; a partition without records
# is one row of NULL records.
def _listings_named(named: NamedPartitions) -> Select[Any]:
    part = named.rows.c
    return (
        select(part.part_name, part.part_id, data_listings.c.file_count, *RECORD_COLUMNS)
        .select_from(
            named.source.outerjoin(
                data_listings,
                (data_listings.c.tbl_id == part.tbl_id) & (data_listings.c.part_id == part.part_id),
            ).outerjoin(
                data_files,
                (data_files.c.tbl_id == part.tbl_id)
                & (data_files.c.part_id == part.part_id)
                & or_(
                    data_listings.c.file_count.is_(None),
                    data_listings.c.file_count <= bindparam("longer_than"),
                ),
            )
        )
        .where(named.picked)
    )


_LISTINGS_NAMED = ByBackend(_listings_named)


def read_listings_named(
    conn: Connection, tbl_id: int, names: Sequence[str], longer_than: int
) -> tuple[dict[str, LongListing], dict[str, dict[str, FileRecord]]]:
    """Of a table's partitions named ``names``: those recording more than ``longer_than`` files (by name),
    and the recorded files of the others (partition name -> relative path -> record; a partition with
    nothing recorded is absent). One statement per CHUNK of names, where asking for the long ones and then
    for the others' records cost a round trip more per table of a bootstrap dump on a server database."""
    long: dict[str, LongListing] = {}
    recorded: dict[str, dict[str, FileRecord]] = {}
    statement = _LISTINGS_NAMED.for_(conn)
    for start in range(0, len(names), CHUNK):
        chunk = list(names[start : start + CHUNK])
        rows = conn.execute(statement, {"tbl_id": tbl_id, "names": chunk, "longer_than": longer_than})
        for part_name, part_id, file_count, *record in rows:
            if file_count is not None and file_count > longer_than:
                long[part_name] = LongListing(part_id, file_count)
            elif record[0] is not None:
                recorded.setdefault(part_name, {})[record[0]] = FileRecord(*record)
    return long, recorded


def unrecorded(conn: Connection, tbl_id: int, part_ids: Iterable[int]) -> set[int]:
    """Which of a table's objects ``part_ids`` have nothing recorded, neither files nor a listing row, in one
    statement per chunk: capturing one of them reads nothing recorded (``capture``'s ``fresh``), where each
    would otherwise cost reads of its records and a write clearing a mark it cannot have."""
    wanted = sorted(set(part_ids))
    found: set[int] = set()
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        listed = select(data_listings.c.part_id).where(
            data_listings.c.tbl_id == tbl_id, data_listings.c.part_id.in_(chunk)
        )
        recorded = select(data_files.c.part_id).where(
            data_files.c.tbl_id == tbl_id, data_files.c.part_id.in_(chunk)
        )
        found.update(conn.execute(listed.union(recorded)).scalars())
    return set(wanted) - found


def read_paths(conn: Connection, key: ObjectKey, paths: Iterable[str]) -> dict[str, FileRecord]:
    """The records of some paths of the object (those recorded), in O(paths) rows."""
    wanted = sorted(set(paths))
    out: dict[str, FileRecord] = {}
    for start in range(0, len(wanted), CHUNK):
        rows = conn.execute(
            select(*RECORD_COLUMNS).where(
                data_files.c.tbl_id == key.tbl_id,
                data_files.c.part_id == key.part_id,
                data_files.c.rel_path.in_(wanted[start : start + CHUNK]),
            )
        )
        out.update((row.rel_path, FileRecord(*row)) for row in rows)
    return out


def stream(conn: Connection, key: ObjectKey) -> Iterator[FileRecord]:
    """The object's recorded files, fetched a batch at a time: a caller that keeps only what it needs of
    each holds one batch of rows, not the listing (a 1,000,000-file partition). Consume it whole before
    issuing other statements on ``conn`` (some drivers stream over the connection itself)."""
    for row in stream_rows(conn, key, RECORD_COLUMNS):
        yield FileRecord(*row)


def stream_rows(
    conn: Connection, key: ObjectKey, columns: Sequence[ColumnElement[Any]]
) -> Iterator[Row[Any]]:
    """``stream`` of some of the record's columns, as rows: a write compares every recorded file with the
    listing, and building a ``FileRecord`` and reading the checksum of each would cost about as much as the
    rest of that comparison (10,000 files)."""
    query = (
        select(*columns)
        .where(data_files.c.tbl_id == key.tbl_id, data_files.c.part_id == key.part_id)
        .execution_options(yield_per=STREAM_ROWS)
    )
    with database.in_transaction(conn):
        for rows in conn.execute(query).partitions():
            yield from rows


def stream_sorted(conn: Connection, key: ObjectKey) -> Iterator[FileRecord]:
    """``stream`` in the order Python sorts relative paths (by code point), a batch at a time: the order in
    which a listing is written (a dump's ``_files``, an event's ``added``), so a listing of 1,000,000 files
    is written as it is read, never held or sorted here. The database sorts by its binary order (UTF-8
    bytes, which sort as their code points); each path is checked to follow the one before, so a collation
    that sorts otherwise fails loudly instead of writing a listing out of order."""
    query = (
        select(*RECORD_COLUMNS)
        .where(data_files.c.tbl_id == key.tbl_id, data_files.c.part_id == key.part_id)
        .order_by(_code_point_order(conn))
        .execution_options(yield_per=STREAM_ROWS)
    )
    last = ""
    with database.in_transaction(conn):
        for rows in conn.execute(query).partitions():
            for row in rows:
                if row[0] <= last:
                    raise MetastoreError(
                        f"the recorded files of {key} come out of order ('{last}', then '{row[0]}'); "
                        "the database sorts them by another collation"
                    )
                last = row[0]
                yield FileRecord(*row)


def _code_point_order(conn: Connection) -> ColumnElement[Any]:
    """``rel_path`` in code point order on this database: SQLite's own (``BINARY``) order already is;
    PostgreSQL's default collation sorts by locale, MariaDB's pads and may fold case."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        return data_files.c.rel_path.collate("C")
    if dialect in ("mysql", "mariadb"):
        return literal_column("CAST(CONVERT(data_files.rel_path USING utf8mb4) AS BINARY)")
    return data_files.c.rel_path


def summary(conn: Connection, key: ObjectKey) -> Summary:
    """The recorded listing's count and digest; computed from its rows once if no summary was kept yet."""
    row = conn.execute(
        select(data_listings.c.file_count, data_listings.c.digest, data_listings.c.total_size).where(
            data_listings.c.tbl_id == key.tbl_id, data_listings.c.part_id == key.part_id
        )
    ).first()
    if row is not None:
        return Summary(row.file_count, row.digest, row.total_size)
    count, digest, size = 0, listing_digest.EMPTY, 0
    for record in stream(conn, key):
        count += 1
        size += record.size
        digest = listing_digest.combine(digest, [(record.rel_path, record.checksum)])
    return Summary(count, digest, size)


def totals(conn: Connection, key: ObjectKey) -> tuple[int, int]:
    """The recorded listing's file count and byte total (Hive's ``numFiles`` and ``totalSize``), read from
    its summary: one row, whatever the object holds. A summary without a byte total yet (kept before they
    were) is summed once and completed; an object without a summary is counted (it has none until its
    first diff, so it is empty or was recorded before summaries were kept)."""
    where = (data_listings.c.tbl_id == key.tbl_id, data_listings.c.part_id == key.part_id)
    row = conn.execute(select(data_listings.c.file_count, data_listings.c.total_size).where(*where)).first()
    if row is not None and row.total_size is not None:
        return int(row.file_count), int(row.total_size)
    count, size = recount(conn, key)
    if row is not None and row.file_count == count:
        conn.execute(update(data_listings).where(*where).values(total_size=size))
    return count, size


def recount(conn: Connection, key: ObjectKey) -> tuple[int, int]:
    """The object's file count and byte total counted over its recorded rows (a pass over the listing)."""
    row = conn.execute(
        select(func.count(), func.coalesce(func.sum(data_files.c.size), 0)).where(
            data_files.c.tbl_id == key.tbl_id, data_files.c.part_id == key.part_id
        )
    ).one()
    return int(row[0]), int(row[1])


def _store_summary(conn: Connection, key: ObjectKey, value: Summary) -> None:
    where = (data_listings.c.tbl_id == key.tbl_id, data_listings.c.part_id == key.part_id)
    done = conn.execute(
        update(data_listings)
        .where(*where)
        .values(file_count=value.count, digest=value.digest, total_size=value.size)
    ).rowcount
    if not done:
        conn.execute(
            insert(data_listings).values(
                tbl_id=key.tbl_id,
                part_id=key.part_id,
                file_count=value.count,
                digest=value.digest,
                total_size=value.size,
            )
        )


def mark_unlisted(conn: Connection, key: ObjectKey, at_ns: int) -> None:
    """A declared write changed the object at ``at_ns`` without listing its location (an earlier mark stays)."""
    where = (data_listings.c.tbl_id == key.tbl_id, data_listings.c.part_id == key.part_id)
    mark = (
        update(data_listings)
        .where(*where)
        .values(unlisted_since=func.coalesce(data_listings.c.unlisted_since, at_ns))
    )
    if not conn.execute(mark).rowcount:  # nothing recorded yet (an empty table): the mark needs the row
        _store_summary(conn, key, summary(conn, key))
        conn.execute(mark)


def mark_listed(conn: Connection, key: ObjectKey) -> None:
    """The recorded listing was just compared with the whole location: nothing is left to reconcile."""
    conn.execute(
        update(data_listings)
        .where(
            data_listings.c.tbl_id == key.tbl_id,
            data_listings.c.part_id == key.part_id,
            data_listings.c.unlisted_since.is_not(None),
        )
        .values(unlisted_since=None)
    )


def unlisted_since(conn: Connection, key: ObjectKey) -> int | None:
    """When a declared write last left the object's listing unchecked (None: it was listed since)."""
    return conn.execute(
        select(data_listings.c.unlisted_since).where(
            data_listings.c.tbl_id == key.tbl_id, data_listings.c.part_id == key.part_id
        )
    ).scalar()


def due_unlisted(conn: Connection, before_ns: int, limit: int) -> list[ObjectKey]:
    """Objects whose declared writes before ``before_ns`` no listing has checked yet, oldest first."""
    rows = conn.execute(
        select(data_listings.c.tbl_id, data_listings.c.part_id)
        .where(data_listings.c.unlisted_since.is_not(None), data_listings.c.unlisted_since <= before_ns)
        .order_by(data_listings.c.unlisted_since)
        .limit(limit)
    )
    return [ObjectKey(row.tbl_id, row.part_id) for row in rows]


def _replaced(conn: Connection, key: ObjectKey, paths: list[str]) -> dict[str, tuple[str, int]]:
    """The recorded checksum and size of each of ``paths`` that is recorded (what a diff takes out)."""
    out: dict[str, tuple[str, int]] = {}
    for start in range(0, len(paths), CHUNK):
        out.update(
            (path, (checksum, size))
            for path, checksum, size in conn.execute(
                select(data_files.c.rel_path, data_files.c.checksum, data_files.c.size).where(
                    data_files.c.tbl_id == key.tbl_id,
                    data_files.c.part_id == key.part_id,
                    data_files.c.rel_path.in_(paths[start : start + CHUNK]),
                )
            ).tuples()
        )
    return out


def apply(
    conn: Connection,
    key: ObjectKey,
    upserts: Iterable[FileRecord],
    removed: Iterable[str] = (),
    *,
    before: Summary | None = None,
    new_paths: bool = False,
) -> Summary:
    """Write a diff: ``upserts`` replace or add records, ``removed`` paths go (O(diff) statements' rows).

    The listing's count, digest and byte total are updated from the diff alone (the replaced records'
    checksums and sizes are read back, O(diff) rows) and returned: what the write's event carries. ``before``: the summary the
    caller read in this transaction (or the previous batch's result), not read again.

    ``new_paths``: no path of ``upserts`` is recorded (a page of a listing that was empty when its first page
    went in, each path named once), so none is looked up. On PostgreSQL those look-ups, in a listing filled by
    the same transaction and so without statistics, were planned as scans of the whole listing: a first capture
    of 1,000,000 files did not end in 9 minutes. A path recorded after all fails the insert on the listing's key.
    """
    upserts = list(upserts)
    gone = {*removed, *(r.rel_path for r in upserts)}
    if not gone:  # nothing changed: nothing to write (most metadata-only writes)
        return before if before is not None else summary(conn, key)
    table = data_files
    paths = sorted(gone)
    if before is None:
        before = summary(conn, key)
    replaces = before.count > 0 and not new_paths  # an empty listing, or paths new to it, replace nothing
    old = _replaced(conn, key, paths) if replaces else {}
    size = None
    if before.size is not None:
        size = before.size - sum(s for _, s in old.values()) + sum(r.size for r in upserts)
    after = Summary(
        before.count - len(old) + len(upserts),
        listing_digest.combine(
            before.digest,
            [(r.rel_path, r.checksum) for r in upserts],
            [(path, checksum) for path, (checksum, _) in old.items()],
        ),
        size,
    )
    recorded = sorted(old)  # paths not recorded have no row to delete (an append's new files)
    for start in range(0, len(recorded), CHUNK):
        conn.execute(
            delete(table).where(
                table.c.tbl_id == key.tbl_id,
                table.c.part_id == key.part_id,
                table.c.rel_path.in_(recorded[start : start + CHUNK]),
            )
        )
    bulk_rows.insert_rows(
        conn,
        table,
        ROW_COLUMNS,
        [
            (key.tbl_id, key.part_id, r.rel_path, r.size, r.mtime_ns, r.checksum, r.version_id)
            for r in upserts
        ],
    )
    _store_summary(conn, key, after)
    return after


def replace_all(conn: Connection, key: ObjectKey, records: Iterable[FileRecord]) -> Summary:
    """Record exactly ``records`` for the object (a first capture, or a listing rebuilt from scratch)."""
    forget(conn, key)
    return apply(conn, key, records)


# Built once: every table a load creates forgets its listing (SQLAlchemy builds a statement in ~40 us).
_FORGET = tuple(
    delete(table).where(table.c.tbl_id == bindparam("tbl_id"), table.c.part_id == bindparam("part_id"))
    for table in (data_files, data_listings)
)


def forget(conn: Connection, key: ObjectKey) -> None:
    for statement in _FORGET:
        conn.execute(statement, {"tbl_id": key.tbl_id, "part_id": key.part_id})


def forget_table(conn: Connection, tbl_id: int) -> None:
    """A dropped table: its own listing and every partition's."""
    for table in (data_files, data_listings):
        conn.execute(delete(table).where(table.c.tbl_id == tbl_id))


def forget_partitions(conn: Connection, tbl_id: int, part_ids: Iterable[int]) -> None:
    ids = list(part_ids)
    for start in range(0, len(ids), CHUNK):
        for table in (data_files, data_listings):
            conn.execute(
                delete(table).where(table.c.tbl_id == tbl_id, table.c.part_id.in_(ids[start : start + CHUNK]))
            )
