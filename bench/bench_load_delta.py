"""Load of one incremental event that adds one 4 KB file, by what the target partition already holds.

    python bench/bench_load_delta.py [--repeats 5] [--small 10000] [--big 10] [--big-mib 256] [--backend sqlite]
                                     [--appends 1] [--partitions 1] [--interleave] [--rollover]
                                     [--files-per-append 1] [--skip-format-1] [--before TREE]

For a target partition holding 1 small file, ``--small`` small files and ``--big`` files of ``--big-mib`` MiB,
each repeat appends one 4 KB file on the source (one INSERT event), dumps it, and times ``REPL LOAD`` of that
one event into two replicas of the same source: one loads the dump as the source captured it (message format
2: the event names the one added file), the other the same dump rewritten to message format 1 (the complete
listing in every data event, as logs written before format 2 hold it; ``tests/format2.py``). The baseline, timed in the same run, is ``cp`` of the one new file. Prints median and
min over the repeats and each median's ratio to the 1-file case (goal: within 2x at every size for appends of
one file; within 3x for appends of several, which must appear at once and so take a new version). With
``--appends N`` each load takes N such events (a streaming writer's appends between two loads); with
``--partitions K`` the table has K such partitions and each load's appends go to them in turn, a run of
N/K appends each (a writer crossing into the next hour's partition), or with ``--interleave`` one append
each in turn (a streaming job writing a file per partition per micro-batch). With ``--rollover`` each load's
appends are followed by a new partition holding one file (the writer crossing into the next hour; the
partition it leaves must not take a new version for it). ``--files-per-append K`` makes each INSERT name K
new files (a Spark append of K tasks: they must appear at once, so the partition takes a new version). Set-up
(writing the partitions, the bootstrap) is not timed. Replaced versions are retired at once (grace 0), inside
the timed load, as they would be by the next load. ``--skip-format-1`` times the as-captured load only (a
format-1 event lists the whole partition: 9 s a load at 10,000 files).

``--before TREE`` runs the same cases in the same run twice, each in a process of its own: with the code of
``TREE`` (a checkout, e.g. ``git worktree add --detach /work/before main``) and with this tree's, and prints
the two side by side. The multi-file figure of the README:

    python bench/bench_load_delta.py --repeats 5 --files-per-append 8 --small 10000 --big 0 --skip-format-1 \
        --before /work/before-multifile
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
TREE_ENV = "HMSREPL_BENCH_TREE"  # the checkout whose code is timed (default: this one)
REPO = Path(os.environ.get(TREE_ENV) or HERE)
sys.path[:0] = [str(REPO / "include"), str(REPO)]
os.environ["HMSREPL_REPL_RETIRE_GRACE_SECONDS"] = "0"

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.storage.local import local_path  # noqa: E402
from tests.backends import temporary_database  # noqa: E402
from tests.format2 import bootstrap_listings, message_versions, to_format_1  # noqa: E402
from tests.helpers import make_partition, one_partition_directory  # noqa: E402

NEW_FILE_BYTES = 4096
CHUNK = 8 << 20


def open_store(stack: ExitStack, backend: str, root: Path, name: str) -> Metastore:
    url = stack.enter_context(temporary_database(backend, str(root)))
    store = Metastore.open(
        MetastoreConfig(db_url=url, warehouse=str(root / f"{name}_wh"), cmroot=str(root / f"{name}_cm"))
    )
    stack.callback(store.close)
    return store


def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as out:
        left = size
        while left:
            n = min(left, CHUNK)
            out.write(os.urandom(n))
            left -= n


@dataclass(frozen=True)
class Workload:
    """What the source writes between two loads (see the module's options)."""

    appends: int = 1
    partitions: int = 1
    interleave: bool = False
    rollover: bool = False
    files_per_append: int = 1
    format_1: bool = True


def bench_case(
    backend: str, root: Path, label: str, files: int, size: int, repeats: int, work: Workload
) -> dict:
    appends, partitions = work.appends, work.partitions
    with ExitStack() as stack:
        source = open_store(stack, backend, root, "src")
        target = open_store(stack, backend, root, "dst")
        engine = ReplicationEngine(str(root / "dumps"), source, target)
        first, _ = one_partition_directory(source, "bench")
        table = source.catalog.get_table("bench", "t")
        values = [chr(ord("a") + k) for k in range(partitions)]
        parts = [
            first,
            *source.catalog.add_partitions("bench", "t", [make_partition(table, v) for v in values[1:]]),
        ]
        directories = {v: Path(local_path(p.sd.location or "")) for v, p in zip(values, parts, strict=True)}
        for value, directory in directories.items():
            directory.mkdir(parents=True, exist_ok=True)
            for i in range(files):
                write_random(directory / f"part-{i:05d}.parquet", size)
            source.catalog.insert("bench", "t", [value])
        boot = engine.execute("REPL DUMP bench").dump_dir
        engine.execute(f"REPL LOAD as_captured FROM '{boot}'")
        engine.execute(f"REPL LOAD format_1 FROM '{boot}'")
        listings = bootstrap_listings(boot, "bench")
        times: dict[str, list[float]] = {"cp": [], "as captured": [], "format 1": []}
        formats: set[int] = set()
        stats = {}
        refused = ""
        for r in range(repeats):
            names = [f"new-{r:03d}-{i:03d}.parquet" for i in range(appends)]
            written = []
            # One INSERT each (a streaming writer's appends between two loads): a run of appends per
            # partition, in turn; or one append per partition, in turn.
            for i, name in enumerate(names):
                value = values[i % partitions] if work.interleave else values[i * partitions // appends]
                step = [directories[value] / f"{name}.{k}" for k in range(work.files_per_append)]
                for path in step:
                    write_random(path, NEW_FILE_BYTES)
                written.extend(str(path) for path in step)
                source.catalog.insert("bench", "t", [value], new_files=[str(path) for path in step])
            # The next hour: its first file written, then its partition added (Spark's order).
            if work.rollover:
                hour = f"h{r:03d}"
                directory = Path(local_path(table.sd.location or "")) / f"p={hour}"
                directory.mkdir(parents=True)
                write_random(directory / "part-00000.parquet", NEW_FILE_BYTES)
                source.catalog.add_partitions("bench", "t", [make_partition(table, hour)])
            last = engine.execute("REPL STATUS as_captured")
            dump = engine.execute(f"REPL DUMP bench FROM {last}").dump_dir
            formats.update(message_versions(dump))
            converted = dump.rstrip("/") + "-v2"
            shutil.copytree(local_path(dump), local_path(converted))
            to_format_1(converted, listings)
            scratch = root / "cp" / f"{r}"
            scratch.mkdir(parents=True)
            t0 = time.perf_counter()
            subprocess.run(["cp", *written, str(scratch)], check=True)
            t1 = time.perf_counter()
            loaded = engine.execute(f"REPL LOAD as_captured FROM '{dump}'")
            t2 = time.perf_counter()
            stats["as captured"] = loaded.stats
            times["cp"].append(t1 - t0)
            times["as captured"].append(t2 - t1)
            if not work.format_1 and not refused:
                refused = "skipped (--skip-format-1)"
                del times["format 1"]
            if refused:
                continue
            try:
                loaded = engine.execute(f"REPL LOAD format_1 FROM '{converted}'")
            except Exception as exc:  # a tree whose load does not read this format
                refused = str(exc).splitlines()[0][:120]
                del times["format 1"]
                continue
            t3 = time.perf_counter()
            stats["format 1"] = loaded.stats
            times["format 1"].append(t3 - t2)
        for db in ("as_captured",) if refused else ("as_captured", "format_1"):
            loaded_parts = target.catalog.get_partitions_by_names(db, "t", [f"p={v}" for v in values])
            held = sum(len(os.listdir(local_path(p.sd.location))) for p in loaded_parts)
            assert held == partitions * files + repeats * appends * work.files_per_append, (db, held)
        return {
            "label": label,
            "times": times,
            "formats": sorted(formats),
            "stats": stats,
            "refused": refused,
        }


def ratio_goal(files_per_append: int) -> float:
    """How many times the 1-file partition's load time a load may take, by the files each append adds."""
    return 2.0 if files_per_append == 1 else 3.0


def compare(args: argparse.Namespace, argv: list[str]) -> None:
    """The same cases timed with the code of ``--before`` and of this tree, each in a process of its own."""
    medians = {}
    for name, tree in (("before", Path(args.before).resolve()), ("after", HERE)):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            env = {**os.environ, TREE_ENV: str(tree)}
            command = [sys.executable, __file__, *argv, "--json-out", out.name]
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            medians[name] = json.loads(Path(out.name).read_text())
        print(f"{name}: {tree} at {_commit(tree)}")
    print(
        f"{'target partition holds':<24} {'before s':>9} {'x 1-file':>9} {'after s':>9} {'x 1-file':>9}  goal"
    )
    base = {name: results[0]["as captured"] for name, results in medians.items()}
    goal = ratio_goal(args.files_per_append)
    for before, after in zip(medians["before"], medians["after"], strict=True):
        b, a = before["as captured"], after["as captured"]
        ratio = a / base["after"]
        print(
            f"{before['label']:<24} {b:>9.4f} {b / base['before']:>8.2f}x {a:>9.4f} {ratio:>8.2f}x"
            f"  {'PASS' if ratio <= goal else 'FAIL'} (<= {goal:.0f}x)"
        )


def _commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h"], capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small", type=int, default=10_000, help="files of the many-small-files case")
    parser.add_argument("--small-bytes", type=int, default=4096)
    parser.add_argument("--big", type=int, default=10, help="files of the big-files case")
    parser.add_argument("--big-mib", type=int, default=256, help="MiB per file of the big-files case")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "mysql"], default="sqlite")
    parser.add_argument("--appends", type=int, default=1, help="one-file INSERTs per load (default 1)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions the appends go to, in turn")
    parser.add_argument("--interleave", action="store_true", help="one append per partition in turn")
    parser.add_argument("--rollover", action="store_true", help="a new partition after each load's appends")
    parser.add_argument("--files-per-append", type=int, default=1, help="new files each INSERT names")
    parser.add_argument("--skip-format-1", action="store_true", help="time the as-captured load only")
    parser.add_argument("--before", help="also time the code of this checkout, side by side")
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before:
        argv = sys.argv[1:]
        at = argv.index("--before")
        compare(args, argv[:at] + argv[at + 2 :])
        return
    work = Workload(
        args.appends,
        args.partitions,
        args.interleave,
        args.rollover,
        args.files_per_append,
        not args.skip_format_1,
    )
    cases = [
        ("1 small file", 1, args.small_bytes),
        (f"{args.small:,} small files", args.small, args.small_bytes),
        (f"{args.big} x {args.big_mib} MiB", args.big, args.big_mib << 20),
    ]
    cases = [case for case in cases if case[1]]  # --big 0: no big-files case
    results = []
    for label, files, size in cases:
        with tempfile.TemporaryDirectory(prefix="bench-load-delta-") as tmp:
            results.append(bench_case(args.backend, Path(tmp), label, files, size, args.repeats, work))
    if args.json_out:
        medians = [
            {"label": r["label"], **{what: statistics.median(t) for what, t in r["times"].items()}}
            for r in results
        ]
        Path(args.json_out).write_text(json.dumps(medians))
    print(
        f"load of {args.appends} incremental event(s) each adding {args.files_per_append} "
        f"{NEW_FILE_BYTES // 1024} KB file(s) "
        f"to {args.partitions} partition(s) in turn{' (interleaved)' if args.interleave else ''}"
        f"{', then a new partition' if args.rollover else ''}, "
        f"{args.backend}, "
        f"{args.repeats} repeats; python {sys.version.split()[0]}"
    )
    print(f"captured message format(s) in this tree: {results[0]['formats']}")
    header = f"{'target partition holds':<24} {'what':<22} {'median s':>9} {'min s':>9} {'x 1-file':>9}"
    print(header)
    base = {what: statistics.median(t) for what, t in results[0]["times"].items()}
    goal = ratio_goal(args.files_per_append)
    for result in results:
        if result["refused"]:
            print(f"{result['label']:<24} load, format 1: refused by this tree ({result['refused']})")
        for what, times in result["times"].items():
            median = statistics.median(times)
            ratio = median / base[what]
            verdict = "" if what == "cp" else f"  {'PASS' if ratio <= goal else 'FAIL'} (<= {goal:.0f}x)"
            shown = "cp (baseline)" if what == "cp" else f"load, {what}"
            print(
                f"{result['label']:<24} {shown:<22} {median:>9.4f} {min(times):>9.4f} {ratio:>8.2f}x{verdict}"
            )
        for what, stats in result["stats"].items():
            kept = getattr(stats, "files_kept", "n/a")
            print(f"{'':<24}   {what}: last load copied {stats.files_copied}, kept {kept}")


if __name__ == "__main__":
    main()
