"""Lists the data files of a table or partition and describes them for events, with checksums.

Hidden entries (any path component starting with ``_`` or ``.``, e.g. ``_SUCCESS`` and Hadoop's ``.crc``
side files) are not data, as in Hive's listing filter, and are left out.

Each file is described by one ``identify`` call, which yields its checksum and, in a versioned store, the
version id that checksum belongs to (on S3: one HEAD when the object carries a CRC32C, no download). Calls
run in parallel as the store suits (``FileSystem.io_parallelism``): object stores are latency bound.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.base import FileStatus, base_name, filesystem_for, relative_to

PARALLEL_CHECKSUM_THRESHOLD = 8


def is_hidden(relative_path: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative_path.split("/"))


def list_data_files(location: str | None) -> list[FileStatus]:
    if not location:
        return []
    fs = filesystem_for(location)
    return [status for status in fs.list_files(location) if not is_hidden(_relative(status.uri, location))]


def _relative(uri: str, location: str) -> str:
    return relative_to(uri, location) if uri.rstrip("/") != location.rstrip("/") else base_name(uri)


def describe_files(
    location: str | None, cm: ChangeManager, files: list[FileStatus] | None = None
) -> list[str]:
    """Encoded URIs (``fileuri#checksum#cmroot#subdir[#versionid]``) of the data files under ``location``."""
    if files is None:
        files = list_data_files(location)
    if not files or location is None:
        return []
    fs = filesystem_for(location)
    if len(files) >= PARALLEL_CHECKSUM_THRESHOLD:
        with ThreadPoolExecutor(max_workers=fs.io_parallelism) as pool:
            identities = list(pool.map(lambda s: fs.identify(s.uri), files))
    else:
        identities = [fs.identify(s.uri) for s in files]
    out = []
    for status, identity in zip(files, identities, strict=True):
        rel = _relative(status.uri, location)
        subdir = rel.rsplit("/", 1)[0] if "/" in rel else ""
        out.append(cm.encode(status.uri, identity.checksum, subdir, identity.version_id))
    return out
