"""Benchmark of the metadata cache: read latency on a hit versus the database, and prewarm time.

Targets (issue 7): a cache hit at least 20x faster than the database for get_table and get_partitions, and a
prewarm of 100,000 partitions in under 10 s. Reads are measured three ways:

- in-process: ``CachedReads`` with the cache versus the catalog (the database);
- Thrift, server side: what the metastore spends per call (the handler through the error-mapping dispatcher,
  plus encoding the result for the wire), with a cache versus without;
- Thrift, end to end: a client (thriftpy2, compiled codec) calling a server in this process with a cache
  versus one without, on the same database. Client decoding and the round trip are the same on both paths
  (decoding 1,000 partitions takes a Python client ~10-25 ms), so these ratios are bounded by them; they are
  printed for reference, without a target.

Run:  python bench/bench_cache.py [--backend postgres|sqlite] [--partitions 100000] [--iterations 200]

The database is a throwaway one (PostgreSQL on the server tests/backends.py points at, or a SQLite file).
Prints a table with PASS/FAIL per target and exits 0 unless the benchmark itself fails: figures on shared
2-core machines are noisy, so they inform rather than gate.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import thriftpy2  # noqa: E402
from thriftpy2.protocol import TCyBinaryProtocolFactory  # noqa: E402
from thriftpy2.rpc import make_client  # noqa: E402
from thriftpy2.utils import serialize  # noqa: E402

from hmsrepl.cache import CachedReads, CacheSettings, MetadataCache  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import (  # noqa: E402
    Database,
    FieldSchema,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TableType,
)
from hmsrepl.thrift.handler import EncodedStructs, ErrorMappingDispatcher, MetastoreHandler  # noqa: E402
from hmsrepl.thrift.idl import IDL_PATH, Service  # noqa: E402
from hmsrepl.thrift.server import MetastoreServer  # noqa: E402
from tests.backends import temporary_database  # noqa: E402
from tests.servers import free_port  # noqa: E402

DB = "bench"
SPEEDUP_TARGET = 20.0
PREWARM_TARGET_SECONDS = 10.0
PREWARM_TARGET_PARTITIONS = 100_000
LIST_PARTITIONS = 1_000  # partitions returned by each get_partitions call (DESIGN.md's reference size)
hms = thriftpy2.load(str(IDL_PATH), module_name="hms_bench_cache_thrift")


@dataclass
class Row:
    measurement: str
    hit: float  # seconds (p50) or the prewarm time
    database: float | None = None
    target: str = ""
    passed: bool | None = None
    detail: str = ""

    @property
    def speedup(self) -> float | None:
        return self.database / self.hit if self.database is not None and self.hit > 0 else None


def storage(location: str) -> StorageDescriptor:
    """A storage descriptor as Spark writes a Parquet table: ~1 KB of JSON per partition."""
    columns = [("order_id", "bigint"), ("customer_id", "bigint"), ("status", "string"), ("amount", "double")]
    return StorageDescriptor(
        cols=[FieldSchema(name=name, type=kind) for name, kind in columns],
        location=location,
        input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        serde_info=SerDeInfo(
            serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
            parameters={"serialization.format": "1"},
        ),
    )


def create_table(store: Metastore, name: str, partitions: int, *, transactional: bool) -> Table:
    location = f"{store.config.warehouse}/ext/{name}"
    params = (
        {"transactional": "true", "transactional_properties": "insert_only"}
        if transactional
        else {"EXTERNAL": "TRUE"}
    )
    table = store.catalog.create_table(
        Table(
            db_name=DB,
            table_name=name,
            sd=storage(location),
            partition_keys=[FieldSchema(name="ds", type="string")],
            parameters=params,
            table_type=TableType.MANAGED_TABLE if transactional else TableType.EXTERNAL_TABLE,
        )
    )
    for start in range(0, partitions, 10_000):
        batch = [
            Partition(
                values=[f"d{i:06d}"], db_name=DB, table_name=name, sd=storage(f"{location}/ds=d{i:06d}")
            )
            for i in range(start, min(partitions, start + 10_000))
        ]
        store.catalog.add_partitions(DB, name, batch)
    return table


def latencies(action: Callable[[], object], iterations: int) -> tuple[float, float]:
    """(p50, p99) seconds of ``action`` after one untimed warm-up call."""
    action()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def compared(
    name: str,
    hit: Callable[[], object],
    database: Callable[[], object],
    iterations: int,
    *,
    gated: bool = True,
) -> Row:
    hit_p50, hit_p99 = latencies(hit, iterations)
    db_p50, db_p99 = latencies(database, max(10, iterations // 4))
    row = Row(name, hit_p50, db_p50, f">= {SPEEDUP_TARGET:g}x" if gated else "(reference)")
    row.passed = (row.speedup or 0) >= SPEEDUP_TARGET if gated else None
    row.detail = f"p99 hit {hit_p99 * 1e3:.3f} ms, db {db_p99 * 1e3:.3f} ms"
    return row


_WIRE = TCyBinaryProtocolFactory()


def server_side(dispatcher: ErrorMappingDispatcher, api: str, *args: object) -> bytes:
    """What a server does for one call after reading it: run the handler, encode the result for the wire."""
    value = getattr(dispatcher, api)(*args)
    if isinstance(value, EncodedStructs):
        return value.result_bytes()
    return serialize(getattr(Service, f"{api}_result")(success=value), _WIRE)


@contextmanager
def serving(store: Metastore, cache: MetadataCache | None) -> Iterator[object]:
    """A Thrift server in this process (with or without the cache) and a client connected to it."""
    port = free_port()
    server = MetastoreServer(store, "127.0.0.1", port, cache=cache)

    def serve() -> None:
        with suppress(OSError):  # the listening socket closes under accept() when the benchmark stops it
            server.serve_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    client = None
    while client is None:
        try:
            client = make_client(hms.ThriftHiveMetastore, "127.0.0.1", port, timeout=120_000)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # waiting for the listening socket
    client.set_ugi("hive", [])
    try:
        yield client
    finally:
        client.close()
        server.stop()


def run(backend: str, partitions: int, iterations: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, temporary_database(backend, tmp) as url:
        config = MetastoreConfig(
            db_url=url, warehouse=f"{tmp}/warehouse", cmroot=f"{tmp}/cmroot", cm_enabled=False
        )
        store = Metastore.open(config)
        store.catalog.create_database(Database(name=DB))
        started = time.perf_counter()
        acid = create_table(store, "acid_1k", LIST_PARTITIONS, transactional=True)
        create_table(store, "ext_1k", LIST_PARTITIONS, transactional=False)
        create_table(store, "big", max(0, partitions - 2 * LIST_PARTITIONS), transactional=False)
        print(
            f"setup: {partitions:,} partitions in {time.perf_counter() - started:.1f} s ({backend})",
            flush=True,
        )

        cache = MetadataCache(store, CacheSettings(refresh_interval_seconds=0.05))
        prewarm = time.perf_counter()
        cache.updater.run_once()  # the updater's first round: a full prewarm
        seconds = time.perf_counter() - prewarm
        loaded = cache.store.entries - len(cache.store.tables())
        rows.append(
            Row(
                f"prewarm: {loaded:,} partitions in {len(cache.store.tables())} tables",
                seconds,
                target=f"{PREWARM_TARGET_PARTITIONS // 1000}k in < {PREWARM_TARGET_SECONDS:g} s",
                passed=loaded >= PREWARM_TARGET_PARTITIONS and seconds < PREWARM_TARGET_SECONDS,
                detail=f"{cache.store.bytes / 1e6:.0f} MB of JSON cached",
            )
        )

        [ids] = store.txns.get_valid_write_ids([f"{DB}.acid_1k"])
        reads = CachedReads(store.catalog, cache)
        rows.append(
            compared(
                "in-process get_table (ACID, write-id list)",
                lambda: reads.table(DB, "acid_1k", ids.write_ids, ids.table_id),
                lambda: store.catalog.get_table(DB, "acid_1k"),
                iterations,
            )
        )
        rows.append(
            compared(
                f"in-process get_partitions ({LIST_PARTITIONS:,}, write-id list)",
                lambda: reads.partitions(DB, "acid_1k", -1, ids.write_ids, ids.table_id),
                lambda: store.catalog.get_partitions(DB, "acid_1k"),
                max(20, iterations // 4),
            )
        )
        assert cache.metrics()["misses"] == {}, cache.metrics()

        uncached_store = Metastore(config)
        with_cache = ErrorMappingDispatcher(MetastoreHandler(store, cache))
        without = ErrorMappingDispatcher(MetastoreHandler(uncached_store))
        server_request = Service.get_table_req_args.thrift_spec[1][2](
            dbName=DB, tblName="acid_1k", validWriteIdList=ids.write_ids.to_string(), id=acid.id
        )
        rows.append(
            compared(
                "Thrift server side: get_table_req (list + id)",
                lambda: server_side(with_cache, "get_table_req", server_request),
                lambda: server_side(without, "get_table_req", server_request),
                iterations,
            )
        )
        rows.append(
            compared(
                f"Thrift server side: get_partitions ({LIST_PARTITIONS:,})",
                lambda: server_side(with_cache, "get_partitions", DB, "ext_1k", -1),
                lambda: server_side(without, "get_partitions", DB, "ext_1k", -1),
                max(20, iterations // 4),
            )
        )
        with serving(store, cache) as cached, serving(uncached_store, None) as plain:
            request = hms.GetTableRequest(
                dbName=DB, tblName="acid_1k", validWriteIdList=ids.write_ids.to_string(), id=acid.id
            )
            rows.append(
                compared(
                    "Thrift end to end: get_table_req (list + id)",
                    lambda: cached.get_table_req(request),
                    lambda: plain.get_table_req(request),
                    iterations,
                    gated=False,
                )
            )
            rows.append(
                compared(
                    f"Thrift end to end: get_partitions ({LIST_PARTITIONS:,})",
                    lambda: cached.get_partitions(DB, "ext_1k", -1),
                    lambda: plain.get_partitions(DB, "ext_1k", -1),
                    max(20, iterations // 4),
                    gated=False,
                )
            )
        metrics = cache.metrics()
        print(f"cache metrics: hits {metrics['hits']}, misses {metrics['misses']}", flush=True)
        store.close()
    return rows


def print_table(rows: list[Row]) -> None:
    print()
    print(f"{'measurement':<52} {'cache hit':>12} {'database':>12} {'speedup':>9}  {'target':<18} result")
    for row in rows:
        hit = f"{row.hit * 1e3:.3f} ms" if row.database is not None else f"{row.hit:.2f} s"
        database = f"{row.database * 1e3:.3f} ms" if row.database is not None else ""
        speedup = f"{row.speedup:.1f}x" if row.speedup is not None else ""
        result = "" if row.passed is None else ("PASS" if row.passed else "FAIL")
        print(f"{row.measurement:<52} {hit:>12} {database:>12} {speedup:>9}  {row.target:<18} {result}")
        if row.detail:
            print(f"{'':<52} {row.detail}")


def main() -> int:
    # thriftpy2 logs the accept loop's wake-up when a stopped server's socket closes; it is not an error here.
    logging.getLogger("thriftpy2.server").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--partitions", type=int, default=PREWARM_TARGET_PARTITIONS)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    print_table(run(args.backend, args.partitions, args.iterations))
    return 0


if __name__ == "__main__":
    sys.exit(main())
