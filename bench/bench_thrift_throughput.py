"""Throughput of the Thrift metastore under concurrent clients: get_table and get_partitions(1,000) at 1, 4 and
16 client processes, ours next to another checkout of ours (``--baseline-checkout``, e.g. the version before a
change to the server) and the real Hive Metastore 2.3.10, in the same run.

Every client is its own process with one kept-open connection (as Spark keeps its connection), calling as fast
as it is answered for ``--seconds``; all clients of a cell start together. Cells are run server after server,
alternating the order, so a noisy neighbour hits every server alike; only ratios in the same run are compared.

Run:  python bench/bench_thrift_throughput.py [--clients 1,4,16] [--seconds 4] [--partitions 1000]
                                              [--baseline-checkout ../main] [--no-hive-baseline]

Prints a table (calls per second, and each server's ratio to ours) and exits 0; exits non-zero with a message when
a server cannot be started or a call fails. The figures inform, they do not gate.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.bench_thrift_latency import (  # noqa: E402
    DB_NAME,
    TABLE,
    Client,
    Server,
    check_same_answers,
    prepare,
    timed_add_partitions,
)
from bench.hive_reference import HiveReferenceMetastore, hive_version  # noqa: E402
from bench.interrupts import run_bench  # noqa: E402
from tests.servers import metastore_server  # noqa: E402

WARMUP_CALLS = 3


@dataclass
class Target:
    label: str
    port: int
    rates: dict[tuple[str, int], float] = field(default_factory=dict)


CALLS: dict[str, Callable[[Any, int], Any]] = {
    "get_table": lambda hms, _n: hms.get_table(DB_NAME, TABLE),
    "get_partitions": lambda hms, n: hms.get_partitions(DB_NAME, TABLE, -1),
}


def _client(port: int, figure: str, partitions: int, start: Any, seconds: float, out: Any) -> None:
    """One client process: connect, warm up, wait for the others, call for ``seconds``; put the call count."""
    try:
        client = Client(port)
        call = CALLS[figure]
        for _ in range(WARMUP_CALLS):
            call(client.hms, partitions)
        start.wait()
        deadline = time.monotonic() + seconds
        calls = 0
        while time.monotonic() < deadline:
            result = call(client.hms, partitions)
            if figure == "get_partitions" and len(result) != partitions:
                raise RuntimeError(f"get_partitions returned {len(result)} partitions, expected {partitions}")
            calls += 1
        client.close()
        out.put(calls)
    except BaseException as exc:  # reported by the parent
        out.put(f"{exc.__class__.__name__}: {exc}")


def measure_cell(target: Target, figure: str, clients: int, partitions: int, seconds: float) -> float:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(clients + 1)
    out = context.Queue()
    procs = [
        context.Process(target=_client, args=(target.port, figure, partitions, start, seconds, out))
        for _ in range(clients)
    ]
    for proc in procs:
        proc.start()
    try:
        start.wait(timeout=120)
        results = [out.get(timeout=seconds + 120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    failures = [r for r in results if isinstance(r, str)]
    if failures:
        raise RuntimeError(f"{target.label}: {figure} with {clients} clients failed: {failures[0]}")
    return sum(results) / seconds


def print_table(targets: list[Target], figures: list[str], counts: list[int]) -> None:
    print()
    head = f"{'figure':<24}" + "".join(f"{t.label:>28}" for t in targets)
    print(head)
    print("-" * len(head))
    ours = targets[0]
    for figure in figures:
        for clients in counts:
            cells = []
            for target in targets:
                rate = target.rates[(figure, clients)]
                ratio = (
                    rate / ours.rates[(figure, clients)] if ours.rates[(figure, clients)] else float("nan")
                )
                cells.append(
                    f"{rate:10.1f}/s" + (f" ({ratio:4.2f}x ours)" if target is not ours else " " * 15)
                )
            print(f"{figure + f' x{clients}':<24}" + "".join(f"{c:>28}" for c in cells))
    print("\n(calls per second over all clients; ratios > 1 mean that server answered more calls than ours)")


def run(args: argparse.Namespace) -> None:
    counts = [int(c) for c in args.clients.split(",")]
    figures = [f for f in CALLS if f in args.figures.split(",")]
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-throughput-")))
        hive_ref = None
        if not args.no_hive_baseline:
            hive_ref = stack.enter_context(HiveReferenceMetastore(root / "hive"))  # boots while ours start
        checkouts = [("ours", ROOT)]
        if args.baseline_checkout:
            checkouts.append(("baseline", Path(args.baseline_checkout).resolve()))
        targets: list[Target] = []
        for label, checkout in checkouts:
            server_root = root / label
            server_root.mkdir()
            pythonpath = os.pathsep.join([str(checkout / "include"), str(checkout)])
            running = stack.enter_context(
                metastore_server(server_root, f"sqlite:///{server_root}/metastore.db", PYTHONPATH=pythonpath)
            )
            targets.append(Target(f"{label} ({_commit(checkout)})", running.port))
        if hive_ref is not None:
            hive_ref.wait_ready()
            targets.append(Target(f"hive {hive_version()} (derby)", hive_ref.port))
        servers = [Server(t.label, Client(t.port)) for t in targets]
        try:
            for server in servers:
                prepare(server)
                timed_add_partitions(server, args.partitions)
            check_same_answers(servers, args.partitions)
        finally:
            for server in servers:
                server.client.close()
        print(
            f"{args.partitions} partitions; {args.seconds:g} s per cell; clients {counts}; {os.cpu_count()} CPUs"
        )
        for figure in figures:
            for clients in counts:
                order = targets if clients % 2 == 0 else list(reversed(targets))
                for target in order:
                    target.rates[(figure, clients)] = measure_cell(
                        target, figure, clients, args.partitions, args.seconds
                    )
                print(
                    f"  {figure} x{clients}: "
                    + ", ".join(f"{t.label} {t.rates[(figure, clients)]:.1f}/s" for t in targets),
                    flush=True,
                )
        print_table(targets, figures, counts)


def _commit(checkout: Path) -> str:
    """The checkout's short commit id (its directory name when git cannot tell)."""
    try:
        found = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return checkout.name
    return found.stdout.strip() or checkout.name


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,4,16", help="client process counts, comma-separated")
    parser.add_argument(
        "--figures", default="get_table,get_partitions", help="calls to measure, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="measured time per cell")
    parser.add_argument("--partitions", type=int, default=1000, help="partitions in the measured table")
    parser.add_argument(
        "--baseline-checkout", help="another checkout of this project to measure side by side"
    )
    parser.add_argument("--no-hive-baseline", action="store_true", help="do not start Hive 2.3.10")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_bench("bench_thrift_throughput", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
