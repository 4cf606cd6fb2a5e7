"""A task handed to a worker pool from a thread of its own (``worker_processes.submit_soon``).

A pool's first submit waits until the forkserver has forked the worker (its imports first): a caller with work
of its own must get its answer's future at once and go on, and the future must then say what the task did,
or what the pool refused, exactly as ``submit`` would have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, cast

import pytest

from hmsrepl.worker_processes import submit_soon

WAIT = 10.0  # seconds: far above any scheduling delay, only reached when the code under test is wrong


class SlowPool:
    """A pool whose submit blocks until ``started`` is set (a worker that is still being forked), then gives
    the task's outcome (or ``refusal``, raised from submit itself; ``cancel``: a task it cancelled)."""

    def __init__(self, refusal: BaseException | None = None, cancel: bool = False) -> None:
        self.started = threading.Event()
        self.refusal = refusal
        self.cancel = cancel

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        assert self.started.wait(WAIT), "the worker never started"
        if self.refusal is not None:
            raise self.refusal
        done: Future[Any] = Future()
        if self.cancel:
            done.cancel()
            return done
        try:
            done.set_result(fn(*args))
        except Exception as exc:
            done.set_exception(exc)
        return done


def _soon(pool: SlowPool, fn: Callable[..., Any], *args: Any) -> Future[Any]:
    return submit_soon(cast(Any, pool), fn, *args)


def test_the_caller_gets_the_future_while_the_worker_starts_and_then_the_task_s_result() -> None:
    pool = SlowPool()
    answer = _soon(pool, pow, 2, 10)
    assert not answer.done()  # the submit still waits for the worker: the caller was not held up by it
    pool.started.set()
    assert answer.result(WAIT) == 1024


def test_the_task_s_error_is_the_answer_s() -> None:
    pool = SlowPool()
    answer = _soon(pool, int, "not a number")
    pool.started.set()
    with pytest.raises(ValueError, match="not a number"):
        answer.result(WAIT)


def test_a_pool_that_refuses_the_task_fails_the_answer_with_its_own_error() -> None:
    pool = SlowPool(refusal=BrokenProcessPool("the worker died"))
    answer = _soon(pool, pow, 2, 10)
    pool.started.set()
    with pytest.raises(BrokenProcessPool, match="the worker died"):
        answer.result(WAIT)


def test_a_task_the_pool_cancelled_cancels_the_answer() -> None:
    pool = SlowPool(cancel=True)
    answer = _soon(pool, pow, 2, 10)
    pool.started.set()
    with pytest.raises(CancelledError):
        answer.result(WAIT)
