"""Cache answers checked one by one against the database, with two caches on one PostgreSQL database.

In-process, each answer says whether the cache gave it, so hits are held to the exact rule: a hit shows
every write the reader's list marks committed and nothing else (``equal``), or a later committed state
(``contains``), never an open or aborted write. Partitions are covered here because their reads with a
write-id list have no Thrift request in this server's IDL yet.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from hmsrepl.cache import CacheSettings, Freshness, MetadataCache
from hmsrepl.cache.attribution import TxnWriter
from hmsrepl.cache.visibility import aborted_write_id
from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table
from tests.integration.test_cache_ha import snapshot_write_ids

pytestmark = pytest.mark.postgres

DB = "cc"
TABLES = ("t0", "t1", "t2")
PARTITIONS = ("0", "1", "2", "3")
DEADLINE_SECONDS = 60.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database("postgres", str(tmp_path)) as url:
        config = MetastoreConfig(db_url=url, warehouse=str(tmp_path / "wh"), cmroot=str(tmp_path / "cm"))
        metastore = Metastore.open(config)
        metastore.catalog.create_database(Database(name=DB))
        for name in TABLES:
            table = metastore.catalog.create_table(
                make_table(
                    DB,
                    name,
                    partition_keys=("p",),
                    transactional="true",
                    transactional_properties="insert_only",
                )
            )
            metastore.catalog.add_partitions(DB, name, [make_partition(table, v) for v in PARTITIONS])
        yield metastore
        metastore.close()


def started(store: Metastore, freshness: Freshness) -> MetadataCache:
    cache = MetadataCache(store, CacheSettings(refresh_interval_seconds=0.01, freshness=freshness))
    cache.start()
    assert cache.updater.ready.wait(DEADLINE_SECONDS)
    return cache


@dataclass
class Write:
    table: str
    kind: str  # "table" (alter table params), "partition" (alter partition params), "data" (ACID_WRITE)
    partition: str | None
    outcome: str = "open"


@dataclass
class Run:
    writes: dict[tuple[str, int], Write] = field(default_factory=dict)  # (table, write id) -> what it did
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    hits: int = 0
    checked: int = 0
    seen: set[tuple[str, int]] = field(default_factory=set)  # write ids whose changes a hit showed


def expected(run: Run, table: str, ids: ValidWriteIdList) -> dict[str, int]:
    """What a reader holding ``ids`` must see: per field, the highest write id it marks committed."""
    want = {"v": 0, "write_id": 0} | {f"pv{p}": 0 for p in PARTITIONS} | {f"w{p}": 0 for p in PARTITIONS}
    for (name, write_id), write in list(run.writes.items()):
        if name != table or not ids.is_write_id_valid(write_id):
            continue
        if write.kind == "table":
            want["v"] = max(want["v"], write_id)
        else:
            want["write_id"] = max(want["write_id"], write_id)
            want[f"w{write.partition}"] = max(want[f"w{write.partition}"], write_id)
            if write.kind == "partition":
                want[f"pv{write.partition}"] = max(want[f"pv{write.partition}"], write_id)
    return want


def test_every_cache_hit_shows_exactly_a_committed_snapshot(store: Metastore) -> None:
    caches = {"equal": started(store, Freshness.EQUAL), "contains": started(store, Freshness.CONTAINS)}
    table_ids = {name: store.catalog.get_table(DB, name).id for name in TABLES}
    engine = create_engine(store.config.db_url, pool_size=8)
    locks = {name: threading.Lock() for name in TABLES}
    run, stop = Run(), threading.Event()
    seed = random.randrange(1 << 30)

    def writer(rng: random.Random) -> None:
        writer_api = TxnWriter(store)
        while not stop.is_set():
            name, kind, part = (
                rng.choice(TABLES),
                rng.choice(("table", "partition", "data")),
                rng.choice(PARTITIONS),
            )
            with locks[name]:  # Hive's exclusive lock: one writer per table at a time
                [txn] = store.txns.open_txns()
                [pair] = store.txns.allocate_table_write_ids([txn], DB, name)
                write = run.writes[(name, pair.write_id)] = Write(
                    name, kind, None if kind == "table" else part
                )
                claim = writer_api.resolve(txn, None, DB, name)
                if kind == "table":
                    current = store.catalog.get_table(DB, name)
                    params = {**current.parameters, "v": str(pair.write_id)}
                    writer_api.alter_table(DB, name, current.model_copy(update={"parameters": params}), claim)
                elif kind == "partition":
                    current = store.catalog.get_partition(DB, name, [part])
                    params = {**current.parameters, "pv": str(pair.write_id)}
                    writer_api.alter_partitions(
                        DB, name, [current.model_copy(update={"parameters": params})], claim
                    )
                else:
                    store.txns.add_write_notification(txn, pair.write_id, DB, name, [part], [])
                if rng.random() < 0.25:
                    store.txns.abort_txns([txn])
                    write.outcome = "aborted"
                else:
                    store.txns.commit_txn(txn)
                    write.outcome = "committed"

    def reader(rng: random.Random) -> None:
        while not stop.is_set():
            policy, name = rng.choice(list(caches)), rng.choice(TABLES)
            cache = caches[policy]
            ids = snapshot_write_ids(engine, f"{DB}.{name}")
            want = expected(run, name, ids)
            got: dict[str, int] = {}
            table = cache.table(DB, name, ids, table_ids[name])
            if table.hit and table.value is not None:
                model = table.value.model
                got |= {"v": int(model.parameters.get("v", 0)), "write_id": model.write_id}
            parts = cache.partitions(
                DB, name, ids, table_ids[name], lambda s: [e.model for _, e in s.ordered_partitions()]
            )
            if parts.hit:
                for part in parts.value or []:
                    got |= {
                        f"pv{part.values[0]}": int(part.parameters.get("pv", 0)),
                        f"w{part.values[0]}": part.write_id,
                    }
            run.checked += 1
            run.hits += table.hit + parts.hit
            for key, value in got.items():
                run.seen.add((name, value))
                ok = value == want[key] if policy == "equal" else value >= want[key]
                if not ok:
                    run.violations.append(
                        f"{policy} {name} {ids.to_string()} {key}={value}, want {want[key]}"
                    )
            if run.checked >= 1500:
                stop.set()

    def guarded(body, rng: random.Random) -> None:
        try:
            body(rng)
        except Exception as exc:
            run.errors.append(repr(exc))
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(role, random.Random(seed + i)))
        for i, role in enumerate([writer, writer, reader, reader, reader])
    ]
    for thread in threads:
        thread.start()
    stop.wait(DEADLINE_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    for cache in caches.values():
        cache.stop()
    engine.dispose()
    assert run.errors == [], f"seed {seed}"
    assert run.violations == [], f"seed {seed}: {run.violations[:5]}"
    shown_uncommitted = [key for key in run.seen if key[1] and run.writes[key].outcome != "committed"]
    assert shown_uncommitted == [], f"seed {seed}: hits showed writes that never committed"
    assert run.checked >= 1500 and run.hits > run.checked // 4, f"seed {seed}: {run.hits} hits"


def test_prewarm_racing_writers_installs_only_consistent_entries(store: Metastore) -> None:
    """A cache started while writers run must end up equal to the database, entry by entry, tag and all."""
    stop = threading.Event()
    errors: list[str] = []
    locks = {name: threading.Lock() for name in TABLES}
    committed: dict[tuple[str, str], int] = {}  # (table, partition) -> highest committed write id
    for name in TABLES:  # a table's first allocation races in TransactionService (reported): do it alone
        [txn] = store.txns.open_txns()
        store.txns.allocate_table_write_ids([txn], DB, name)
        store.txns.commit_txn(txn)

    def writer(seed: int) -> None:
        rng, writer_api = random.Random(seed), TxnWriter(store)
        try:
            while not stop.is_set():
                name, part = rng.choice(TABLES), rng.choice(PARTITIONS)
                with locks[name]:
                    [txn] = store.txns.open_txns()
                    store.txns.allocate_table_write_ids([txn], DB, name)
                    claim = writer_api.resolve(txn, None, DB, name)
                    current = store.catalog.get_partition(DB, name, [part])
                    changed = current.model_copy(
                        update={"parameters": {**current.parameters, "pv": str(claim.write_id)}}
                    )
                    writer_api.alter_partitions(DB, name, [changed], claim)
                    if rng.random() < 0.3:
                        store.txns.abort_txns([txn])
                    else:
                        store.txns.commit_txn(txn)
                        committed[(name, part)] = claim.write_id
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    cache = started(store, Freshness.EQUAL)  # prewarms while the writers run
    stop.set()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert errors == []
    assert cache.wait_applied(store.events.current_event_id(), DEADLINE_SECONDS)
    # A table whose stored content still shows an aborted txn's change (catalog rows are not rolled back)
    # cannot be loaded: no reader may see that content. Every other table ends up cached.
    tainted = {name for name in TABLES if _shows_aborted_write(store, name)}
    deadline = time.monotonic() + DEADLINE_SECONDS
    while any(cache.store.table((DB, n)) is None for n in TABLES if n not in tainted):  # raced loads
        assert time.monotonic() < deadline, cache.metrics()
        time.sleep(0.01)  # bounded polling for a condition
    cache.stop()
    for name in TABLES:
        state = cache.store.table((DB, name))
        if name in tainted and state is None:
            continue
        assert state is not None, name
        [current] = store.txns.get_valid_write_ids([f"{DB}.{name}"])
        assert state.write_ids == current.write_ids and not state.unsettled and not state.pending
        aborted = current.write_ids.aborted_write_ids
        for part in store.catalog.get_partitions(DB, name):
            cached = (state.partitions or {})[f"p={part.values[0]}"].model
            required = committed.get((name, part.values[0]), 0)
            db_pv, pv = int(part.parameters.get("pv", 0)), int(cached.parameters.get("pv", 0))
            # Never older than the committed history, never an open write; different from the database
            # only where the database keeps an aborted txn's change (catalog rows are not rolled back)
            # that the cache held back and dropped.
            assert pv >= required and cached.write_id >= required, (name, part.values, pv, required)
            assert pv == db_pv or db_pv in aborted, (name, part.values, pv, db_pv)
            assert cached.write_id == part.write_id or part.write_id in aborted


def _shows_aborted_write(store: Metastore, name: str) -> bool:
    [ids] = store.txns.get_valid_write_ids([f"{DB}.{name}"])
    shown = [store.catalog.get_table(DB, name), *store.catalog.get_partitions(DB, name)]
    return aborted_write_id(shown, ids.write_ids) is not None
