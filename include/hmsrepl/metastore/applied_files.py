"""The listing a replication load published, as the checksums the load verified.

A replica logs what its loads apply like any other write (so a replica can itself be replicated: chains and
reverse replication). A load has just made a location hold exactly a list of files whose checksums it
verified while copying; reading them again would re-read every byte. The listing is instead taken from the
copied files: each one's place below the location (``subdir`` and name, as at the source) and its checksum.
``metastore.capture`` records exactly that listing (stating the files for their sizes and modification times,
no reads) and logs its diff from the previous record.

Stores that keep object versions (S3 with versioning) still look the new files up: an event there pins the
version it saw, which only a lookup of the object can tell (one HEAD per file, no download).
"""

from __future__ import annotations

from collections.abc import Sequence

from hmsrepl.metastore.file_capture import is_hidden
from hmsrepl.metastore.messages import checksum_of, relative_path


def applied_checksums(applied: Sequence[str]) -> dict[str, str]:
    """Relative path -> checksum of the encoded files a load made a location hold (hidden entries left out)."""
    out: dict[str, str] = {}
    for text in applied:
        relative = relative_path(text)
        if not is_hidden(relative):
            out[relative] = checksum_of(text)
    return out
