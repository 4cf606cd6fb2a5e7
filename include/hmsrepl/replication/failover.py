"""Disaster recovery: lift a replica's protection, planned failover, unplanned promotion, failback, lag.

Event ids are per metastore, so a hand-over is recorded on each side in its own numbering
(``hmsrepl.failover.handover.id``) with the other side's name and id (``hmsrepl.failover.peer``,
``<db>@<id>``): the two databases were equal at those two points. Failback compares both notification logs
after those points and re-bootstraps only the tables either side changed (Hive 4's optimised bootstrap).

Every database-level change made here goes through ``privileged()``: the databases involved are protected
(replica or frozen) while it happens, and only this in-process path may change them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from hmsrepl.exceptions import EventsCleanedUpError, HmsReplError, NoSuchDatabaseError, NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import is_deadlock
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import AlterTableMessage
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import (
    FAILBACK_FROM,
    HANDOVER_ID,
    HANDOVER_PEER,
    PROMOTED,
    PROTECTION_LIFTED,
    READ_ONLY,
    lifted_record,
    privileged,
)
from hmsrepl.replication import acid_replay
from hmsrepl.replication.column_stats import load_column_stats
from hmsrepl.replication.commands import DumpCommand, LoadCommand
from hmsrepl.replication.dump import DumpResult
from hmsrepl.replication.engine import ReplicationEngine, recorded_load
from hmsrepl.replication.layout import FUNCTIONS_DIR, METADATA, DumpDir, DumpMetadata
from hmsrepl.replication.leftovers import cleanup_database
from hmsrepl.replication.load import LoadEngine, LoadResult
from hmsrepl.replication.locations import EXTERNAL_ROOT
from hmsrepl.replication.metrics import MetricsLog, StageClock
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.replica_scope import SCOPE_PARAMS
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.target import (
    BOOTSTRAP_IN_PROGRESS,
    REPL_LAST_ID,
    REPLICA_OF,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
)
from hmsrepl.replication.verify import verify

log = logging.getLogger(__name__)

# On a database being failed back: the last event id of its own log that is not the failback's own work
# (its protection was set there), so a failback that is run again does not take its own writes for
# divergent changes.

REPLICA_STATE = (
    REPLICA_OF,
    REPL_LAST_ID,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
    BOOTSTRAP_IN_PROGRESS,
    *SCOPE_PARAMS,
)
DB_LEVEL_EVENTS = {
    "CREATE_DATABASE",
    "ALTER_DATABASE",
    "DROP_DATABASE",
    "OPEN_TXN",
    "COMMIT_TXN",
    "ABORT_TXN",
}


DEADLOCK_ATTEMPTS = 5


class FailoverError(HmsReplError):
    """A failover, promotion or failback cannot proceed; the message says what state things are in."""


def _set_params(
    store: Metastore, db_name: str, values: dict[str, str] | None = None, *, remove: tuple[str, ...] = ()
) -> Database:
    """Change a database's parameters through the privileged path (it is protected while we do this).

    Run again when the database breaks a deadlock by cancelling it (MariaDB can, against a client writing at
    the moment of the freeze): nothing of it was applied.
    """

    def change() -> Database:
        with privileged("failover"), store.events.transaction():
            db = store.catalog.lock_database(db_name)
            params = {k: v for k, v in db.parameters.items() if k not in remove}
            params.update(values or {})
            return store.catalog.alter_database(db.name, db.model_copy(update={"parameters": params}))

    retrying = Retrying(
        retry=retry_if_exception(is_deadlock),
        stop=stop_after_attempt(DEADLOCK_ATTEMPTS),
        wait=wait_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )
    return retrying(change)


# -- protection ------------------------------------------------------------------------------------------
def unprotect(store: Metastore, db_name: str, reason: str) -> Database:
    """Make a protected replica (or a database frozen by an abandoned failover) writable, recording why.

    The replica keeps its ``hmsrepl.replica.of``: it may already have diverged, which ``repl verify`` shows.
    """
    if not reason.strip():
        raise FailoverError(f"unprotect '{db_name}': give the reason (--reason '...'); it is recorded")
    db = store.catalog.get_database(db_name)
    if REPLICA_OF not in db.parameters and READ_ONLY not in db.parameters:
        raise FailoverError(
            f"database '{db.name}' is not protected (neither a replica nor frozen): nothing to do"
        )
    record = lifted_record(reason)
    log.warning("protection of database '%s' lifted: %s", db.name, record)
    return _set_params(store, db.name, {PROTECTION_LIFTED: record}, remove=(READ_ONLY,))


# -- planned failover -----------------------------------------------------------------------------------
@dataclass
class FailoverResult:
    source_db: str
    target_db: str
    handover_id: int  # in the source's numbering
    target_handover_id: int  # in the target's numbering
    events_applied: int = 0
    dump_dir: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def planned_failover(
    engine: ReplicationEngine, source_db: str, target_db: str, policy: str | None = None
) -> FailoverResult:
    """Freeze the source, replicate its last events, verify, then swap roles; RPO 0.

    The freeze commits before the hand-over id is read, and every write checks the freeze at commit under a
    shared lock of the database row, so every write acknowledged before the freeze has an event id at or
    below the hand-over id and reaches the replica; writes after it are refused. Re-running an interrupted
    failover continues where it stopped (the freeze is kept until the roles are swapped).
    """
    source, target = engine.source, engine.target
    if not isinstance(source, Metastore) or target is None:
        raise FailoverError(
            "failover needs both metastores, the source an hmsrepl one (a stock Hive Metastore cannot be frozen "
            "or made a replica); nothing was changed"
        )
    source_db, target_db = source_db.lower(), target_db.lower()
    started = time.monotonic()
    seconds: dict[str, float] = {}
    src = source.catalog.get_database(source_db)
    tgt = target.catalog.get_database(target_db)
    if tgt.parameters.get(REPLICA_OF) != source_db or REPL_LAST_ID not in tgt.parameters:
        raise FailoverError(
            f"'{target_db}' is not a bootstrapped replica of '{source_db}' (hmsrepl.replica.of="
            f"{tgt.parameters.get(REPLICA_OF)!r}); nothing was changed"
        )
    if BOOTSTRAP_IN_PROGRESS in tgt.parameters:
        raise FailoverError(f"replica '{target_db}' has an unfinished bootstrap load; finish it first")
    frozen_for = src.parameters.get(READ_ONLY)
    if frozen_for not in (None, target_db):
        raise FailoverError(
            f"'{source_db}' is frozen for a failover to '{frozen_for}'; finish or abandon that"
        )
    if REPLICA_OF in src.parameters and PROTECTION_LIFTED not in src.parameters:
        raise FailoverError(
            f"'{source_db}' is itself a protected replica of '{src.parameters[REPLICA_OF]}'; fail that over first"
        )
    # 1. freeze: from here on the source refuses every client write (same check as replicas)
    _set_params(source, source_db, {READ_ONLY: target_db})
    handover = source.events.current_event_id()
    log.warning("failover %s -> %s: source frozen at event %s", source_db, target_db, handover)
    seconds["freeze"] = time.monotonic() - started
    # 2. the last events
    result = FailoverResult(source_db, target_db, handover, 0)
    last = int(target.catalog.get_database(target_db).parameters[REPL_LAST_ID])
    policy_text = policy or source_db
    if last < handover:
        dump = engine.execute(f"REPL DUMP {policy_text} FROM {last} TO {handover}")
        assert isinstance(dump, DumpResult)
        loaded = engine.execute(f"REPL LOAD {target_db} FROM '{dump.dump_dir}'")
        assert isinstance(loaded, LoadResult)
        result.dump_dir, result.events_applied = dump.dump_dir, loaded.events_applied
    position = int(target.catalog.get_database(target_db).parameters[REPL_LAST_ID])
    if position != handover:
        raise FailoverError(
            f"replica '{target_db}' is at event {position}, not at the hand-over event {handover}; '{source_db}' "
            "stays read-only: run the failover again"
        )
    seconds["replicate"] = time.monotonic() - started - sum(seconds.values())
    # 3. verify: target == source at the hand-over id (the source cannot change any more)
    differences = verify(source, source_db, target, target_db, _policy(policy_text))
    if differences:
        raise FailoverError(
            f"replica '{target_db}' differs from '{source_db}' at the hand-over event {handover} "
            f"({len(differences)} differences, first: {differences[0]}); '{source_db}' stays read-only"
        )
    seconds["verify"] = time.monotonic() - started - sum(seconds.values())
    # 4. swap roles: the old source becomes a protected replica first, so no moment has two writable sides
    target_handover = target.events.current_event_id()
    result.target_handover_id = target_handover
    _set_params(
        source,
        source_db,
        remove=(READ_ONLY, PROTECTION_LIFTED, BOOTSTRAP_IN_PROGRESS),
        values=(
            {
                REPLICA_OF: target_db,
                REPL_LAST_ID: str(target_handover),
                SOURCE_DB_LOCATION: tgt.location_uri or target.catalog.default_db_location(target_db),
                SOURCE_WAREHOUSE: target.config.warehouse,
                HANDOVER_ID: str(handover),
                HANDOVER_PEER: f"{target_db}@{target_handover}",
            }
        ),
    )
    _set_params(
        target,
        target_db,
        remove=(*REPLICA_STATE, PROTECTION_LIFTED, READ_ONLY),
        values={HANDOVER_ID: str(target_handover), HANDOVER_PEER: f"{source_db}@{handover}"},
    )
    seconds["promote"] = time.monotonic() - started - sum(seconds.values())
    result.seconds = {k: round(v, 3) for k, v in seconds.items()}
    log.warning(
        "failover %s -> %s done: hand-over event %s / %s", source_db, target_db, handover, target_handover
    )
    return result


def _policy(text: str) -> ReplicationPolicy:
    from hmsrepl.replication.commands import parse_policy

    return parse_policy(text)


# -- unplanned failover -------------------------------------------------------------------------------------
def promote(target: Metastore, target_db: str, *, force: bool, reason: str = "") -> FailoverResult:
    """Make a replica whose source is gone writable; its last replicated event id is the hand-over point.

    Changes the source made after that event are not on the replica (RPO = the replication lag); failback
    finds them in the old source's log and reports them.
    """
    db = target.catalog.get_database(target_db)
    source_db = db.parameters.get(REPLICA_OF)
    if source_db is None or REPL_LAST_ID not in db.parameters:
        raise FailoverError(f"'{db.name}' is not a bootstrapped replica; nothing to promote")
    if BOOTSTRAP_IN_PROGRESS in db.parameters:
        raise FailoverError(
            f"replica '{db.name}' has an unfinished bootstrap load (a mix of two points in time); finish it first"
        )
    if not force:
        raise FailoverError(
            f"promoting '{db.name}' without its source '{source_db}' loses the source's unreplicated changes; "
            f"if the source is reachable run 'hmsrepl repl failover {source_db} {db.name}', else add --force"
        )
    last = int(db.parameters[REPL_LAST_ID])
    target_handover = target.events.current_event_id()
    record = lifted_record(reason or "unplanned failover", action="promote")
    log.warning("promoting replica '%s' of '%s' at its event %s: %s", db.name, source_db, last, record)
    _set_params(
        target,
        db.name,
        remove=(*REPLICA_STATE, READ_ONLY, PROTECTION_LIFTED),
        values=(
            {
                HANDOVER_ID: str(target_handover),
                HANDOVER_PEER: f"{source_db}@{last}",
                PROMOTED: record,
            }
        ),
    )
    return FailoverResult(source_db, db.name, last, target_handover)


# -- failback -----------------------------------------------------------------------------------------------
@dataclass
class FailbackResult:
    new_db: str
    old_db: str
    changed_on_new: list[str]
    changed_on_old: list[str]  # divergent: the old source's changes after the hand-over, now discarded
    old_events_discarded: int
    tables_rebootstrapped: list[str]
    tables_dropped: list[str]
    bytes_copied: int = 0
    files_copied: int = 0
    last_event_id: int = 0
    dump_dir: str = ""

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _peer(db: Database) -> tuple[str, int]:
    peer = db.parameters.get(HANDOVER_PEER, "")
    name, _, event = peer.rpartition("@")
    if not name or not event.isdigit() or HANDOVER_ID not in db.parameters:
        raise FailoverError(
            f"'{db.name}' records no hand-over ({HANDOVER_PEER}); fail back only from a promoted database"
        )
    return name, int(event)


def _touched_tables(store: Metastore, db_name: str, after: int, upto: int | None) -> tuple[set[str], int]:
    """Tables named by the database's events in (after, upto], and how many events there were."""
    try:
        events = store.events.next_events(after, db_name=db_name, to_event_id=upto)
    except EventsCleanedUpError as exc:
        raise FailoverError(
            f"the notification log of '{db_name}' no longer holds the events after the hand-over ({exc}); "
            "a failback without a full copy is impossible: bootstrap the replica again"
        ) from exc
    tables: set[str] = set()
    for event in events:
        if event.table_name:
            tables.add(event.table_name.lower())
        if event.event_type == EventType.ALTER_TABLE:  # a rename changes the new name too
            message = parse_event(event)
            if isinstance(message, AlterTableMessage):
                tables.add(message.table.table_name.lower())
    return tables, len(events)


def failback(
    engine: ReplicationEngine, new_db: str, old_db: str, *, discard_divergent: bool = False
) -> FailbackResult:
    """Make the old source a replica of the promoted database again, copying only what changed.

    ``engine.source`` is the promoted side (``new_db``), ``engine.target`` the old source (``old_db``). The old
    database is protected first (as a replica of ``new_db``), so it takes no more divergent writes.
    """
    new, old = engine.source, engine.target
    if not isinstance(new, Metastore) or old is None:
        raise FailoverError(
            "failback needs the promoted (source) and the old source (target) metastores, both hmsrepl ones; "
            "nothing was changed"
        )
    new_db, old_db = new_db.lower(), old_db.lower()
    promoted = new.catalog.get_database(new_db)
    peer_name, old_handover = _peer(promoted)
    if peer_name != old_db:
        raise FailoverError(f"'{new_db}' was handed over from '{peer_name}', not from '{old_db}'")
    new_handover = int(promoted.parameters[HANDOVER_ID])
    try:
        current = old.catalog.get_database(old_db)
    except NoSuchDatabaseError as exc:
        raise FailoverError(
            f"database '{old_db}' does not exist on the old side: there is nothing to keep, so bootstrap it "
            f"from '{new_db}' (REPL DUMP {new_db}; REPL LOAD {old_db} FROM '<dump>')"
        ) from exc
    params = current.parameters
    if params.get(REPLICA_OF) == new_db and REPL_LAST_ID in params and BOOTSTRAP_IN_PROGRESS not in params:
        raise FailoverError(
            f"'{old_db}' is already a replica of '{new_db}' at event {current.parameters[REPL_LAST_ID]}: "
            "continue with incremental replication"
        )
    # protect the old side now; remember where its own (client) events end
    if FAILBACK_FROM in current.parameters:
        protected_at = int(current.parameters[FAILBACK_FROM])
    else:
        _set_params(
            old,
            old_db,
            remove=(READ_ONLY, PROTECTION_LIFTED),
            values={REPLICA_OF: new_db},
        )
        protected_at = old.events.current_event_id()
        _set_params(old, old_db, {FAILBACK_FROM: str(protected_at)})
    changed_old, old_events = _touched_tables(old, old_db, old_handover, protected_at)
    if changed_old and not discard_divergent:
        raise FailoverError(
            f"'{old_db}' changed after the hand-over (event {old_handover}): {old_events} events on tables "
            f"{sorted(changed_old)[:20]}; they are not on '{new_db}'. Save what you need, then rerun with "
            f"--discard-divergent to replace them with '{new_db}''s version ('{old_db}' is now protected)"
        )
    upto = new.events.current_event_id()  # the replica's position: later events are replayed incrementally
    changed_new, _ = _touched_tables(new, new_db, new_handover, upto)
    changed = sorted(changed_new | changed_old)
    include = tuple(re.escape(name) for name in changed)
    dump = engine.execute(DumpCommand(ReplicationPolicy(new_db, include=include)))
    assert isinstance(dump, DumpResult)
    result = FailbackResult(
        new_db,
        old_db,
        sorted(changed_new),
        sorted(changed_old),
        old_events if changed_old else 0,
        [],
        [],
        dump_dir=dump.dump_dir,
    )
    command = LoadCommand(dump.dump_dir, old_db)

    def work(clock: StageClock, _meta: DumpMetadata | None) -> LoadResult:
        with privileged("failback"):
            return _load_changed(
                old,
                DumpDir(dump.dump_dir),
                old_db,
                set(changed),
                upto,
                clock,
                result,
                engine.load_source_roots,
            )

    loaded = recorded_load(MetricsLog(old.engine), command, work)
    # Directories of dropped and re-bootstrapped tables, and files of writes refused since the protection,
    # are named by no metadata any more: swept now, so the old side holds exactly the promoted side's state.
    with privileged("failback"):
        cleanup_database(old, old_db)
    result.bytes_copied, result.files_copied = loaded.stats.bytes_copied, loaded.stats.files_copied
    result.last_event_id = loaded.last_event_id
    log.warning("failback %s -> %s: %s", new_db, old_db, json.dumps(result.to_json()))
    return result


def _load_changed(
    old: Metastore,
    dump: DumpDir,
    old_db: str,
    changed: set[str],
    position: int,
    clock: StageClock,
    result: FailbackResult,
    source_roots: SourceRoots | None,
) -> LoadResult:
    """Re-bootstrap the changed tables (REPLACE-style), drop those gone, keep the others untouched.

    The dump's paths are checked against the promoted side's roots, as any load checks them.
    """
    meta = dump.require_complete()
    loader = LoadEngine(old, clock=clock, source_roots=source_roots)
    loaded = LoadResult(old_db, position)
    source_db = dump.read_json(f"{meta.db_name}/{METADATA}")["database"]
    writer = loader._writer(old_db, meta, source_db.get("location_uri") or "", loaded.stats)
    writer.put_database(
        source_db,
        {
            REPLICA_OF: meta.db_name,
            SOURCE_DB_LOCATION: source_db.get("location_uri") or "",
            SOURCE_WAREHOUSE: meta.source_warehouse,
            BOOTSTRAP_IN_PROGRESS: dump.uri,
            EXTERNAL_ROOT: writer.mapper.external_root,
        },
    )
    dumped: set[str] = set()
    functions: set[str] = set()
    for relative in dump.metadata_files(meta.db_name):
        parts = relative.split("/")
        if parts[1] == FUNCTIONS_DIR:
            function = dump.read_json(relative)["function"]
            functions.add(function["function_name"])
            writer.put_function(function)
        elif len(parts) == 3:
            table = dump.read_json(relative)["table"]
            name = table["table_name"]
            dumped.add(name)
            with clock.stage("apply"), old.events.transaction():
                _drop_stale(writer, dump, meta, table)
                LoadEngine._load_table(dump, writer, meta, table)
                load_column_stats(dump, old, meta.db_name, old_db, table)
            result.tables_rebootstrapped.append(name)
    for name in old.catalog.get_functions(old_db):
        if name not in functions:
            writer.drop_function(name)
    for name in sorted(changed - dumped):  # dropped on the promoted side, or created on the old one only
        if writer.get_table(name) is not None:
            writer.drop_table(name)
            result.tables_dropped.append(name)
    with old.events.transaction():  # ACID write-id state of the re-bootstrapped tables, with the position
        acid_replay.load_bootstrap_state(writer, dump, meta)
        writer.set_last_id(position, bootstrap_done=True)
        db = old.catalog.get_database(old_db)
        params = {k: v for k, v in db.parameters.items() if k != FAILBACK_FROM}
        old.catalog.alter_database(old_db, db.model_copy(update={"parameters": params}))
    return loaded


def _drop_stale(writer: Any, dump: DumpDir, meta: DumpMetadata, table: dict[str, Any]) -> None:
    """Partitions the dump does not hold, or the whole table if its partition keys changed."""
    name = table["table_name"]
    existing = writer.get_table(name)
    if existing is None:
        return
    keys = [k["name"] for k in table.get("partition_keys") or []]
    if existing.partition_key_names != keys:
        writer.drop_table(name)
        return
    if keys:
        base = f"{meta.db_name}/{name}"
        held = {
            make_partition_name(keys, dumped.document["partition"]["values"])
            for dumped in dump.partitions(base)
        }
        stale = [
            p.values
            for p in writer.catalog.get_partitions(writer.db, name)
            if make_partition_name(keys, p.values) not in held
        ]
        if stale:
            writer.drop_partitions(name, stale)


# -- lag ---------------------------------------------------------------------------------------------------
@dataclass
class Lag:
    source_db: str
    target_db: str
    source_event_id: int
    replica_event_id: int
    events: int  # events of the source database the replica has not applied
    seconds: float  # age of the oldest of them (0 when none)
    source_event_time: int | None = None
    replica_event_time: int | None = None

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def replica_lag(source: Metastore, policy: str, target: Metastore, target_db: str) -> Lag:
    """How far ``target_db`` is behind its source: events and seconds (from the source's log)."""
    source_db = _policy(policy).db_name
    db = target.catalog.get_database(target_db)
    if REPL_LAST_ID not in db.parameters:
        raise FailoverError(f"'{db.name}' is not a replica (no {REPL_LAST_ID}); there is no lag to measure")
    position = int(db.parameters[REPL_LAST_ID])
    current = source.events.current_event_id()
    pending = source.events.count_events(position, source_db, current)
    lag = Lag(source_db, db.name, current, position, pending, 0.0)
    with contextlib.suppress(EventsCleanedUpError, NoSuchObjectError):
        newest = source.events.next_events(current - 1, 1) if current else []
        lag.source_event_time = newest[0].event_time if newest else None
        at = source.events.next_events(position - 1, 1, to_event_id=position) if position else []
        lag.replica_event_time = at[0].event_time if at else None
        if pending:
            oldest = source.events.next_events(position, 1, db_name=source_db)
            if oldest:
                lag.seconds = max(0.0, time.time() - oldest[0].event_time)
    return lag
