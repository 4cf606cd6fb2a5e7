"""What a write did to one table's or partition's data files, found at a cost proportional to the change.

A write lists its object's location (sizes and modification times only, no reads) and compares that with
the listing the metastore recorded last time (``metastore.listings``). A file whose size and modification
time are unchanged keeps its recorded checksum; only new or changed files are identified (read, or one HEAD
on S3), pinned (``ChangeManager.pin``) and recorded (a changed file whose checksum is the recorded one,
touched or copied over itself, is recorded with its new size and time but not logged: its content is not
new). The diff is written back in the write's transaction and becomes the event's ``DataChange``: the
files added or changed, the paths removed, and the new listing's count and digest, updated from the
previous ones (``listings.apply``). So an append of one file to a partition of 10,000 reads one file and
logs one file. Spark's Hive client fires the INSERT naming the new files first, then alters the partition:
the INSERT reads the named files only, and the alter, declared by it, lists nothing (``declared_change``);
a listing reconciliation compares the location with the record later, once for many appends, and logs what
no writer named.

Callers run ``capture`` inside the write's transaction after locking the table's row: two writers of one
table are serialised from listing to recording, so neither records a listing older than the other's.

A replication load passes the listing it published (``applied``: relative path -> checksum it verified):
that listing is recorded exactly, nothing is read (files are only listed for their sizes and modification
times), and the event carries its diff from the previous record like any write. Where the load kept the
record and changed less than half of it on a local disk (a new version linking the kept files, or files added
in place), it passes only that change (``applied_files.AppliedDelta``, ``capture_delta``): nothing is listed.

A local file whose modification time is within one clock tick of its listing is recorded without its time
(``settled``): a rewrite of the same size in that tick would keep size and time, so the next write reads
it once more instead of trusting them. Object stores need no such care: their stamps carry the ETag.

Memory: the location's listing is one ``(size, mtime_ns)`` tuple per file, the recorded rows are streamed
and the new files are identified and recorded a batch at a time. A first capture (nothing recorded to
compare) holds not even the listing: it walks the location a page at a time and its event's listing is read
back from the records as the event is written (``_first_capture``), so the source registering a partition of
1,000,000 files holds a page and the compressed event.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from sqlalchemy import Connection

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.formats import listing_digest
from hmsrepl.metastore import listings
from hmsrepl.metastore.applied_files import AppliedDelta
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.database import plan_for_growth
from hmsrepl.metastore.file_capture import (
    describe_known,
    encode_at,
    identify_all,
    stat_listing,
)
from hmsrepl.metastore.listings import FileRecord, ObjectKey, Summary
from hmsrepl.metastore.messages import DataChange
from hmsrepl.metastore.recorded_listing import recorded_listing
from hmsrepl.storage.base import FileIdentity, is_hidden, path_key
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.local_tree import StatIdentity
from hmsrepl.storage.rooted import RootedFileSystem

#: New files identified, pinned and recorded per round (bounds what a huge first capture holds at once).
BATCH = 2_000
#: Files of a location a first capture walks at a time (``_first_capture``): a longer listing is never held.
WALK_PAGE = 10_000
#: Modification time recorded for a file the next write must read again: an applied file that is not on
#: disk, or a local file written within a clock tick of its listing (``settled``).
UNKNOWN_MTIME = -1
#: A listing that reports modification times as float seconds (about 0.25 us apart at today's epoch) may
#: differ by that rounding from a record written in integer nanoseconds; never by more.
MTIME_SLACK_NS = 1_000
SECOND_NS = 1_000_000_000
#: Linux's clock id of the coarse real-time clock (which Python's ``time`` module does not name).
LINUX_REALTIME_COARSE = 5


def _clock_tick_ns() -> int:
    """How far a file's modification time may lag the write it stamps on this machine: the kernel stamps
    writes with its coarse clock, which advances once a tick (1-10 ms); twice its step, at least 10 ms."""
    coarse = getattr(
        time, "CLOCK_REALTIME_COARSE", LINUX_REALTIME_COARSE if sys.platform == "linux" else None
    )
    try:
        step = time.clock_getres(coarse) if coarse is not None else 0.01
    except OSError:  # no coarse clock to ask: the slowest common tick
        step = 0.01
    return max(2 * int(step * SECOND_NS), 10_000_000)


#: See ``_clock_tick_ns``.
CLOCK_TICK_NS = _clock_tick_ns()


def same_stat(now: StatIdentity, known: StatIdentity) -> bool:
    """Whether a file's size and stamp (``FileStatus.stamp``) are the recorded ones (within the float
    rounding).

    A record of an object-store file made before stamps carried the ETag holds the whole second alone; it
    still matches a stamp of that second. It cannot hide an overwrite: one made since is in a later second.
    """
    if now[0] != known[0]:
        return False
    if abs(now[1] - known[1]) <= MTIME_SLACK_NS:
        return True
    return known[1] > 0 and known[1] % SECOND_NS == 0 and now[1] // SECOND_NS == known[1] // SECOND_NS


def settled(stamp_ns: int, listed_at_ns: int) -> bool:
    """Whether any later rewrite of a file listed with modification time ``stamp_ns`` at ``listed_at_ns``
    would show a later time. A file written within one clock tick of its listing is not: a rewrite of the
    same size in that tick keeps both size and time, and a record of them could never see it (the racy-
    clean problem of every stat cache). Whole-second times come from a file system that keeps seconds only.
    """
    grain = SECOND_NS if stamp_ns % SECOND_NS == 0 else CLOCK_TICK_NS
    return stamp_ns + grain <= listed_at_ns


def _settle(stats: Mapping[str, StatIdentity], listed_at_ns: int) -> dict[str, StatIdentity]:
    """The stats to record for new or changed local files: an unsettled file's time is recorded as
    ``UNKNOWN_MTIME``, so the next write reads it once more (a file just written, one read)."""
    return {
        rel: now if settled(now[1], listed_at_ns) else (now[0], UNKNOWN_MTIME) for rel, now in stats.items()
    }


@dataclass
class Captured:
    """A capture's outcome: the event's change and the encoded files the caller names in its event."""

    change: DataChange
    named: list[str] = field(default_factory=list)  # the files the writer named, as recorded now
    excluded: list[str] = field(default_factory=list)  # present but left out of the listing (overwrite)


def relative_names(location: str, uris: Collection[str]) -> dict[str, str]:
    """Relative path below ``location`` of each URI a writer named (any spelling: ``file:/x`` or ``/x``)."""
    root = path_key(location).rstrip("/") + "/"
    out: dict[str, str] = {}
    outside = []
    for uri in uris:
        key = path_key(uri)
        rel = key[len(root) :] if key.startswith(root) else ""
        if not rel or is_hidden(rel) or ".." in rel.split("/"):
            outside.append(uri)
        out[rel] = uri
    if outside:
        raise InvalidObjectError(
            f"files {sorted(outside)[:3]} were not found under '{location}'; write them first"
        )
    return out


def capture(
    conn: Connection,
    cm: ChangeManager,
    key: ObjectKey,
    location: str | None,
    *,
    applied: Mapping[str, str] | None = None,
    named: Collection[str] | None = None,
    only_named: bool = False,
    fresh: bool = False,
) -> Captured:
    """Record ``location``'s data files for ``key`` and return what changed since the last record.

    ``applied``: a load's published listing (relative path -> checksum), recorded exactly without reading.
    ``named``: relative paths of files the writer says it wrote (each must be listed); with ``only_named``
    they become the whole listing and the other files present are returned as ``excluded`` (to recycle).
    ``fresh``: a new object, under an id never used before (the schema never reuses ids): nothing is
    recorded under it, so nothing recorded is read.
    """
    if fresh and applied is not None and not applied and not named:
        # A new object a load published empty: nothing to list (the listing would be dropped for the applied
        # one), read or record. A bootstrap of a table of 100,000 empty partitions lists none of them.
        return Captured(DataChange((), (), True, 0, listing_digest.EMPTY))
    listed_at = time.time_ns()
    fs = cm.files  # the metastore's data roots and cmroot: a location outside them is refused
    if location and applied is None and named is None and not only_named:
        walked = _first_capture(conn, cm, key, location, fresh, listed_at)
        if isinstance(walked, Captured):
            return walked
        current = walked
    else:
        current = stat_listing(fs, location)
    if applied is not None:
        current = _applied_stats(current, applied)
    if fresh and not current and not named:  # a new, empty object: nothing to read or record
        return Captured(DataChange((), (), True, 0, listing_digest.EMPTY))
    wanted = set(named) if named is not None else set()
    missing = sorted(wanted - current.keys())
    if missing:
        raise InvalidObjectError(f"files {missing[:3]} were not found under '{location}'; write them first")
    others: dict[str, StatIdentity] = {}
    if only_named:
        others = {rel: now for rel, now in current.items() if rel not in wanted}
        current = {rel: current[rel] for rel in wanted}
    out = Captured(DataChange())
    removed: list[str] = []
    refreshed: list[FileRecord] = []
    kept_named: list[str] = []  # unchanged files the writer named: their recorded identity is read after
    kept_excluded: list[str] = []  # unchanged files an overwrite leaves out (to recycle): likewise
    restamp: set[str] = set()  # recorded files whose size or time changed (a write mode only)
    survivors = 0
    loc = location or ""
    # A load compares checksums and may refresh a record; a write compares sizes and times only.
    columns = listings.RECORD_COLUMNS if applied is not None else listings.STAT_COLUMNS
    for row in () if fresh else listings.stream_rows(conn, key, columns):
        rel, known = row[0], (row[1], row[2])
        now = current.get(rel)
        if now is None:
            removed.append(rel)
            if rel in others and same_stat(others[rel], known):
                kept_excluded.append(rel)
                del others[rel]
            continue
        if applied is not None:
            if row[3] != applied[rel]:
                continue  # changed: recorded again below
            if not same_stat(now, known) and now[1] != UNKNOWN_MTIME:  # same content, copied anew: refresh
                refreshed.append(FileRecord(rel, *now, row[3], row[4]))
        elif now != known and not same_stat(now, known):  # an exact match, the usual case, needs no call
            restamp.add(rel)  # read below: logged only if its content changed
            continue
        survivors += 1
        del current[rel]
        if rel in wanted:
            kept_named.append(rel)
    if kept_named or kept_excluded:
        records = listings.read_paths(conn, key, [*kept_named, *kept_excluded])
        out.named.extend(encode_at(cm, loc, rel, _identity(records[rel])) for rel in kept_named)
        out.excluded.extend(encode_at(cm, loc, rel, _identity(records[rel])) for rel in kept_excluded)
    if applied is None and loc and fs.traits(loc).writes_in_place:
        current = _settle(current, listed_at)
    summary, unchanged = record_new(
        conn, cm, key, loc, current, applied, wanted, removed, refreshed, restamp, out
    )
    complete = survivors + unchanged == 0
    out.change = DataChange(
        tuple(out.change.added), () if complete else tuple(removed), complete, summary.count, summary.digest
    )
    if others:
        rels = sorted(others)
        out.excluded.extend(
            encode_at(cm, loc, rel, identity)
            for rel, identity in zip(rels, _identify(fs, loc, rels), strict=True)
        )
    if applied is None and not fresh:  # only a write's listing can clear a declared write's mark
        listings.mark_listed(conn, key)
    return out


def _first_capture(
    conn: Connection, cm: ChangeManager, key: ObjectKey, location: str, fresh: bool, listed_at: int
) -> Captured | dict[str, StatIdentity]:
    """The first capture of an object with nothing recorded, a page of its listing at a time, when the
    listing is longer than a page; else the whole listing (one page, or an object with records to compare),
    for ``capture`` to record as any listing.

    Nothing recorded is compared, so each page is identified, pinned and recorded as it is walked
    (``record_new``), and the event's ``added``, the whole new listing in path order, is read back from the
    records when the event is written (``recorded_listing``): a partition of 1,000,000 files is captured in
    the memory of a page, where holding its listing, its sorted paths and its encoded files took some 450 MB.
    """
    pages = cm.files.stat_pages(location, WALK_PAGE)
    first = next(pages, {})
    second = next(pages, None)
    if second is None:
        return first
    if not fresh and listings.summary(conn, key).count:  # records to compare: the listing is held
        for page in itertools.chain((second,), pages):
            first.update(page)
        return first
    in_place = cm.files.traits(location).writes_in_place
    summary: Summary | None = None
    scratch = Captured(DataChange())  # each page's encoded files: pinned and recorded, not kept
    for page in itertools.chain((first, second), pages):
        stats = _settle(page, listed_at) if in_place else page
        summary, _ = record_new(
            conn, cm, key, location, stats, None, (), [], [], (), scratch, summary, new_paths=True
        )  # the listing was empty, and the walk names each file once
    assert summary is not None
    if not fresh:
        listings.mark_listed(conn, key)
    added = recorded_listing(lambda: nullcontext(conn), cm, key, location, summary.count)
    return Captured(DataChange(added, (), True, summary.count, summary.digest))  # type: ignore[arg-type]


def capture_named(
    conn: Connection, cm: ChangeManager, key: ObjectKey, location: str | None, named: Collection[str]
) -> Captured:
    """Record the files a writer names as added (an INSERT that replaces nothing), looking at those only.

    Spark's Hive client fires the INSERT of an append to a partition before it alters the partition (and
    after it alters a table): stating the named files and reading their records finds the new ones (or
    tells that an earlier alter recorded them), without listing a partition of 10,000 files. What else
    changed at the location (files dropped or removed by hand) is left to the next full capture, which logs
    it then: the listing reconciliation this marks the object for (``listings.mark_unlisted``), or any
    earlier ALTER that lists or overwrite. The count and digest are the recorded listing's, so a reader
    applying the changes in order still holds exactly what the metastore recorded. On an object store each
    named file costs one HEAD, whatever the partition holds.
    """
    if not location:
        return capture(conn, cm, key, location, named=named)
    listed_at = time.time_ns()
    stats = _named_stats(cm.files, location, named)
    missing = sorted(set(named) - stats.keys())
    if missing:
        raise InvalidObjectError(f"files {missing[:3]} were not found under '{location}'; write them first")
    out = Captured(DataChange())
    before = listings.summary(conn, key)
    known = listings.read_paths(conn, key, stats)
    for rel, record in known.items():
        if same_stat(stats[rel], (record.size, record.mtime_ns)):
            out.named.append(encode_at(cm, location, rel, _identity(record)))
            del stats[rel]
    replaced = len(known) - len(out.named)  # recorded files the writer rewrote
    if not stats:  # nothing new: an empty change, nothing written
        out.change = _no_change(before)
        return out
    rewritten = known.keys() & stats.keys()
    if cm.files.traits(location).writes_in_place:
        stats = _settle(stats, listed_at)
    summary, unchanged = record_new(
        conn, cm, key, location, stats, None, set(named), [], [], rewritten, out, before
    )
    complete = before.count - replaced + unchanged == 0
    out.change = DataChange(tuple(out.change.added), (), complete, summary.count, summary.digest)
    listings.mark_unlisted(conn, key, listed_at)  # what the writer did not name waits for a listing
    return out


def declared_change(conn: Connection, key: ObjectKey) -> DataChange:
    """The change a client's write logs when its INSERT already recorded its files (Hive's loadPartition
    fires the INSERT, then alters the partition): none, and nothing listed.

    The location is not listed again: what the writer did not name (a file dropped there by hand) is
    found by the listing reconciliation (``CatalogService.reconcile_listing``), which the INSERT's
    ``mark_unlisted`` scheduled, and logged in an event of its own.
    """
    return _no_change(listings.summary(conn, key))


def _no_change(recorded: Summary) -> DataChange:
    return DataChange((), (), recorded.count == 0, recorded.count, recorded.digest)


def _named_stats(fs: RootedFileSystem, location: str, named: Collection[str]) -> dict[str, StatIdentity]:
    """Size and stamp of each named file that is there: one ``stat`` each on a file system, one HEAD each on
    an object store (never a listing of the location)."""
    return fs.stat_named(location, named)


def still_recorded(record: FileRecord | None, now: StatIdentity) -> FileIdentity | None:
    """The recorded identity of a file whose size and modification time are still the recorded ones."""
    if record is None or not same_stat(now, (record.size, record.mtime_ns)):
        return None
    return FileIdentity(record.checksum, record.version_id)


def describe_recorded(
    location: str | None,
    cm: ChangeManager,
    records: Mapping[str, FileRecord],
    files: RootedFileSystem | None = None,
) -> list[str]:
    """``describe_files`` of a location whose files are recorded (relative path -> record): a file is read
    only when it is not recorded or its size or modification time changed since (``files``: as for
    ``describe_known``)."""
    return describe_known(location, cm, lambda rel, now: still_recorded(records.get(rel), now), files)


def capture_delta(
    conn: Connection, cm: ChangeManager, key: ObjectKey, location: str | None, delta: AppliedDelta
) -> Captured:
    """Record a load's change to a location whose record it kept, without listing the location: the
    records of ``delta`` (read back for their paths only) and its removals, O(files changed).

    Logged as added are the records whose checksum is new (a file copied again with the same content is
    recorded, not logged), in path order. Staged files (added in place) are pinned into cmroot by the load's
    publish intent once they have their names; the others are pinned here, as ``capture`` pins.
    """
    loc = location or ""
    records = sorted(delta.records, key=lambda record: record.rel_path)
    known = listings.read_paths(conn, key, [record.rel_path for record in records])
    new = [r for r in records if r.rel_path not in known or known[r.rel_path].checksum != r.checksum]
    changed = [r for r in records if known.get(r.rel_path) != r]
    after = listings.apply(conn, key, changed, delta.removed)
    encoded = tuple(encode_at(cm, loc, record.rel_path, _identity(record)) for record in new)
    if not delta.staged:
        cm.pin(encoded)
    complete = after.count == len(new)  # nothing recorded before survives: the change is the listing
    return Captured(
        DataChange(encoded, () if complete else tuple(delta.removed), complete, after.count, after.digest)
    )


def _applied_stats(disk: Mapping[str, StatIdentity], applied: Mapping[str, str]) -> dict[str, StatIdentity]:
    """The applied listing's files with their stat on disk (or the size their checksum records)."""
    return {
        rel: disk.get(rel) or (checksum_size(checksum), UNKNOWN_MTIME)
        for rel, checksum in applied.items()
        if not is_hidden(rel)
    }


def record_new(
    conn: Connection,
    cm: ChangeManager,
    key: ObjectKey,
    location: str,
    fresh: Mapping[str, StatIdentity],
    applied: Mapping[str, str] | None,
    wanted: Collection[str],
    removed: list[str],
    refreshed: list[FileRecord],
    restamp: Collection[str],
    out: Captured,
    before: Summary | None = None,
    *,
    new_paths: bool = False,
    pin: bool = True,
) -> tuple[Summary, int]:
    """Identify, pin and record the new or changed files a batch at a time; the first batch also writes
    the removals. Returns the listing's summary after the change, and how many files of ``restamp`` (a
    new size or time) kept their recorded checksum: those are recorded anew but not logged (touched, or
    rewritten with the same bytes), so the event carries only files whose content is new. ``before``: the
    recorded summary, when the caller read it already. ``new_paths``: none of ``fresh`` is recorded
    (``listings.apply``'s). ``pin``: False when the caller pinned the files already."""
    rels = sorted(fresh)
    added: list[str] = []
    unchanged = 0
    summary = before
    if len(rels) > BATCH and not new_paths:  # the listing grows under its look-ups (``_replaced``)
        plan_for_growth(conn)
    for start in range(0, max(len(rels), 1), BATCH):
        batch = rels[start : start + BATCH]
        identities = _applied_identities(cm.files, location, batch, applied) if applied is not None else None
        if identities is None:
            identities = _identify(cm.files, location, batch)
        records = [
            FileRecord(rel, *fresh[rel], identity.checksum, identity.version_id)
            for rel, identity in zip(batch, identities, strict=True)
        ]
        encoded = [
            encode_at(cm, location, rel, identity) for rel, identity in zip(batch, identities, strict=True)
        ]
        if pin:
            cm.pin(encoded)
        known = listings.read_paths(conn, key, [rel for rel in batch if rel in restamp]) if restamp else {}
        same = {
            rel
            for rel, identity in zip(batch, identities, strict=True)
            if rel in known and known[rel].checksum == identity.checksum
        }
        unchanged += len(same)
        added.extend(uri for rel, uri in zip(batch, encoded, strict=True) if rel not in same)
        out.named.extend(uri for rel, uri in zip(batch, encoded, strict=True) if rel in wanted)
        first = start == 0
        records = [r for r in records if known.get(r.rel_path) != r]  # read again, still as recorded
        summary = listings.apply(
            conn,
            key,
            [*records, *(refreshed if first else ())],
            removed if first else (),
            before=summary,
            new_paths=new_paths,
        )
    out.change = DataChange(tuple(added))
    assert summary is not None
    return summary, unchanged


def _identity(record: FileRecord) -> FileIdentity:
    return FileIdentity(record.checksum, record.version_id)


def _identify(fs: RootedFileSystem, location: str, rels: Sequence[str]) -> list[FileIdentity]:
    if not rels:
        return []
    return identify_all(fs, [f"{location.rstrip('/')}/{rel}" for rel in rels])


def _applied_identities(
    fs: RootedFileSystem, location: str, rels: Sequence[str], applied: Mapping[str, str]
) -> list[FileIdentity] | None:
    """A load's files carry the checksums it verified; only a versioned store must still say the version."""
    if rels and not fs.traits(location).writes_in_place:  # an object store: versions to look up
        return None
    return [FileIdentity(applied[rel]) for rel in rels]
