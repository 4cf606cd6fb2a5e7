"""Monotonic reads: two cached metastore instances on one PostgreSQL database never answer backwards.

Each instance here is what a server process holds (its own Metastore, MetadataCache and CachedReads, writes
fenced with ``note_local_write`` as the Thrift handler does), in one process so that reads are cheap enough to
count in the hundreds of thousands. Every table carries a version ``v`` that only grows (one writer per
table); an answer an instance gives must never show a lower ``v`` than an answer it completed before the read
started. ACID tables are read with a ValidWriteIdList and the table id; their cache answers must also never
show a write the list does not count as committed.

``HMSREPL_TEST_MONOTONIC_READS`` sets how many reads the randomised test makes (default 50,000: 38-48 s of
the suite at 100,000; the figure in docs/cache.md is a run of 100,000).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from hmsrepl.cache import CacheSettings, MetadataCache
from hmsrepl.cache.attribution import TxnWriter
from hmsrepl.cache.metrics import MissReason
from hmsrepl.cache.reads import CachedReads
from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.backends import temporary_database
from tests.helpers import make_table
from tests.integration.test_cache_ha import snapshot_write_ids

pytestmark = pytest.mark.postgres

DB = "mono"
PLAIN = ("p0", "p1", "p2", "p3")
ACID_TABLES = ("a0", "a1")
ACID = {"transactional": "true", "transactional_properties": "insert_only"}
READS = int(os.environ.get("HMSREPL_TEST_MONOTONIC_READS", "50000"))
DEADLINE_SECONDS = 240.0


@dataclass
class Instance:
    """One metastore instance: its own connections, cache and read path."""

    store: Metastore
    cache: MetadataCache
    reads: CachedReads

    def write_plain(self, table: str, version: int) -> None:
        current = self.store.catalog.get_table(DB, table)
        params = {**current.parameters, "v": str(version)}
        try:
            self.store.catalog.alter_table(DB, table, current.model_copy(update={"parameters": params}))
        finally:
            self.cache.note_local_write()

    def write_acid(self, table: str) -> int:
        """One committed txn setting ``v`` to its write id; returns it."""
        txns = self.store.txns
        try:
            [txn] = txns.open_txns(1)
            [pair] = txns.allocate_table_write_ids([txn], DB, table)
            writer = TxnWriter(self.store)
            claim = writer.resolve(txn, None, DB, table)
            current = self.store.catalog.get_table(DB, table)
            params = {**current.parameters, "v": str(pair.write_id)}
            writer.alter_table(DB, table, current.model_copy(update={"parameters": params}), claim)
            txns.commit_txn(txn)
            return pair.write_id
        finally:
            self.cache.note_local_write()

    def close(self) -> None:
        self.cache.stop()
        self.store.close()


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    with temporary_database("postgres", str(tmp_path)) as url:
        store = Metastore.open(_config(url, tmp_path))
        store.catalog.create_database(Database(name=DB))
        for name in PLAIN:
            store.catalog.create_table(make_table(DB, name, v="0"))
        for name in ACID_TABLES:
            store.catalog.create_table(make_table(DB, name, v="0", **ACID))
        store.close()
        yield url


def _config(url: str, root: Path) -> MetastoreConfig:
    return MetastoreConfig(db_url=url, warehouse=str(root / "wh"), cmroot=str(root / "cm"))


def instance(url: str, root: Path, *, start: bool = True, **settings: object) -> Instance:
    store = Metastore(_config(url, root))
    cache = MetadataCache(store, CacheSettings(**{"refresh_interval_seconds": 0.02, **settings}))
    if start:
        cache.start()
        assert cache.updater.ready.wait(60)
    return Instance(store, cache, CachedReads(store.catalog, cache))


def version(table: object) -> int:
    return int(table.parameters["v"])  # type: ignore[attr-defined]


def test_a_read_after_a_database_answer_never_goes_back_to_the_lagging_cache(db_url: str, tmp_path) -> None:
    """The reproduced mechanism, stepped by hand: a local write sends reads to the database; when its fence
    has been applied, the cache is still behind what the database answered, and must not answer."""
    other = instance(db_url, tmp_path)
    me = instance(db_url, tmp_path, start=False, event_batch_size=1)
    try:
        me.cache.updater.run_once()  # prewarm: every table at v=0
        assert version(me.reads.table(DB, "p0")) == 0 and me.cache.stats.hits == 1
        me.write_plain("p0", 1)  # through this instance: its reads wait for the updater (fence)
        fence = me.store.events.current_event_id()
        other.write_plain("p0", 2)  # through the other instance, right after
        assert version(me.reads.table(DB, "p0")) == 2  # fenced: the database answers, with v=2
        me.cache.updater.catch_up(max_events=1)  # the fence is applied, v=2 is not yet
        assert me.cache.updater.position == fence
        assert version(me.store.catalog.get_table(DB, "p0")) == 2
        misses = me.cache.stats.misses[MissReason.OLDER_THAN_SERVED]
        assert version(me.reads.table(DB, "p0")) == 2  # the cache (v=1) may not answer: the database does
        assert me.cache.stats.misses[MissReason.OLDER_THAN_SERVED] == misses + 1
        me.cache.updater.catch_up()
        hits = me.cache.stats.hits
        assert version(me.reads.table(DB, "p0")) == 2 and me.cache.stats.hits == hits + 1  # caught up: a hit
        # Reads of several tables at once (get_table_objects_by_name) are database answers for each table.
        head = me.store.events.current_event_id()
        assert [t.table_name for t in me.reads.tables(DB, ["p1", "p2"])] == ["p1", "p2"]
        assert me.cache.served.database_floor((DB, "p2")) == head
    finally:
        me.close()
        other.close()


def test_a_reader_list_never_gets_a_write_it_does_not_count_as_committed(db_url: str, tmp_path) -> None:
    me = instance(db_url, tmp_path)
    try:
        table_id = me.store.catalog.get_table(DB, "a0").id
        first = me.write_acid("a0")
        old_list = me.store.txns.get_valid_write_ids([f"{DB}.a0"])[0].write_ids
        me.write_acid("a0")
        me.cache.wait_applied(me.store.events.current_event_id(), 30)
        # The entry's committed ids contain the reader's (the 'contains' policy would serve it), but the
        # table's version is a write the reader's list does not count as committed.
        answer = me.cache.table(DB, "a0", old_list, table_id)
        assert not answer.hit and answer.miss is MissReason.WRITE_NOT_COMMITTED
        new_list = me.store.txns.get_valid_write_ids([f"{DB}.a0"])[0].write_ids
        answer = me.cache.table(DB, "a0", new_list, table_id)
        assert answer.hit and answer.value is not None and version(answer.value.model) == first + 1
    finally:
        me.close()


@dataclass
class Tally:
    reads: int = 0
    hits: int = 0
    regressions: list[str] = field(default_factory=list)
    uncommitted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def test_two_instances_with_writers_on_both_never_read_backwards(db_url: str, tmp_path) -> None:
    instances = [instance(db_url, tmp_path), instance(db_url, tmp_path)]
    engine = create_engine(db_url, pool_size=4)
    table_ids = {name: instances[0].store.catalog.get_table(DB, name).id for name in ACID_TABLES}
    # Per instance and table: the highest version an answer of that instance completed with.
    answered = [dict.fromkeys(PLAIN + ACID_TABLES, 0) for _ in instances]
    locks = [threading.Lock() for _ in instances]
    tally, stop = Tally(), threading.Event()
    seed = random.randrange(1 << 30)

    def plain_writer(me: Instance, tables: tuple[str, ...], rng: random.Random) -> None:
        versions = dict.fromkeys(tables, 0)
        while not stop.is_set():
            table = rng.choice(tables)
            versions[table] += 1
            me.write_plain(table, versions[table])
            time.sleep(0.005 + rng.random() * 0.02)

    def acid_writer(me: Instance, table: str, rng: random.Random) -> None:
        while not stop.is_set():
            me.write_acid(table)
            time.sleep(0.005 + rng.random() * 0.02)

    def reader(index: int, rng: random.Random) -> None:
        me, seen, lock = instances[index], answered[index], locks[index]
        lists: dict[str, ValidWriteIdList] = {}
        while not stop.is_set():
            table = rng.choice(ACID_TABLES if rng.random() < 0.2 else PLAIN)
            with lock:
                floor = seen[table]
            if table in ACID_TABLES:
                if table not in lists or rng.random() < 0.1:  # lists are reused, so they age
                    lists[table] = snapshot_write_ids(engine, f"{DB}.{table}")
                ids = lists[table]
                answer = me.cache.table(DB, table, ids, table_ids[table])
                if answer.hit and answer.value is not None:
                    got = version(answer.value.model)
                    if not ids.is_write_id_valid(got):
                        tally.uncommitted.append(
                            f"instance {index} {table}: v={got} from the cache, list {ids}"
                        )
                else:
                    try:
                        got = version(me.store.catalog.get_table(DB, table))
                    finally:
                        me.cache.note_database_answer((DB, table))
            else:
                got = version(me.reads.table(DB, table))
            with lock:
                if got < floor:
                    tally.regressions.append(f"instance {index} {table}: v={got} after v={floor}")
                seen[table] = max(seen[table], got)
                tally.reads += 1
                if tally.reads >= READS:
                    stop.set()

    def guarded(body, *args) -> None:
        try:
            body(*args)
        except Exception as exc:  # reported, and the run stops
            tally.errors.append(repr(exc))
            stop.set()

    rng = random.Random(seed)
    roles = [
        (plain_writer, instances[0], PLAIN[:2]),
        (plain_writer, instances[1], PLAIN[2:]),
        (acid_writer, instances[0], "a0"),
        (acid_writer, instances[1], "a1"),
        (reader, 0),
        (reader, 0),
        (reader, 1),
        (reader, 1),
    ]
    threads = [threading.Thread(target=guarded, args=(*role, random.Random(rng.random()))) for role in roles]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    stop.wait(DEADLINE_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(60)
    metrics = [inst.cache.metrics() for inst in instances]
    for inst in instances:
        inst.close()
    engine.dispose()
    elapsed = time.monotonic() - started
    hits = sum(m["hits"] for m in metrics)
    print(f"monotonic reads: {tally.reads} reads in {elapsed:.1f} s, cache hits {hits}, metrics {metrics}")
    assert tally.errors == [], f"seed {seed}"
    assert tally.reads >= READS, f"seed {seed}: only {tally.reads} reads before the deadline"
    assert tally.regressions == [], (
        f"seed {seed}: {len(tally.regressions)} regressions: {tally.regressions[:5]}"
    )
    assert tally.uncommitted == [], f"seed {seed}: {tally.uncommitted[:5]}"
    assert hits > tally.reads // 2, f"seed {seed}: the cache answered only {hits} of {tally.reads} reads"
    writes = sum(m["events_applied"] for m in metrics)
    assert writes > 100, f"seed {seed}: too few writes ({writes} events applied) to race the readers"
