"""Per-append metastore cost as Spark's Hive client pays it, next to stock Hive Metastores in the same run.

A Spark append to a partition writes its files, then calls ``fire_listener_event`` (the INSERT notification
naming the new files) and ``alter_partition``, in the order of Hive's loadPartition (the alter, declared by
the INSERT, lists nothing; our housekeeping lists the partition later, once for many appends: not timed
here). Both calls are timed through the Thrift server, for a
partition that already holds 1, 100, 1,000, 10,000 small files and 1, 10, 40 big files (256 MiB each by
default; ``--big-mib`` makes a quick run use smaller ones), with the bytes our notification log stores per
append. The goal: flat in what the partition holds (a write reads and logs only what it added), within 1.5x
of Hive, at most 2 KB + O(files added) stored per append.

Then: notification-log bytes after 100 and after 1,000 single-file appends to one partition (the ratio is
~10 when the log grows linearly; it grew quadratically when every event carried the whole listing), and with
``--capture-files N`` the capture of one N-file partition (1,000,000 is the goal: under 1 GB peak RSS) in a
separate process, so its peak RSS is the capture's own.

Run:  python bench/bench_append.py [--repeats 5] [--small 1,100,1000,10000] [--big 1,10,40] [--big-mib 256]
                                   [--log-appends 100,1000] [--backend sqlite|postgres] [--no-hive-baseline]
                                   [--hive 2.3.10,4.2.0]
                                   [--capture-files 1000000]

* ours: ``hmsrepl metastore serve`` in a subprocess on a throwaway database (tests/servers.py);
* Hive: each ``--hive`` version (default 2.3.10, the HiveMetaStore in pyspark's jars; 3.1.3 and 4.2.0 from
  Maven Central) on Derby (bench/hive_peers.py), side by side in the same run, each killed with its process
  group at the end, also on Ctrl-C and errors. 2.3.10 keeps no notification log (no DbNotificationListener
  in pyspark's jars); 3.1.3 and 4.2.0 run theirs. Only our stored bytes are printed. Hive 3 moved
  ``InsertEventRequestData.filesAdded`` from field 1 to 2 (1 is ``replace``), so their INSERT is sent with
  Hive 4's generated client (pyiceberg's ``hive_metastore``) on the same connection, with an empty checksum
  per file as Hive's own client sends (3.1.3's listener needs one), the rest with Hive 2's.

All servers' partitions hold the same files (hard links of one pool: no doubled disk use); each timed
append adds one new 4 KiB file. Calls are interleaved append by append, alternating which server goes first.
Prints tables (median and min over ``--repeats``) and exits 0; non-zero with a message when a server cannot
be started or a call fails. The figures inform, they do not gate.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hive_metastore import ThriftHiveMetastore as Hive4Metastore  # noqa: E402
from hive_metastore import ttypes as hive4  # noqa: E402
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore  # noqa: E402
from hmsclient.genthrift.hive_metastore import ttypes as hive  # noqa: E402
from sqlalchemy import create_engine, func, select  # noqa: E402
from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from bench import hive_peers  # noqa: E402
from bench.hive_reference import java_version  # noqa: E402
from bench.interrupts import run_bench  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.storage.local import local_path  # noqa: E402
from tests.backends import temporary_database  # noqa: E402
from tests.servers import metastore_server  # noqa: E402

DB_NAME = "bench_append"
CLIENT_TIMEOUT_MS = 900_000
SMALL_BYTES = 1024
APPEND_BYTES = 4096
MIB = 1024 * 1024
PARQUET = (
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
)


class Client:
    """hmsclient's generated Hive 2.x client on one kept-open connection, as Spark keeps its connection."""

    def __init__(self, port: int, hive3_insert: bool = False) -> None:
        """``hive3_insert``: the server reads Hive 3+'s ``InsertEventRequestData`` (a stock 3.1 or 4.x)."""
        sock = TSocket.TSocket("127.0.0.1", port)
        sock.setTimeout(CLIENT_TIMEOUT_MS)
        self.transport = TTransport.TBufferedTransport(sock)
        protocol = TBinaryProtocol.TBinaryProtocolAccelerated(self.transport)
        self.hms = ThriftHiveMetastore.Client(protocol)
        self.hive4 = Hive4Metastore.Client(protocol) if hive3_insert else None
        self.transport.open()
        self.hms.set_ugi("hive", [])

    def fire_insert(self, table: str, values: list[str], files: list[str]) -> None:
        """The INSERT notification of ``files`` added to partition ``values``, in the server's IDL. Hive 3+
        also gets one empty checksum per file, as Hive's own client sends on a file system without them
        (3.1's listener fails on a file without one)."""
        if self.hive4 is None:
            data = hive.InsertEventRequestData(filesAdded=files)
            idl, hms = hive, self.hms
        else:
            data = hive4.InsertEventRequestData(filesAdded=files, filesAddedChecksum=[""] * len(files))
            idl, hms = hive4, self.hive4
        request = idl.FireEventRequest(
            successful=True,
            data=idl.FireEventRequestData(insertData=data),
            dbName=DB_NAME,
            tableName=table,
            partitionVals=values,
        )
        hms.fire_listener_event(request)

    def close(self) -> None:
        self.transport.close()


@dataclass
class Server:
    label: str
    client: Client
    stored_bytes: Callable[[int], int] | None = None  # bytes the log stores for events after an id
    current_event: Callable[[], int] | None = None
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)


# -- objects --------------------------------------------------------------------------------------------------
def _table(name: str) -> Any:
    input_format, output_format, serde = PARQUET
    sd = hive.StorageDescriptor(
        cols=[hive.FieldSchema("id", "bigint", None), hive.FieldSchema("v", "string", None)],
        inputFormat=input_format,
        outputFormat=output_format,
        compressed=False,
        numBuckets=-1,
        serdeInfo=hive.SerDeInfo(None, serde, {"serialization.format": "1"}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return hive.Table(
        tableName=name,
        dbName=DB_NAME,
        owner="hive",
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=sd,
        partitionKeys=[hive.FieldSchema("d", "string", None)],
        parameters={"spark.sql.sources.provider": "parquet"},
        tableType="MANAGED_TABLE",
    )


def _new_partition(client: Client, table: str) -> Any:
    """Add partition d=1 (the server places it under the table) and return it as stored."""
    template = client.hms.get_table_req(hive.GetTableRequest(dbName=DB_NAME, tblName=table)).table.sd
    part = hive.Partition(
        values=["1"],
        dbName=DB_NAME,
        tableName=table,
        createTime=int(time.time()),
        lastAccessTime=0,
        sd=hive.StorageDescriptor(**{**template.__dict__, "location": None}),
        parameters={},
    )
    client.hms.add_partitions([part])
    return client.hms.get_partition(DB_NAME, table, ["1"])


# -- the data files -------------------------------------------------------------------------------------------
def make_pool(pool: Path, small: int, big: int, big_mib: int) -> None:
    """Small files and big files once; partitions hold hard links to them (no doubled disk use)."""
    pool.mkdir(parents=True, exist_ok=True)
    for i in range(small):
        (pool / f"small-{i:06d}.parquet").write_bytes(i.to_bytes(8, "big") * (SMALL_BYTES // 8))
    chunk = os.urandom(MIB)
    for i in range(big):
        with open(pool / f"big-{i:03d}.parquet", "wb") as out:
            for j in range(big_mib):
                out.write(chunk[:8] + i.to_bytes(4, "big") + j.to_bytes(4, "big") + chunk[16:])


def fill(location: str, pool: Path, names: list[str]) -> None:
    directory = Path(local_path(location))
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.link(pool / name, directory / name)


# -- one append, as Spark's Hive client makes it --------------------------------------------------------------
def append(server: Server, table: str, part: Any, name: str) -> tuple[float, float, int]:
    """Write one new file, then fire_listener_event naming it and alter_partition, in the order of Hive's
    loadPartition; returns the alter's and the INSERT's ms and the bytes stored."""
    location = part.sd.location
    Path(local_path(location), name).write_bytes(os.urandom(APPEND_BYTES))
    before = server.current_event() if server.current_event else 0
    start = time.perf_counter_ns()
    server.client.fire_insert(table, ["1"], [f"{location}/{name}"])
    middle = time.perf_counter_ns()
    server.client.hms.alter_partition(DB_NAME, table, part)
    end = time.perf_counter_ns()
    stored = server.stored_bytes(before) if server.stored_bytes else 0
    return (end - middle) / 1e6, (middle - start) / 1e6, stored


@dataclass(frozen=True)
class Scenario:
    label: str
    files: list[str]  # pool names the partition holds before the appends


def listing_pass(store: Metastore, table: str) -> float:
    """ms of one listing of the partition compared with its record: what the reconciliation pays once per
    housekeeping pass for all the appends since the last one (an alter no INSERT declared, in process)."""
    part = store.catalog.get_partition(DB_NAME, table, ["1"])
    start = time.perf_counter_ns()
    store.catalog.alter_partitions(DB_NAME, table, [part])
    return (time.perf_counter_ns() - start) / 1e6


def run_scenarios(
    servers: list[Server], scenarios: list[Scenario], pool: Path, repeats: int, store: Metastore
) -> dict[str, list[float]]:
    """Time the appends of every scenario on every server; returns our listing passes' ms per scenario."""
    passes: dict[str, list[float]] = {}
    for index, scenario in enumerate(scenarios):
        table = f"t{index}"
        parts = {}
        for server in servers:
            server.client.hms.create_table(_table(table))
            part = _new_partition(server.client, table)
            fill(part.sd.location, pool, scenario.files)
            server.client.hms.alter_partition(DB_NAME, table, part)  # the first record: reads every file
            append(server, table, part, "warmup.parquet")
            parts[server.label] = part
            server.samples[scenario.label] = {"alter": [], "fire": [], "bytes": []}
        for i in range(repeats):
            for server in servers if i % 2 == 0 else list(reversed(servers)):
                alter_ms, fire_ms, stored = append(
                    server, table, parts[server.label], f"append-{i:04d}.parquet"
                )
                got = server.samples[scenario.label]
                got["alter"].append(alter_ms)
                got["fire"].append(fire_ms)
                got["bytes"].append(stored)
        passes[scenario.label] = [listing_pass(store, table) for _ in range(min(3, repeats))]
        print(f"  measured: partition holding {scenario.label}", flush=True)
    return passes


def log_growth(server: Server, counts: list[int]) -> dict[int, int]:
    """Stored log bytes after ``n`` single-file appends to one partition, for each ``n`` in ``counts``."""
    table = "t_log"
    server.client.hms.create_table(_table(table))
    part = _new_partition(server.client, table)
    assert server.current_event is not None and server.stored_bytes is not None
    start = server.current_event()
    out: dict[int, int] = {}
    for i in range(max(counts)):
        append(server, table, part, f"log-{i:05d}.parquet")
        if i + 1 in counts:
            out[i + 1] = server.stored_bytes(start)
    return out


# -- the 1,000,000-file capture, in its own process -----------------------------------------------------------
def capture_child(root: Path, files: int) -> None:
    """Record an ``files``-file partition (first capture), then one append to it; print times and peak RSS."""
    from hmsrepl.metastore import Metastore
    from hmsrepl.metastore.model import Database, Partition
    from tests.conftest import make_config
    from tests.helpers import make_table

    store = Metastore.open(make_config(f"sqlite:///{root}/metastore.db", root))
    store.catalog.create_database(Database(name=DB_NAME))
    table = store.catalog.create_table(make_table(DB_NAME, "big", partition_keys=("d",)))
    location = f"{table.sd.location}/d=1"
    os.rename(root / "files", local_path(location))
    part = Partition(values=["1"], db_name=DB_NAME, table_name="big")
    start = time.perf_counter()
    [part] = store.catalog.add_partitions(DB_NAME, "big", [part])
    first = time.perf_counter() - start
    first_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(local_path(location), "appended.parquet").write_bytes(os.urandom(APPEND_BYTES))
    before = store.get_current_notification_event_id()
    start = time.perf_counter()
    store.catalog.alter_partitions(DB_NAME, "big", [part])
    again = time.perf_counter() - start
    [event] = store.events.next_events(before)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"first capture of {files:,} files (reads every file): {first:.1f} s, peak RSS {first_rss:.0f} MB")
    print(
        f"append of 1 file to it (alter_partitions): {again * 1000:.0f} ms, event {len(event.message):,} bytes "
        f"stored, peak RSS {rss:.0f} MB"
    )
    store.close()


def run_capture(files: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        root = Path(tmp)
        directory = root / "files"
        directory.mkdir()
        start = time.perf_counter()
        for i in range(files):
            with open(directory / f"part-{i:07d}.parquet", "wb") as out:
                out.write(i.to_bytes(8, "big"))
        print(f"\nwrote {files:,} files in {time.perf_counter() - start:.0f} s; capturing in a child process")
        subprocess.run([sys.executable, __file__, "--capture-child", str(root), str(files)], check=True)


# -- reporting ------------------------------------------------------------------------------------------------
def _fmt(samples: list[float]) -> str:
    return f"{statistics.median(samples):8.1f} {min(samples):8.1f}"


def print_table(servers: list[Server], scenarios: list[Scenario], repeats: int) -> None:
    print(f"\nper append (ms, median and min over {repeats}; bytes: median stored per append)")
    header = f"{'partition holds':>22} |"
    for server in servers:
        header += f" {server.label + ' alter':>17} | {'fire':>17} |"
    ratios = [f"ours/{server.label.split()[1]} alter+fire" for server in servers[1:]] or ["ratio alter+fire"]
    header += "".join(f" {r:>16} |" for r in ratios) + f" {'stored bytes':>12}"
    print(header)
    print(f"{'':>22} |" + f" {'median':>8} {'min':>8} | {'median':>8} {'min':>8} |" * len(servers))
    for scenario in scenarios:
        line = f"{scenario.label:>22} |"
        totals = []
        for server in servers:
            got = server.samples[scenario.label]
            line += f" {_fmt(got['alter'])} | {_fmt(got['fire'])} |"
            totals.append(statistics.median(a + f for a, f in zip(got["alter"], got["fire"], strict=True)))
        shown = [f"{totals[0] / total:.2f}x" for total in totals[1:]] or ["-"]
        line += "".join(f" {ratio:>{len(name)}} |" for ratio, name in zip(shown, ratios, strict=True))
        line += f" {statistics.median(servers[0].samples[scenario.label]['bytes']):>12,.0f}"
        print(line)


def _db_probes(db_url: str) -> tuple[Callable[[int], int], Callable[[], int]]:
    from hmsrepl.metastore.schema import notification_log

    engine = create_engine(db_url)

    def stored(after: int) -> int:
        with engine.connect() as conn:
            query = select(func.coalesce(func.sum(func.length(notification_log.c.message)), 0)).where(
                notification_log.c.event_id > after
            )
            return int(conn.execute(query).scalar_one())

    def current() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(select(func.coalesce(func.max(notification_log.c.event_id), 0))).scalar_one()
            )

    return stored, current


@contextmanager
def _connected(label: str, port: int, hive3_insert: bool = False) -> Iterator[Client]:
    client = Client(port, hive3_insert)
    try:
        yield client
    finally:
        client.close()


def run(args: argparse.Namespace) -> None:
    scenarios = [
        Scenario(f"{n:,} small files", [f"small-{i:06d}.parquet" for i in range(n)]) for n in args.small
    ]
    scenarios += [
        Scenario(f"{n} x {args.big_mib} MiB", [f"big-{i:03d}.parquet" for i in range(n)]) for n in args.big
    ]
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-append-")))
        peers = stack.enter_context(hive_peers.started(args.hive, root))  # they boot while we prepare
        pool = root / "pool"
        start = time.perf_counter()
        make_pool(pool, max(args.small, default=0), max(args.big, default=0), args.big_mib)
        print(f"data pool written in {time.perf_counter() - start:.0f} s")
        ours_root = root / "ours"
        ours_root.mkdir()
        db_url = stack.enter_context(temporary_database(args.backend, str(ours_root)))
        proc = stack.enter_context(metastore_server(ours_root, db_url))
        stored, current = _db_probes(db_url)
        servers = [
            Server(
                f"ours ({args.backend})", stack.enter_context(_connected("ours", proc.port)), stored, current
            )
        ]
        for peer in peers:
            peer.wait_ready()
            hive3_insert = peer.version != hive_peers.PYSPARK_HIVE
            connected = _connected(peer.label, peer.port, hive3_insert)
            servers.append(Server(peer.label, stack.enter_context(connected)))
        print(
            f"python {sys.version.split()[0]}, {java_version()}, {os.cpu_count()} cpus, ours on {args.backend}"
        )
        for peer in peers:
            print(f"{peer.label}: {peer.describe()}")
        for server in servers:
            server.client.hms.create_database(
                hive.Database(name=DB_NAME, description="append bench", parameters={})
            )
        store = stack.enter_context(closing(Metastore(proc.config)))
        passes = run_scenarios(servers, scenarios, pool, args.repeats, store)
        print_table(servers, scenarios, args.repeats)
        print(
            "\nlisting pass of the partition (ours, ms, median and min): the reconciliation's cost, paid once"
        )
        print(
            "per housekeeping pass (60 s) for all the appends since the last one, outside the client's calls"
        )
        for label, samples in passes.items():
            print(f"{label:>22} | {_fmt(samples)}")
        if args.log_appends:
            growth = log_growth(servers[0], args.log_appends)
            print("\nnotification-log bytes stored by single-file appends to one partition (ours)")
            for n, size in growth.items():
                print(f"  after {n:>6,} appends: {size:>12,} bytes ({size / n:,.0f} per append)")
            counts = sorted(growth)
            if len(counts) > 1:
                low, high = counts[0], counts[-1]
                print(
                    f"  ratio {high:,}/{low:,} appends: {growth[high] / growth[low]:.1f}x "
                    f"(linear: {high / low:.0f}x)"
                )
    if args.capture_files:
        run_capture(args.capture_files)


def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()] if text else []


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed appends per size and server")
    parser.add_argument("--small", type=_counts, default=[1, 100, 1000, 10000], help="small-file counts")
    parser.add_argument("--big", type=_counts, default=[1, 10, 40], help="big-file counts")
    parser.add_argument("--big-mib", type=int, default=256, help="size of each big file in MiB")
    parser.add_argument("--log-appends", type=_counts, default=[100, 1000], help="appends for log growth")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--no-hive-baseline", action="store_true", help="measure our server only")
    parser.add_argument(
        "--hive",
        type=hive_peers.versions,
        default=(hive_peers.PYSPARK_HIVE,),
        help=f"stock metastores to run side by side, comma-separated, of {','.join(hive_peers.VERSIONS)}",
    )
    parser.add_argument("--capture-files", type=int, default=0, help="then capture one partition of N files")
    parser.add_argument("--capture-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.no_hive_baseline:
        args.hive = ()
    if args.repeats < 1 or args.big_mib < 1 or any(n < 0 for n in [*args.small, *args.big]):
        parser.error("--repeats and --big-mib must be at least 1, file counts not negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.capture_child:
        capture_child(Path(args.capture_child[0]), int(args.capture_child[1]))
        return 0
    return run_bench("bench_append", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
