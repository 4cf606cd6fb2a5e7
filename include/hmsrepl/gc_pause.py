"""Pausing Python's cyclic garbage collector while a burst of objects is built.

Building many small objects (100,000 events read from the notification log, a cache load of 100,000
partitions) triggers collection passes that each rescan every live object; the objects built hold no
reference cycles, so pausing the collector for the burst frees nothing later than it would have. Measured:
reading 100,000 events on PostgreSQL takes 0.17 s of CPU instead of 0.35 s, and parsing a cache load of
100,000 partitions 1.4 s instead of 7.9 s.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0  # pauses in progress, in every thread
_resume = False  # whether the collector was on when the first of them began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the collector off. Pauses may overlap across threads: the collector comes back on
    when the last one ends, and only if it was on when the first began (a caller that switched it off keeps
    it off)."""
    global _pauses, _resume
    with _lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
