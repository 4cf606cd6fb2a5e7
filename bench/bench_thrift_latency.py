"""Latency of our Thrift metastore next to stock Hive Metastores (2.3.10, and 3.1.3 or 4.2.0 on request).

Spark and every other HMS client reach the catalog over Thrift, so per-call latency is what users feel:
get_table on every query, get_partitions / get_partition_names when planning a partitioned scan, and one
add_partitions when a job creates many partitions; lock + unlock of a table around every Iceberg commit.
DESIGN.md ("The real Hive Metastore as a reference oracle") gives Hive's figures on these machines; machines
are noisy, so both servers are measured in the same run, call by call interleaved (alternating which server
goes first), and only ratios are compared.

Run:  python bench/bench_thrift_latency.py [--partitions 1000] [--iterations 200] [--no-hive-baseline]
                                           [--hive 2.3.10,4.2.0] [--backend sqlite|postgres] [--profile]

* ours: ``python -m hmsrepl.cli metastore serve`` in a subprocess on a throwaway database (a SQLite file in a
  temporary directory, or a PostgreSQL database created and dropped on 127.0.0.1:5432);
* Hive: each ``--hive`` version (default 2.3.10, the HiveMetaStore in pyspark's jars; 3.1.3 and 4.2.0 from
  Maven Central with their DbNotificationListener) on Derby (bench/hive_peers.py), side by side in the same
  run, each killed with its process group at the end, also on Ctrl-C and errors.

All are called through the same client: hmsclient's generated Hive 2.x client over thrift's
TBinaryProtocolAccelerated (C extension) when it is built, else the pure-Python TBinaryProtocol; the
environment block says which. Hive 4.2 no longer answers ``get_table``: when a server refuses it,
every server's table read is timed as ``get_table_req`` instead (the table says so). ``--profile`` then
profiles our server's get_partitions in-process (database read, struct conversion, Cython encoding) to
show where its time goes.

Prints a table and exits 0; exits non-zero with a message when a server cannot be started or a call fails.
The figures inform, they do not gate.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore  # noqa: E402
from hmsclient.genthrift.hive_metastore import ttypes as hive  # noqa: E402
from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.Thrift import TApplicationException  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from bench import hive_peers  # noqa: E402
from bench.interrupts import run_bench  # noqa: E402
from tests.backends import temporary_database  # noqa: E402
from tests.servers import metastore_server  # noqa: E402

DB_NAME = "bench_thrift"
TABLE = "orders"
WARMUP_TABLE = "orders_warmup"
CLIENT_TIMEOUT_MS = 600_000  # Hive on Derby needs ~20 s for add_partitions(1,000); never cut a call short
PARTITION_KEYS = (("dt", "string"), ("hr", "string"))
COLUMNS = (
    ("order_id", "bigint"),
    ("customer_id", "bigint"),
    ("order_ts", "timestamp"),
    ("status", "string"),
    ("amount", "decimal(12,2)"),
    ("currency", "string"),
    ("country", "string"),
    ("channel", "string"),
    ("items", "array<struct<sku:string,qty:int,price:decimal(12,2)>>"),
    ("attributes", "map<string,string>"),
)
PARQUET = (
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
)


# -- client ---------------------------------------------------------------------------------------------------
def _fastbinary_available() -> bool:
    try:
        from thrift.protocol import fastbinary  # noqa: F401
    except ImportError:
        return False
    return True


FAST = _fastbinary_available()


def client_protocol_name() -> str:
    if FAST:
        return "thrift TBinaryProtocolAccelerated (fastbinary C extension), TBufferedTransport"
    return "thrift TBinaryProtocol (pure Python: fastbinary not built), TBufferedTransport"


class Client:
    """hmsclient's generated Hive 2.x client on one kept-open connection, as Spark keeps its connection."""

    def __init__(self, port: int) -> None:
        sock = TSocket.TSocket("127.0.0.1", port)
        sock.setTimeout(CLIENT_TIMEOUT_MS)
        self.transport = TTransport.TBufferedTransport(sock)
        if FAST:
            protocol: Any = TBinaryProtocol.TBinaryProtocolAccelerated(self.transport, fallback=False)
        else:
            protocol = TBinaryProtocol.TBinaryProtocol(self.transport)
        self.hms = ThriftHiveMetastore.Client(protocol)
        self.transport.open()
        self.hms.set_ugi("hive", [])

    def close(self) -> None:
        self.transport.close()


# -- objects, shaped like what a Spark ETL job creates ----------------------------------------------------------
def _sd(location: str | None = None) -> Any:
    input_format, output_format, serde = PARQUET
    return hive.StorageDescriptor(
        cols=[hive.FieldSchema(name, kind, None) for name, kind in COLUMNS],
        location=location,
        inputFormat=input_format,
        outputFormat=output_format,
        compressed=False,
        numBuckets=-1,
        serdeInfo=hive.SerDeInfo(None, serde, {"serialization.format": "1"}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def _table(name: str) -> Any:
    return hive.Table(
        tableName=name,
        dbName=DB_NAME,
        owner="hive",
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=_sd(),
        partitionKeys=[hive.FieldSchema(k, t, None) for k, t in PARTITION_KEYS],
        parameters={"spark.sql.sources.provider": "parquet", "spark.sql.create.version": "4.2.0"},
        tableType="MANAGED_TABLE",
    )


def partition_values(count: int, offset: int = 0) -> list[list[str]]:
    """``count`` (dt, hr) pairs: consecutive hours from 2024-01-01, as hourly ingestion creates them."""
    return [
        [f"2024-{1 + (i // 24) // 28:02d}-{1 + (i // 24) % 28:02d}", f"{i % 24:02d}"]
        for i in range(offset, offset + count)
    ]


def _partitions(table: str, values: list[list[str]]) -> list[Any]:
    return [
        hive.Partition(
            values=v,
            dbName=DB_NAME,
            tableName=table,
            createTime=int(time.time()),
            lastAccessTime=0,
            sd=_sd(),  # no location: the server puts it under the table's, as for Spark's dynamic partitions
            parameters={},
        )
        for v in values
    ]


# -- measurement ----------------------------------------------------------------------------------------------
@dataclass
class Server:
    """One server under test with its client and the samples taken from it."""

    label: str
    client: Client
    samples: dict[str, list[float]] = field(default_factory=dict)
    add_seconds: float = float("nan")


def _timed_ms(call: Callable[[], Any]) -> float:
    start = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - start) / 1e6


def measure(
    servers: list[Server],
    figure: str,
    call: Callable[[Client], Any],
    iterations: int,
    warmup: int,
) -> None:
    """Time ``call`` on every server, interleaved call by call and alternating who goes first.

    A burst of noise from a neighbour then hits both servers alike instead of one whole series.
    """
    for server in servers:
        for _ in range(warmup):
            call(server.client)
    for server in servers:
        server.samples[figure] = []
    for i in range(iterations):
        for server in servers if i % 2 == 0 else reversed(servers):
            server.samples[figure].append(_timed_ms(lambda s=server: call(s.client)))


def percentile(samples: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 1..100, 0 for the minimum); with 200 samples p99 sits between the
    two slowest."""
    if len(samples) == 1 or q == 0:
        return min(samples)
    return statistics.quantiles(samples, n=100, method="inclusive")[round(q) - 1]


def prepare(server: Server) -> None:
    """Create the database and the tables, and warm add_partitions up on a table that is not measured."""
    hms = server.client.hms
    hms.create_database(hive.Database(name=DB_NAME, description="latency benchmark", parameters={}))
    hms.create_table(_table(TABLE))
    hms.create_table(_table(WARMUP_TABLE))
    for round_ in range(3):  # warms Hive's JIT and both servers' caches of the add path
        hms.add_partitions(_partitions(WARMUP_TABLE, partition_values(10, offset=10 * round_)))


def timed_add_partitions(server: Server, partitions: int) -> None:
    parts = _partitions(TABLE, partition_values(partitions))
    start = time.perf_counter()
    added = server.client.hms.add_partitions(parts)
    server.add_seconds = time.perf_counter() - start
    if added != partitions:
        raise RuntimeError(f"{server.label}: add_partitions added {added} partitions, expected {partitions}")


def check_same_answers(servers: list[Server], partitions: int) -> None:
    """Both servers must hold the same partitions, or the latencies would compare different work."""
    names: dict[str, list[str]] = {}
    for server in servers:
        got = server.client.hms.get_partition_names(DB_NAME, TABLE, -1)
        parts = server.client.hms.get_partitions(DB_NAME, TABLE, -1)
        if len(got) != partitions or len(parts) != partitions:
            raise RuntimeError(
                f"{server.label}: {len(got)} partition names and {len(parts)} partitions, expected {partitions}"
            )
        names[server.label] = sorted(got)
    first_label, first = next(iter(names.items()))
    for label, other in names.items():
        if other != first:
            raise RuntimeError(f"partition names differ between {label} and {first_label}")


# -- environment ----------------------------------------------------------------------------------------------
def _describe_factory(factory: Any) -> str:
    cls = factory if isinstance(factory, type) else type(factory)
    compiled = str(getattr(sys.modules[cls.__module__], "__file__", "")).endswith((".so", ".pyd"))
    return f"{cls.__name__} ({'compiled Cython' if compiled else 'PURE PYTHON'})"


def our_server_protocol() -> str:
    """Which protocol our server's workers decode and encode with, and whether it is compiled: the classes the
    server and its front end take, read from their modules (the server process runs this same package)."""
    from hmsrepl.thrift import frontend, server

    found = {getattr(module, "TCyBinaryProtocol", None) for module in (server, frontend)} - {None}
    return ", ".join(_describe_factory(cls) for cls in found) or "unknown"


def print_environment(args: argparse.Namespace, backend_url: str, peers: list[hive_peers.StockPeer]) -> None:
    import thrift
    import thriftpy2

    from hmsrepl import __version__

    thrift_version = getattr(thrift, "__version__", None)
    if thrift_version is None:
        from importlib.metadata import version

        thrift_version = version("thrift")
    print("Environment")
    print(
        f"  python           {platform.python_implementation()} {platform.python_version()} ({sys.executable})"
    )
    print(
        f"  machine          {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    )
    print(f"  client           hmsclient (Hive 2.x IDL), thrift {thrift_version}: {client_protocol_name()}")
    print(
        f"  ours             hmsrepl {__version__}, thriftpy2 {thriftpy2.__version__}: {our_server_protocol()}"
    )
    print(f"  ours backend     {args.backend} ({backend_url.split('@')[-1]})")
    for peer in peers:
        print(f"  {peer.label:<17}{peer.describe()}")
    print(f"  workload         {args.partitions} partitions (dt, hr), {len(COLUMNS)} columns, parquet serde")
    print(
        f"  sampling         {args.warmup} warm-up calls, then {args.iterations} interleaved calls per figure"
    )
    print()


def lock_unlock(client: Client) -> None:
    """What Iceberg's Hive catalog does around every commit: an exclusive table lock, then unlock."""
    component = hive.LockComponent(type=hive.LockType.EXCLUSIVE, level=hive.LockLevel.TABLE, dbname=DB_NAME)
    component.tablename = TABLE
    response = client.hms.lock(hive.LockRequest(component=[component], user="bench", hostname="localhost"))
    if response.state != hive.LockState.ACQUIRED:
        raise RuntimeError(f"lock answered state {response.state}, expected ACQUIRED")
    client.hms.unlock(hive.UnlockRequest(lockid=response.lockid))


def print_table(servers: list[Server], partitions: int, iterations: int, get_table: str) -> None:
    rows: list[tuple[str, list[float]]] = []
    for figure in (
        get_table,
        f"get_partitions({partitions})",
        f"get_partition_names({partitions})",
        "lock+unlock",
    ):
        for q in (0, 50, 99):
            rows.append(
                (
                    f"{figure} {'min' if q == 0 else f'p{q}'} (ms)",
                    [
                        percentile(s.samples[figure], q) if s.samples.get(figure) else float("nan")
                        for s in servers
                    ],
                )
            )
    rows.append((f"add_partitions({partitions}), one call (s)", [s.add_seconds for s in servers]))
    width = max(len(name) for name, _ in rows) + 2
    header = f"{'figure':<{width}}" + "".join(f"{s.label:>20}" for s in servers)
    header += "".join(f"{'ours/' + s.label.split()[1]:>14}" for s in servers[1:])  # one ratio per peer
    print(header)
    print("-" * len(header))
    for name, values in rows:
        line = f"{name:<{width}}" + "".join(f"{v:>20.3f}" for v in values)
        for value in values[1:]:
            ratio = values[0] / value if value > 0 else float("nan")  # nan: not measured there
            line += f"{ratio:>13.2f}x"
        print(line)
    print()
    print(
        f"ratio < 1: ours is faster. p99 of {iterations} samples rests on the slowest few calls: a tail hint only."
    )


# -- in-process profile of our get_partitions ----------------------------------------------------------------------
class GcTimer:
    """Wall time spent in the cyclic garbage collector, per generation, via ``gc.callbacks``.

    cProfile charges a collection to whichever function happened to allocate when it triggered, so GC cost
    shows up smeared over innocent lines; this measures it directly.
    """

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._started
            self.counts[info["generation"]] += 1

    @contextmanager
    def recording(self) -> Iterator[GcTimer]:
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)


@contextmanager
def _gc_threshold(*threshold: int) -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(*threshold)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def profile_get_partitions(db_url: str, root: Path, repeats: int = 20) -> None:
    """Split our server's get_partitions into database read, conversion, encoding and garbage collection.

    It runs the server's own code (MetastoreHandler, catalog, convert, thriftpy2's Cython protocol) in this
    process against the benchmark's database: the real call minus the socket. This process's heap is not the
    server's, so GC figures are indicative; the wire figures above are the ones that count.
    """
    # The package-level names are aliased to the Cython classes: import the pure-Python ones by module.
    from thriftpy2.protocol.binary import TBinaryProtocol as PyBinary
    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport import TCyMemoryBuffer
    from thriftpy2.transport.memory import TMemoryBuffer

    from hmsrepl.config import MetastoreConfig
    from hmsrepl.metastore import Metastore
    from hmsrepl.thrift import convert
    from hmsrepl.thrift.handler import MetastoreHandler
    from hmsrepl.thrift.idl import Service

    store = Metastore(
        MetastoreConfig(db_url=db_url, warehouse=str(root / "warehouse"), cmroot=str(root / "cmroot"))
    )
    try:
        handler = MetastoreHandler(store)
        models = store.catalog.get_partitions(DB_NAME, TABLE, -1)
        result = Service.get_partitions_result(success=[convert.partition_to_thrift(p) for p in models])

        def encode(protocol: Any, buffer: Any) -> int:
            proto = protocol(buffer)
            proto.write_struct(result)
            buffer.flush()
            return len(buffer.getvalue())

        def median_ms(step: Callable[[], Any]) -> float:
            step()
            return statistics.median(_timed_ms(step) for _ in range(repeats))

        def handler_call() -> Any:
            return handler.get_partitions(DB_NAME, TABLE, -1)

        n = len(models)
        print(
            f"Profile of our get_partitions({n}), in-process, median of {repeats} (response {encode(TCyBinaryProtocol, TCyMemoryBuffer()) / 1e3:.0f} kB):"
        )
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("handler.get_partitions, whole (read + structs from documents)", handler_call),
            (
                "  catalog.get_partitions, structs from documents",
                lambda: store.catalog.get_partitions(DB_NAME, TABLE, -1, decode=convert.PartitionDocs()),
            ),
            (
                "  (was) catalog.get_partitions, pydantic models",
                lambda: store.catalog.get_partitions(DB_NAME, TABLE, -1),
            ),
            (
                "  (was) convert.partition_to_thrift x N",
                lambda: [convert.partition_to_thrift(p) for p in models],
            ),
            (
                "encode result, thriftpy2 Cython (what we serve)",
                lambda: encode(TCyBinaryProtocol, TCyMemoryBuffer()),
            ),
            ("encode result, thriftpy2 pure Python (for scale)", lambda: encode(PyBinary, TMemoryBuffer())),
            ("handler.get_partition_names (whole)", lambda: handler.get_partition_names(DB_NAME, TABLE, -1)),
        ]
        for name, step in steps:
            print(f"  {name:<58}{median_ms(step):>9.2f} ms")
        with GcTimer().recording() as timer:
            for _ in range(repeats):
                handler_call()
        per_call = sum(timer.seconds) / repeats * 1e3
        print(
            f"  cyclic GC inside handler.get_partitions: {per_call:.2f} ms per call (mean) "
            f"(collections per call gen0/1/2: {'/'.join(f'{c / repeats:.1f}' for c in timer.counts)}; "
            f"gen2 {timer.seconds[2] / repeats * 1e3:.2f} ms)"
        )
        with _gc_threshold(50_000, 20, 100):
            print(
                f"  {'handler.get_partitions with gc.set_threshold(50000, 20, 100)':<58}{median_ms(handler_call):>9.2f} ms"
            )
        gc.disable()
        try:
            print(
                f"  {'handler.get_partitions with GC disabled (floor)':<58}{median_ms(handler_call):>9.2f} ms"
            )
        finally:
            gc.enable()

        profiler = cProfile.Profile()
        with _gc_threshold(50_000, 20, 100):  # keep collections from smearing over the allocating lines
            profiler.enable()
            for _ in range(5):
                encode(TCyBinaryProtocol, TCyMemoryBuffer())
                handler_call()
            profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        lines = out.getvalue().splitlines()
        start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
        print("  cProfile, top 12 by own time (5 x handler + encode, GC threshold raised):")
        for line in lines[start:]:
            if line.strip():
                print("   ", _short_paths(line.rstrip()))
        print()
    finally:
        store.close()


def _short_paths(line: str) -> str:
    """Profile lines name files by absolute path; the package-relative part is what a reader needs."""
    for prefix in sorted({str(p) for p in sys.path if p}, key=len, reverse=True):
        line = line.replace(prefix + os.sep, "")
    return line


# -- main -----------------------------------------------------------------------------------------------------
@contextmanager
def _connected(label: str, port: int) -> Iterator[Server]:
    client = Client(port)
    try:
        yield Server(label, client)
    finally:
        client.close()


def table_read(servers: list[Server]) -> tuple[str, Callable[[Client], Any]]:
    """The figure's name and the call that reads the table on every server: ``get_table``, or
    ``get_table_req`` (which all answer) when one of them no longer answers the old form (Hive 4)."""
    refusing = []
    for server in servers:
        try:
            server.client.hms.get_table(DB_NAME, TABLE)
        except TApplicationException as exc:
            if exc.type != TApplicationException.UNKNOWN_METHOD:
                raise
            refusing.append(server.label)
    if not refusing:
        return "get_table", lambda c: c.hms.get_table(DB_NAME, TABLE)
    print(
        f"note: {', '.join(refusing)} answered get_table with 'Invalid method name': every server's "
        "table read is timed as get_table_req"
    )
    request = hive.GetTableRequest(dbName=DB_NAME, tblName=TABLE)
    return "get_table_req", lambda c: c.hms.get_table_req(request)


def run(args: argparse.Namespace) -> None:
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-thrift-")))
        # Launch the JVMs first: they boot while our server starts.
        peers = stack.enter_context(hive_peers.started(args.hive, root))
        ours_root = root / "ours"
        ours_root.mkdir()
        db_url = stack.enter_context(temporary_database(args.backend, str(ours_root)))
        print_environment(args, db_url, peers)
        ours_proc = stack.enter_context(metastore_server(ours_root, db_url))
        servers = [stack.enter_context(_connected(f"ours ({args.backend})", ours_proc.port))]
        for peer in peers:
            peer.wait_ready()
            servers.append(stack.enter_context(_connected(f"{peer.label} (derby)", peer.port)))

        for server in servers:
            prepare(server)
        for server in servers:  # one call each, one after the other: nothing else runs meanwhile
            timed_add_partitions(server, args.partitions)
        check_same_answers(servers, args.partitions)

        n = args.partitions
        get_table, read_table = table_read(servers)
        measure(servers, get_table, read_table, args.iterations, args.warmup)
        measure(
            servers,
            f"get_partitions({n})",
            lambda c: c.hms.get_partitions(DB_NAME, TABLE, -1),
            args.iterations,
            args.warmup,
        )
        measure(
            servers,
            f"get_partition_names({n})",
            lambda c: c.hms.get_partition_names(DB_NAME, TABLE, -1),
            args.iterations,
            args.warmup,
        )
        # Hive's lock manager needs its txn tables, which a bare Derby metastore lacks: measured where it works.
        lockable = []
        for server in servers:
            try:
                lock_unlock(server.client)
                lockable.append(server)
            except Exception as exc:
                print(f"lock+unlock on {server.label} failed, not measured: {exc}")
        measure(lockable, "lock+unlock", lock_unlock, args.iterations, args.warmup)
        print_table(servers, n, args.iterations, get_table)
        if args.profile:
            print()
            profile_get_partitions(db_url, ours_root)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000, help="partitions in the measured table")
    parser.add_argument("--iterations", type=int, default=200, help="timed calls per figure and server")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per figure and server first")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--no-hive-baseline", action="store_true", help="measure our server only")
    parser.add_argument(
        "--hive",
        type=hive_peers.versions,
        default=(hive_peers.PYSPARK_HIVE,),
        help=f"stock metastores to run side by side, comma-separated, of {','.join(hive_peers.VERSIONS)}",
    )
    parser.add_argument("--profile", action="store_true", help="then profile our get_partitions in-process")
    args = parser.parse_args(argv)
    if args.no_hive_baseline:
        args.hive = ()
    if args.partitions < 1 or args.iterations < 1 or args.warmup < 0:
        parser.error("--partitions and --iterations must be at least 1, --warmup at least 0")
    if args.partitions > 32767:
        parser.error("--partitions must fit get_partitions' i16 max_parts (at most 32767)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_bench("bench_thrift_latency", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
