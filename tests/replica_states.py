"""A table's state as readers see it, and the states a load's commits publish, for checking replicas.

A state is what a query engine reading the table gets: its files by content (per partition for a
partitioned table), or None if the table does not exist. Tests record the source's states at event ids and
check that every state the replica shows, at the position it shows, is one the source had there.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.replication.load import LoadEngine, repl_status
from hmsrepl.storage.base import filesystem_for, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

States = dict[str, object]  # table name -> state


def _files(location: str | None) -> frozenset[tuple[str, bytes]]:
    if not location:
        return frozenset()
    fs = filesystem_for(location)
    out = []
    for status in list_data_files(RootedFileSystem([location], purpose="test"), location):
        with fs.open_read(status.uri) as stream:
            out.append((relative_to(status.uri, location), stream.read()))
    return frozenset(out)


def table_state(store: Metastore, db: str, name: str) -> tuple[int | None, object]:
    """(table id, state): None if missing; else its files, or each partition's files, by content."""
    try:
        table = store.catalog.get_table(db, name)
    except NoSuchObjectError:
        return None, None
    if table.partition_keys:
        parts = store.catalog.get_partitions(db, name)
        keys = table.partition_key_names
        return table.id, (
            "partitioned",
            frozenset((make_partition_name(keys, p.values), _files(p.sd.location)) for p in parts),
        )
    return table.id, ("plain", _files(table.sd.location))


def states(store: Metastore, db: str, names: Sequence[str]) -> States:
    return {name: table_state(store, db, name)[1] for name in names}


@dataclass
class History:
    """The source's tables at each event id recorded: after every change that logs an event (the ids in
    between, not recorded, are events that change none of them: other tables, transactions)."""

    store: Metastore
    db: str
    names: Sequence[str]
    recorded: dict[int, States] = field(default_factory=dict)

    def record(self) -> None:
        self.recorded[self.store.events.current_event_id()] = states(self.store, self.db, self.names)

    def at(self, position: int) -> States | None:
        """The source's tables at ``position`` (None: before the first id recorded)."""
        ids = sorted(self.recorded)
        index = bisect.bisect_right(ids, position)
        return self.recorded[ids[index - 1]] if index else None

    def between(self, before: int, after: int) -> list[States]:
        """The source's tables at every position from ``before`` to ``after``."""
        first = self.at(before)
        later = [tables for event_id, tables in self.recorded.items() if before < event_id <= after]
        return ([first] if first is not None else []) + later


@dataclass
class CommitLog:
    """The replica's position and tables after every transaction a load commits (``LoadEngine._batch``)."""

    store: Metastore
    db: str
    names: Sequence[str]
    seen: list[tuple[int, States]] = field(default_factory=list)

    @contextlib.contextmanager
    def watching(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[CommitLog]:
        batch = LoadEngine._batch

        @contextlib.contextmanager
        def observed(engine: LoadEngine, writer: object) -> Iterator[None]:
            with batch(engine, writer):  # type: ignore[arg-type]
                yield
            self.seen.append((repl_status(self.store, self.db) or 0, states(self.store, self.db, self.names)))

        with monkeypatch.context() as patch:
            patch.setattr(LoadEngine, "_batch", observed)
            yield self

    def foreign(self, history: History) -> list[tuple[int, States]]:
        """The commits whose tables are not the source's at their position."""
        return [(position, seen) for position, seen in self.seen if history.at(position) != seen]
