"""Recording a new object's listing as a load published it a page at a time (``ListingPages``).

A bootstrap load of a partition of 1,000,000 files publishes its version directory page by page from the
dump's ``_files``. Recording it as ``capture`` records a load's listing would list the whole directory (a dict
of a million stats, some 190 MB) and hold the replica's encoded listing for the event (some 180 MB more).
Here each page is stated (one ``stat`` a file, no listing), pinned and recorded, and the event's listing is a
``LazyArray`` (``new_version_listing``) made again from the pages when the event is written, a piece at a time
(``events.encode_message``): memory follows one page, whatever the object holds.

Only a new object on a store that writes in place qualifies (the caller's ``fresh``): nothing recorded is
compared, and each file's identity is the checksum the load verified (an object store's version ids would
have to be looked up and held until the event is written).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Connection

from hmsrepl.formats import listing_digest
from hmsrepl.formats.json_text import LazyArray
from hmsrepl.metastore.applied_files import ListingPages, applied_checksums
from hmsrepl.metastore.capture import UNKNOWN_MTIME, Captured, record_new
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import encode_at
from hmsrepl.metastore.listings import ObjectKey, Summary
from hmsrepl.metastore.messages import DataChange
from hmsrepl.storage.base import FileIdentity
from hmsrepl.storage.checksum import checksum_size


def pages_qualify(cm: ChangeManager, location: str | None, fresh: bool) -> bool:
    """Whether ``capture_pages`` may record a load's paged listing at ``location``: a new object on a store
    that writes in place (elsewhere the listing is held and captured as any load's)."""
    return fresh and bool(location) and cm.files.traits(location or "").writes_in_place


def capture_pages(
    conn: Connection, cm: ChangeManager, key: ObjectKey, location: str, pages: ListingPages
) -> Captured:
    """Record the listing a load published at ``location`` for the new object ``key``, a page at a time.

    Each page's files are stated by name (a file not there is recorded with ``UNKNOWN_MTIME``, read by the next
    write, as ``capture`` records one), pinned (unless the load pinned them as it staged them:
    ``ListingPages.pinned``) and recorded with the checksums the load verified. The change
    is complete; its ``added`` is the replica's listing, made again from the pages when the event is written.
    """
    summary: Summary | None = None
    scratch = Captured(DataChange())  # each page's encoded files: pinned and recorded, not kept
    for page in pages:
        applied = applied_checksums(page)
        stats = cm.files.stat_named(location, applied)
        current = {
            rel: stats.get(rel) or (checksum_size(checksum), UNKNOWN_MTIME)
            for rel, checksum in applied.items()
        }
        summary, _ = record_new(
            conn,
            cm,
            key,
            location,
            current,
            applied,
            (),
            [],
            [],
            (),
            scratch,
            summary,
            new_paths=True,  # a new object's, whose validated listing names each file once
            pin=not pages.pinned,
        )
    if summary is None:  # an empty listing: nothing recorded
        return Captured(DataChange((), (), True, 0, listing_digest.EMPTY))
    added = new_version_listing(cm, location, pages, summary.count)
    return Captured(DataChange(added, (), True, summary.count, summary.digest))  # type: ignore[arg-type]


def new_version_listing(cm: ChangeManager, location: str, pages: ListingPages, count: int) -> LazyArray:
    """The replica's encoded files of a version published from ``pages`` (its event's ``added``), each made
    as ``capture_pages`` recorded and pinned it, when the event is written: never held."""

    def make() -> Iterator[str]:
        for page in pages:
            for rel, checksum in applied_checksums(page).items():
                yield encode_at(cm, location, rel, FileIdentity(checksum))

    return LazyArray(make, count)
