"""The files one write id wrote in an ACID location of a stock metastore: what its commit replicates.

A stock Hive's COMMIT_TXN names no files (Hive 3.1 has no ``add_write_notification_log`` at all), so a
commit's files are read from the location when the commit is read: the directories that belong to exactly
that write id (``delta_W_W[_S]``, ``delete_delta_W_W[_S]``, ``base_W``). A committed write id's directories
never change afterwards (later writes and the compactor make new ones), so reading them later gives the
commit's content, until Hive's cleaner removes them after a compaction (then the commit copies nothing and
the replica reads the data again from the compactor's base at a later bootstrap).
"""

from __future__ import annotations

from hmsrepl.acid.directories import DirKind, parse_directory_name
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.storage.base import FileStatus, is_hidden, relative_to


def belongs_to(top: str, write_id: int) -> bool:
    """Whether a directory directly below an ACID location holds what ``write_id`` wrote, and only that."""
    parsed = parse_directory_name(top)
    if parsed is None or parsed.visibility_txn_id is not None:  # not a write's, or the compactor's
        return False
    if parsed.kind is DirKind.BASE:
        return parsed.max_write_id == write_id
    return parsed.min_write_id == parsed.max_write_id == write_id


def write_id_files(cm: ChangeManager, location: str | None, write_id: int) -> list[str]:
    """Encoded files (this product's checksums) of ``write_id``'s directories below ``location``.

    A directory without data files (an empty overwrite's base) contributes its hidden marker, so the
    replica recreates it and hides what it replaced, as ``acid_replay.visible_statuses`` does."""
    fs = cm.files
    if not location or not fs.exists(location):
        return []
    entries: dict[str, list[FileStatus]] = {}
    for status in fs.list_files(location):
        top = relative_to(status.uri, location).split("/", 1)[0]
        if belongs_to(top, write_id):
            entries.setdefault(top, []).append(status)
    chosen: list[FileStatus] = []
    for statuses in entries.values():
        data = [s for s in statuses if not is_hidden(relative_to(s.uri, location))]
        chosen.extend(data or statuses)
    return describe_files(location, cm, chosen)
