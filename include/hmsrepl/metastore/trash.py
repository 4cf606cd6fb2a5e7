"""Adopts files that a Hive client moved to Hadoop's trash into cmroot.

On INSERT OVERWRITE, the Hive 2.3 client inside Spark removes the old files itself before it calls the
metastore, so the change manager never sees them. With Hadoop trash enabled (``fs.trash.interval`` > 0, part
of the writer settings) the client moves them to ``<trash>/Current/<their full path>`` instead. When the
metastore next hears about that location (the INSERT or ALTER it is told of), it moves whatever the trash
holds for it into cmroot and records it in the event, so older events that name those files stay
replayable. Local (and mounted) warehouses are covered, and HDFS ones: with ``trash_root`` on HDFS (the
writers' ``hdfs://nn:8020/user/<user>/.Trash``), a location on the same NameNode is looked for under its
``Current`` and adopted by renames into an HDFS cmroot (``storage.base.move_file``). Object-store trash lives
in the bucket and is not covered. Adoption never leaves ``<trash>/Current``: locations are normalised,
symlinks out of it are refused and listings do not follow links or read FIFOs and devices
(``storage.local``; HDFS symbolic links are off unless a cluster enables them, and are not listed).
"""

from __future__ import annotations

import functools

from hmsrepl.exceptions import StorageError
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.locations import BadLocationError, normalise, safe_join
from hmsrepl.storage.base import relative_to, store_traits
from hmsrepl.storage.rooted import RootedFileSystem


class TrashAdopter:
    def __init__(self, trash_root: str, cm: ChangeManager) -> None:
        self.trash_root = trash_root.rstrip("/")
        self.cm = cm
        self.current = f"{self.trash_root}/Current"

    @functools.cached_property
    def files(self) -> RootedFileSystem:
        """``<trash>/Current`` and nothing else: adoption reads only there (symlinks out of it refused)."""
        return RootedFileSystem([self.current], purpose=f"trash adoption from '{self.current}'")

    def trashed_dir(self, location: str) -> str | None:
        """Where the trash keeps ``location``'s files, or ``None`` when that place is not inside the trash.

        The location is normalised first (``..`` resolved, control characters refused), and the result must
        still lie in ``<trash>/Current`` once symlinks are followed: adoption moves what it finds into
        cmroot, so a ``..`` or a link must never lead it to foreign files.
        """
        if not self.trash_root or not self.cm.enabled:
            return None
        fs = store_traits(location)  # what the store is like; files are reached through self.files only
        if not fs.has_directories:
            return None
        if not fs.hard_links:  # not a local disk: a file system with a trash of its own (HDFS)
            return self._trashed_remote_dir(location)
        try:
            path = normalise(location).path
            trashed = safe_join(self.current, path)
            if trashed is None or not self.files.contains(trashed):
                return None
        except (BadLocationError, StorageError):
            return None
        return trashed

    def _trashed_remote_dir(self, location: str) -> str | None:
        """The trash place of a location on a file system with a trash of its own (HDFS): the trash root
        must be on the same NameNode. Normalised (``..`` resolved lexically) and checked to stay inside."""
        try:
            place, root = normalise(location), normalise(self.trash_root)
        except BadLocationError:
            return None
        if place.scheme != "hdfs" or (root.scheme, root.authority) != (place.scheme, place.authority):
            return None
        current = f"{root}/Current"
        trashed = f"{current}{place.path}"
        return trashed if normalise(trashed).is_within(normalise(current)) else None

    def adopt(self, location: str | None) -> list[str]:
        """Move the trashed files of ``location`` into cmroot; returns their encoded URIs (original place)."""
        if not location:
            return []
        trashed = self.trashed_dir(location)
        fs = self.files
        if trashed is None or not fs.is_directory(trashed):
            return []
        adopted = []
        for status in list(fs.list_files(trashed)):
            rel = relative_to(status.uri, trashed)
            checksum = fs.checksum(status.uri)
            subdir = rel.rsplit("/", 1)[0] if "/" in rel else ""
            original = f"{location.rstrip('/')}/{rel}"
            self.cm.recycle([self.cm.encode(status.uri, checksum, subdir)])
            adopted.append(self.cm.encode(original, checksum, subdir))
        return adopted
