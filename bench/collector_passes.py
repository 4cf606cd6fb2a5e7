"""Passes of Python's cyclic collector during a measured step, by generation, and their time.

A replay or a bootstrap keeps many objects alive between its pages and batches; every middle or full pass of
the collector rescans them. Its passes are counted exactly, unlike the step's time on a noisy machine, so a
bench prints them beside its timings: a change in the work the collector does shows at once.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CollectorPasses:
    """Passes by generation (0 young, 1 middle, 2 full) and their total seconds."""

    passes: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: float = 0.0

    def cell(self) -> str:
        young, middle, full = self.passes
        return f"{young} / {middle} / {full} ({self.seconds * 1000:.0f} ms)"


@contextmanager
def counted_passes() -> Iterator[CollectorPasses]:
    """Count the collector's passes while the block runs (in every thread of the process)."""
    counted = CollectorPasses()
    started = [0.0]

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            counted.passes[info["generation"]] += 1
            counted.seconds += time.perf_counter() - started[0]

    gc.callbacks.append(record)
    try:
        yield counted
    finally:
        gc.callbacks.remove(record)
