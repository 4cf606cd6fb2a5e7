"""Test-only fault points: a process killed at a chosen step, to prove what survives a crash there.

``HMSREPL_FAULT_POINT=<name>`` makes the process SIGKILL itself when it reaches ``fault_point(<name>)``
(no cleanup, no ``finally``, no atexit: what a power cut or ``kill -9`` does); ``<name>@<n>`` at the n-th
time it reaches it. Unset, a point costs one dictionary lookup. The crash tests
(tests/integration/test_crash_file_effects.py) use it.
"""

from __future__ import annotations

import os
import signal
import threading

FAULT_ENV = "HMSREPL_FAULT_POINT"

_hits: dict[str, int] = {}
_lock = threading.Lock()


def fault_point(name: str) -> None:
    """Kill this process here when ``HMSREPL_FAULT_POINT`` names this point (and this hit of it)."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted or not wanted.startswith(name):
        return
    point, _, nth = wanted.partition("@")
    if point != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        hit = _hits[name]
    if hit == (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
