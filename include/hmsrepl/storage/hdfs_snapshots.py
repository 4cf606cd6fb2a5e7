"""HDFS snapshots as pseudo-versions: what pins a file's content on HDFS, as an object version does on S3.

HDFS has neither hard links nor object versions, so a file rewritten behind the metastore's back (a writer
that replaces files without telling it, ``hdfs dfs -put -f``) leaves nothing to replay its event from. Where
a directory is snapshottable (``hdfs dfsadmin -allowSnapshot <dir>``: the operator's choice, as for Hive's
REPL and ``distcp -diff``), a snapshot keeps every file below it as it was, at no cost until the file changes.

- **The version id** of a pinned file is its snapshot's path, ``<dir>/.snapshot/<name>``. The versioned
  reference ``hdfs://<encoded id>@namenode/<path>`` (``formats.file_uri``) then names ``<id>/<path below
  dir>`` with no lookup. An id read from a dump is refused unless ``<dir>`` is an ancestor of the path and
  ``<name>`` one path segment: a reference can only name an earlier state of the same path, which the rooted
  file system has already checked.
- **Pinning** (``SnapshotPins.pin``, from ``HdfsFileSystem.identify``) reuses the newest snapshot this
  process took of the directory when the file in it is the same inode with the same length and modification
  time (HDFS files are written once and only appended to, so those three equal mean the same bytes);
  otherwise it takes a new snapshot, ``hmsrepl-<ms>-<hex>``. An INSERT's files are usually pinned by one
  snapshot. The caller reads the checksum from the snapshot, so checksum and version always describe the
  same content, even if a writer replaces the file meanwhile.
- **Which directories**: ``GETSNAPSHOTTABLEDIRECTORYLIST``, the ones the user owns (all for the superuser),
  which are exactly the ones it may snapshot; re-read every ``SNAPSHOTTABLE_TTL_SECONDS``.
- **Expiry**: ``expire`` deletes this product's snapshots (``hmsrepl-`` names only, never an operator's)
  taken before a cutoff, on snapshottable directories at, above or below a root: the change manager's
  retention calls it with cmroot's cutoff, so a pin lives as long as a recycled file does.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from hmsrepl.exceptions import StorageError

log = logging.getLogger(__name__)

SNAPSHOT_MARK = "/.snapshot/"
SNAPSHOT_PREFIX = "hmsrepl-"
SNAPSHOTTABLE_TTL_SECONDS = 30.0

#: ``call(op, path, method="get", **params)``: one WebHDFS operation on an absolute path, its JSON answer;
#: FileNotFoundError for a missing path, StorageError for any other failure.
WebHdfsCall = Callable[..., dict[str, Any]]


def _below(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or inside it (both absolute, no trailing slash but for ``/``)."""
    return directory == "/" or path == directory or path.startswith(directory + "/")


def snapshot_directory(version: str) -> tuple[str, str]:
    """(snapshottable directory, snapshot name) of a version id ``<dir>/.snapshot/<name>``; StorageError for
    anything else (a crafted id: ``..`` or empty segments, a name with a slash)."""
    directory, mark, name = version.rpartition(SNAPSHOT_MARK)
    directory = directory or "/"
    segments = directory.split("/")[1:] if directory != "/" else []
    if (
        not mark
        or not directory.startswith("/")
        or any(segment in ("", ".", "..", ".snapshot") for segment in segments)
        or not name
        or "/" in name
        or name in (".", "..")
    ):
        raise StorageError(f"'{version}' is not an HDFS snapshot version (<directory>/.snapshot/<name>)")
    return directory, name


def path_in_snapshot(version: str, path: str) -> str:
    """Where ``path`` is kept in the snapshot ``version``; StorageError if that snapshot cannot hold it."""
    directory, _name = snapshot_directory(version)
    if not _below(path, directory):
        raise StorageError(f"HDFS snapshot '{version}' does not hold '{path}': it is outside '{directory}'")
    return version + path[len(directory.rstrip("/")) :]


def same_content(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two HDFS file statuses describe the same bytes: one inode, one length, one modification."""
    return (
        a is not None
        and b is not None
        and a.get("type") == b.get("type") == "FILE"
        and a["fileId"] == b["fileId"]
        and a["length"] == b["length"]
        and a["modificationTime"] == b["modificationTime"]
    )


class SnapshotPins:
    """One NameNode's snapshottable directories, and the snapshots this process took of them."""

    def __init__(self, call: WebHdfsCall) -> None:
        self._call = call
        self._lock = threading.Lock()
        self._directories: tuple[float, tuple[str, ...]] | None = None
        self._latest: dict[str, str] = {}  # snapshottable directory -> version of the newest snapshot taken
        self._unavailable = False

    def directories(self) -> tuple[str, ...]:
        """The snapshottable directories this user may snapshot, deepest first."""
        now = time.monotonic()
        cached = self._directories
        if cached is not None and now - cached[0] < SNAPSHOTTABLE_TTL_SECONDS:
            return cached[1]
        found: tuple[str, ...] = ()
        if not self._unavailable:
            try:
                answer = self._call("GETSNAPSHOTTABLEDIRECTORYLIST", "/")
            except (StorageError, FileNotFoundError) as exc:  # Hadoop before 3.3: no such operation
                self._unavailable = True
                log.warning("HDFS snapshots are not used as pins: %s", exc)
            else:
                listing = answer.get("SnapshottableDirectoryList") or []
                paths = (
                    _join(entry["parentFullPath"], entry["dirStatus"]["pathSuffix"]) for entry in listing
                )
                found = tuple(sorted(paths, key=len, reverse=True))
        self._directories = (now, found)
        return found

    def directory_of(self, path: str) -> str | None:
        """The deepest snapshottable directory holding ``path``, if any."""
        return next((directory for directory in self.directories() if _below(path, directory)), None)

    def pin(self, path: str, live: dict[str, Any]) -> str | None:
        """The version id of a snapshot holding ``path`` as ``live`` describes it; None where no directory
        above it is snapshottable."""
        directory = self.directory_of(path)
        if directory is None:
            return None
        seen = self._latest.get(directory)
        if seen is not None and same_content(self._status(path_in_snapshot(seen, path)), live):
            return seen  # the common case, in parallel: an INSERT's files after its first one
        with self._lock:  # threads identifying one INSERT's files share one new snapshot
            latest = self._latest.get(directory)
            if (
                latest is not None
                and latest != seen
                and same_content(self._status(path_in_snapshot(latest, path)), live)
            ):
                return latest  # another thread took one meanwhile
            name = f"{SNAPSHOT_PREFIX}{int(time.time() * 1000)}-{os.urandom(4).hex()}"
            made = str(self._call("CREATESNAPSHOT", directory, "put", snapshotname=name)["Path"])
            self._latest[directory] = made
            return made

    def expire(self, root: str, cutoff: float) -> int:
        """Delete this product's snapshots taken before ``cutoff`` (epoch seconds) on snapshottable
        directories at, above or below ``root``; how many."""
        deleted = 0
        for directory in self.directories():
            if not (_below(directory, root) or _below(root, directory)):
                continue
            for name, taken in self._snapshots(directory):
                if not name.startswith(SNAPSHOT_PREFIX) or taken >= cutoff:
                    continue
                try:
                    self._call("DELETESNAPSHOT", directory, "delete", snapshotname=name)
                except FileNotFoundError:
                    continue  # deleted meanwhile
                deleted += 1
                with self._lock:
                    if self._latest.get(directory) == _join(directory, f".snapshot/{name}"):
                        del self._latest[directory]
        return deleted

    def _snapshots(self, directory: str) -> Iterator[tuple[str, float]]:
        """(name, time taken) of each snapshot of ``directory``."""
        try:
            listing = self._call("LISTSTATUS", _join(directory, ".snapshot"))["FileStatuses"]["FileStatus"]
        except FileNotFoundError:
            return
        for entry in listing:
            yield entry["pathSuffix"], entry["modificationTime"] / 1000

    def _status(self, path: str) -> dict[str, Any] | None:
        try:
            status: dict[str, Any] = self._call("GETFILESTATUS", path)["FileStatus"]
            return status
        except FileNotFoundError:
            return None


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"
