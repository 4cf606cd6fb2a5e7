"""The change manager: files that a drop or an overwrite would remove are moved into cmroot instead.

A recycled file is stored as ``<cmroot>/<file name>_<checksum>``. The name is content-addressed, so the same
file recycled twice is kept once, and an event's encoded URI (``fileuri#checksum#cmroot#subdir``) is enough
to find the file again: at its original location if the checksum still matches, else in cmroot. The cleaner
deletes recycled files after the retention period, counted from when they were recycled.

cmroot may be in another store than the warehouse (a local warehouse recycling into S3 or the reverse), or
on another local file system: recycling then copies across and deletes the original only after the copy is
verified. Nothing under a cmroot name is trusted without checking it: a file already there counts only when
its size and checksum match (else it is replaced from the original), and new copies are written under a
temporary name, synced and verified before they are renamed into place (see ``ChangeManager._store``). So a
crash at any point leaves the content either at its original place or verified in cmroot, never neither.

Versioned stores (S3 with bucket versioning on): events carry the version id of each file
(``fileuri#checksum#cmroot#subdir#versionid``, see ``formats.file_uri``). ``resolve`` then also finds content
that was overwritten or deleted *without* passing through cmroot (a writer that bypassed the metastore),
by returning a versioned reference (``s3://<versionid>@bucket/key``) that every read method accepts. The
cmroot copy is still made, so replay does not depend on the bucket keeping noncurrent versions.

Pinning: a write pins each file it records (``pin``), so an event can name it whatever the writer does next
(Spark without Hadoop trash deletes overwritten files before the metastore hears of the overwrite). On local
and mounted warehouses the pin is a hard link under the cmroot name: no bytes copied, and the link shares the
file's modification time, so retention counts from the file's write and frees the pin like any recycled
file; a later recycle of the file finds its content already there. On S3 the recorded version id pins it.

Retention on S3: a recycled object's clock is its ``LastModified``, which the copy into cmroot sets; when
the same content is recycled again, ``touch`` renews it by a copy onto itself (see ``storage.s3``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hmsrepl.exceptions import FileLostError, StorageError
from hmsrepl.faults import fault_point
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.storage.base import FileSystem, base_name, join_uri, parent_uri, store_traits
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.directory_copies import OpenDirectories, link_in_directories
from hmsrepl.storage.directory_syncs import DirectorySyncs
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

#: Name prefix of copies in progress in cmroot; never a recycled file's name (those end in a checksum).
TEMP_PREFIX = ".cmtmp-"


@dataclass(frozen=True)
class CleanupResult:
    deleted: int
    kept: int
    bytes_deleted: int


class ChangeManager:
    """Recycles, pins and finds files; ``roots``: where the files it recycles and pins may live (the
    warehouse and the other data roots, the trash). Every file it touches goes through one file system
    bound to cmroot and those roots (``storage.rooted``): a path outside them is refused, never touched."""

    def __init__(self, cmroot: str, *, enabled: bool = True, roots: Sequence[str] = ()) -> None:
        self.cmroot = cmroot.rstrip("/")
        self.enabled = enabled
        self.roots = tuple(roots)

    @functools.cached_property
    def files(self) -> RootedFileSystem:
        """cmroot and the data roots; made on first use (a change manager that only encodes needs none)."""
        return RootedFileSystem([self.cmroot, *self.roots], purpose=f"change manager of '{self.cmroot}'")

    def cm_uri(self, file_uri: str, checksum: str) -> str:
        return join_uri(self.cmroot, f"{base_name(file_uri)}_{checksum}")

    def encode(self, file_uri: str, checksum: str, subdir: str = "", version_id: str | None = None) -> str:
        """The event form of a file: where it is now, which version, and where cmroot would keep it."""
        return EncodedFileUri(
            file_uri, checksum, self.cmroot if self.enabled else "", subdir, version_id or ""
        ).encode()

    def recycle(self, encoded_files: Iterable[str], syncs: DirectorySyncs | None = None) -> int:
        """Move files into cmroot (or delete them when CM is off); returns how many copies were made.

        The directories its renames changed are synced before it returns, or, given ``syncs``, left there
        for the caller to sync once it removed the dropped directories (``storage.directory_syncs``).

        Runs after the metadata change committed, and again after a crash (``metastore.intents``), so every
        step is safe to repeat: a file no longer at its place was recycled before. A file is deleted only
        once cmroot verifiably holds its content (see ``_store``). Where the event names a version, exactly
        that version is copied (verified against the event's checksum) before the key is deleted, so the
        cmroot name ``<name>_<checksum>`` always holds the content it promises.
        """
        moved = 0
        now = time.time()
        renamed_in: dict[str, RootedFileSystem] = {}  # directories whose renames are made durable, once each
        files = self.files.batch()  # a dropped tree's directories are resolved once, not once per file
        try:
            for text in encoded_files:
                entry = EncodedFileUri.decode(text)
                # Checked once, as a name: all this does with it is read its checksum (never through a
                # final symlink), rename and delete it.
                fs = files.admit(entry.file_uri, content=False)
                if not fs.has_entry(entry.file_uri):
                    continue  # recycled by an earlier, interrupted run
                if not self.enabled:
                    fs.delete(entry.file_uri)
                    continue
                try:
                    moved += int(self._store(entry, fs, now, renamed_in))
                except (OSError, StorageError):
                    if fs.has_entry(entry.file_uri):
                        raise
                    continue  # another process recycled it meanwhile (an intent completed twice at once)
                fault_point("recycle_after_file")
        finally:
            # Before the caller records the work as done: a rename lost in a power cut would put the file
            # back in the warehouse after its intent was deleted. One fsync per directory, not per file.
            pending = DirectorySyncs() if syncs is None else syncs
            for directory, holder in renamed_in.items():
                pending.add(holder, directory)
            if syncs is None:
                pending.flush()
        return moved

    def _store(
        self, entry: EncodedFileUri, fs: RootedFileSystem, now: float, renamed_in: dict[str, RootedFileSystem]
    ) -> bool:
        """Put one file's content into cmroot, verified, then remove the original; True if a copy was made.

        The cmroot name is content-addressed, so it is checked, never trusted: an existing file under it
        counts only when its size and checksum match (a kill during an older, unverified copy could have
        left a truncated file there), else it is replaced from the original. New content is written under a
        temporary name, synced, verified, then renamed into place; on one local file system the file is
        renamed directly (atomic), after its checksum was verified. The original is removed last.
        """
        versioned = bool(entry.version_id) and fs.exists(entry.versioned_uri)
        if versioned:
            source, checksum = entry.versioned_uri, entry.checksum
        else:
            source = entry.file_uri
            checksum = fs.checksum(source)
            if entry.checksum and checksum != entry.checksum:
                # Rewritten since the event recorded it: keep what it holds now, under its own checksum.
                log.warning(
                    "'%s' has checksum %s, not %s as recorded; recycling it under its current checksum",
                    source,
                    checksum,
                    entry.checksum,
                )
        target = self.cm_uri(entry.file_uri, checksum)
        cm_fs = fs = fs.admit(target)
        if verified_copy(cm_fs, target, checksum):
            fs.delete(entry.file_uri)
            cm_fs.touch(target, now)
            return False
        if cm_fs.exists(target):
            log.warning(
                "cmroot file '%s' does not hold checksum %s (an interrupted copy?): replacing it",
                target,
                checksum,
            )
            cm_fs.delete(target)
        renamed = self._write(fs, source, target, checksum, versioned=versioned)
        if renamed:
            renamed_in.update(dict.fromkeys((parent_uri(target), parent_uri(source)), fs))
        if renamed:  # a rename keeps the old mtime; retention counts from recycling
            cm_fs.touch(target, now)
        else:  # a copy is dated now
            fault_point("recycle_before_delete_source")
            fs.delete(entry.file_uri)
        return True

    def _write(
        self, fs: RootedFileSystem, source: str, target: str, checksum: str, *, versioned: bool
    ) -> bool:
        """Write ``source``'s content under ``target``, verified against ``checksum``; True if renamed.

        On one file system: a rename (the caller syncs both directories, once for all files it renames).
        Else a copy verified before it is visible under the cmroot name: locally to a synced temporary name
        then renamed; to or from an object store ``copy_file`` (S3 copies and uploads appear whole or not at
        all) verified against the checksum (the copy's CRC32C as S3 computed it).
        """
        if not versioned and fs.rename(source, target):
            return True
        self._copy_verified(source, target, checksum, "recycle_mid_copy")
        return False

    def _copy_verified(self, source: str, target: str, checksum: str, fault: str) -> None:
        self.files.copy_verified(
            source, target, checksum, temp_prefix=TEMP_PREFIX, on_chunk=lambda: fault_point(fault)
        )
        self.files.sync_directory(parent_uri(target))

    def preserve(self, encoded_files: Iterable[str]) -> int:
        """Keep a cmroot copy of files that are about to move (a rename moves a managed table's directory).

        Events logged before the move name the old paths; after it, only cmroot can serve them. Local files
        are hard-linked (no bytes copied; the warehouse never rewrites a file in place), others copied. An
        existing cmroot file counts only when its size and checksum match, or when it is the file itself (a
        pin, see ``pin``). Links are not touched: that would change the warehouse file's modification time,
        which writes compare with the recorded one. Returns how many copies were made.
        """
        if not self.enabled:
            return 0
        made = 0
        now = time.time()
        for text in encoded_files:
            entry = EncodedFileUri.decode(text)
            target = self.cm_uri(entry.file_uri, entry.checksum)
            cm_fs = self.files.admit(entry.file_uri, target)
            if cm_fs.same_file(entry.file_uri, target):
                continue
            if verified_copy(cm_fs, target, entry.checksum):
                cm_fs.touch(target, now)
                continue
            cm_fs.delete(target)  # a damaged copy under the name, if any
            try:
                linked = cm_fs.link(entry.file_uri, target)
            except OSError:  # made meanwhile, or links refused here: a verified copy instead
                linked = False
            if linked:
                made += 1
                continue
            self._copy_verified(entry.file_uri, target, entry.checksum, "recycle_mid_copy")
            cm_fs.touch(target, now)
            made += 1
        return made

    def pin(self, encoded_files: Iterable[str]) -> int:
        """Keep what newly recorded files hold fetchable from cmroot; returns how many pins were made.

        Local files are hard-linked under their cmroot name (a copy only where a link cannot be made: cmroot
        on another device). The link is not touched: its modification time is the file's own, which a touch
        would change (the next write would take the file for a changed one). A name already linked to the
        same file, or holding the same content verified, is kept. Files in object stores are pinned by the
        version id their events carry; where none is kept nothing is pinned (the file then depends on the
        writer recycling through the metastore).
        """
        return self.pin_files(_named(EncodedFileUri.decode(text)) for text in encoded_files)

    def pin_files(self, files: Iterable[tuple[str, str]]) -> int:
        """``pin`` of files given as (URI, checksum): a load pins the copies it staged as it staged them,
        before any event names them (``replication.prestage``)."""
        if not self._pins_by_links():
            return 0
        files_fs = self.files.batch()  # one call's files share a few directories: each resolved once
        with contextlib.closing(OpenDirectories()) as opened:  # and opened once, for links made in them
            return sum(self._pin_one(files_fs, opened, uri, checksum) for uri, checksum in files)

    def unpin_files(self, files: Iterable[tuple[str, str]]) -> int:
        """Remove the pins of files (URI, checksum) that are about to be deleted unpublished (a refused
        load's staged copies): a cmroot name is removed only when it is a hard link of the file itself,
        so a pin of the same content kept for another file stays. Returns how many were removed."""
        if not self._pins_by_links():
            return 0
        removed = 0
        files_fs = self.files.batch()
        for uri, checksum in files:
            if not _linkable(uri, checksum):
                continue
            target = self.cm_uri(uri, checksum)
            fs = _with_pin(files_fs, uri, target)
            if fs.same_file(uri, target):
                fs.delete(target)
                removed += 1
        return removed

    def _pin_one(self, files: RootedFileSystem, opened: OpenDirectories, uri: str, checksum: str) -> int:
        """``pin`` of one file: 1 when a pin was made."""
        if not _linkable(uri, checksum):
            return 0
        target = self.cm_uri(uri, checksum)
        if link_in_directories(uri, target, fs=files, opened=opened):  # a new pin, the usual case
            return 1
        return self._pin_by_paths(files, uri, target, checksum)

    def _pins_by_links(self) -> bool:
        """Whether pins are hard links in cmroot (off, or an object store's cmroot: files are pinned by their
        versions, or not at all)."""
        return self.enabled and _has_links(self.cmroot)

    def _pin_by_paths(self, files: RootedFileSystem, source: str, target: str, checksum: str) -> int:
        """``pin`` of one file by full paths, each checked in full: 1 when a pin was made."""
        fs = _with_pin(files, source, target)
        try:
            linked = fs.link(source, target)
        except FileExistsError:  # already pinned, or another file under the name
            if fs.same_file(source, target) or verified_copy(fs, target, checksum):
                return 0  # kept: it holds the content
            fs.delete(target)
            try:
                linked = fs.link(source, target)
            except FileExistsError:  # pinned by a concurrent write meanwhile
                return 0
            except OSError as exc:
                log.warning("could not pin '%s' into cmroot (%s); it is not kept if deleted", source, exc)
                return 0
        except OSError as exc:
            log.warning("could not pin '%s' into cmroot (%s); it is not kept if deleted", source, exc)
            return 0
        if not linked:  # cmroot on another device: a verified copy, unless one is there already
            if verified_copy(fs, target, checksum):
                return 0
            try:
                self._copy_verified(source, target, checksum, "pin_mid_copy")
            except (OSError, StorageError) as copy_exc:
                log.warning(
                    "could not pin '%s' into cmroot (%s); it is not kept if deleted", source, copy_exc
                )
                return 0
        return 1

    def resolve(self, encoded: str, *, verify: bool = True) -> str:
        """Where the content an event named can be read now, as a URI every read method accepts.

        In order: the original file if it still holds that content (same version, or same checksum); the
        exact version the event recorded, as a versioned reference, in a versioned store; the cmroot copy.
        Raises FileLostError naming all places when none holds that content.
        """
        entry = EncodedFileUri.decode(encoded)
        fs = self.files
        if self._current_matches(fs, entry):
            return entry.file_uri
        if entry.version_id:
            reference = entry.versioned_uri
            if fs.exists(reference) and (
                not verify or not entry.checksum or fs.checksum(reference) == entry.checksum
            ):
                return reference
        if entry.checksum:
            cmroot = entry.cmroot or self.cmroot
            candidate = join_uri(cmroot, f"{entry.file_name}_{entry.checksum}")
            cm_fs = self.files
            if cm_fs.exists(candidate) and (not verify or cm_fs.checksum(candidate) == entry.checksum):
                return candidate
        version = f" (version {entry.version_id} is gone too)" if entry.version_id else ""
        raise FileLostError(
            f"file '{entry.file_uri}' with checksum {entry.checksum or '(none)'} is gone: the original changed "
            f"or was deleted{version} and cmroot '{entry.cmroot or self.cmroot}' has no copy (retention "
            "passed?); run a bootstrap to re-replicate this object"
        )

    @staticmethod
    def _current_matches(fs: FileSystem, entry: EncodedFileUri) -> bool:
        """Whether the file at its original place still holds the event's content.

        A matching version id proves it without hashing; otherwise the checksum decides (content rewritten
        byte for byte is still the same content).
        """
        if not fs.exists(entry.file_uri):
            return False
        if not entry.checksum:
            return True
        current = fs.identify(entry.file_uri)
        if entry.version_id and current.version_id == entry.version_id:
            return True
        return current.checksum == entry.checksum

    def cleanup(self, retention_seconds: int, now: float | None = None) -> CleanupResult:
        """Delete recycled files older than the retention, and the pins stores took themselves (HDFS
        snapshots) as old; files not recycled by us and snapshots not taken by us are left alone."""
        cutoff = (time.time() if now is None else now) - retention_seconds
        fs = self.files
        deleted = kept = freed = 0
        for status in fs.list_files(self.cmroot):
            if status.mtime < cutoff:
                try:
                    fs.delete(status.uri)
                except StorageError as exc:  # keep going: one bad file must not stop retention
                    log.warning("could not delete %s: %s", status.uri, exc)
                    continue
                deleted += 1
                freed += status.size
            else:
                kept += 1
        return CleanupResult(deleted + self._expire_pins(cutoff), kept, freed)

    def _expire_pins(self, cutoff: float) -> int:
        """Pins a store took itself (HDFS snapshots) before ``cutoff``, deleted as recycled files are."""
        expired = 0
        for root in self.roots:
            if not root:
                continue
            try:
                expired += self.files.expire_pins(root, cutoff)
            except StorageError as exc:  # keep going: one root must not stop retention
                log.warning("could not expire the pins below %s: %s", root, exc)
        return expired


def _with_pin(files: RootedFileSystem, source: str, target: str) -> RootedFileSystem:
    """The storage admitting a file and its cmroot name ``target``, for pinning and unpinning alike. The cmroot
    name is admitted as a name (``link`` and ``delete`` act on names): a name already there is looked at
    through ``same_file`` and ``verified_copy``, which check it in full first."""
    return files.admit(source).admit(target, content=False)


def _named(entry: EncodedFileUri) -> tuple[str, str]:
    return entry.file_uri, entry.checksum


def _linkable(uri: str, checksum: str) -> bool:
    """Whether a file's pin is a link under its checksum's name: it has a checksum, in a store of links."""
    return bool(checksum) and _has_links(uri)


def _has_links(uri: str) -> bool:
    """Whether ``uri`` is in a store that pins by hard links (a file system; object stores pin by version)."""
    return store_traits(uri).hard_links


def verified_copy(fs: FileSystem, uri: str, checksum: str) -> bool:
    """Whether ``uri`` exists and holds exactly the content ``checksum`` names (size first: cheap)."""
    if not checksum:
        return False
    size = fs.size(uri)
    if size is None or size != checksum_size(checksum):
        return False
    try:
        return fs.checksum(uri) == checksum
    except (OSError, StorageError):
        return False
