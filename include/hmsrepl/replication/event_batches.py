"""How an incremental load cuts a dump's events into transactions, and which tables' appends go in place.

A batch commits as one transaction, so readers of the replica see only batch boundaries; every cut made here
is one where the source itself had that state. The cuts a load must make (a drop committed before its name is
reused) and those it makes for speed (a table's one-file appends kept apart from changes to its shape, so
their files can be added in place) are decided from the events alone, before anything is applied; where a
commit may fall at all is ``holds.py``'s rule. ``load.LoadEngine`` applies the batches these yield.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from hmsrepl.metastore.event_specs import Scope, spec_of
from hmsrepl.metastore.messages import AlterPartitionMessage, AlterTableMessage, InsertMessage, Message
from hmsrepl.replication.dump_validation import PendingEvents
from hmsrepl.replication.holds import Holds
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.replica_files import adds_one_file

BATCH_EVENTS = 500
#: Events in order, each its dumped document and its typed message: a chunk read from a dump, or what one
#: transaction applies.
EventBatch = list[tuple[dict[str, Any], Message[Any]]]


def parsed_chunks(dump: DumpDir, pending: PendingEvents) -> Iterator[EventBatch]:
    """The pending events with their typed messages, ``BATCH_EVENTS`` at a time, in order: the messages
    validation parsed, or parsed here for documents read again."""
    ids = pending.ids
    for start in range(0, len(ids), BATCH_EVENTS):
        yield [pending.take_parsed(dump, i) for i in ids[start : start + BATCH_EVENTS]]


def in_place_tables(messages: Iterable[Message[Any]]) -> frozenset[str]:
    """Tables whose data changes in a batch may be added in place (``VersionPublisher._publish_in_place``).

    Files added in place appear after the batch's commit, renamed one by one in the order the source wrote
    them (``written_at``), while objects given new versions switch at the commit: a table's readers must
    still see only states its source had. So a table qualifies when no event of the batch adds, drops or
    renames one of its partitions or the table (those show at the commit), and either its data changes in
    one object only (readers see it before the batch, then after), or several of its partitions change,
    every event of the batch on the table is a partition write adding one file (or none), and the batch has
    no database event (``database_event``, which would split the table's run in two): its files are then renamed in the
    source's order, across its partitions (A B A as well as A A B), provided every one of those partitions
    can be added in place (``TargetWriter.put_partitions`` checks them together). ``load_batches`` keeps a
    table's appends and its reshapes in separate batches, so the usual reshape (an hour rollover, a rolling
    window's drop) costs an extra commit, not new versions.
    """
    changed: dict[str, set[str | None]] = {}
    appends: dict[str, bool] = {}  # table -> every event on it is a one-file partition write
    reshaped: set[str] = set()  # tables whose partitions (or the table itself) come or go in the batch
    database_level = False
    for msg in messages:
        for obj in msg.objects():
            changed.setdefault(obj.snapshot.table_name, set()).add(obj.partition_name)
        if msg.table_name is None:
            database_level = database_level or database_event(msg)
            continue
        names = msg.table_names
        if _reshapes(msg):
            reshaped |= names
        append = _one_file_partition_write(msg)
        for name in names:
            appends[name] = appends.get(name, True) and append
    return frozenset(
        table
        for table, objects in changed.items()
        if table not in reshaped and (len(objects) == 1 or (not database_level and appends.get(table, False)))
    )


def database_event(msg: Message[Any]) -> bool:
    """An event without a table that every table's run must be applied before (a database's creation,
    change or drop). A transaction's events write ACID tables only (``PartitionRuns.flush_for``) and a
    function's touch no table: neither orders a plain table's writes."""
    return msg.table_name is None and spec_of(msg.kind).scope not in (Scope.TXN, Scope.FUNCTION)


def _reshapes(msg: Message[Any]) -> bool:
    """The event adds, drops or renames a partition, or drops or renames the table: it shows at the commit,
    so files renamed into the table after the commit (written before it, maybe) would show out of order."""
    spec = spec_of(msg.kind)
    return spec.structural or spec.drops or msg.renames


def written_at(events: Iterable[tuple[dict[str, Any], Message[Any]]]) -> dict[str, int]:
    """The event that wrote each file a one-file append of the batch adds (encoded URI -> event id)."""
    return {
        obj.change.added[0]: int(event["event_id"])
        for event, msg in events
        for obj in msg.objects()
        if adds_one_file(obj.change)
    }


def _one_file_partition_write(msg: Message[Any]) -> bool:
    """An ALTER_PARTITION or partition INSERT whose data change adds one file and removes none, or is none."""
    if not isinstance(msg, AlterPartitionMessage | InsertMessage) or not msg.partition_names():
        return False
    return all(adds_one_file(obj.change) or obj.change.is_empty for obj in msg.objects())


def commit_batches(chunks: Iterable[EventBatch], holds: Holds, end: int) -> Iterator[tuple[EventBatch, int]]:
    """The transactions a load applies its events in, each with the position it publishes (``holds.py``).

    ``chunks``: the dump's events in order, ``BATCH_EVENTS`` at a time; ``end``: the highest position a
    commit may publish. ``load_batches`` cuts each chunk; a cut where the rule allows no commit (inside a
    hold) is undone, the batch merged with the next, and a merged batch is cut again only where a drop's name
    is reused (``split_before_reuse``), a cut ``compaction.compact`` keeps out of every hold.
    """
    group: EventBatch = []
    merged = False
    for batch in (batch for chunk in chunks for batch in load_batches(chunk)):
        if group:
            position = holds.position(group[-1][0]["event_id"], min(batch[0][0]["event_id"], end + 1))
            if position is None:  # no commit inside a hold: the next batch joins this one
                group, merged = group + batch, True
                continue
            yield from _cut_merged(group, merged, holds, position, end)
        group, merged = batch, False
    if group:
        last = min(group[-1][0]["event_id"], end)
        yield from _cut_merged(group, merged, holds, holds.position(last, end + 1) or last, end)


def _cut_merged(
    group: EventBatch, merged: bool, holds: Holds, position: int, end: int
) -> Iterator[tuple[EventBatch, int]]:
    """``group`` publishing ``position``; a merged one in the parts a reused name needs, each at its own.

    A reused name inside a hold (a rename-in's, or a dump that recorded none) is not cut: the drop's
    directories are retired only after the commit, and retirement removes only what no metadata names then
    (``leftovers``), so the re-created object's files stay; a cut there would show readers a state the
    source never had.
    """
    parts = split_before_reuse(group) if merged else [group]
    pending: EventBatch = []
    for part, following in itertools.pairwise(parts):
        pending += part
        published = holds.position(part[-1][0]["event_id"], min(following[0][0]["event_id"], end + 1))
        if published is not None:
            yield pending, published
            pending = []
    yield pending + parts[-1], position


def load_batches(events: EventBatch) -> Iterator[EventBatch]:
    """The transactions a run of events is applied in: cut where a drop's name is reused
    (``split_before_reuse``) and between a table's appends and a change to its shape or a database event
    (``split_appends_from_reshapes``)."""
    for reused in split_before_reuse(events):
        yield from split_appends_from_reshapes(reused)


def split_appends_from_reshapes(events: EventBatch) -> list[EventBatch]:
    """Cut a batch between a table's one-file appends and an event that adds, drops or renames one of its
    partitions or the table, or a database event, in either order.

    Files added in place appear after their batch's commit, a reshape at it; in one batch the appends'
    partitions would take new versions instead (``in_place_tables``), copying or linking every file they
    keep. Cut, each part commits on its own and its appends go in place: readers see the source's states in
    its order, at the cost of one more transaction. The usual cases are an hour rollover (appends to hour h,
    hour h+1 added, appends to both), once an hour per table, a rolling window dropping its oldest day, and
    a replica's own log read by the next replica in a chain (an ALTER_DATABASE, the position, per load).
    """
    out: list[EventBatch] = [[]]
    appended: set[str] = set()  # tables with a one-file append in the current part
    reshaped: set[str] = set()  # tables with a partition (or the table) added, dropped or renamed in it
    database_seen = False  # the current part holds a database event (it reshapes every table's order)
    for event, msg in events:
        names = msg.table_names
        database = database_event(msg)
        reshapes = database or _reshapes(msg)
        appends = not reshapes and any(adds_one_file(obj.change) for obj in msg.objects())
        if reshapes:
            clash = bool(appended) if database else bool(names & appended)
        else:
            clash = appends and (database_seen or bool(names & reshaped))
        if out[-1] and clash:
            out.append([])
            appended.clear()
            reshaped.clear()
            database_seen = False
        out[-1].append((event, msg))
        database_seen = database_seen or database
        if reshapes:
            reshaped |= names
        elif appends:
            appended |= names
    return [batch for batch in out if batch]


def split_before_reuse(events: EventBatch) -> list[EventBatch]:
    """Cut a batch where a table or partition dropped in it gets data at its name again.

    A drop removes the target's files only once its transaction commits; in a batch that later creates,
    renames into or adds the same table or partition, that removal would delete the new files (same
    directory). Each cut commits the drop first; readers still see only states the source had. Partitions
    count by name: dropping one partition and adding another (a rolling window) needs no cut.
    """
    out: list[EventBatch] = [[]]
    dropped_tables: set[str] = set()
    dropped_parts: set[tuple[str, str]] = set()
    for event, msg in events:
        spec = spec_of(msg.kind)
        table = msg.table.table_name if msg.table is not None else None
        reused = (spec.structural or isinstance(msg, AlterTableMessage)) and (
            table in dropped_tables or any((table, name) in dropped_parts for name in msg.partition_names())
        )
        if reused and out[-1]:
            out.append([])
            dropped_tables.clear()
            dropped_parts.clear()
        out[-1].append((event, msg))
        if spec.drops and spec.scope is Scope.TABLE and table:
            dropped_tables.add(table)
        elif spec.drops and spec.scope is Scope.PARTITION and table:
            dropped_parts.update((table, name) for name in msg.partition_names())
    return [batch for batch in out if batch]
