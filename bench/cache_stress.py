"""The long run of the cache stress test: cached server processes under writers, aborts, restarts and
unclaimed DDL, until a number of reads have been checked (see ``tests/cache_stress.py`` for the checker).

Run:  python bench/cache_stress.py [--reads 500000] [--instances 2] [--restart-every 30] [--seed N]

Prints progress every 30 s and ends with one line ``reads N backwards B uncommitted U refused R``; exits 1
when any answer went backwards or showed a write its reader's list does not count, or the run failed.
Needs PostgreSQL (``HMSREPL_TEST_POSTGRES_URL``, else a throwaway server as the tests start one).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tests.cache_stress import Checker, StressSettings, run_stress, stress_database  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reads", type=int, default=500_000, help="checked answers to reach (default 500,000)"
    )
    parser.add_argument("--instances", type=int, default=2, choices=(2, 3))
    parser.add_argument("--readers", type=int, default=2, help="reader sessions per instance")
    parser.add_argument(
        "--restart-every", type=float, default=30.0, help="seconds between restarts (0: none)"
    )
    parser.add_argument("--max-seconds", type=float, default=6 * 3600.0, help="stop here even if short")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)

    def progress(checker: Checker) -> None:
        print(f"... {checker.summary()}", flush=True)

    settings = StressSettings(
        instances=args.instances,
        readers_per_instance=args.readers,
        seconds=args.max_seconds,
        max_reads=args.reads,
        restart_every=args.restart_every,
        seed=args.seed,
        progress=progress,
    )
    with tempfile.TemporaryDirectory(prefix="cache-stress-") as tmp, stress_database(Path(tmp)) as url:
        outcome = run_stress(Path(tmp), url, settings)
    checker = outcome.checker
    print(outcome)
    print(
        f"reads {checker.reads} backwards {len(checker.backwards)} uncommitted {len(checker.uncommitted)} "
        f"refused {checker.refused}"
    )
    for line in (checker.backwards + checker.uncommitted)[:10]:
        print(f"  {line}")
    failed = bool(checker.backwards or checker.uncommitted or outcome.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
