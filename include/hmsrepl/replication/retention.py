"""Dump-directory retention: old dumps are removed, dumps a replica still needs are kept.

A dump holds only metadata and ``_files`` indirections, but a busy warehouse writes one per LIMIT batch,
every few minutes, forever. Once loaded, a dump is never read again: the next incremental dump starts from
the replica's ``repl.last.id``, not from an older dump. So a dump may go when its newest file is older than
the retention, unless a replica's bootstrap load is still unfinished from it (the bootstrap-in-progress
mark names the dump to finish loading). Age is measured on the files themselves, so a dump still being
written (fresh files) is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from hmsrepl.metastore import Metastore
from hmsrepl.replication.target import BOOTSTRAP_IN_PROGRESS
from hmsrepl.storage.base import FileStatus, join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

DEFAULT_DUMP_RETENTION_SECONDS = 7 * 86400


@dataclass
class PruneResult:
    """What a pass removed and kept (dump directory URIs)."""

    removed: list[str] = field(default_factory=list)
    kept_recent: list[str] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)
    bytes_removed: int = 0


def dumps_in_use(target: Metastore) -> set[str]:
    """Dump directories that a replica of ``target`` must still finish loading (bootstrap marks)."""
    in_use = set()
    for db_name in target.catalog.get_databases():
        dump = (target.catalog.get_database(db_name).parameters or {}).get(BOOTSTRAP_IN_PROGRESS)
        if dump:
            in_use.add(dump.rstrip("/"))
    return in_use


def group_by_dump(dump_root: str, files: Iterable[FileStatus]) -> dict[str, list[FileStatus]]:
    """The files under ``dump_root`` grouped by the dump directory (first path component) they belong to."""
    dumps: dict[str, list[FileStatus]] = {}
    for status in files:
        top = relative_to(status.uri, dump_root).split("/", 1)[0]
        if top:
            dumps.setdefault(join_uri(dump_root, top), []).append(status)
    return dumps


def prune_dumps(
    dump_root: str,
    retention_seconds: int,
    *,
    in_use: Collection[str] = (),
    dry_run: bool = False,
    now: float | None = None,
) -> PruneResult:
    """Remove dump directories under ``dump_root`` whose newest file is older than the retention."""
    if retention_seconds < 0:
        raise ValueError(f"retention {retention_seconds} s is negative; give 0 or more seconds")
    fs = RootedFileSystem([dump_root], purpose=f"dump retention under '{dump_root}'")
    root = dump_root.rstrip("/")
    cutoff = (time.time() if now is None else now) - retention_seconds
    result = PruneResult()
    keep = {uri.rstrip("/") for uri in in_use}
    for dump, files in sorted(group_by_dump(root, fs.list_files(root)).items()):
        if dump in keep:
            result.kept_in_use.append(dump)
        elif max(f.mtime for f in files) >= cutoff:
            result.kept_recent.append(dump)
        else:
            if not dry_run:
                fs.delete_tree(dump)
            result.removed.append(dump)
            result.bytes_removed += sum(f.size for f in files)
    return result
