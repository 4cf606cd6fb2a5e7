"""Pausing the garbage collector around a burst of objects (a large notification log read, a cache load)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from hmsrepl.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_error() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("the read failed")
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_two_threads_turn_it_back_on_when_the_last_ends() -> None:
    """The first pause ending while another thread's is running must not turn the collector back on under
    it, and the last one ending must."""
    gc.enable()
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still running
    release.set()
    thread.join(10)
    assert seen == [False]
    assert gc.isenabled()
