"""The change manager: files that a drop or an overwrite would remove are moved into cmroot instead.

A recycled file is stored as ``<cmroot>/<file name>_<checksum>``. The name is content-addressed, so the same
file recycled twice is kept once, and an event's encoded URI (``fileuri#checksum#cmroot#subdir``) is enough
to find the file again: at its original location if the checksum still matches, else in cmroot. The cleaner
deletes recycled files after the retention period, counted from when they were recycled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from hmsrepl.exceptions import FileLostError, StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.storage.base import base_name, filesystem_for, join_uri

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

    def encode(self, file_uri: str, checksum: str, subdir: str = "") -> str:
        """The event form of a file: where it is now and where cmroot would keep it."""
        return EncodedFileUri(file_uri, checksum, self.cmroot if self.enabled else "", subdir).encode()

    def recycle(self, encoded_files: Iterable[str]) -> int:
        """Move files into cmroot (or delete them when CM is off); returns how many were moved.

        Runs after the metadata change committed. A file already in cmroot with the same checksum is
        identical content, so the source is deleted and the kept copy's retention restarts.
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
            else:
                fs.move(entry.file_uri, target)
                moved += 1
            cm_fs.touch(target, now)
        return moved

    def resolve(self, encoded: str, *, verify: bool = True) -> str:
        """Where the content an event named can be read now: the original file, or its cmroot copy.

        Raises FileLostError naming both places when neither holds that content.
        """
        entry = EncodedFileUri.decode(encoded)
        fs = filesystem_for(entry.file_uri)
        if fs.exists(entry.file_uri) and (
            not entry.checksum or fs.checksum(entry.file_uri) == entry.checksum
        ):
            return entry.file_uri
        if entry.checksum:
            cmroot = entry.cmroot or self.cmroot
            candidate = join_uri(cmroot, f"{entry.file_name}_{entry.checksum}")
            cm_fs = filesystem_for(candidate)
            if cm_fs.exists(candidate) and (not verify or cm_fs.checksum(candidate) == entry.checksum):
                return candidate
        raise FileLostError(
            f"file '{entry.file_uri}' with checksum {entry.checksum or '(none)'} is gone: the original changed "
            f"or was deleted and cmroot '{entry.cmroot or self.cmroot}' has no copy (retention passed?); "
            "run a bootstrap to re-replicate this object"
        )

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
