"""The change manager: files that a drop or an overwrite would remove are moved into cmroot instead.

A recycled file is stored as ``<cmroot>/<file name>_<checksum>``. The name is content-addressed, so the same
file recycled twice is kept once, and an event's encoded URI (``fileuri#checksum#cmroot#subdir``) is enough
to find the file again: at its original location if the checksum still matches, else in cmroot. The cleaner
deletes recycled files after the retention period, counted from when they were recycled.

cmroot may be in another store than the warehouse (a local warehouse recycling into S3 or the reverse):
recycling then copies across and deletes the original after the copy is complete.

Versioned stores (S3 with bucket versioning on): events carry the version id of each file
(``fileuri#checksum#cmroot#subdir#versionid``, see ``formats.file_uri``). ``resolve`` then also finds content
that was overwritten or deleted *without* passing through cmroot (a writer that bypassed the metastore),
by returning a versioned reference (``s3://<versionid>@bucket/key``) that every read method accepts. The
cmroot copy is still made, so replay does not depend on the bucket keeping noncurrent versions.

Retention on S3: a recycled object's clock is its ``LastModified``, which the copy into cmroot sets; when
the same content is recycled again, ``touch`` renews it by a copy onto itself (see ``storage.s3``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from hmsrepl.exceptions import FileLostError, StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.storage.base import FileSystem, base_name, copy_file, filesystem_for, join_uri, move_file
from hmsrepl.storage.local import is_local_uri, local_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanupResult:
    deleted: int
    kept: int
    bytes_deleted: int


class ChangeManager:
    def __init__(self, cmroot: str, *, enabled: bool = True) -> None:
        self.cmroot = cmroot.rstrip("/")
        self.enabled = enabled

    def cm_uri(self, file_uri: str, checksum: str) -> str:
        return join_uri(self.cmroot, f"{base_name(file_uri)}_{checksum}")

    def encode(self, file_uri: str, checksum: str, subdir: str = "", version_id: str | None = None) -> str:
        """The event form of a file: where it is now, which version, and where cmroot would keep it."""
        return EncodedFileUri(
            file_uri, checksum, self.cmroot if self.enabled else "", subdir, version_id or ""
        ).encode()

    def recycle(self, encoded_files: Iterable[str]) -> int:
        """Move files into cmroot (or delete them when CM is off); returns how many were moved.

        Runs after the metadata change committed. A file already in cmroot with the same checksum is
        identical content, so the source is deleted and the kept copy's retention restarts. Where the event
        names a version, exactly that version is copied (verified against the event's checksum) before the
        key is deleted, so the cmroot name ``<name>_<checksum>`` always holds the content it promises.
        """
        moved = 0
        now = time.time()
        for text in encoded_files:
            entry = EncodedFileUri.decode(text)
            fs = filesystem_for(entry.file_uri)
            if not fs.exists(entry.file_uri):
                continue  # recycled by an earlier, interrupted run
            if not self.enabled:
                fs.delete(entry.file_uri)
                continue
            target = self.cm_uri(entry.file_uri, entry.checksum)
            cm_fs = filesystem_for(target)
            if cm_fs.exists(target):
                fs.delete(entry.file_uri)
                cm_fs.touch(target, now)
                continue
            if entry.version_id and fs.exists(entry.versioned_uri):
                copy_file(entry.versioned_uri, target, entry.checksum or None)
                fs.delete(entry.file_uri)
            else:
                move_file(entry.file_uri, target)
            moved += 1
            if _keeps_old_mtime(fs, cm_fs, versioned=bool(entry.version_id)):
                cm_fs.touch(target, now)
        return moved

    def preserve(self, encoded_files: Iterable[str]) -> int:
        """Keep a cmroot copy of files that are about to move (a rename moves a managed table's directory).

        Events logged before the move name the old paths; after it, only cmroot can serve them. Local files
        are hard-linked (no bytes copied; the warehouse never rewrites a file in place), others copied.
        Returns how many copies were made.
        """
        if not self.enabled:
            return 0
        made = 0
        now = time.time()
        for text in encoded_files:
            entry = EncodedFileUri.decode(text)
            target = self.cm_uri(entry.file_uri, entry.checksum)
            cm_fs = filesystem_for(target)
            if cm_fs.exists(target):
                cm_fs.touch(target, now)
                continue
            if is_local_uri(entry.file_uri) and is_local_uri(target):
                os.makedirs(os.path.dirname(local_path(target)), exist_ok=True)
                try:
                    os.link(local_path(entry.file_uri), local_path(target))
                except OSError:  # another device, or links not allowed: copy instead
                    copy_file(entry.file_uri, target, entry.checksum or None)
            else:
                copy_file(entry.file_uri, target, entry.checksum or None)
            cm_fs.touch(target, now)
            made += 1
        return made

    def resolve(self, encoded: str, *, verify: bool = True) -> str:
        """Where the content an event named can be read now, as a URI every read method accepts.

        In order: the original file if it still holds that content (same version, or same checksum); the
        exact version the event recorded, as a versioned reference, in a versioned store; the cmroot copy.
        Raises FileLostError naming all places when none holds that content.
        """
        entry = EncodedFileUri.decode(encoded)
        fs = filesystem_for(entry.file_uri)
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
            cm_fs = filesystem_for(candidate)
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
        """Delete recycled files older than the retention; files not recycled by us are left alone."""
        cutoff = (time.time() if now is None else now) - retention_seconds
        fs = filesystem_for(self.cmroot)
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
        return CleanupResult(deleted, kept, freed)


def _keeps_old_mtime(src_fs: FileSystem, cm_fs: FileSystem, *, versioned: bool) -> bool:
    """Whether the file just put in cmroot still carries its old modification time.

    A rename (local move) keeps it, so retention would count from when the file was written, not
    recycled; a copy (across stores, a versioned copy, any S3 move) writes a new file whose time is now.
    """
    return not versioned and src_fs.same_store(cm_fs) and cm_fs.move_keeps_mtime
