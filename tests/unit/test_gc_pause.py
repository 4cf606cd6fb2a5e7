"""Pausing the garbage collector around a burst of objects (a large notification log read, a cache load)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from hmsrepl.gc_pause import gc_paused, paused_pages, paused_walk


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


def test_pages_are_read_and_handled_paused_and_the_collector_runs_between_them() -> None:
    """A bootstrap load reads and writes each page of partitions with the collector off (its passes over
    everything the load keeps cost a quarter of its CPU), and lets it run between pages."""
    gc.enable()
    read_paused: list[bool] = []

    def items() -> Iterator[int]:
        for item in range(5):
            read_paused.append(not gc.isenabled())
            yield item

    handled = []
    with paused_pages(items(), 2) as pages:
        for page in pages:
            handled.append((page, gc.isenabled()))
    assert handled == [([0, 1], False), ([2, 3], False), ([4], False)]
    assert read_paused == [True] * 5
    assert gc.isenabled()


def test_the_collector_is_back_after_pages_are_left_early() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), paused_pages(range(10), 3) as pages:
        for _page in pages:
            raise RuntimeError("the write failed")
    assert gc.isenabled()


def test_a_walk_is_only_given_inside_a_with_so_leaving_it_ends_the_pause() -> None:
    """A walk iterated without its ``with`` is refused at once: left early, it kept the collector off for
    as long as something held it (a traceback's frame)."""
    gc.enable()
    with pytest.raises(TypeError):
        iter(paused_walk([["a"]]))  # type: ignore[call-overload]
    with paused_walk([["a"], ["b"]]) as walk:
        next(walk)
        held = walk  # kept past the block, as a traceback would keep it
    assert gc.isenabled() and list(held) == []


def test_each_page_young_objects_are_collected_after_it_and_never_in_a_full_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full pass over everything a load keeps (every partition's event until its batch commits) is what
    the walk avoids; a young pass after each page keeps what a page leaves from piling up."""
    passes: list[tuple[int, str]] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: passes.append((generation, "collect")) or 0)
    gc.enable()
    with paused_walk([["a", "b"], ["c"]]) as walk:
        for page in walk:
            passes.append((-1, "".join(page)))
    assert passes == [(-1, "ab"), (0, "collect"), (-1, "c"), (0, "collect")]
