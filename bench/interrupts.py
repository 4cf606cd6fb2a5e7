"""How a bench that starts servers ends: Ctrl-C and SIGTERM unwind through every ``finally`` (servers stopped,
throwaway databases dropped) and exit 130 / 143; a failure is one line and exit 1; success prints the run time.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable


class Terminated(BaseException):
    """Raised by the SIGTERM handler; a BaseException so no ``except Exception`` on the way swallows it."""


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` stops the servers and drops the database."""
    raise Terminated(signum)


def run_bench(name: str, run: Callable[[], None]) -> int:
    """Run ``run`` with SIGTERM turned into an unwinding exception; the process's exit status."""
    signal.signal(signal.SIGTERM, _terminate)
    started = time.monotonic()
    try:
        run()
    except KeyboardInterrupt:
        print(f"{name}: interrupted (Ctrl-C); servers stopped", file=sys.stderr)
        return 130
    except Terminated:
        print(f"{name}: terminated (SIGTERM); servers stopped", file=sys.stderr)
        return 143
    except Exception as exc:
        print(f"{name}: FAILED: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"total run time {time.monotonic() - started:.0f} s")
    return 0
