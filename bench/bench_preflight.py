"""CPU of a bootstrap load's pre-flight over one partition of many files: the dump's validation and the look at
every source file, before the load's first change, alone.

    python bench/bench_preflight.py [--files 100000] [--root DIR] [--repeats 3] [--baseline TREE]

The partition is written, captured and dumped as ``bench_million_files.py`` does (its phases, once; the tree is
kept under ``--root`` when given, and reused by later runs with the same ``--files``). Then the validation and
the pre-flight run ``--repeats`` times in a fresh process, and the CPU seconds of each run are printed with
their minimum and median. ``--baseline TREE`` (a checkout of another version, e.g. a ``git worktree`` of main)
runs the same measure with that tree's code, the two alternating run by run, and prints the ratio of the
medians: one machine, one window, the noise shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measure(tree: Path, root: Path) -> float:
    """In this process, with ``tree``'s code: CPU seconds of one validation and pre-flight of ``root``'s dump."""
    sys.path[:0] = [str(tree / "include"), str(tree)]
    from bench.bench_million_files import open_store
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.layout import DumpDir
    from hmsrepl.replication.load import LoadEngine

    source, target = open_store(root, "source", None), open_store(root, "target", None)
    try:
        engine = ReplicationEngine(str(root / "dumps"), source, target)
        loader = LoadEngine(target, source_roots=engine.load_source_roots)
        dump = DumpDir(json.loads((root / "state.json").read_text())["dump"])
        meta = dump.read_metadata()
        started = time.process_time()
        checks = loader._preflight(dump, meta)
        loader.validate_bootstrap(dump, meta, "big_dr", checks)
        if checks is not None:
            checks.finish()
        return time.process_time() - started
    finally:
        source.close()
        target.close()


def prepare(root: Path, files: int) -> None:
    """The partition of ``files`` files, captured and dumped (``bench_million_files.py``'s phases), once."""
    marker = root / "preflight-files.txt"
    if marker.exists() and marker.read_text() == str(files):
        return
    root.mkdir(parents=True, exist_ok=True)
    (root / "urls.json").write_text(json.dumps({"source": None, "target": None}))
    for phase in ("write", "capture", "bootstrap dump"):
        print(f"  {phase} of {files:,} files...", file=sys.stderr, flush=True)
        argv = [sys.executable, str(REPO / "bench" / "bench_million_files.py"), "--phase", phase]
        subprocess.run([*argv, "--files", str(files), "--root", str(root)], check=True, capture_output=True)
    marker.write_text(str(files))


def one_run(tree: Path, root: Path) -> float:
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(tree), "--root", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument(
        "--root", help="keep the partition and its dump here (default: a temporary directory)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", help="another checkout to measure side by side, alternating")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(measure(Path(args.measure).resolve(), Path(args.root)))
        return
    if args.files < 1 or args.repeats < 1:
        raise SystemExit("--files and --repeats must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as tmp:
        root = Path(args.root).resolve() if args.root else Path(tmp)
        prepare(root, args.files)
        trees = {"this": REPO} | ({"baseline": Path(args.baseline).resolve()} if args.baseline else {})
        runs: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                runs[name].append(one_run(tree, root))
        print(f"pre-flight of one partition of {args.files:,} files (validation and file looks), CPU seconds")
        for name, figures in runs.items():
            shown = " ".join(f"{f:.2f}" for f in figures)
            print(f"{name:<9} runs {shown}; min {min(figures):.2f}, median {statistics.median(figures):.2f}")
        if args.baseline:
            ratio = statistics.median(runs["this"]) / statistics.median(runs["baseline"])
            print(f"this / baseline (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
