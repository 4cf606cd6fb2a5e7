"""What a refused attack must leave as it was: files (hashed), catalog rows and the notification log.

Security tests take a ``Untouched`` snapshot before an attack and compare it after: every file below the
guarded directories by content hash (links by target, so a planted link that is followed shows up), every
row of the catalog tables a write changes, and the last event id (a refused write logs nothing).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.schema import data_files, data_listings, dbs, funcs, partitions, tbls

CATALOG_TABLES = (dbs, tbls, partitions, funcs, data_files, data_listings)


def tree_hashes(*dirs: Path | str) -> dict[str, str]:
    """Every entry below ``dirs``: regular files by content hash and mode, links by target, others by kind."""
    out: dict[str, str] = {}
    for top in dirs:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    out[path] = "link:" + os.readlink(path)
                elif os.path.isfile(path):
                    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                    out[path] = f"{digest} mode {os.stat(path).st_mode & 0o7777:o}"
                else:
                    out[path] = "dir" if os.path.isdir(path) else "special"
    return out


def catalog_rows(store: Metastore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the catalog's object and file tables, sorted (order of storage does not matter)."""
    with store.engine.connect() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in CATALOG_TABLES
        }


@dataclass(frozen=True)
class Untouched:
    """A snapshot of the files below ``dirs`` and of ``stores``' catalogs and logs, to compare after."""

    files: dict[str, str]
    rows: list[dict[str, list[tuple[Any, ...]]]]
    last_events: list[int]

    @classmethod
    def take(cls, dirs: list[Path | str], stores: list[Metastore]) -> Untouched:
        return cls(
            files=tree_hashes(*dirs),
            rows=[catalog_rows(store) for store in stores],
            last_events=[store.events.current_event_id() for store in stores],
        )

    def assert_same(self, dirs: list[Path | str], stores: list[Metastore]) -> None:
        after = Untouched.take(dirs, stores)
        assert after.files == self.files, "files outside the roots or of the replica changed"
        assert after.last_events == self.last_events, "a refused write logged an event"
        assert after.rows == self.rows, "catalog rows changed"
