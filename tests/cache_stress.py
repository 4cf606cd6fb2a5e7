"""A randomised stress run of cached metastore server processes on one PostgreSQL database, with its checker.

Two or three ``metastore serve`` instances (``HMSREPL_CACHE_ENABLED=true``) share a database. Writers on
every instance change transactional tables in txns: each sets the table's ``v`` to its write id, some also
make an unclaimed DDL change while their txn is open (the cache must unsettle, an invalidation), and a
share abort. Writes to one table are serialised, as Hive's exclusive DDL lock does, so a table's committed
``v`` grows with time. Instances are restarted while all this runs. Reader sessions (one connection each,
reconnecting after a restart) read with their own ValidWriteIdList, taken from one database snapshot and
only ever replaced by a newer one, and the table id, as a Hive 4 client does.

``Checker`` judges every answer ``v`` given to a session with list L:

- backwards: ``v`` is below the last version this instance slot answered that session for the table, or
  below a version the instance answered any session before and that L counts as committed (per instance);
- uncommitted: L has ``v`` open or aborted; or ``v`` is above L's watermark and its txn was not committed
  before the read ended (never committed, or its commit was only asked for after the answer came back).

A refusal (``WriteNotVisibleError``: retryable) is no answer and is counted apart.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, select
from thriftpy2.transport import TTransportException

from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.schema import txn_to_write_id, txns
from tests.backends import temporary_database
from tests.integration.test_cache_ha import CACHE_ENV, Client, hms, snapshot_write_ids
from tests.servers import RunningMetastore, metastore_server

DB = "stress"
REFUSED = "does not count as committed"  # WriteNotVisibleError's words, as the Thrift client sees them
RECONNECT_SECONDS = 60.0


@dataclass
class Checker:
    """Every answer a session got, judged as it comes (backwards) and at the end (commits)."""

    reads: int = 0
    refused: int = 0
    backwards: list[str] = field(default_factory=list)
    uncommitted: list[str] = field(default_factory=list)
    _floors: dict[tuple[int, int, str], int] = field(default_factory=dict)
    _answered: dict[tuple[int, str], list[int]] = field(default_factory=dict)  # sorted, per instance slot
    _newer: list[tuple[str, int, float, str]] = field(default_factory=list)  # (table, v, ended, where)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self, slot: int, session: int, table: str, write_ids: ValidWriteIdList, version: int, ended: float
    ) -> None:
        """One answer: ``version`` read by ``session`` through instance ``slot`` with ``write_ids``."""
        where = f"instance {slot} session {session} {table}: v={version} list {write_ids.to_string()}"
        with self._lock:
            self.reads += 1
            key = (slot, session, table)
            floor = self._floors.get(key, 0)
            answered = self._answered.setdefault((slot, table), [])
            later = answered[bisect.bisect_right(answered, version) :]
            seen = [u for u in later if write_ids.is_write_id_valid(u)]
            if version < floor:
                self.backwards.append(f"{where} after v={floor}")
            elif seen:  # per instance: reported once, after the session's own rule
                self.backwards.append(
                    f"{where} after instance {slot} answered v={seen[-1]}, which the list counts"
                )
            self._floors[key] = max(floor, version)
            if version not in answered:
                bisect.insort(answered, version)
            if version <= 0 or write_ids.is_write_id_valid(version):
                return
            if version <= write_ids.high_watermark:
                state = "aborted" if version in write_ids.aborted_write_ids else "open"
                self.uncommitted.append(f"{where}: {state} in the list")
            else:
                self._newer.append((table, version, ended, where))

    def refusal(self) -> None:
        with self._lock:
            self.refused += 1

    def finish(self, commits: dict[tuple[str, int], float], committed: set[tuple[str, int]]) -> None:
        """Judge answers newer than their list: ``committed`` holds the (table, write id) pairs committed in
        the end, ``commits`` when each commit was asked for (before the call)."""
        with self._lock:
            for table, version, ended, where in self._newer:
                if (table, version) not in committed:
                    self.uncommitted.append(f"{where}: never committed")
                elif commits.get((table, version), float("inf")) > ended:
                    self.uncommitted.append(f"{where}: answered before its commit was asked for")
            self._newer.clear()

    def summary(self) -> str:
        return (
            f"reads {self.reads}, backwards {len(self.backwards)}, uncommitted {len(self.uncommitted)}, "
            f"refused (retryable) {self.refused}"
        )


@dataclass
class StressSettings:
    instances: int = 2
    tables: int = 3
    readers_per_instance: int = 2
    seconds: float = 45.0
    max_reads: int | None = None  # stop early once this many answers were checked
    abort_rate: float = 0.15
    invalidate_rate: float = 0.1  # share of txns that also make an unclaimed DDL change
    restart_every: float = 15.0  # seconds between instance restarts (0: none)
    list_refresh: float = 0.3  # chance a session takes a newer list before a read
    seed: int | None = None
    progress: Callable[[Checker], None] | None = None
    progress_every: float = 30.0


@dataclass(repr=False)
class Outcome:
    checker: Checker
    seed: int
    seconds: float
    restarts: int
    commits: int
    aborts: int
    invalidations: int
    hits: list[int]
    errors: list[str]

    def __repr__(self) -> str:
        return (
            f"{self.checker.summary()}; seed {self.seed}, {self.seconds:.0f} s, {self.restarts} restarts, "
            f"{self.commits} commits, {self.aborts} aborts, {self.invalidations} invalidations, "
            f"cache hits per instance {self.hits}, errors {self.errors[:3]}"
        )


class Slots:
    """The running instances by slot; a restart replaces a slot's server (on a new port)."""

    def __init__(self, root: Path, db_url: str, count: int) -> None:
        self.root, self.db_url = root, db_url
        self._stacks: list[ExitStack] = []
        self.servers: list[RunningMetastore] = []
        self.generation = [0] * count
        for slot in range(count):  # in order: the first creates the schema
            self._stacks.append(ExitStack())
            self.servers.append(self._start(slot))

    def _start(self, slot: int) -> RunningMetastore:
        path = self.root / f"i{slot}-{self.generation[slot]}"
        path.mkdir(parents=True, exist_ok=True)
        roots = {  # instances of one metastore: one database, one warehouse and cmroot
            "HMSREPL_WAREHOUSE": str(self.root / "warehouse"),
            "HMSREPL_CMROOT": str(self.root / "cmroot"),
        }
        return self._stacks[slot].enter_context(metastore_server(path, self.db_url, **CACHE_ENV, **roots))

    def restart(self, slot: int) -> None:
        self._stacks[slot].close()
        self.generation[slot] += 1
        self.servers[slot] = self._start(slot)

    def close(self) -> None:
        for stack in self._stacks:
            stack.close()


def connect(slots: Slots, slot: int, stop: threading.Event) -> Client:
    """A client of the slot's current server, waiting through a restart."""
    deadline = time.monotonic() + RECONNECT_SECONDS
    while True:
        try:
            return Client(slots.servers[slot])
        except (OSError, TTransportException):
            if time.monotonic() > deadline or stop.is_set():
                raise
            time.sleep(0.1)  # bounded retry while the slot's server restarts


@contextmanager
def stress_database(root: Path) -> Iterator[str]:
    """A throwaway PostgreSQL database for one run."""
    with temporary_database("postgres", str(root)) as url:
        yield url


def _abandon(client: Client, txn: int | None) -> None:
    """Abort a txn whose connection died (its commit may have happened: then this changes nothing)."""
    if txn is None:
        return
    with suppress(hms.NoSuchTxnException, hms.TxnAbortedException, hms.MetaException):
        client.abort(txn)


def run_stress(root: Path, db_url: str, settings: StressSettings) -> Outcome:
    seed = settings.seed if settings.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    tables = [f"t{i}" for i in range(settings.tables)]
    slots = Slots(root, db_url, settings.instances)
    engine = create_engine(db_url, pool_size=settings.instances * settings.readers_per_instance + 2)
    checker, stop, errors = Checker(), threading.Event(), []
    commits: dict[tuple[str, int], float] = {}
    counts = {"commits": 0, "aborts": 0, "invalidations": 0, "restarts": 0}
    locks = {name: threading.Lock() for name in tables}
    restarting = threading.Lock()
    try:
        setup = Client(slots.servers[0])
        for name in tables:
            setup.create_acid_table(DB, name)
        ids = {name: setup.table_id(DB, name) for name in tables}
        setup.close()

        def writer(slot: int, wrng: random.Random) -> None:
            client = connect(slots, slot, stop)
            while not stop.is_set():
                name = wrng.choice(tables)
                with locks[name]:
                    txn = None
                    try:
                        txn = client.open_txn()
                        write_id = client.allocate(txn, DB, name)
                        client.alter_in_txn(txn, DB, name, v=str(write_id))
                        if wrng.random() < settings.invalidate_rate:  # unclaimed DDL: caches unsettle
                            table = client.raw.get_table(DB, name)
                            table.parameters = {**table.parameters, "ddl": str(write_id)}
                            client.raw.alter_table(DB, name, table)
                            counts["invalidations"] += 1
                        time.sleep(wrng.random() * 0.01)  # the txn stays open while readers race it
                        if wrng.random() < settings.abort_rate:
                            client.abort(txn)
                            counts["aborts"] += 1
                        else:
                            commits[(name, write_id)] = time.monotonic()
                            client.commit(txn)
                            counts["commits"] += 1
                    except (hms.MetaException, hms.NoSuchTxnException, hms.TxnAbortedException):
                        raise
                    except (OSError, TTransportException):  # the slot restarted mid-txn
                        client = connect(slots, slot, stop)
                        _abandon(client, txn)
                time.sleep(wrng.random() * 0.01)

        def reader(slot: int, session: int, rrng: random.Random) -> None:
            client = connect(slots, slot, stop)
            lists: dict[str, ValidWriteIdList] = {}
            while not stop.is_set():
                name = rrng.choice(tables)
                if name not in lists or rrng.random() < settings.list_refresh:
                    lists[name] = snapshot_write_ids(engine, f"{DB}.{name}")  # newer than the last one
                write_ids = lists[name]
                try:
                    table = client.read(DB, name, write_ids, ids[name])
                except hms.MetaException as exc:
                    if REFUSED not in exc.message:
                        raise
                    checker.refusal()
                    continue
                except (OSError, TTransportException):  # the slot restarted: same session, new connection
                    client = connect(slots, slot, stop)
                    continue
                checker.record(
                    slot, session, name, write_ids, int(table.parameters.get("v", "0")), time.monotonic()
                )
                if settings.max_reads is not None and checker.reads >= settings.max_reads:
                    stop.set()

        def restarter(prng: random.Random) -> None:
            while not stop.wait(settings.restart_every):
                with restarting:
                    slots.restart(prng.randrange(settings.instances))
                    counts["restarts"] += 1

        def guarded(body: Callable[..., None], *args: Any) -> None:
            try:
                body(*args)
            except Exception as exc:  # reported; the run stops
                if not stop.is_set():
                    errors.append(f"{body.__name__}: {exc!r}")
                stop.set()

        roles: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        for slot in range(settings.instances):
            roles.append((writer, (slot, random.Random(rng.random()))))
            for session in range(settings.readers_per_instance):
                roles.append((reader, (slot, session, random.Random(rng.random()))))
        if settings.restart_every > 0:
            roles.append((restarter, (random.Random(rng.random()),)))
        threads = [threading.Thread(target=guarded, args=(body, *args)) for body, args in roles]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        next_progress = started + settings.progress_every
        while not stop.wait(1.0):
            now = time.monotonic()
            if now - started >= settings.seconds:
                break
            if settings.progress is not None and now >= next_progress:
                settings.progress(checker)
                next_progress = now + settings.progress_every
        stop.set()
        for thread in threads:
            thread.join(RECONNECT_SECONDS + 30)
        elapsed = time.monotonic() - started
        with restarting:
            hits = [_hits(server) for server in slots.servers]
        checker.finish(commits, _committed(engine))
        return Outcome(
            checker, seed, elapsed, counts["restarts"], counts["commits"], counts["aborts"],
            counts["invalidations"], hits, errors,
        )  # fmt: skip
    finally:
        engine.dispose()
        slots.close()


def _hits(server: RunningMetastore) -> int:
    client = Client(server)
    try:
        return int(client.metrics()["hits"])
    finally:
        client.close()


def _committed(engine: Engine) -> set[tuple[str, int]]:
    """(table, write id) of every committed txn's write in the stress database, read at the end."""
    query = (
        select(txn_to_write_id.c.tbl_name, txn_to_write_id.c.write_id)
        .select_from(txn_to_write_id.join(txns, txns.c.txn_id == txn_to_write_id.c.txn_id))
        .where(txn_to_write_id.c.db_name == DB, txns.c.state == "c")
    )
    with engine.connect() as conn:
        return {(row.tbl_name, row.write_id) for row in conn.execute(query)}
