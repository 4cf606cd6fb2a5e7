"""bounded_map: map's results and failures, with a bounded number of tasks in flight."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from hmsrepl.concurrency import bounded_map


def test_results_come_in_order_with_at_most_the_window_submitted() -> None:
    submitted = taken = 0
    most = 0
    lock = threading.Lock()

    def items():
        nonlocal submitted, most
        for i in range(1000):
            with lock:
                submitted += 1
                most = max(most, submitted - taken)
            yield i

    with ThreadPoolExecutor(max_workers=4) as pool:
        out = []
        for value in bounded_map(pool, lambda i: i * i, items(), 2):
            taken += 1
            out.append(value)
    assert out == [i * i for i in range(1000)]
    assert most <= 9  # the window (4 per worker), plus the item drawn before the oldest result is taken


def test_the_first_failure_is_raised() -> None:
    def fail_on_three(i: int) -> int:
        if i == 3:
            raise ValueError("three")
        return i

    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(ValueError, match="three"):
        list(bounded_map(pool, fail_on_three, range(100), 1))
