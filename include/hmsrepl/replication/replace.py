"""Tables whose replica cannot follow by events: policy REPLACE and renames across a policy's table filter.

``REPL DUMP <new> REPLACE <old> FROM n``: the target holds the tables the old policy included. Tables the new
policy adds have no replica to replay events onto, so the incremental dump bootstraps them: it reads them and
replays the window's later events onto what it read with the bootstrap's consolidation
(``DumpEngine._consolidate``), so they are written as of the dump's last event id, under
``layout.BOOTSTRAP_DIR`` (``DumpDir.bootstrap_part``), and their own events in the window are not written. Tables the new policy drops
are dropped by the load. A rename that moves a table into the policy (from an excluded name) is the same
case as a newly included table; a rename out of it is written as a DROP_TABLE of the old name. This holds for
every incremental dump, with or without REPLACE, and for renames across databases (``crossing``): a table
renamed into the policy's database arrives from outside the policy, one renamed into another leaves it.

Which names need this is decided event by event (``WindowPlanner``): a name is *diverged* while the source
has a table under it that the target does not follow. It becomes diverged when newly included by REPLACE
or renamed in from outside the policy, and stops being so when the source frees the name (drop, rename
away: the target has no such table either) or creates it (a CREATE proves the name was free on both sides).
Events of diverged names are not written; the names still diverged at the end are bootstrapped.

Transactional tables are bootstrapped the same way, as Hive's REPL bootstraps them inside the load: the
dump's last event id is then the one of a txn snapshot (``TxnService.replication_snapshot``), as in a
bootstrap dump, and ``_bootstrap/<db>/_acid_state`` holds the tables' write-id state (high watermark, open
write ids with their source txns, aborted ids) as of it, their listings the files visible in it. Their
ALLOC_WRITE_ID and ACID_WRITE events of the window are not written while they are diverged and commits lose
their writes to them (the state and the listings hold their outcome), so the load, which replays the
window's txn events first, then creates each table with the source's write ids: the txns still open replay
their commits onto it later. Reading a table is only possible "now", so a dump that bootstraps tables ends where its reads end: LIMIT and
TO bound only dumps that bootstrap nothing. Reads and consolidation go in rounds: a table renamed in while
the dump was reading is read in the next round. A REPLACE dump whose newly included table was renamed away
after the LIMIT/TO cut extends to now as well: the target never had that table, so its rename cannot be
replayed (``_diverged_after``).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hmsrepl.exceptions import HmsReplError, NoSuchDatabaseError, NoSuchTableError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.event_specs import TXN_KINDS
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    AlterTableMessage,
    CommitTxnMessage,
    DropPartitionMessage,
)
from hmsrepl.metastore.payloads import DropTableBody, metadata_location
from hmsrepl.replication.acid_replay import commit_keeping, is_acid_snapshot, load_bootstrapped_tables_state
from hmsrepl.replication.compaction import (
    TABLE_CREATES,
    TABLE_DROPS,
    EventSummary,
    compact,
    summarize,
)
from hmsrepl.replication.crossing import qualified_target
from hmsrepl.replication.dump_events import DumpEvent
from hmsrepl.replication.layout import TABLE, DumpDir, DumpLayout, DumpMetadata
from hmsrepl.replication.policy import ReplicationPolicy

if TYPE_CHECKING:
    from hmsrepl.replication.dump import DumpEngine
    from hmsrepl.replication.target import TargetWriter

log = logging.getLogger(__name__)

EMIT, SKIP, DROP = "emit", "skip", "drop"
MAX_ROUNDS = 20


class PolicyChangeError(HmsReplError):
    """A table could not be bootstrapped consistently inside an incremental dump."""


@dataclass
class WindowPlanner:
    """Decides, event by event in log order, which events a dump writes, skips, or writes as a drop."""

    policy: ReplicationPolicy
    replaced: ReplicationPolicy | None = None
    extras: set[str] = field(default_factory=set)  # diverged: renamed in from outside the policy
    settled: set[str] = field(default_factory=set)  # newly included, but proven followed by events
    valid: set[str] = field(default_factory=set)  # diverged names whose bootstrap entry is right so far
    known: set[str] = field(default_factory=set)  # diverged names read or renamed in
    summaries: list[EventSummary] = field(default_factory=list)
    actions: dict[int, str] = field(default_factory=dict)  # only events not written as they are
    # COMMIT_TXN event id -> diverged tables whose writes it loses (their bootstrap holds the outcome)
    commit_strips: dict[int, frozenset[str]] = field(default_factory=dict)
    # Names renamed in from outside the policy, by the event they arrived at: until the target follows them
    # again (or the dump's end, which bootstraps them) the replica lacks a table the source has (holds.py).
    arrived: dict[str, int] = field(default_factory=dict)
    holds: list[tuple[int, int]] = field(default_factory=list)
    _at: int = 0  # the event being decided

    def newly_included(self, name: str) -> bool:
        old = self.replaced
        return old is not None and self.policy.includes_table(name) and not old.includes_table(name)

    def diverged(self, name: str) -> bool:
        return name in self.extras or (self.newly_included(name) and name not in self.settled)

    def _follow(self, name: str) -> None:
        """From now on the target follows ``name`` by events (both sides agree: free, or just created)."""
        if name in self.arrived:
            self.holds.append((self.arrived.pop(name), self._at))
        self.extras.discard(name)
        self.valid.discard(name)
        if self.newly_included(name):
            self.settled.add(name)

    def _diverge(self, name: str, entry_valid: bool) -> None:
        self.arrived.setdefault(name, self._at)
        self.settled.discard(name)
        self.extras.add(name)
        self.known.add(name)
        (self.valid.add if entry_valid else self.valid.discard)(name)

    def feed(self, summary: EventSummary) -> None:
        self.summaries.append(summary)
        self._at = summary.event_id
        action = self._decide(summary)
        if action != EMIT:
            self.actions[summary.event_id] = action

    def _decide(self, s: EventSummary) -> str:
        if s.kind in TXN_KINDS:
            return self._decide_txn(s)
        if s.table is None:
            return EMIT
        name = s.table
        if s.new_db is not None:
            return self._decide_move(s)
        if s.is_rename:
            new = s.new_name or ""
            if self.diverged(name):
                was_valid = name in self.valid
                self._follow(name)
                if self.policy.includes_table(new):
                    self._diverge(new, was_valid)
                return SKIP
            if not self.policy.includes_table(name):  # renamed in from outside the policy
                self._diverge(new, False)
                return SKIP
            if self.policy.includes_table(new):
                self._follow(new)  # the new name was free on both sides
                return EMIT
            return DROP  # renamed out of the policy
        if not self.diverged(name):
            return EMIT
        if s.kind in TABLE_CREATES:
            self._follow(name)
            return EMIT
        if s.kind in TABLE_DROPS:
            self._follow(name)
        return SKIP

    def _decide_move(self, s: EventSummary) -> str:
        """A rename across databases (``crossing``): one arriving is bootstrapped like a table renamed in
        from outside the policy, one leaving is written as a drop of its old name (or only frees a diverged
        name: the target has no table under it)."""
        if s.new_db == self.policy.db_name:
            self._diverge(s.new_name or "", False)
            return SKIP
        name = s.table or ""
        if self.diverged(name):
            self._follow(name)
            return SKIP
        return DROP

    def _decide_txn(self, s: EventSummary) -> str:
        """Txns are replayed whole (every open needs its close), but a diverged table's write ids are not
        the target's yet: its allocations and writes are left out, and a commit loses its writes to it."""
        if s.kind in (EventType.ALLOC_WRITE_ID, EventType.ACID_WRITE):
            return SKIP if s.table is not None and self.diverged(s.table) else EMIT
        if s.kind == EventType.COMMIT_TXN:
            names = frozenset(name for name in s.txn_tables if self.diverged(name))
            if names:
                self.commit_strips[s.event_id] = names
        return EMIT

    def to_read(self, source_tables: Iterable[str] | None) -> set[str]:
        """Diverged names whose state must be read: every existing one first, then those renamed in since."""
        names = {n for n in self.known if self.diverged(n) and n not in self.valid}
        if source_tables is not None:
            names |= {n for n in source_tables if self.diverged(n)}
        return names

    def read(self, names: Iterable[str], found: set[str]) -> None:
        for name in names:
            self.known.add(name)
            if name in found:
                self.valid.add(name)

    def bootstrapped(self) -> list[str]:
        return sorted(n for n in self.known if self.diverged(n))

    def plan(self, *, compacting: bool, with_data: bool, last: int | None = None) -> WindowPlan:
        """``last``: the dump's last event id, where the tables still diverged are bootstrapped."""
        effective = []
        for s in self.summaries:
            action = self.actions.get(s.event_id, EMIT)
            if action == DROP:
                effective.append(EventSummary(s.event_id, EventType.DROP_TABLE, s.table))
            elif action == EMIT:
                effective.append(s)
        compacted = compact(effective, with_data=with_data) if compacting else None
        return WindowPlan(
            dict(self.actions),
            compacted.skipped if compacted else set(),
            compacted.trimmed if compacted else {},
            compacted.stripped if compacted else set(),
            (compacted.holds if compacted else []) + self.arrival_holds(last),
            dict(self.commit_strips),
        )

    def arrival_holds(self, last: int | None) -> list[tuple[int, int]]:
        """From each rename into the policy until the target has the table: its drop or rename away, a
        create under its name, or the dump's end (``last``), where it is bootstrapped."""
        until = last if last is not None else self._at
        return self.holds + [(since, until) for since in self.arrived.values()]


@dataclass
class WindowPlan:
    actions: dict[int, str]
    compacted: set[int]
    trimmed: dict[int, frozenset[str]]
    stripped: set[int] = field(default_factory=set)
    holds: list[tuple[int, int]] = field(default_factory=list)  # where no load commits (holds.py)
    commit_strips: dict[int, frozenset[str]] = field(default_factory=dict)

    @property
    def skipped_events(self) -> int:
        return len(self.compacted)

    def rewrite(self, event: DumpEvent[Any]) -> DumpEvent[Any] | None:
        """The event as the dump writes it, or None when it is not written."""
        action = self.actions.get(event.event_id, EMIT)
        if action == SKIP or event.event_id in self.compacted:
            return None
        message = event.message
        if action == DROP and isinstance(message, AlterTableMessage):
            # A rename out of the policy: the target drops the table under its old name.
            renamed_to = qualified_target(message) or message.rename_target
            drop = DropTableBody(table=message.before, recycled=[], renamed_to=renamed_to)
            return event.rewritten(drop, EventType.DROP_TABLE)
        strip = self.commit_strips.get(event.event_id)
        if strip and isinstance(message, CommitTxnMessage):
            return commit_keeping(event, lambda write: write.table not in strip)
        if event.event_id in self.stripped:
            return event.without_data()
        names = self.trimmed.get(event.event_id)
        if names and isinstance(message, AddPartitionMessage | DropPartitionMessage):
            keep = [name not in names for name in message.partition_names()]
            return event.rewritten(message.body.keeping(keep))
        return event


# -- dump side -----------------------------------------------------------------------------------------------
def bootstrap_in_window(
    engine: DumpEngine,
    dump: DumpDir,
    planner: WindowPlanner,
    position: int,
    *,
    with_data: bool,
    external: bool,
) -> int:
    """Bootstrap the planner's diverged tables into ``dump``'s sub-tree; returns the dump's last event id.

    Each round reads tables at some point after ``start`` and replays (start, end] onto them, exactly as a
    bootstrap dump does; a table renamed in during a round is read in the next one.
    """
    source, policy = engine.source, planner.policy
    sub = dump.bootstrap_part()

    def feed(after: int, upto: int) -> None:
        for event in engine._events(policy, after, upto):
            planner.feed(summarize(event))

    try:
        listing: list[str] = source.catalog.get_tables(policy.db_name)
    except NoSuchDatabaseError:
        listing = []
    if not planner.to_read(listing) and not _diverged_after(engine, planner, position):
        return position  # nothing to bootstrap: the window stays as LIMIT/TO cut it
    start = source.get_current_notification_event_id()
    feed(position, start)  # a bootstrap is consistent only as of now: the window extends to the reads
    names = planner.to_read(source.catalog.get_tables(policy.db_name))
    rounds = 0
    acid, snapshot = False, None  # snapshot: of the last round, once a transactional table was read
    while names:
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise PolicyChangeError(
                f"tables of '{policy.db_name}' kept being renamed into the policy while the dump read them "
                f"({sorted(names)[:3]}); run the dump again when renames have settled"
            )
        found = set()
        for name in sorted(names):
            with contextlib.suppress(NoSuchTableError):  # changed since: the round's events settle it
                table = source.catalog.get_table(policy.db_name, name)
                acid = acid or table.is_transactional
                if external or table.is_managed:
                    engine._write_entry(sub, policy.db_name, engine._read_entry(table, with_data))
                found.add(name)
        planner.read(names, found)
        # With a transactional table the round ends at a txn snapshot: its state and listings are of it.
        snapshot = source.txns.replication_snapshot(policy.db_name) if acid else None
        end = snapshot.event_id if snapshot is not None else source.get_current_notification_event_id()
        feed(start, end)
        engine._consolidate(sub, policy, start, end, with_data, external)
        start = end
        names = planner.to_read(None)
    if rounds:  # the consolidation also wrote tables the target follows by events: not part of the dump
        keep = set(planner.bootstrapped())
        for name in _dumped_tables(sub, policy.db_name):
            if name not in keep:
                sub.remove_tree(DumpLayout.table_dir(policy.db_name, name))
    if snapshot is not None:
        engine._finish_acid_tables(sub, policy.db_name, snapshot, with_data)
    return start


def _diverged_after(engine: DumpEngine, planner: WindowPlanner, position: int) -> bool:
    """Whether an event after ``position`` touches a name still diverged there (REPLACE dumps only).

    A table REPLACE newly includes is known to the planner only by the source's tables now: one that existed
    at ``position`` and was renamed away since is not among them, yet the target never got it. Its later
    events (the rename) would reach the target as if it followed the table, so such a dump cannot end at
    ``position``: it extends to now and bootstraps what the rename made of it. Without REPLACE every diverged
    name came from an event the planner has seen, and reading them already extends the dump.
    """
    if planner.replaced is None:
        return False
    probe = copy.deepcopy(planner)
    for event in engine._events(planner.policy, position, engine.source.get_current_notification_event_id()):
        summary = summarize(event)
        touched = summary.table is not None and summary.kind not in TXN_KINDS | TABLE_CREATES
        if touched and probe.diverged(summary.table or ""):
            return True
        probe.feed(summary)
    return False


def _dumped_tables(sub: DumpDir, db: str) -> set[str]:
    return {found.table for _, found in sub.entries(db) if found.kind == TABLE and found.table}


# -- load side -------------------------------------------------------------------------------------------------
def has_bootstrap_part(meta: DumpMetadata) -> bool:
    return bool(meta.bootstrapped_tables) or meta.replaced_policy is not None


def bootstrap_part_objects(dump: DumpDir, meta: DumpMetadata) -> list[tuple[str | None, list[str]]]:
    """(source location, files) of every table and partition bootstrapped inside an incremental dump."""
    sub = dump.bootstrap_part()
    out: list[tuple[str | None, list[str]]] = []
    for name in meta.bootstrapped_tables:
        metadata = DumpLayout.table(meta.db_name, name)
        if not sub.exists(metadata):
            continue  # dropped: nothing to copy
        out.append((metadata_location(sub.read_json(metadata), metadata), sub.read_listing(metadata) or []))
        for dumped in sub.partitions(DumpLayout.table_dir(meta.db_name, name)):
            out.append((metadata_location(dumped.document, dumped.where), dumped.files or []))
    return out


def bootstrap_part_files(dump: DumpDir, meta: DumpMetadata) -> list[str]:
    """Every file the bootstrapped tables of an incremental dump name (for the load's pre-flight)."""
    return [uri for _, files in bootstrap_part_objects(dump, meta) for uri in files]


def apply_bootstrap_part(
    dump: DumpDir,
    meta: DumpMetadata,
    writer: TargetWriter,
    policy: ReplicationPolicy,
    load_table: Callable[[DumpDir, TargetWriter, DumpMetadata, dict[str, Any]], object],
) -> None:
    """Drop the tables the (new) policy excludes, then make each bootstrapped table equal to its dump.

    Idempotent: a table already equal is left alone, partitions the dump does not hold are dropped.
    """
    catalog, db = writer.catalog, writer.db
    if meta.replaced_policy is not None:
        for name in catalog.get_tables(db):
            if not policy.includes_table(name):
                writer.drop_table(name)
    sub = dump.bootstrap_part()
    acid: list[str] = []
    for name in meta.bootstrapped_tables:
        base = DumpLayout.table_dir(meta.db_name, name)
        if not sub.exists(DumpLayout.table(meta.db_name, name)):
            writer.drop_table(name)
            continue
        table = sub.read_json(DumpLayout.table(meta.db_name, name))["table"]
        existing = writer.get_table(name)
        keys = [k["name"] for k in table.get("partition_keys") or []]
        if existing is not None and existing.partition_key_names != keys:
            writer.drop_table(name)
            existing = None
        if existing is not None and keys:
            dumped = {_part_name(keys, held.document["partition"]["values"]) for held in sub.partitions(base)}
            stale = [
                p.values for p in catalog.get_partitions(db, name) if _part_name(keys, p.values) not in dumped
            ]
            if stale:
                writer.drop_partitions(name, stale)
        load_table(sub, writer, meta, table)
        if is_acid_snapshot(table):
            acid.append(name)
    load_bootstrapped_tables_state(writer, sub, meta, acid)


def _part_name(keys: list[str], values: list[str]) -> str:
    return make_partition_name(keys, values)
