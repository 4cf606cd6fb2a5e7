"""Event-window compaction: the events of one incremental dump that a later event of the same dump nullifies.

Seed 003 planned this and Hive never built it: replaying a window of events one by one (window size 1) copies
data that a later event replaces and creates objects a later event drops. Here the whole window of a dump is
looked at before anything is written, and an event is skipped when loading the rest gives the same target:

- a table **born and dropped** in the window (CREATE_TABLE ... DROP_TABLE of one table, following it through
  renames): every event of it is skipped, the create and the drop included;
- a table that existed before the window and is **dropped** in it: everything but its renames and the drop
  (the target must still rename it, or the drop would not find it under its final name); the renames are
  written without their data change, which describes the listing the skipped events left;
- a partition **added and dropped** in the window: it is taken out of the ADD_PARTITION and DROP_PARTITION
  lists (whole events are skipped when nothing is left) and its events in between are skipped; a partition
  dropped in the window loses its earlier ALTER/INSERT events;
- an event whose every effect is **overwritten later** on the same live object: ALTER events carry the
  whole object, so the last snapshot wins; a data change that sets the object's complete listing (format 1's
  ``files``, a format-2 change marked ``complete``: creates, overwrites, truncates) makes every earlier data
  change of the object redundant. A format-2 *delta* (files added or removed, the rest kept) covers nothing:
  the listing after it depends on every change before it, so it only ever is the one made redundant.
  Creates, adds and renames are never skipped this way.

What is never compacted: transactional events (OPEN/COMMIT/ABORT_TXN, ALLOC_WRITE_ID, ACID_WRITE), and any
event of a table that is transactional or that such an event names in the window (a barrier: ACID replay
copies data at COMMIT_TXN and needs every step). A window holding a DROP_DATABASE is not compacted at all.

Each decision also says from which event until which the compacted replica differs from the source: its
*hold* (``holds.py``, where the rule a load's commits follow is written). A decision whose hold would cover a
cut the load must make (a drop committed before its name is reused: ``reuse_points``) is not taken, so a
load never has to commit inside a hold.

The plan is computed from small per-event summaries, so memory grows with the number of events in the window,
not with their messages.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.metastore.event_specs import TXN_KINDS, Scope, kinds, parse
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.messages import DataChange, Message, TxnMessage
from hmsrepl.replication.acid_replay import is_acid_snapshot
from hmsrepl.replication.dump_events import DumpEvent

COMPACT_SETTING = "hmsrepl.repl.compact.events"
META, DATA, DELTA = "meta", "data", "delta"
"""Effects: sets the object's metadata / sets its complete listing / changes part of its listing."""

TABLE_CREATES = kinds(scope=Scope.TABLE, structural=True)
TABLE_DROPS = kinds(scope=Scope.TABLE, drops=True)
PARTITION_ADDS = kinds(scope=Scope.PARTITION, structural=True)
PARTITION_DROPS = kinds(scope=Scope.PARTITION, drops=True)
PARTITION_WRITES = kinds(scope=Scope.PARTITION, structural=False, drops=False)
DATABASE_DROPS = kinds(scope=Scope.DATABASE, drops=True)
STRUCTURAL = kinds(structural=True)


@dataclass(frozen=True)
class EventSummary:
    """What compaction (and the REPLACE planner) need to know of one event, without its message."""

    event_id: int
    kind: str
    table: str | None
    new_name: str | None = None  # ALTER_TABLE that renames
    new_db: str | None = None  # ALTER_TABLE that renames into another database (crossing.py)
    partitions: tuple[str, ...] = ()  # partition names the event adds, drops, alters or writes
    effects: frozenset[str] = frozenset()  # META, DATA (complete listing), DELTA (part of the listing)
    transactional: bool = False  # a transactional table or an ACID event: never compacted
    txn_tables: tuple[str, ...] = ()  # tables a COMMIT_TXN/ABORT_TXN names

    @property
    def is_rename(self) -> bool:
        return self.new_name is not None and (self.new_name != self.table or self.new_db is not None)


def data_effects(change: DataChange | None) -> frozenset[str]:
    """DATA for a change that sets the whole listing, DELTA for one that changes part of it or checks it.

    A format-2 change that adds and removes nothing still carries the listing's count and digest, which the
    load checks against the listing it holds (a rename, a metadata-only ALTER): like a delta, it needs every
    earlier change of its object applied.
    """
    if change is None or (change.is_empty and change.count is None and change.digest is None):
        return frozenset()
    return frozenset({DATA if change.complete else DELTA})


def _object_effects(message: Message[Any]) -> frozenset[str]:
    return frozenset().union(*(data_effects(obj.change) for obj in message.objects()))


def _none(message: Message[Any]) -> frozenset[str]:
    return frozenset()


def _meta_and_data(message: Message[Any]) -> frozenset[str]:
    """An ALTER (or a create) sets its object's metadata, and whatever its data change sets."""
    return frozenset({META}) | _object_effects(message)


def _added(message: Message[Any]) -> frozenset[str]:
    """A new partition: its metadata and its whole listing (nothing earlier of it survives)."""
    return frozenset({META, DATA})


def _insert(message: Message[Any]) -> frozenset[str]:
    """The load puts an unpartitioned table's snapshot with its files; a partition's INSERT only its files."""
    return _object_effects(message) | (frozenset() if message.partition_names() else frozenset({META}))


EFFECTS: dict[EventType, Callable[[Message[Any]], frozenset[str]]] = {
    EventType.CREATE_TABLE: _meta_and_data,
    EventType.ALTER_TABLE: _meta_and_data,
    EventType.ADD_PARTITION: _added,
    EventType.ALTER_PARTITION: _meta_and_data,
    EventType.INSERT: _insert,
    **dict.fromkeys(
        (
            EventType.CREATE_DATABASE,
            EventType.ALTER_DATABASE,
            EventType.DROP_DATABASE,
            EventType.DROP_TABLE,
            EventType.DROP_PARTITION,
            EventType.CREATE_FUNCTION,
            EventType.DROP_FUNCTION,
            EventType.OPEN_TXN,
            EventType.COMMIT_TXN,
            EventType.ABORT_TXN,
            EventType.ALLOC_WRITE_ID,
            EventType.ACID_WRITE,
            EventType.UPDATE_TABLE_COLUMN_STAT,
            EventType.UPDATE_PARTITION_COLUMN_STAT,
            EventType.DELETE_TABLE_COLUMN_STAT,
            EventType.DELETE_PARTITION_COLUMN_STAT,
        ),
        _none,
    ),
}
"""What each event type sets on its object, as the load applies it (event_handlers.py)."""


def summarize(event: DumpEvent[Any] | NotificationEvent) -> EventSummary:
    dumped = event if isinstance(event, DumpEvent) else DumpEvent.of(event)
    return summarize_message(dumped.event_id, dumped.event.table_name, dumped.message)


def summarize_body(event_id: int, kind: str, table: str | None, body: dict[str, Any]) -> EventSummary:
    return summarize_message(event_id, table, parse(kind, body, None, table))


def summarize_message(event_id: int, table: str | None, message: Message[Any]) -> EventSummary:
    """Effects as the load applies them: see the module docstring and ``EFFECTS``."""
    kind = EventType(message.kind)
    if kind in TXN_KINDS:
        txn_tables = message.txn_tables() if isinstance(message, TxnMessage) else ()
        return EventSummary(event_id, kind, table, transactional=True, txn_tables=txn_tables)
    if table is None:
        return EventSummary(event_id, kind, None)
    moved, after = message.moved_to_db, message.table
    return EventSummary(
        event_id,
        kind,
        table,
        new_name=after.table_name if moved is not None and after is not None else message.rename_target,
        new_db=moved,
        partitions=message.partition_names(),
        effects=EFFECTS[kind](message),
        transactional=is_acid_snapshot(message.table),
    )


@dataclass
class CompactionPlan:
    skipped: set[int] = field(default_factory=set)  # event ids not to write
    trimmed: dict[int, frozenset[str]] = field(default_factory=dict)  # ADD/DROP_PARTITION: names taken out
    stripped: set[int] = field(default_factory=set)  # written without their data change (metadata only)
    # [first, until): event ids at which the replica, loaded without these events, is not the source (holds.py)
    holds: list[tuple[int, int]] = field(default_factory=list)

    def take(self, decision: CompactionPlan) -> None:
        """Add one object's decision (its events left out, trimmed or stripped, and its hold)."""
        self.skipped |= decision.skipped
        for event_id, names in decision.trimmed.items():
            self.trimmed[event_id] = self.trimmed.get(event_id, frozenset()) | names
        self.stripped |= decision.stripped
        self.holds += decision.holds


def _decision(hold: tuple[int, int], skipped: set[int]) -> CompactionPlan:
    return CompactionPlan(skipped=skipped, holds=[hold])


def reuse_points(steps: Sequence[EventSummary]) -> list[int]:
    """Ids of the events that create, add, rename or alter a table or partition under a name dropped earlier
    in the window, in order: the load commits the drop before each such event
    (``event_batches.split_before_reuse``) whatever compaction leaves out, so these include every place it cuts
    for that reason."""
    dropped_tables: set[str] = set()
    dropped_parts: set[tuple[str, str]] = set()
    out: list[int] = []
    for step in steps:
        if step.table is None:
            continue
        names = {step.table} | ({step.new_name} if step.new_name else set())
        if (step.kind in STRUCTURAL or step.kind == EventType.ALTER_TABLE) and (
            names & dropped_tables or any((n, p) in dropped_parts for n in names for p in step.partitions)
        ):
            out.append(step.event_id)
        if step.kind in TABLE_DROPS:
            dropped_tables.add(step.table)
        elif step.kind in PARTITION_DROPS:
            dropped_parts.update((step.table, p) for p in step.partitions)
    return out


def _covers_a_cut(decision: CompactionPlan, cuts: list[int]) -> bool:
    """A hold [first, until) covers the commit before event r when first <= r - 1 < until."""
    for first, until in decision.holds:
        index = bisect.bisect_right(cuts, first)
        if index < len(cuts) and cuts[index] <= until:
            return True
    return False


@dataclass
class _Lifetime:
    """One table (through its renames) or one partition, from its birth or the window's start."""

    born: bool
    steps: list[int] = field(default_factory=list)
    dead: bool = False
    barrier: bool = False


def compact(steps: Sequence[EventSummary], *, with_data: bool = True) -> CompactionPlan:
    """The events of ``steps`` (one dump's events, in order) that loading the others makes redundant.

    ``with_data=False`` (metadata-only dumps, whose loads ignore file listings) keeps the lifetime rules
    and drops the "overwritten later" rule, whose data effects mean nothing there.
    """
    plan = CompactionPlan()
    if any(s.kind in DATABASE_DROPS for s in steps):
        return plan
    current: dict[str, _Lifetime] = {}
    tables: list[_Lifetime] = []

    def lifetime_of(name: str) -> _Lifetime:
        if name not in current:
            current[name] = _Lifetime(born=False)
            tables.append(current[name])
        return current[name]

    for index, step in enumerate(steps):
        if step.table is None:
            for name in step.txn_tables:
                lifetime_of(name).barrier = True
            continue
        if step.kind in TABLE_CREATES:
            current[step.table] = _Lifetime(born=True)
            tables.append(current[step.table])
        life = lifetime_of(step.table)
        life.steps.append(index)
        life.barrier |= step.transactional or step.kind in TXN_KINDS
        if step.is_rename:
            del current[step.table]
            current[step.new_name or ""] = life
        elif step.kind in TABLE_DROPS:
            life.dead = True
            del current[step.table]

    decisions: list[CompactionPlan] = []
    for life in tables:
        if life.barrier:
            continue
        ids = [steps[i].event_id for i in life.steps]
        if life.born and life.dead:
            decisions.append(_decision((ids[0], ids[-1]), set(ids)))  # never on the replica
        elif life.dead:
            # Its renames stay, without their data change: the data events before them are skipped, and a
            # rename's change would be checked against the listing they left.
            dead = CompactionPlan()
            for i in life.steps:
                step = steps[i]
                if step.is_rename and step.effects & {DATA, DELTA}:
                    dead.stripped.add(step.event_id)
                elif not step.is_rename and step.kind not in TABLE_DROPS:
                    dead.skipped.add(step.event_id)
            if dead.skipped or dead.stripped:
                dead.holds.append((min(dead.skipped | dead.stripped), ids[-1]))  # until its drop
                decisions.append(dead)
        else:
            _compact_partitions(steps, life.steps, decisions, with_data)
            if with_data:
                table_steps = [i for i in life.steps if not steps[i].partitions]
                _supersede(steps, table_steps, decisions)
    cuts = reuse_points(steps)
    for decision in decisions:
        if not _covers_a_cut(decision, cuts):
            plan.take(decision)
    # A partition list emptied by trimming means the whole event is redundant.
    by_id = {step.event_id: step for step in steps if step.event_id in plan.trimmed}
    for event_id, names in list(plan.trimmed.items()):
        if set(by_id[event_id].partitions) <= names:
            plan.skipped.add(event_id)
            del plan.trimmed[event_id]
    return plan


def _compact_partitions(
    steps: Sequence[EventSummary], indices: list[int], decisions: list[CompactionPlan], with_data: bool
) -> None:
    current: dict[str, _Lifetime] = {}
    parts: list[tuple[str, _Lifetime]] = []
    for index in indices:
        step = steps[index]
        for name in step.partitions:
            if step.kind in PARTITION_ADDS:
                current[name] = _Lifetime(born=True)
                parts.append((name, current[name]))
            elif name not in current:
                current[name] = _Lifetime(born=False)
                parts.append((name, current[name]))
            life = current[name]
            life.steps.append(index)
            if step.kind in PARTITION_DROPS:
                life.dead = True
                del current[name]
    for name, life in parts:
        writes = [i for i in life.steps if steps[i].kind in PARTITION_WRITES]
        if life.dead:
            dead = CompactionPlan(skipped={steps[i].event_id for i in writes})
            if life.born:
                for i in life.steps:
                    if steps[i].kind in PARTITION_ADDS | PARTITION_DROPS:
                        dead.trimmed[steps[i].event_id] = frozenset({name})
            changed = dead.skipped | dead.trimmed.keys()
            if changed:
                dead.holds.append((min(changed), steps[life.steps[-1]].event_id))  # until its drop
                decisions.append(dead)
        elif with_data:
            _supersede(steps, writes, decisions)


def _supersede(steps: Sequence[EventSummary], indices: list[int], decisions: list[CompactionPlan]) -> None:
    """Skip each step whose effects later steps of the same object all set again (the last one wins).

    A DELTA needs a later DATA (a complete listing) to be redundant, and covers nothing itself: dropping an
    earlier change under a later delta would lose what the delta was applied to. A DELTA that stays (a
    rename, which is never skipped, or a step with effects nothing later sets) reads the listing before it,
    so no earlier data change is redundant any more. A skipped step's hold ends at the latest of the steps
    that set its effects again (the nearest later one for each effect).
    """
    covered: dict[str, int] = {}  # effect -> event id of the nearest later step kept that sets it
    for index in reversed(indices):
        step = steps[index]
        structural = step.kind in STRUCTURAL or step.is_rename
        needs = {DATA if effect == DELTA else effect for effect in step.effects}
        if not structural and needs and needs <= covered.keys():
            until = max(covered[effect] for effect in needs)
            decisions.append(_decision((step.event_id, until), {step.event_id}))
            continue
        if DELTA in step.effects:
            covered.pop(DATA, None)
        covered.update(dict.fromkeys(step.effects - {DELTA}, step.event_id))
