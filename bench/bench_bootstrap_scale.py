"""Bootstrap dump and load at warehouse scale: seconds and peak RSS per phase, against two floors.

    python bench/bench_bootstrap_scale.py [--sizes 1x10000,1x100000,1000x1000] [--backend sqlite,postgres]
        [--hive-max 100000] [--mkdir-max 100000] [--profile dump|load] [--workers N]

Each size is TABLES x PARTITIONS (``1x100000``: one table of 100,000 partitions; ``10000x10``: the 10,000-table
goal; ``1000x1000``: a million partitions). The source is built once per size and backend (not measured);
then REPL DUMP and REPL LOAD each run in a fresh Python process, so the peak RSS printed is that phase's own
(``wait4``), not the set-up's. Partitions have their default locations under the table and no files, so
the figures are the catalog's and the dump's, and the disk's only for the directories: the load makes one
version directory a partition.

The disk's floor: coreutils ``mkdir`` making the same directories in a new tree (a table's, then one a
partition inside it), timed after the phases, with each backend's load time as a multiple of it. A big
table's directories are entries of one parent, made one at a time (each ``mkdir`` holds the parent's lock),
so no tool makes them faster than this on the same disk. Sizes above ``--mkdir-max`` partitions skip it.

The floor: the same tables and partitions written into the stock Hive Metastore 2.3.10 of pyspark's jars (on
Derby, ``bench/hive_reference.py``) and read back over Thrift the way the import reads it
(``get_table``, ``get_partition_names``, ``get_partitions_by_names`` in pages of 500): what any HMS-to-HMS
tool pays just to read the objects. Sizes above ``--hive-max`` partitions skip it (Derby fills slowly).

Each phase's CPU seconds (user and system, from ``wait4``) are printed beside its wall time: on a machine
shared with other work they compare two runs where wall time cannot. Under each phase, its wall seconds by
stage (the run's ``repl_metrics`` row: pre-flight, copy, apply...) and its user and system CPU apart show
where a wall time went (system time: the kernel making directories and syncing).

Every tree of a run (each size and backend's, the ``mkdir`` floor's, Hive's) stays until the run ends, and
all are removed then, not between measurements: on ext4 without a journal (this project's build machines),
each file or directory made in the minutes after a mass removal skips the recently freed inodes one by one
(the kernel's ``recently_deleted``, kept 60 s, 360 s while their blocks are unwritten), and the ``mkdir``
floor measured right after a backend's tree was removed took about twice as long. Only a disk short of inodes
for the next size has the trees kept so far removed first (said on stderr).

``--profile dump`` (or ``load``) runs that phase under cProfile and prints the top 25 functions by
cumulative time (``BENCH_PROFILE_LINES`` and ``BENCH_PROFILE_SORT``, e.g. ``tottime``, change both;
``BENCH_PROFILE_CLOCK=cpu`` counts CPU seconds instead of wall seconds, so time spent waiting on a database
server drops out; ``BENCH_PROFILE_OUT=FILE`` also saves the whole profile there).

Goals (issue 34): 1x100,000 dump + load <= 15 s; 10,000x10 <= 60 s; 1,000x1,000 <= 300 s; peak RSS of either
phase <= 400 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.statement_table import CHOICES, chosen_backends  # noqa: E402

DB = "boot"
ADD_BATCH = 1000
GOALS = {(1, 100_000): 15.0, (10_000, 10): 60.0, (1_000, 1_000): 300.0}
RSS_GOAL_MB = 400


def parse_size(text: str) -> tuple[int, int]:
    tables, _, parts = text.lower().partition("x")
    try:
        return int(tables), int(parts)
    except ValueError:
        raise SystemExit(f"size '{text}' is not TABLESxPARTITIONS (e.g. 1x100000)") from None


def _config(url: str, root: Path, name: str):
    from hmsrepl.config import MetastoreConfig

    return MetastoreConfig(db_url=url, warehouse=str(root / f"{name}_wh"), cmroot=str(root / f"{name}_cm"))


def build_source(url: str, root: Path, tables: int, partitions: int) -> None:
    """The source database: ``tables`` tables of ``partitions`` partitions each (batches of ADD_BATCH)."""
    from hmsrepl.metastore import Metastore
    from hmsrepl.metastore.model import Database
    from tests.helpers import make_partition, make_table

    store = Metastore.open(_config(url, root, "src"))
    try:
        store.catalog.create_database(Database(name=DB))
        for t in range(tables):
            table = store.catalog.create_table(make_table(DB, f"t{t:05d}", partition_keys=("p",)))
            for first in range(0, partitions, ADD_BATCH):
                chunk = [
                    make_partition(table, f"{p:07d}")
                    for p in range(first, min(partitions, first + ADD_BATCH))
                ]
                store.catalog.add_partitions(DB, table.table_name, chunk)
    finally:
        store.close()


def run_phase(phase: str, url: str, target_url: str, root: Path, dump_dir: str, profile: bool) -> dict:
    """In the child process: one REPL DUMP or REPL LOAD, timed; the parent reads the peak RSS."""
    from hmsrepl.metastore import Metastore
    from hmsrepl.replication.engine import ReplicationEngine

    source = Metastore.open(_config(url, root, "src"))
    target = Metastore.open(_config(target_url, root, "dst"))
    engine = ReplicationEngine(str(root / "dumps"), source, target)
    command = "REPL DUMP boot" if phase == "dump" else f"REPL LOAD boot FROM '{dump_dir}'"
    profiler = None
    if profile:
        import cProfile

        # BENCH_PROFILE_CLOCK=cpu: the process's CPU time, not wall time (a wait on the server then costs
        # nothing, so what shows is the client's own work; run with HMSREPL_LOAD_PARALLELISM=1).
        clock = time.process_time if os.environ.get("BENCH_PROFILE_CLOCK") == "cpu" else time.perf_counter
        profiler = cProfile.Profile(clock)
        profiler.enable()
    started = time.perf_counter()
    result = engine.execute(command)
    seconds = time.perf_counter() - started
    if profiler is not None:
        import pstats

        profiler.disable()
        if os.environ.get("BENCH_PROFILE_OUT"):  # the whole profile, for pstats or snakeviz
            profiler.dump_stats(os.environ["BENCH_PROFILE_OUT"])
        pstats.Stats(profiler, stream=sys.stderr).sort_stats(
            os.environ.get("BENCH_PROFILE_SORT", "cumulative")
        ).print_stats(int(os.environ.get("BENCH_PROFILE_LINES", "25")))
    out = {
        "seconds": seconds,
        "dump_dir": getattr(result, "dump_dir", dump_dir),
        "stages": _stages(source, target),
    }
    source.close()
    target.close()
    return out


def _stages(*stores) -> dict[str, float]:
    """The newest run's wall seconds per stage (its ``repl_metrics`` row), from whichever store recorded it."""
    from hmsrepl.replication.metrics import MetricsLog

    rows = [row for store in stores for row in MetricsLog(store.engine).list(limit=1)]
    newest = max(rows, key=lambda row: row.started_at, default=None)
    return {} if newest is None else newest.stages


def _stage_line(label: str, phase: str, answer: dict, user: float, system: float) -> str:
    """One phase's wall seconds by stage beside its user and system CPU: where a wall time went."""
    stages = ", ".join(f"{name} {seconds:.2f}" for name, seconds in sorted(answer["stages"].items()))
    return f"  {label}: {phase} stages (wall s): {stages or 'none recorded'}; cpu user {user:.2f} s, system {system:.2f} s"


def child(
    phase: str, url: str, target_url: str, root: Path, dump_dir: str, profile: bool
) -> tuple[dict, float, float]:
    """Run one phase in a fresh interpreter; (its JSON answer, its peak RSS in MB, its CPU seconds: user and
    system, the figure that holds on a loaded machine). The answer also holds ``user`` and ``system``."""
    argv = [sys.executable, __file__, "--phase", phase, "--url", url, "--target-url", target_url]
    argv += ["--root", str(root), "--dump-dir", dump_dir] + (["--profile", phase] if profile else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=os.environ.copy())
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{phase} failed (exit {proc.returncode})")
    answer = json.loads(output.decode().strip().splitlines()[-1])
    answer.update(user=usage.ru_utime, system=usage.ru_stime)
    return answer, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def hive_floor(stack: ExitStack, root: Path, tables: int, partitions: int) -> float:
    """Seconds to read the tables and partitions back from a stock Hive Metastore 2.3.10 over Thrift."""
    from thriftpy2.rpc import make_client

    from bench.hive_reference import HiveReferenceMetastore
    from hmsrepl.hive_import.reader import StockMetastoreReader
    from hmsrepl.metastore.model import Database
    from hmsrepl.thrift.convert import database_to_thrift, partition_to_thrift, table_to_thrift
    from hmsrepl.thrift.idl import Service
    from tests.helpers import make_partition, make_table

    hive = stack.enter_context(HiveReferenceMetastore(root / "hive", heap="2g"))
    hive.wait_ready()
    client = make_client(Service, "127.0.0.1", hive.port, timeout=3_600_000)
    warehouse = hive.root / "warehouse" / f"{DB}.db"
    client.create_database(database_to_thrift(Database(name=DB, location_uri=str(warehouse))))
    for t in range(tables):
        table = make_table(DB, f"t{t:05d}", partition_keys=("p",))
        table.sd.location = str(warehouse / table.table_name)
        client.create_table(table_to_thrift(table))
        for first in range(0, partitions, ADD_BATCH):
            chunk = []
            for p in range(first, min(partitions, first + ADD_BATCH)):
                part = make_partition(table, f"{p:07d}")
                part.sd = table.sd.model_copy(update={"location": f"{table.sd.location}/p={p:07d}"})
                chunk.append(partition_to_thrift(part))
            client.add_partitions(chunk)
    client.close()
    reader = StockMetastoreReader(hive.uri, timeout_seconds=3600)
    started = time.perf_counter()
    read = 0
    for name in reader.table_names(DB):
        reader.table(DB, name)
        for page in reader.partitions(DB, name, reader.partition_names(DB, name)):
            read += len(page)
    seconds = time.perf_counter() - started
    reader.close()
    assert read == tables * partitions, (read, tables * partitions)
    return seconds


def mkdir_floor(root: Path, tables: int, partitions: int) -> float:
    """Seconds for coreutils ``mkdir`` (through ``xargs``) to make the same directories in a new tree: a
    table's directory, then one per partition inside it, as a load makes one version directory a partition.
    Kernel work no tool avoids: on a local disk it is most of a big table's load (the entries of one
    directory are made one at a time, each holding the directory's lock)."""
    root.mkdir()
    names = root / "names"
    with names.open("wb") as out:
        for t in range(tables):
            (root / f"t{t:05d}").mkdir()
            out.write(b"".join(f"t{t:05d}/p={p:07d}\0".encode() for p in range(partitions)))
    with names.open("rb") as listed:
        started = time.perf_counter()
        subprocess.run(["xargs", "-0", "mkdir", "--"], stdin=listed, cwd=root, check=True)
        return time.perf_counter() - started


def bench_size(root: Path, backend: str, tables: int, partitions: int, args: argparse.Namespace) -> dict:
    """One size on one backend in the new tree ``root`` (left for the run's end to remove)."""
    from tests.backends import temporary_database

    root.mkdir()
    tmp = str(root)
    with ExitStack() as stack:
        url = stack.enter_context(temporary_database(backend, tmp))
        target_url = stack.enter_context(temporary_database(backend, tmp))
        label = f"{backend} {tables:,}x{partitions:,}"
        print(f"  {label}: building the source...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        build_source(url, root, tables, partitions)
        print(f"  {label}: built in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        dumped, dump_rss, dump_cpu = child("dump", url, target_url, root, "", args.profile == "dump")
        print(f"  {label}: dump {dumped['seconds']:.2f} s, {dump_rss:.0f} MB", file=sys.stderr, flush=True)
        print(
            _stage_line(label, "dump", dumped, dumped["user"], dumped["system"]), file=sys.stderr, flush=True
        )
        loaded, load_rss, load_cpu = child(
            "load", url, target_url, root, dumped["dump_dir"], args.profile == "load"
        )
        # Printed now: removing a million partitions' directories afterwards takes minutes.
        print(f"  {label}: load {loaded['seconds']:.2f} s, {load_rss:.0f} MB", file=sys.stderr, flush=True)
        print(
            _stage_line(label, "load", loaded, loaded["user"], loaded["system"]), file=sys.stderr, flush=True
        )
        return {
            "dump": (dumped["seconds"], dump_rss, dump_cpu),
            "load": (loaded["seconds"], load_rss, load_cpu),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1x10000,1x100000,1000x1000", help="TABLESxPARTITIONS, comma-separated"
    )
    parser.add_argument(
        "--backend", default="sqlite", help=f"one of {', '.join(CHOICES)}, or a comma-separated list"
    )
    parser.add_argument(
        "--hive-max", type=int, default=100_000, help="largest size (partitions) read from Hive"
    )
    parser.add_argument(
        "--mkdir-max", type=int, default=100_000, help="largest size (partitions) made again by mkdir"
    )
    parser.add_argument("--profile", choices=("dump", "load"), help="cProfile that phase (top 25 to stderr)")
    parser.add_argument("--phase", choices=("dump", "load"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--target-url", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--dump-dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        answer = run_phase(
            args.phase, args.url, args.target_url, Path(args.root), args.dump_dir, bool(args.profile)
        )
        print(json.dumps(answer))
        return
    sizes = [parse_size(text) for text in args.sizes.split(",") if text.strip()]
    backends = chosen_backends(args.backend)
    with tempfile.TemporaryDirectory(prefix="bench-boot-scale-") as session:
        run(Path(session), sizes, backends, args)


def make_room(session: Path, objects: int) -> None:
    """Remove the trees kept so far when the disk has too few inodes left for a size of ``objects`` partitions
    (its source's and its replica's directories, with room to spare): the one case where a measurement
    follows a removal, said on stderr."""
    needed = 4 * objects + 100_000
    if os.statvfs(session).f_favail >= needed:
        return
    print(
        f"  fewer than {needed:,} inodes left: removing the trees kept so far "
        "(the next figures follow a removal)",
        file=sys.stderr,
        flush=True,
    )
    for tree in session.iterdir():
        shutil.rmtree(tree)


def run(session: Path, sizes: list[tuple[int, int]], backends: list[str], args: argparse.Namespace) -> None:
    """Every size on every backend, then the floors; each tree a new directory of ``session``."""
    print(
        f"bootstrap at scale on {', '.join(backends)}; python {sys.version.split()[0]}; {os.cpu_count()} cores"
    )
    header = (
        f"{'backend':<9}{'size':>14}{'dump s':>9}{'MB':>6}{'load s':>9}{'MB':>6}{'total s':>9}{'ms/part':>9}"
        f"{'dump cpu':>9}{'load cpu':>9}  goal"
    )
    rows = []
    loads: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for tables, partitions in sizes:
        for turn, backend in enumerate(backends):  # a backend may be named twice: runs alternate
            make_room(session, tables * partitions)
            result = bench_size(
                session / f"{backend}-{tables}x{partitions}-{turn}", backend, tables, partitions, args
            )
            (dump_s, dump_mb, dump_cpu), (load_s, load_mb, load_cpu) = result["dump"], result["load"]
            total = dump_s + load_s
            loads.setdefault((tables, partitions), []).append((backend, load_s))
            goal = GOALS.get((tables, partitions))
            verdicts = []
            if goal is not None:
                verdicts.append(f"<= {goal:.0f} s {'PASS' if total <= goal else 'FAIL'}")
            verdicts.append(
                f"RSS <= {RSS_GOAL_MB} MB {'PASS' if max(dump_mb, load_mb) <= RSS_GOAL_MB else 'FAIL'}"
            )
            rows.append(
                f"{backend:<9}{f'{tables:,}x{partitions:,}':>14}{dump_s:>9.2f}{dump_mb:>6.0f}{load_s:>9.2f}"
                f"{load_mb:>6.0f}{total:>9.2f}{1000 * total / (tables * partitions):>9.3f}"
                f"{dump_cpu:>9.2f}{load_cpu:>9.2f}  {', '.join(verdicts)}"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    print(header)
    print("\n".join(rows))
    made = [(t, p) for t, p in sizes if t * p <= args.mkdir_max]
    if made:
        print(
            "\nfloor: making the same directories with mkdir (xargs mkdir: a table's, then one a partition)"
        )
        for tables, partitions in made:
            seconds = mkdir_floor(session / f"mkdir-{tables}x{partitions}", tables, partitions)
            ratios = ", ".join(
                f"{backend} load {load_s / seconds:.2f}x" for backend, load_s in loads[tables, partitions]
            )
            print(
                f"{'mkdir':<9}{f'{tables:,}x{partitions:,}':>14}{seconds:>9.2f}{'':>36}"
                f"{1000 * seconds / (tables * partitions):>9.3f}  {ratios}"
            )
    floors = [(t, p) for t, p in sizes if t * p <= args.hive_max]
    if floors:
        from bench.hive_reference import hive_version

        print(f"\nfloor: reading the same objects from Hive Metastore {hive_version()} (Derby) over Thrift")
        for tables, partitions in floors:
            with ExitStack() as stack:
                print(f"  hive {tables:,}x{partitions:,}: building...", file=sys.stderr, flush=True)
                tree = session / f"hive-{tables}x{partitions}"
                tree.mkdir()
                seconds = hive_floor(stack, tree, tables, partitions)
            per = 1000 * seconds / (tables * partitions)
            print(f"{'hive read':<9}{f'{tables:,}x{partitions:,}':>14}{seconds:>9.2f}{'':>36}{per:>9.3f}")


if __name__ == "__main__":
    main()
