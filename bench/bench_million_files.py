"""One partition of very many files, end to end: capture, bootstrap dump and load, then one append replicated.

    python bench/bench_million_files.py [--files 1000000] [--backend sqlite|postgres]

Each phase runs in its own child process, so the peak RSS printed for it is that phase's own (the goal: at
most 400 MB at 1,000,000 files, whatever the phase; the bootstrap load in at most 120 s). Its CPU seconds
(user + system) are printed too: on a shared machine they vary far less than the wall time. A load that
stages a big partition's copies in several processes (``HMSREPL_COPY_PROCESSES``) prints their CPU seconds
(all of them) apart: the phase's CPU is the sum of both columns. (Their peak RSS is not printed: the kernel
reports the load's own, as it was when the forkserver was forked and exec'd.) The source partition's files are 8 bytes each (the cost under
test is per file, not per byte). Phases:

- capture: the first INSERT naming no files lists the partition and reads every file (checksums), once;
- bootstrap dump / load: the dump writes the listing to ``_files``, the load copies and verifies every file;
- append: one new file, INSERT naming it; the incremental dump and load of that one event (the replica keeps
  every file it holds: no re-read, one new version directory of hard links).

The tree stays under ``--root`` (default: a temporary directory removed at the end). Start a run a few minutes
after the last one's tree was removed: on ext4 without a journal the kernel skips the inodes freed in the last
60-360 s one by one on each create, which cost 2-7x per create in a scratch loop, depending on where the new
inodes land.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.storage.local import local_path  # noqa: E402
from tests.helpers import one_partition_directory  # noqa: E402

PHASES = (
    "write",
    "capture",
    "bootstrap dump",
    "bootstrap load",
    "append",
    "incremental dump",
    "incremental load",
)


def open_store(root: Path, name: str, url: str | None) -> Metastore:
    return Metastore.open(
        MetastoreConfig(
            db_url=url or f"sqlite:///{root}/{name}.db",
            warehouse=str(root / f"{name}_wh"),
            cmroot=str(root / f"{name}_cm"),
        )
    )


def run_phase(root: Path, phase: str, files: int, urls: dict[str, str | None]) -> dict[str, float]:
    """One phase in this process; returns its seconds and this process's peak RSS (MB)."""
    state_file = root / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    source = open_store(root, "source", urls["source"])
    target = open_store(root, "target", urls["target"])
    engine = ReplicationEngine(str(root / "dumps"), source, target)
    started = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = started.ru_utime + started.ru_stime
    start = time.perf_counter()
    if phase == "write":
        part, directory = one_partition_directory(source, "big")
        for i in range(files):
            with open(directory / f"part-{i:07d}.parquet", "wb") as out:
                out.write(i.to_bytes(8, "big"))
        state["location"] = part.sd.location
    elif phase == "capture":
        source.catalog.insert("big", "t", ["a"])
    elif phase == "bootstrap dump":
        state["dump"] = engine.execute("REPL DUMP big").dump_dir
    elif phase in ("bootstrap load", "incremental load"):
        engine.execute(f"REPL LOAD big_dr FROM '{state['dump']}'")
    elif phase == "append":
        name = "part-appended.parquet"
        with open(Path(local_path(state["location"])) / name, "wb") as out:
            out.write(b"one more file")
        source.catalog.insert("big", "t", ["a"], new_files=[f"{state['location']}/{name}"])
    elif phase == "incremental dump":
        last = engine.execute("REPL STATUS big_dr")
        state["dump"] = engine.execute(f"REPL DUMP big FROM {last}").dump_dir
    seconds = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = used.ru_utime + used.ru_stime - cpu_before
    source.close()
    target.close()
    state_file.write_text(json.dumps(state))
    reap_copy_processes()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "workers_cpu": children.ru_utime + children.ru_stime,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def reap_copy_processes() -> None:
    """Stop the forkserver the load's copy processes came from and wait for it: their CPU (the forkserver
    waited for them) then counts in this process's children's, as the phase's own."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is not None:
        server._stop()


def check_replica(root: Path, files: int, urls: dict[str, str | None]) -> int:
    target = open_store(root, "target", urls["target"])
    try:
        [part] = target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
        held = sum(1 for _ in Path(local_path(part.sd.location)).iterdir())
    finally:
        target.close()
    if held != files + 1:
        raise SystemExit(f"the replica's partition holds {held} files, not {files + 1}")
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--root", help="keep the tree here (default: a temporary directory)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.files < 1:
        raise SystemExit("--files must be at least 1")
    urls: dict[str, str | None] = {"source": None, "target": None}
    if args.phase:
        root = Path(args.root)
        urls = json.loads((root / "urls.json").read_text())
        print(json.dumps(run_phase(root, args.phase, args.files, urls)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-million-", dir=args.root) as tmp:
        root = Path(tmp)
        if args.backend == "postgres":
            from tests.backends import temporary_database

            with (
                temporary_database("postgres", str(root)) as src,
                temporary_database("postgres", str(root)) as dst,
            ):
                urls = {"source": src, "target": dst}
                run_all(root, args.files, urls)
        else:
            run_all(root, args.files, urls)


def run_all(root: Path, files: int, urls: dict[str, str | None]) -> None:
    (root / "urls.json").write_text(json.dumps(urls))
    print(f"{files:,} files in one partition; python {sys.version.split()[0]}; each phase in its own process")
    print(f"{'phase':<18} {'seconds':>9} {'CPU s':>7} {'peak RSS MB':>12} {'copy processes: CPU s':>22}")
    for phase in PHASES:
        child = [sys.executable, __file__, "--phase", phase, "--files", str(files), "--root", str(root)]
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"phase {phase} failed: {' '.join(done.stderr.strip().splitlines()[-1:])}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        verdict = "" if phase == "write" else ("  <= 400 MB" if figures["rss_mb"] <= 400 else "  OVER 400 MB")
        workers = f" {figures['workers_cpu']:>22.1f}" if figures["workers_cpu"] else ""
        print(
            f"{phase:<18} {figures['seconds']:>9.1f} {figures['cpu']:>7.1f} {figures['rss_mb']:>12.0f}"
            f"{workers}{verdict}",
            flush=True,
        )
    print(
        f"replica partition holds {check_replica(root, files, urls):,} files (source's plus the appended one)"
    )


if __name__ == "__main__":
    main()
