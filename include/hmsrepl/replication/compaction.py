"""Event-window compaction: the events of one incremental dump that a later event of the same dump nullifies.

Seed 003 planned this and Hive never built it: replaying a window of events one by one (window size 1) copies
data that a later event replaces and creates objects a later event drops. Here the whole window of a dump is
looked at before anything is written, and an event is skipped when loading the rest gives the same target:

- a table **born and dropped** in the window (CREATE_TABLE ... DROP_TABLE of one table, following it through
  renames): every event of it is skipped, the create and the drop included;
- a table that existed before the window and is **dropped** in it: everything but its renames and the drop
  (the target must still rename it, or the drop would not find it under its final name);
- a partition **added and dropped** in the window: it is taken out of the ADD_PARTITION and DROP_PARTITION
  lists (whole events are skipped when nothing is left) and its events in between are skipped; a partition
  dropped in the window loses its earlier ALTER/INSERT events;
- an event whose every effect is **overwritten later** on the same live object: data events carry the
  object's full listing after the change (``catalog.insert()``), so the last listing wins, and ALTER events
  carry the whole object, so the last snapshot wins. Creates, adds and renames are never skipped this way.

What is never compacted: transactional events (OPEN/COMMIT/ABORT_TXN, ALLOC_WRITE_ID, ACID_WRITE), and any
event of a table that is transactional or that such an event names in the window (a barrier: ACID replay
copies data at COMMIT_TXN and needs every step). A window holding a DROP_DATABASE is not compacted at all.

The plan is computed from small per-event summaries, so memory grows with the number of events in the window,
not with their messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.replication.acid_replay import is_acid_snapshot

COMPACT_SETTING = "hmsrepl.repl.compact.events"
TXN_KINDS = frozenset(
    {
        EventType.OPEN_TXN,
        EventType.COMMIT_TXN,
        EventType.ABORT_TXN,
        EventType.ALLOC_WRITE_ID,
        EventType.ACID_WRITE,
    }
)
META, DATA = "meta", "data"


@dataclass(frozen=True)
class EventSummary:
    """What compaction (and the REPLACE planner) need to know of one event, without its message."""

    event_id: int
    kind: str
    table: str | None
    new_name: str | None = None  # ALTER_TABLE that renames
    partitions: tuple[str, ...] = ()  # partition names the event adds, drops, alters or writes
    effects: frozenset[str] = frozenset()  # META: sets its object's metadata; DATA: its full file listing
    transactional: bool = False  # a transactional table or an ACID event: never compacted
    txn_tables: tuple[str, ...] = ()  # tables a COMMIT_TXN/ABORT_TXN names

    @property
    def is_rename(self) -> bool:
        return self.new_name is not None and self.new_name != self.table


def summarize(event: NotificationEvent) -> EventSummary:
    return summarize_body(event.event_id, event.event_type, event.table_name, event.body())


def summarize_body(event_id: int, kind: str, table: str | None, body: dict[str, Any]) -> EventSummary:
    """Effects as the load applies them (load.py's handlers): see the module docstring."""
    if kind in TXN_KINDS:
        names = {
            entry["table"]
            for key in ("write_ids", "writes")
            for entry in body.get(key) or []
            if isinstance(entry, dict) and entry.get("table")
        }
        return EventSummary(event_id, kind, table, transactional=True, txn_tables=tuple(sorted(names)))
    if table is None:
        return EventSummary(event_id, kind, None)
    snapshot = body.get("after") if kind == EventType.ALTER_TABLE else body.get("table")
    snapshot = snapshot or {}
    keys = [k["name"] for k in snapshot.get("partition_keys") or []]
    transactional = is_acid_snapshot(snapshot)

    def name(part: dict[str, Any]) -> str:
        return make_partition_name(keys, part["values"])

    sets_files = bool(body.get("files")) or bool(body.get("is_truncate"))
    summary = EventSummary(event_id, kind, table, transactional=transactional)
    if kind == EventType.CREATE_TABLE:
        return _with(summary, effects=frozenset({META} if keys else {META, DATA}))
    if kind == EventType.ALTER_TABLE:
        effects = {META, DATA} if sets_files and not keys else {META}
        return _with(summary, new_name=snapshot.get("table_name"), effects=frozenset(effects))
    if kind in (EventType.ADD_PARTITION, EventType.DROP_PARTITION):
        effects = {META, DATA} if kind == EventType.ADD_PARTITION else set()
        return _with(
            summary, partitions=tuple(name(p) for p in body["partitions"]), effects=frozenset(effects)
        )
    if kind == EventType.ALTER_PARTITION:
        effects = {META, DATA} if sets_files else {META}
        return _with(summary, partitions=(name(body["after"]),), effects=frozenset(effects))
    if kind == EventType.INSERT:
        if body.get("partition"):
            return _with(summary, partitions=(name(body["partition"]),), effects=frozenset({DATA}))
        return _with(summary, effects=frozenset({META, DATA}))
    return summary


def _with(summary: EventSummary, **changes: Any) -> EventSummary:
    return EventSummary(**{**summary.__dict__, **changes})


@dataclass
class CompactionPlan:
    skipped: set[int] = field(default_factory=set)  # event ids not to write
    trimmed: dict[int, frozenset[str]] = field(default_factory=dict)  # ADD/DROP_PARTITION: names taken out


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
    if any(s.kind == EventType.DROP_DATABASE for s in steps):
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
        if step.kind == EventType.CREATE_TABLE:
            current[step.table] = _Lifetime(born=True)
            tables.append(current[step.table])
        life = lifetime_of(step.table)
        life.steps.append(index)
        life.barrier |= step.transactional or step.kind in TXN_KINDS
        if step.is_rename:
            del current[step.table]
            current[step.new_name or ""] = life
        elif step.kind == EventType.DROP_TABLE:
            life.dead = True
            del current[step.table]

    for life in tables:
        if life.barrier:
            continue
        if life.born and life.dead:
            plan.skipped.update(steps[i].event_id for i in life.steps)
        elif life.dead:
            plan.skipped.update(
                steps[i].event_id
                for i in life.steps
                if not steps[i].is_rename and steps[i].kind != EventType.DROP_TABLE
            )
        else:
            _compact_partitions(steps, life.steps, plan, with_data)
            if with_data:
                table_steps = [i for i in life.steps if not steps[i].partitions]
                _supersede(steps, table_steps, plan)
    # A partition list emptied by trimming means the whole event is redundant.
    by_id = {step.event_id: step for step in steps if step.event_id in plan.trimmed}
    for event_id, names in list(plan.trimmed.items()):
        if set(by_id[event_id].partitions) <= names:
            plan.skipped.add(event_id)
            del plan.trimmed[event_id]
    return plan


def _compact_partitions(
    steps: Sequence[EventSummary], indices: list[int], plan: CompactionPlan, with_data: bool
) -> None:
    current: dict[str, _Lifetime] = {}
    parts: list[tuple[str, _Lifetime]] = []
    for index in indices:
        step = steps[index]
        for name in step.partitions:
            if step.kind == EventType.ADD_PARTITION:
                current[name] = _Lifetime(born=True)
                parts.append((name, current[name]))
            elif name not in current:
                current[name] = _Lifetime(born=False)
                parts.append((name, current[name]))
            life = current[name]
            life.steps.append(index)
            if step.kind == EventType.DROP_PARTITION:
                life.dead = True
                del current[name]
    for name, life in parts:
        writes = [i for i in life.steps if steps[i].kind in (EventType.ALTER_PARTITION, EventType.INSERT)]
        if life.dead:
            plan.skipped.update(steps[i].event_id for i in writes)
            if life.born:
                for i in life.steps:
                    if steps[i].kind in (EventType.ADD_PARTITION, EventType.DROP_PARTITION):
                        event_id = steps[i].event_id
                        plan.trimmed[event_id] = plan.trimmed.get(event_id, frozenset()) | {name}
        elif with_data:
            _supersede(steps, writes, plan)


def _supersede(steps: Sequence[EventSummary], indices: list[int], plan: CompactionPlan) -> None:
    """Skip each step whose effects later steps of the same object all set again (the last one wins)."""
    covered: set[str] = set()
    for index in reversed(indices):
        step = steps[index]
        structural = step.kind in (EventType.CREATE_TABLE, EventType.ADD_PARTITION) or step.is_rename
        if not structural and step.effects and step.effects <= covered:
            plan.skipped.add(step.event_id)
        covered |= step.effects
