"""Version directories of a replica: how a load publishes each object's data (the writer's data job).

Data follows the pseudo-snapshot in the event, and is published by *location flip*: an object whose data
changes gets a new version directory (``<logical location>.hmsrepl-v<event id>``, a sibling no metadata names
yet) that is made to hold exactly the listed files (unchanged files hard-linked from the current directory,
server-side copied on S3; new ones copied, checksum-verified, under hidden staging names), and the object's
location is switched to it by the same metadata call, in the load batch's database transaction, which also
advances ``repl.last.id``. Live directories are never written: a reader that took a table's or partition's
metadata and then lists its location sees one committed state. Directories a batch stops naming (older
versions, dropped objects) are handed to ``leftovers.Retirer`` and removed only after the commit and a grace
period; a failed batch's new directories are removed before its transaction ends.

Why not keep unchanged files in place and add only the new ones: a reader lists a location recursively, so
a file added to a live directory is visible at once, before the metadata commits (and after a kill); an
overwrite must also hide the old files at the same instant. One directory per version is the only layout
where the metadata switch alone decides what readers see for any change. Its cost is O(files) links per
changed object, not a data copy (local disks); on S3 each unchanged file costs a server-side copy.

The exception is the most common change of all, one file added (an append, a streaming micro-batch): one
rename makes one whole file appear, so a reader sees the listing before the change or after it, never a
part. Such a file is copied under its hidden staged name into the object's current directory and named in
a publish intent (``metastore.intents``) in the batch's transaction; the intent renames it after the
commit, or housekeeping does after a crash. Readers never see it before its metadata; for the moment
between the commit and the rename they see the state before it. Several such appends to one object in a
batch are renamed in the order they were written, so a reader sees the listing as of one of them, each a
listing the source had (one append of several files must appear at once and takes a new version). On an
object store the "rename" is a server-side copy of the one file onto its key (which S3 replaces whole) and
a delete of the staged one. The load then costs what was added, whatever the object holds: the new files
copied, not every file it keeps.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats import listing_digest
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore, listings
from hmsrepl.metastore.applied_files import ListingPages
from hmsrepl.metastore.file_capture import count_data_files, describe_files, encode_at, list_data_files
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.messages import DataChange, checksum_of, relative_path
from hmsrepl.metastore.model import Partition
from hmsrepl.replication import standby
from hmsrepl.replication.apply_stats import ApplyStats
from hmsrepl.replication.dir_processes import DirectoriesAhead
from hmsrepl.replication.failures import fault_point
from hmsrepl.replication.filecopy import (
    BelowAny,
    adopt_staged_copy,
    below_any,
    copy_verified,
    link_file,
    logical_location,
    publish_all,
    publish_staged_copy,
    remove_staging_leftovers,
    standby_location,
    versioned_location,
)
from hmsrepl.replication.leftovers import Retirement
from hmsrepl.replication.replica_files import (
    AddedOneByOne,
    HeldListing,
    LoadedChange,
    Published,
    drift,
    read_record,
    record,
    scan,
    stamp_of,
    unchanged,
)
from hmsrepl.replication.staged_copies import StagedCopies, add_names, names_digest
from hmsrepl.storage.base import FileIdentity, join_uri, parent_uri, relative_to
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.directory_copies import OpenDirectories
from hmsrepl.storage.local import sync_uris
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import staging_name

log = logging.getLogger(__name__)


# A replaced version keeping at least this many files is parked as its object's standby once its readers'
# grace period passed (``replication.standby``), for the object's next new version to start from: below it,
# linking every kept file again costs less than a directory kept beside the object.
STANDBY_MIN_FILES = 32
STANDBY_MIN_FILES_ENV = "HMSREPL_REPL_STANDBY_MIN_FILES"
# A directory asked this many times in one batch whether a copier's staging area lies in it is listed once and
# answered from the listing (``_staging_area_exists``): a bootstrap asks once per partition of a table, an
# incremental batch a few times, where one check per name costs less than listing a big table's directory.
LIST_AFTER_ASKS = 64


def standby_min_files() -> int:
    """``HMSREPL_REPL_STANDBY_MIN_FILES``, else ``STANDBY_MIN_FILES``."""
    value = os.environ.get(STANDBY_MIN_FILES_ENV)
    try:
        return int(value) if value else STANDBY_MIN_FILES
    except ValueError:
        raise HmsReplError(
            f"{STANDBY_MIN_FILES_ENV}='{value}' is not a whole number of files; set it to one "
            f"(default {STANDBY_MIN_FILES}) or unset it"
        ) from None


#: What an object with no current version holds (``_first_version``): nothing, never written to.
_NO_FILES: Mapping[str, str] = types.MappingProxyType({})


class ReplicaDriftError(HmsReplError):
    """A replica file changed behind the load's back and cannot be fetched again from the source."""


class VersionPublisher:
    """Makes the directories a load batch names: each object's data published by location flip or added in
    place, what the batch stops naming retired after its commit, and its renames made durable."""

    def __init__(
        self, target: Metastore, *, source_cmroot: str, copy_data: bool = True, stats: ApplyStats
    ) -> None:
        self.target = target
        self.catalog = target.catalog
        self.source_cmroot = source_cmroot.rstrip("/")
        self.copy_data = copy_data
        self.stats = stats
        self._unsynced_dirs: set[str] = set()  # directories with renames not yet made durable
        # The event being applied names the version directories it makes (set by the load per event).
        self.version = 0
        # version directories made in the current batch (not yet named), in order; a dict for O(1) membership
        self._created: dict[str, None] = {}
        self._retire: list[Retirement] = []  # directories the current batch stops naming
        # Files added in place this batch (final URI -> the event that wrote it, encoded), staged until a
        # rename after the commit, which goes in event order.
        self._in_place: dict[str, tuple[int, str]] = {}
        # The relative paths added in place this batch, by the location of the object they were added to.
        self._added_in_place: dict[str, set[str]] = {}
        # Plans of in-place additions checked together for a table's partitions, by current location.
        self._planned: dict[str, tuple[dict[str, str], dict[str, str], listings.Summary]] = {}
        # The event that wrote each file a one-file append of the batch adds (encoded source URI -> event
        # id; set by the load per batch): files added in place are renamed in this order.
        self.written_at: Mapping[str, int] = {}
        # Copies the load staged and verified before its first change (``prestage``), by planned target:
        # counted as the copies they are (from cmroot or not), not as a copier's prefetch.
        self.copied_ahead = StagedCopies()
        # A ``batch`` view of the replica's files shared by the objects of one page (``page``), else None.
        self._page_view: RootedFileSystem | None = None
        # Empty new versions made by the directory process while the batch goes on (``dir_processes``).
        self._dirs = DirectoriesAhead(target.cm.files.roots, target.cm.files.purpose)
        # Per directory, this batch's questions about staging areas in it, and its listing once made
        # (``_staging_area_exists``; None: the store lists no names).
        self._asked: dict[str, int] = {}
        self._listed: dict[str, frozenset[str] | None] = {}

    @contextlib.contextmanager
    def page(self) -> Iterator[None]:
        """Publish the objects of one page (a ``put_partitions`` call) through one ``batch`` view of the
        replica's files: their table's directory is resolved once for the page, not once per partition.
        Every path is still checked; the view is dropped with the page, never kept across pages."""
        outer = self._page_view
        self._page_view = outer or self.target.cm.files.batch()
        try:
            yield
        finally:
            self._page_view = outer

    def _files_view(self) -> RootedFileSystem:
        """The page's ``batch`` view when one is open, else one for this object alone."""
        return self._page_view or self.target.cm.files.batch()

    def all_in_place(self, writes: Sequence[PartitionWrite]) -> bool:
        """Whether a table's partition writes may be added in place: one data change always may (it
        decides alone), several only if every one of them can be (see ``event_batches.in_place_tables``).

        Files added in place appear after the batch's commit; an object given a new version switches at
        the commit. Were some partitions of a table added in place and others not, a reader could see a
        later partition's new files without an earlier one's. Each plan is kept for the publish that
        follows, so the two cannot disagree; nested partition directories are not added together in place
        (one's staged copies would lie below the other).
        """
        if not self.copy_data:
            return True
        writes = [w for w in writes if w.change is not None and w.part.sd.location]
        if any(isinstance(w.change, ListingPages) for w in writes):  # a new object's: a new version
            return False
        if len(writes) <= 1:
            return True
        locations = sorted((w.current.sd.location or "").rstrip("/") + "/" for w in writes if w.current)
        if len(locations) != len(writes) or any(b.startswith(a) for a, b in itertools.pairwise(locations)):
            return False
        plans = {}
        for write in writes:
            assert write.current is not None and isinstance(write.change, DataChange)
            current, logical = write.current.sd.location, write.part.sd.location or ""
            plan = self._in_place_plan(current, logical, write.change, write.key, write.what)
            if plan is None:
                return False
            plans[current or ""] = plan
        self._planned.update(plans)
        return True

    def record_version(self, key: ObjectKey, published: Published, *, logged: bool) -> None:
        """Record what a version holds, in the batch's transaction (a failed batch records nothing).

        A version the catalog's call ``logged`` is recorded already: that call was given what the version
        applied (``Published.applied``) and wrote exactly these records, from its change alone
        (``as_delta``: ``capture_delta``) or from its whole listing (a new object, a bootstrap: ``capture``
        with the applied listing). Writing them again cost a second row write per file."""
        if logged:
            return
        if published.replace or published.changed_files or published.removed:
            with self.target.events.transaction() as tx:
                record(tx.conn, key, published)

    # -- data: location flips ------------------------------------------------------------------------------
    def location_for(
        self,
        current: str | None,
        logical: str | None,
        change: LoadedChange | None,
        source_location: str | None,
        key: ObjectKey | None,
        what: str,
        *,
        in_place: bool = True,
        from_standby: bool = True,
    ) -> tuple[str | None, Published | None]:
        """The location to record for an object: a new version with ``change`` applied, or the one it has.

        ``change`` None is a metadata-only change: the object keeps its directory (unless the source moved
        the object elsewhere, then it names the new logical location). ``from_standby`` False: a new version
        is built from nothing (an Iceberg table's, whose hidden metadata the batch rewrites in it).
        """
        if change is not None and logical and self.copy_data:
            published = self.publish_version(
                current,
                logical,
                change,
                source_location,
                key,
                what,
                in_place=in_place,
                from_standby=from_standby,
            )
            return published.location, published
        if current and logical and logical_location(current) == logical.rstrip("/"):
            return current, None
        return logical, None

    def _new_version(self, logical: str, current: str | None) -> str:
        attempt = 0
        while True:
            candidate = versioned_location(logical, self.version, attempt)
            if candidate != (current or "").rstrip("/") and candidate not in self._created:
                self.copied_ahead.claim(candidate)  # copies staged in it are this version's now
                return candidate
            attempt += 1

    def publish_version(
        self,
        current: str | None,
        logical: str,
        change: LoadedChange,
        source_location: str | None,
        key: ObjectKey | None = None,
        what: str = "",
        *,
        in_place: bool = True,
        from_standby: bool = True,
    ) -> Published:
        """A directory holding the object's listing after ``change``: ``current`` if it already does, else a
        new version.

        The listing before the change is the replica's record of the object (``replica_files``; without one,
        ``current`` is listed and read once). The change's count and digest, when it has them, must match the
        result (else an event is missing: one-line error, nothing of the batch stays). A new version reuses
        what an interrupted attempt left in it, links the files ``current`` holds with the right checksum
        (after a size and modification-time check against the record, no read), copies the rest
        (checksum-verified, original location, recorded version, then cmroot), and publishes the copies inside
        it: nothing a reader can see changes until the caller records the returned location. A change that
        adds one file is instead added to ``current`` (``_publish_in_place``) unless ``in_place`` is False;
        one that adds several starts from the object's standby when it has one (``_publish_from_standby``).
        """
        if isinstance(change, ListingPages):  # a new object's listing from the dump, in pages
            if not current and self._files_view().traits(logical).hard_links:
                return self._publish_pages(logical, change, source_location)
            change = change.as_change()  # compared with what the object holds: held whole
        if not current:
            return self._first_version(logical, change, source_location, what)
        added_in_place = (
            self._publish_in_place(current, logical, change, source_location, key, what) if in_place else None
        )
        if added_in_place is not None:
            return added_in_place
        if from_standby:
            built = self._publish_from_standby(current, logical, change, source_location, key, what)
            if built is not None:
                return built
        fs = self._files_view()  # this version's directories resolved once, not per file
        held = self._held(current, key)
        wanted = change.apply(held.files)
        if not change.complete:  # a complete change is its own listing: only deltas can miss an event
            change.check(wanted, what or logical)
        kept = unchanged(held, wanted)
        stamps: dict[str, int] = {} if held.recorded else held.stamps
        drifted: set[str] = set()
        staged_here = self._staged_below(current)  # added in place earlier in this batch: not there yet
        if current and held.recorded and kept:
            drifted, restamped = drift(fs, current, held, kept - staged_here.keys())
            stamps.update(restamped)
            self.stats.files_reverified += len(restamped) + len(drifted)
            for rel in sorted(drifted):
                log.warning("%s: '%s' changed on the replica behind its back; copying it again", what, rel)
            kept -= drifted
        removed = held.files.keys() - wanted.keys()  # a set of the held paths only, not of the wanted ones
        if current and not drifted and len(kept) == len(wanted) == len(held.files):
            self._retire_staging_area(logical, current)  # already this state (a re-run, or no file changed)
            return Published(current, wanted, stamps, removed, not held.recorded)
        return self._fill_version(
            fs,
            current,
            logical,
            wanted,
            source_location,
            what,
            held=held.files,
            replace=not held.recorded,
            kept=kept,
            stamps=stamps,
            staged_here=staged_here,
            removed=removed,
        )

    def _first_version(
        self, logical: str, change: DataChange, source_location: str | None, what: str
    ) -> Published:
        """``publish_version`` of an object with no current version (a bootstrap's every partition): nothing
        is held, so nothing can be added in place, built from a standby, kept, linked or found drifted; its
        record is not read (an object without a location has none). The version is made as any other
        (``_fill_version``): same directory, same copies, same fault points, same ``Published``."""
        wanted = change.apply({})
        if not change.complete:  # a delta onto nothing: its count and digest still tell a missing event
            change.check(wanted, what or logical)
        return self._fill_version(self._files_view(), None, logical, wanted, source_location, what)

    def _fill_version(
        self,
        fs: RootedFileSystem,
        current: str | None,
        logical: str,
        wanted: dict[str, str],
        source_location: str | None,
        what: str,
        *,
        held: Mapping[str, str] = _NO_FILES,
        replace: bool = False,
        kept: frozenset[str] | set[str] = frozenset(),
        stamps: dict[str, int] | None = None,
        staged_here: Mapping[str, str] = _NO_FILES,
        removed: set[str] | None = None,
    ) -> Published:
        """A new version of ``logical`` holding ``wanted`` (``publish_version``'s directory work): ``kept``
        linked from ``current`` (or from their copies ``staged_here``, added in place earlier in the batch),
        the rest copied in. ``held``: what ``current`` holds (its record, or a listing read just now:
        ``replace``); ``stamps``: the record's new stamps so far; ``removed``: held paths ``wanted`` drops.
        The defaults are a new object's (``_first_version``). ``fs``: the page's view."""
        stamps = {} if stamps is None else stamps
        removed = set() if removed is None else removed
        new = self._new_version(logical, current)
        traits = fs.traits(new)
        # An empty version (nothing to link or copy in) on a local disk may be made by the directory process,
        # before the batch commits (``settle_directories``); a directory that was not there holds nothing: only
        # one an interrupted attempt left is listed (a store without directories has no such answer: its
        # prefix is always listed).
        local = traits.has_directories and traits.cpu_bound  # HDFS waits on its server: no process needed
        ahead = not wanted and local and self._page_view is not None and self._dirs.take(new)
        made_here = ahead or (traits.has_directories and fs.make_directory(new))
        if not traits.has_directories:
            fs.makedirs(new)
        self._created[new] = None
        present = {} if made_here else {relative_to(s.uri, new): s for s in list_data_files(fs, new)}
        for rel, status in present.items():  # an interrupted attempt's
            if rel not in wanted or rel in kept:
                fs.delete(status.uri)
        allowed = below_any(source_location, self.source_cmroot) if wanted.keys() - kept else None
        to_publish = []
        copied = []  # the listing's own names (no new string a file): stamped only if the record needs it
        for rel, encoded in wanted.items():
            target_uri = join_uri(new, rel)
            if rel in kept:
                link_file(fs, staged_here.get(rel) or join_uri(current or "", rel), target_uri)
                fault_point()
                continue
            if rel in present and _checksum_matches(fs, present[rel], encoded):
                stamps[rel] = present[rel].stamp
                continue
            # From the event unless it is the very entry of the record (``apply`` keeps those): no set of the
            # event's paths (a bootstrap's partition of 1,000,000 files built one of a million new strings).
            from_event = encoded is not held.get(rel)
            source = encoded if from_event else self._source_copy(encoded, source_location, what)
            assert allowed is not None  # a file not kept is copied: computed above
            # A copy staged ahead is renamed straight to its name in this unnamed directory; others wait.
            if not self._copy_in(
                source, target_uri, allowed, prefetched_at=join_uri(logical, rel), fs=fs, new=True
            ):
                to_publish.append(target_uri)
            copied.append(rel)
            fault_point()
        publish_all(fs, to_publish, durable=False)  # made durable with the batch, in set_last_id
        fault_point()
        if traits.hard_links:
            self._unsynced_dirs.add(new)
        else:  # a server-side copy is a new object: every file of the version gets a new stamp
            stamps.update((relative_to(s.uri, new), s.stamp) for s in list_data_files(fs, new))
            copied = []
        self.stats.files_kept += len(kept)
        if current:
            parked = len(kept) >= standby_min_files() and 2 * len(kept) >= len(wanted) and traits.hard_links
            self._retire.append(
                Retirement(current, frozenset(kept), standby=standby_location(logical) if parked else "")
            )
            self.stats.files_removed += len(removed)
        self._retire_staging_area(logical, current)
        return Published(
            new,
            wanted,
            stamps,
            removed,
            replace,
            unstamped=copied,
            stamp=functools.partial(
                _stamp_below, self.target.cm.files, new
            ),  # not the page's view: read later
        )

    def _publish_pages(self, logical: str, pages: ListingPages, source_location: str | None) -> Published:
        """A new object's first version, filled a page of its listing at a time (no dict of its files: a
        bootstrap's partition of 1,000,000 files held one of some 100 MB): each page's files are copied (or a
        copy staged ahead renamed in) and published before the next page is read. What an interrupted attempt
        left in the version is stated once: a file of the listing with the listed size and checksum is kept,
        any other is removed. The version's record and event are written from the same pages
        (``page_capture``); nothing a reader can see changes until the caller records its location.
        """
        fs = self._files_view()
        new = self._new_version(logical, None)
        # Copies staged ahead straight into this version (``CopyTask.in_place``) are taken where they are; in
        # a version the staging made, nothing else can be there to look for.
        placed = self.copied_ahead.placed_in(new)
        made_now = placed or fs.make_directory(new)
        left = {} if made_now else fs.stat_tree(new)  # an interrupted attempt's files
        self._created[new] = None
        allowed = below_any(source_location, self.source_cmroot)
        whole, others = self._take_placed(new, pages) if placed else (False, -1)
        for page in pages if not whole or others else ():
            to_publish = []
            # The staging area and the version are opened and checked once a page, not per rename.
            with contextlib.closing(OpenDirectories()) as opened:
                for encoded in page:
                    rel = relative_path(encoded)
                    # Only a file directly in the version is staged in it (``CopyPlanner.pages``).
                    in_version = placed is not None and "/" not in rel
                    if whole and in_version:
                        continue  # taken with the others at once
                    target_uri = join_uri(new, rel)
                    stat = left.pop(rel, None)
                    if (
                        placed is None
                        and stat is not None
                        and _same_content(fs, target_uri, stat[0], encoded)
                    ):
                        continue  # a copy staged ahead in this version is taken below: not read again
                    prefetched_at = target_uri if in_version else join_uri(logical, rel)
                    if not self._copy_in(
                        encoded,
                        target_uri,
                        allowed,
                        prefetched_at=prefetched_at,
                        fs=fs,
                        new=True,
                        opened=opened,
                    ):
                        to_publish.append(target_uri)
                    fault_point()
            publish_all(fs, to_publish, durable=False)  # made durable with the batch, in set_last_id
            fault_point()
        for rel in left:  # not in the listing
            fs.delete(join_uri(new, rel))
        self._unsynced_dirs.add(new)
        self._retire_staging_area(logical, None)
        return Published(
            new, pages, {}, set(), True, stamp=functools.partial(_stamp_below, self.target.cm.files, new)
        )

    def _take_placed(self, new: str, pages: ListingPages) -> tuple[bool, int]:
        """Take every copy the staging placed in the new version ``new`` (a directory it made) at once, when
        they are exactly the listing's files directly in it, counted: whether they were, and how many of the
        listing's files lie in subdirectories (staged apart, each taken by name). A partition of 1,000,000
        files looked each one up (``StagedCopies.take``): here one walk of the listing digests its names.
        When the staging pinned them all and the listing has nothing else, ``pages`` says so: its record
        pins nothing again."""
        files = others = 0
        digest = names_digest()
        for page in pages:
            names = [rel for rel in map(relative_path, page) if "/" not in rel]
            files, others = files + len(names), others + len(page) - len(names)
            add_names(digest, names)
            fault_point()
        taken = self.copied_ahead.take_placed(new, files, digest.digest())
        if taken is None:
            return False, others
        totals, pinned = taken
        self.stats.add(totals)
        pages.pinned = pinned and not others  # every file of the version pinned as it was staged
        return True, others

    def _publish_in_place(
        self,
        current: str | None,
        logical: str,
        change: DataChange,
        source_location: str | None,
        key: ObjectKey | None,
        what: str,
    ) -> Published | None:
        """A change that adds files one by one, published in the object's current directory: None if it is
        not one.

        One rename makes one file appear whole, so a reader listing the directory sees the listing before
        the change or after it, never a part of a step. A change of one file qualifies, and so does a batch's
        run of them on one object (``AddedOneByOne``, or an object already added to in place this batch):
        the files are renamed in step order, so a reader sees the listing as of one step or another, each a
        listing the source had. The files are copied under their hidden staged names and named in the
        batch's publish intent (``owe_publishes``), which renames them once the batch has committed (after a
        crash, housekeeping does), so readers never see one before its metadata. The kept files are neither
        read nor linked, only counted by name (a file added or removed behind the replica's back takes a new
        version, which holds exactly the listing), and the record is read for the new paths and its summary
        only: the load costs what was added whatever the object holds (on an object store the count lists
        the object's keys, 1,000 a request, and nothing is copied but the new files). Everything else (a step
        of several files, a file replaced or removed, no record yet) takes a new version.
        """
        plan = self._planned.pop(current or "", None) or self._in_place_plan(
            current, logical, change, key, what
        )
        if plan is None:
            return None
        assert current is not None
        new, checksums, before = plan
        allowed = below_any(source_location, self.source_cmroot)
        files: dict[str, str] = {}
        stamps: dict[str, int] = {}
        for rel, encoded in new.items():  # in step order: the publish intent renames them in this order
            target_uri = join_uri(current, rel)
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            fault_point()
            staged = staging_name(target_uri)
            files[rel] = encode_at(self.target.cm, current, rel, FileIdentity(checksums[rel]))
            self._in_place[target_uri] = (self.written_at.get(encoded, self.version), files[rel])
            stamps[rel] = stamp_of(self.target.cm.files, staged)
            self._unsynced_dirs.add(parent_uri(staged))  # durable before the commit
        self._added_in_place.setdefault(current, set()).update(new)
        self.stats.files_kept += before.count
        self._retire_staging_area(logical, current)
        return Published(current, files, stamps, set(), False, in_place=True)

    def _in_place_plan(
        self, current: str | None, logical: str, change: DataChange, key: ObjectKey | None, what: str
    ) -> tuple[dict[str, str], dict[str, str], listings.Summary] | None:
        """Whether ``change`` can be added in place to ``current`` (``_publish_in_place``): one file, or
        files added one by one; then its ``_addition_plan``."""
        if len(change.added) > 1 and not isinstance(change, AddedOneByOne):
            return None
        return self._addition_plan(current, logical, change, key, what)

    def _addition_plan(
        self,
        current: str | None,
        logical: str,
        change: DataChange,
        key: ObjectKey | None,
        what: str,
        held: int | None = None,
    ) -> tuple[dict[str, str], dict[str, str], listings.Summary] | None:
        """Whether ``change`` only adds new files to what ``current`` holds as recorded, and if so its new
        files (relative path -> encoded URI, in step order), their checksums and the record's summary before.
        Reads the record's summary and the new paths, and counts the directory's data files by name (``held``:
        the count, when the caller listed them)."""
        if not current or key is None or current in self._created:
            return None
        if change.complete or change.removed or not change.added:
            return None
        earlier = self._added_in_place.get(current, set())
        if set(self._staged_below(current)) != earlier:  # another object's staged copies below this one
            return None
        if logical_location(current) != logical.rstrip("/"):
            return None
        new = {relative_path(encoded): encoded for encoded in change.added}
        checksums = {rel: checksum_of(encoded) for rel, encoded in new.items()}
        if not all(checksums.values()) or new.keys() & earlier:
            return None
        with self.target.events.reader() as conn:
            before = listings.summary(conn, key)
            if before.count == 0 or listings.read_paths(conn, key, new):
                return None
        # Files added or removed behind the replica's back: a new version holds exactly the listing.
        present = count_data_files(self.target.cm.files, current) if held is None else held
        if present + len(earlier) != before.count:
            return None
        after = listing_digest.combine(before.digest, checksums.items())
        change.check_summary(before.count + len(new), after, what or logical)
        return new, checksums, before

    def _publish_from_standby(
        self,
        current: str | None,
        logical: str,
        change: DataChange,
        source_location: str | None,
        key: ObjectKey | None,
        what: str,
    ) -> Published | None:
        """A change that only adds files, published as a new version built from the object's standby (see
        ``replication.standby``): None if the object has none, or the change is not such a change.

        The standby (an old version no reader lists any more) is renamed to the new version's name and made
        to hold ``current``'s files by identity: two directory listings and a link or unlink per file that
        changed since it was current, then the new files copied in. Like any new version, no metadata names
        it until the caller records its location in the batch's transaction: readers see all the new files
        at the commit or none. What the version keeps is checked as ``_publish_in_place`` checks it (the
        record's summary, the new paths, a count of the directory's files: a file added or removed behind
        the replica's back takes a version built from nothing, which holds exactly the listing). The record
        and the replica's event take the new files only.
        """
        fs = self.target.cm.files
        if not current or self._staged_below(current) or not fs.traits(current).hard_links:
            return None
        new = self._new_version(logical, current)
        if not fs.is_directory(standby_location(logical)) and not fs.is_directory(new):
            return None  # no standby, and no interrupted attempt to go on from
        held = fs.file_ids(current)
        plan = None if held is None else self._addition_plan(current, logical, change, key, what, len(held))
        if held is None or plan is None or not standby.claim(fs, logical, new):
            return None
        added, checksums, before = plan
        self._created[new] = None
        kept = standby.fill(fs, new, held, current, added)
        allowed = below_any(source_location, self.source_cmroot)
        to_publish = []
        for rel, encoded in added.items():
            target_uri = join_uri(new, rel)
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            to_publish.append(target_uri)
            fault_point()
        publish_all(fs, to_publish, durable=False)  # made durable with the batch, in set_last_id
        fault_point()
        self._unsynced_dirs.add(new)
        files = {rel: encode_at(self.target.cm, new, rel, FileIdentity(checksums[rel])) for rel in added}
        stamps = {rel: stamp_of(fs, join_uri(new, rel)) for rel in added}
        self.stats.files_kept += before.count
        self._retire.append(
            Retirement(current, frozenset(kept), standby=standby_location(logical), whole=True)
        )
        self._retire_staging_area(logical, current)
        return Published(new, files, stamps, set(), False, delta=True)

    def _staged_below(self, location: str | None) -> dict[str, str]:
        """Files this batch added in place below ``location`` (relative path -> staged copy)."""
        if not location or not self._in_place:
            return {}
        root = location.rstrip("/") + "/"
        return {uri[len(root) :]: staging_name(uri) for uri in self._in_place if uri.startswith(root)}

    def owe_publishes(self) -> None:
        """Name the batch's files added in place in one publish intent, in its transaction (call last).

        One intent for the batch: after the commit its files are renamed one after the other, before any
        other file work of the batch, so readers wait for them as little as possible. They are renamed in the
        order the source wrote them (``written_at``; a stable sort keeps one event's files in step order),
        across the partitions of a table too, so a reader sees the source's states one after the other.
        The batch's empty versions the directory process makes are waited for first: all are made before
        the commit names them.
        """
        self.settle_directories()
        if self._in_place:
            self.make_durable()
            order = sorted(self._in_place.values(), key=lambda written: written[0])  # stable
            with self.target.events.transaction() as tx:
                self.catalog.intents.publish(tx, [encoded for _, encoded in order])

    def settle_directories(self) -> None:
        """Wait for the empty versions the directory process makes for this batch, and empty those an
        interrupted attempt had made already (as ``publish_version`` empties one it finds itself)."""
        if not self._dirs.pending:
            return
        fs = self.target.cm.files
        for directory in self._dirs.settle():
            for status in list_data_files(fs, directory):
                fs.delete(status.uri)

    def _held(self, current: str | None, key: ObjectKey | None) -> HeldListing:
        """What the object's current version holds: the replica's record, else a listing read once."""
        if not current:
            return HeldListing()
        if key is not None:
            with self.target.events.reader() as conn:
                held = read_record(conn, key, current)
            if held is not None:
                return held
        return scan(current, self.target.cm)

    def _source_copy(self, held: str, source_location: str | None, what: str) -> str:
        """Where the source keeps a file the replica held but lost: its object's location, or cmroot."""
        entry = EncodedFileUri.decode(held)
        if not source_location:
            raise ReplicaDriftError(
                f"{what}: '{entry.file_name}' changed on the replica and the event names no source location "
                "to copy it from again; load from a new bootstrap dump"
            )
        rel = f"{entry.subdir}/{entry.file_name}" if entry.subdir else entry.file_name
        return EncodedFileUri(
            join_uri(source_location, rel), entry.checksum, self.source_cmroot, entry.subdir
        ).encode()

    def _retire_staging_area(self, logical: str, current: str | None) -> None:
        """A copier working ahead stages files at the logical location: retired with the batch if unnamed."""
        if logical.rstrip("/") != (current or "").rstrip("/") and self._staging_area_exists(logical):
            self._retire.append(Retirement(logical, recycle=False))

    def _staging_area_exists(self, logical: str) -> bool:
        """Whether something lies at ``logical``: its directory is listed once a batch has asked about it
        ``LIST_AFTER_ASKS`` times, then a name it lacks costs no call to the store (a bootstrap of a table asks
        for each of its partitions); a name it holds is still checked on its own.

        The listing stays right for the batch: a staging area is made before the load's first change (by
        ``prestage``, a copier, or an interrupted load), and the batch itself makes only version directories
        and hidden staged copies, never an entry at a logical location (logical locations carry no version
        mark, ``logical_location``); entries it removes (copies adopted, a standby claimed) are confirmed."""
        fs = self._page_view or self.target.cm.files
        parent, _, name = logical.rstrip("/").rpartition("/")
        if parent not in self._listed:
            asked = self._asked[parent] = self._asked.get(parent, 0) + 1
            if asked >= LIST_AFTER_ASKS:
                self._listed[parent] = fs.entry_names(parent)
        names = self._listed.get(parent)
        return (names is None or name in names) and fs.exists(logical)

    def relink(self, current: str, logical: str, key: ObjectKey | None) -> str:
        """A new version at ``logical`` holding exactly the files the replica's record of ``key`` lists (all
        of ``current``'s without a record; ``copy_data`` False: ``logical`` itself, nothing linked)."""
        if not self.copy_data:
            return logical
        recorded = None
        if key is not None:
            with self.target.events.reader() as conn:
                held = read_record(conn, key, current)
            recorded = set(held.files) if held is not None else None
        return self.relink_files(current, logical, recorded)

    def retire(self, retirement: Retirement) -> None:
        """Retire a directory once the batch commits (and its readers' grace period has passed)."""
        self._retire.append(retirement)

    def relink_files(self, current: str, logical: str, only: set[str] | None = None) -> str:
        """A new version at ``logical`` with the same files as ``current`` (a rename): links only.

        ``only``: the relative paths to carry (a file beside them that the replica's record does not list,
        such as one another replica added to a directory of the shared layout, is left behind)."""
        new = self._new_version(logical, current)
        fs = self.target.cm.files
        fs.delete_tree(new)  # whatever an interrupted attempt left: links are cheap to make again
        fs.makedirs(new)
        self._created[new] = None
        carried = set()
        for status in list_data_files(fs, current):
            rel = relative_to(status.uri, current)
            if only is not None and rel not in only:
                continue
            link_file(fs, status.uri, join_uri(new, rel))
            carried.add(rel)
            fault_point()
        for rel, staged in self._staged_below(current).items():  # added in place earlier in this batch
            link_file(fs, staged, join_uri(new, rel))
            carried.add(rel)
        self._unsynced_dirs.add(new)
        self._retire.append(Retirement(current, frozenset(carried)))
        self._retire_staging_area(logical, current)
        return new

    def _copy_in(
        self,
        encoded: str,
        target_uri: str,
        allowed: BelowAny,
        *,
        prefetched_at: str,
        fs: RootedFileSystem | None = None,
        new: bool = False,
        opened: OpenDirectories | None = None,
    ) -> bool:
        """One checksum-verified copy of an event's file to a place no reader sees yet, counted (``fs``: the
        replica's files, or a ``batch`` view of them). Answers whether it is in place already: ``new`` (the
        file goes to a new version directory, which no reader lists before the batch commits) lets a copy
        staged ahead take ``target_uri`` itself (one rename, not two); any other copy waits under its staged
        name for ``publish_all``. ``opened``: the directories a page of renames into a new version is made in."""
        fs = fs or self.target.cm.files
        ahead = self.copied_ahead.take(prefetched_at, encoded)
        if ahead is None:
            result = None
        elif ahead.placed and prefetched_at == target_uri:  # staged under its own name in its new version
            result = ahead
        elif new and opened is not None:
            result = publish_staged_copy(fs, ahead, prefetched_at, target_uri, opened)
        else:
            result = adopt_staged_copy(fs, ahead, prefetched_at, target_uri, publish=new)
        placed = result is not None and new
        if result is None:
            result = copy_verified(
                encoded,
                target_uri,
                target=fs,
                default_cmroot=self.source_cmroot,
                allowed=allowed,
                prefetched_at=prefetched_at,
            )
        self.stats.files_copied += 1
        self.stats.bytes_copied += result.bytes_copied
        self.stats.files_from_cmroot += int(result.from_cmroot)
        self.stats.files_prefetched += int(result.prefetched)
        return placed

    def discard_batch(self) -> None:
        """The batch failed: remove the version directories it made (nothing names them; frees space).

        Called before the batch's transaction ends, so it holds the replica's row lock: no other load
        can be filling a directory of the same name. The directory process finishes its slices first.
        """
        self._dirs.abandon()
        for directory in self._created:
            with contextlib.suppress(Exception):
                self.target.cm.files.delete_tree(directory)
        for uri in self._in_place:  # hidden copies in live directories: never published
            with contextlib.suppress(Exception):
                self.target.cm.files.delete(staging_name(uri))
        self._retire.clear()
        self._forget_batch_files()

    def take_retirements(self) -> list[Retirement]:
        """The batch committed: the directories it stopped naming, for retirement after the grace period."""
        out, self._retire = self._retire, []
        self._forget_batch_files()  # the publish intent renames the files added in place now
        return out

    def _forget_batch_files(self) -> None:
        """The batch ended (committed or failed): what it made and added in place is no longer its own."""
        self._created.clear()
        self._asked.clear()
        self._listed.clear()
        self._in_place.clear()
        self._added_in_place.clear()
        self._planned.clear()

    # -- data: in place (ACID write directories, which belong to one write id) -----------------------------
    def reconcile(self, target_location: str, files: Sequence[str], source_location: str | None) -> None:
        """Make ``target_location`` hold exactly ``files`` (by relative path and checksum), in place.

        Only for directories no reader trusts before the metadata commits: an ACID write directory
        (``delta_<w>_<w>``) is invisible to readers until its write id commits, in the same transaction.
        """
        if not self.copy_data:
            return
        fs = self.target.cm.files
        fs.makedirs(target_location)
        wanted = {relative_path(encoded): encoded for encoded in files}
        present = {relative_to(s.uri, target_location): s for s in list_data_files(fs, target_location)}
        needed = {
            rel: encoded
            for rel, encoded in wanted.items()
            if not _checksum_matches(fs, present.get(rel), encoded)
        }
        # Staged copies of files that need no copy (already in place) or are no longer wanted are leftovers.
        remove_staging_leftovers(
            fs, target_location, {staging_name(join_uri(target_location, rel)) for rel in needed}
        )
        allowed = below_any(source_location, self.source_cmroot)
        logical = logical_location(target_location)  # where a copier working ahead staged them
        to_publish = []
        for rel, encoded in needed.items():
            target_uri = join_uri(target_location, rel)
            self._copy_in(encoded, target_uri, allowed, prefetched_at=join_uri(logical, rel))
            to_publish.append(target_uri)
        extras = [status for rel, status in present.items() if rel not in wanted]
        if extras:  # replaced on the source: keep them in the target's own cmroot (chained replication)
            self.target.cm.recycle(describe_files(target_location, self.target.cm, extras))
            self.stats.files_removed += len(extras)
        publish_all(fs, to_publish, durable=False)  # made durable with the batch, in set_last_id
        if to_publish:
            self._unsynced_dirs.add(target_location)
        if logical != target_location.rstrip("/") and fs.exists(logical):
            self._retire.append(Retirement(logical, recycle=False))  # a copier's staged copies, if unnamed

    def make_durable(self) -> None:
        """One ``syncfs`` per file system for every rename published since the last call.

        Publishing renames a staged copy into place; until the rename reaches the disk, a crash could leave
        the target's metadata (committed with the position) naming a file still under its staged name. One
        sync per load batch instead of one per file keeps this cheap.
        """
        if self._unsynced_dirs:
            sync_uris(self._unsynced_dirs)
            self._unsynced_dirs.clear()


def _same_content(fs: RootedFileSystem, uri: str, size: int, encoded: str) -> bool:
    """A file an interrupted attempt left holds the listed content (size first: most need no read)."""
    checksum = checksum_of(encoded)
    return bool(checksum) and checksum_size(checksum) == size and fs.checksum(uri) == checksum


def _checksum_matches(fs: Any, status: Any, encoded: str) -> bool:
    """An existing target file already holds the content (size first: it avoids reading most files)."""
    entry = EncodedFileUri.decode(encoded)
    if status is None or not entry.checksum or checksum_size(entry.checksum) != status.size:
        return False
    return bool(fs.checksum(status.uri) == entry.checksum)


class PartitionWrite(NamedTuple):
    """One partition of a ``put_partitions`` call, with its data change decided (``LostFiles.decide``).

    A named tuple, immutable like a frozen dataclass at a fifth of its cost to make (one per partition)."""

    name: str
    part: Partition
    current: Partition | None
    change: LoadedChange | None
    source_location: str | None
    key: ObjectKey | None
    what: str


def _stamp_below(fs: RootedFileSystem, directory: str, rel: str) -> int:
    """The stamp of ``directory``'s file ``rel`` (``Published.stamp``)."""
    return stamp_of(fs, join_uri(directory, rel))
