"""Event listings of data a replication load applied, built from the files it copied.

A replica logs what its loads apply like any other write (so a replica can itself be replicated: chains and
reverse replication). A load has just made a location hold exactly a list of files whose checksums it
verified while copying; describing that location again would re-read every byte. The listing is instead
derived from the copied files: each one's place below the location (``subdir`` and name, as at the source)
and its checksum, encoded with this metastore's cmroot.

Stores that keep object versions (S3 with versioning) still describe the location: an event there pins the
version it saw, which only a lookup of the object can tell (one HEAD per file, no download).
"""

from __future__ import annotations

from collections.abc import Sequence

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import describe_files, is_hidden
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.local import is_local_uri


def applied_listing(location: str | None, applied: Sequence[str], cm: ChangeManager) -> list[str]:
    """Encoded URIs of ``location``'s data files, given the encoded files a load made it hold exactly.

    Hidden entries (markers such as ``_SUCCESS``) are left out, as in every listing of data files.
    """
    if not location:
        return []
    if not is_local_uri(location):
        return describe_files(location, cm)
    out: dict[str, str] = {}
    for text in applied:
        entry = EncodedFileUri.decode(text)
        relative = f"{entry.subdir}/{entry.file_name}" if entry.subdir else entry.file_name
        if not is_hidden(relative):
            out[relative] = cm.encode(join_uri(location, relative), entry.checksum, entry.subdir)
    return [out[relative] for relative in sorted(out)]
