"""Files lost at the source: an explicit, reported way forward instead of a replica stuck at one position.

A load needs every file its events add. When one is gone from the source and from its cmroot (retention
passed, an object store without versions), the default is to refuse the load before its first change
(``FileLostError``), as the replica can never equal the source at that event id. With the load setting
``'hmsrepl.repl.lost.files'='skip-objects'`` the load instead applies everything else and, for each table or
partition whose events name a lost file, keeps the data the replica last had (a new object gets its
metadata and no data), and marks the object ``hmsrepl.replica.stale = '<first event id>: <n> files lost'``.

A stale object stays stale: later loads keep applying its metadata but skip its data changes (they are
deltas on a state the replica does not hold) until a *complete* change arrives whose files are all there: an
overwrite at the source (INSERT OVERWRITE, a full listing) or a bootstrap of the database. That change is
applied whole and clears the mark. A lost file that belongs to no single table or partition (an ACID
commit, a table bootstrapped inside the dump) still refuses the load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import FileLostError
from hmsrepl.metastore.applied_files import ListingPages
from hmsrepl.metastore.messages import DataChange, Message
from hmsrepl.replication.commands import CommandError

SETTING = "hmsrepl.repl.lost.files"
FAIL, SKIP_OBJECTS = "fail", "skip-objects"
STALE = "hmsrepl.replica.stale"  # parameter of a replica table or partition whose data is behind the source
FIX = (
    "overwrite it at the source (a complete listing replaces the replica's data and clears the mark) or "
    "re-bootstrap the database (REPL DUMP <db>, then REPL LOAD)"
)

ObjectName = tuple[str, str | None]  # (table, partition name or None)


def mode(settings: Mapping[str, str]) -> str:
    """The load's lost-files mode from its WITH settings (default: fail, as without the setting)."""
    value = settings.get(SETTING, FAIL).strip().lower()
    if value not in (FAIL, SKIP_OBJECTS):
        raise CommandError(f"'{SETTING}'='{value}' is not a mode: use '{FAIL}' (default) or '{SKIP_OBJECTS}'")
    return value


def _path(encoded: str) -> str:
    return encoded.split("#", 1)[0]


def label(name: ObjectName) -> str:
    table, partition = name
    return f"{table}/{partition}" if partition else table


@dataclass
class LostFiles:
    """The files one load cannot fetch, the objects they belong to, and what the load did about stale data."""

    lost: frozenset[str] = frozenset()  # encoded URIs
    first: dict[ObjectName, tuple[int, int]] = field(default_factory=dict)  # first event id, files lost
    stale: dict[ObjectName, str] = field(default_factory=dict)  # objects left stale by this load: their mark
    cleared: set[ObjectName] = field(default_factory=set)  # stale objects this load brought up to date

    @classmethod
    def attribute(cls, lost: Sequence[str], events: Iterable[tuple[int, Message[Any]]]) -> LostFiles:
        """Which tables and partitions name ``lost`` files in ``events``; refuse lost files of anything else."""
        missing = set(lost)
        seen: dict[ObjectName, tuple[int, set[str]]] = {}
        for event_id, msg in events:
            table = msg.table_name or ""
            for obj in msg.objects():
                hit = missing.intersection(obj.change.added)
                if hit:
                    _, files = seen.setdefault((table, obj.partition_name), (event_id, set()))
                    files.update(hit)
        attributed = set().union(*(files for _, files in seen.values())) if seen else set()
        orphans = sorted(missing - attributed)
        if orphans:
            raise FileLostError(
                f"{len(orphans)} file(s) this load needs are gone from the source and its cmroot and belong "
                f"to no single table or partition (a transaction's write, a table bootstrapped in the dump), "
                f"e.g. '{_path(orphans[0])}'; nothing was applied: run a bootstrap to re-replicate"
            )
        return cls(frozenset(missing), {name: (first, len(files)) for name, (first, files) in seen.items()})

    def decide(
        self,
        params: Mapping[str, str],
        change: DataChange | ListingPages | None,
        name: ObjectName,
        event_id: int,
    ) -> tuple[DataChange | ListingPages | None, str | None]:
        """The data change to apply to an object and the stale mark it keeps (None: up to date). A listing
        left in its pages is held whole only when some file is lost or the object is marked stale."""
        mark = params.get(STALE)
        if isinstance(change, ListingPages):
            if not self.lost and mark is None:
                return change, None
            change = change.as_change()
        if change is not None and self.lost and self.lost.intersection(change.added):
            first, count = self.first.get(name, (event_id, 0))
            mark = mark or f"{first}: {count or 'some'} files lost"
            change = None
        elif mark is not None and change is not None and change.complete:
            self.cleared.add(name)
            self.stale.pop(name, None)
            return change, None
        elif mark is not None and change is not None:
            change = None  # a delta onto data the replica does not hold
        if mark is not None and change is None:
            self.stale[name] = mark
        return change, mark

    def report(self, db: str) -> list[str]:
        """One line per object this load left stale or brought up to date."""
        lines = [
            f"{db}.{label(name)}: stale ({mark}), data kept as the replica had it; {FIX}"
            for name, mark in sorted(self.stale.items(), key=lambda i: (i[0][0], i[0][1] or ""))
        ]
        lines += [
            f"{db}.{label(name)}: no longer stale (a complete change replaced its data)"
            for name in sorted(self.cleared, key=lambda n: (n[0], n[1] or ""))
            if name not in self.stale
        ]
        return lines
