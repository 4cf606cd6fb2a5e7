"""The stress run's checker can fail: it catches a backwards answer and reads of writes a list does not count."""

from __future__ import annotations

from hmsrepl.formats.writeids import ValidWriteIdList
from tests.cache_stress import Checker


def lst(hwm: int, open_ids: set[int] = frozenset(), aborted: set[int] = frozenset()) -> ValidWriteIdList:
    return ValidWriteIdList("stress.t0", hwm, set(open_ids), set(aborted))


def test_a_clean_history_passes() -> None:
    checker = Checker()
    checker.record(0, 0, "t0", lst(3), 3, 1.0)
    checker.record(0, 0, "t0", lst(5, aborted={4}), 5, 2.0)
    checker.record(0, 0, "t0", lst(5, aborted={4}), 6, 3.0)  # newer than the list, committed before
    checker.record(1, 0, "t0", lst(2), 2, 3.5)  # another instance's session has its own floor
    checker.finish({("t0", 6): 2.5}, {("t0", 3), ("t0", 5), ("t0", 6), ("t0", 2)})
    assert (checker.reads, checker.backwards, checker.uncommitted) == (4, [], [])


def test_a_planted_backwards_answer_is_caught() -> None:
    checker = Checker()
    checker.record(0, 1, "t0", lst(6), 6, 1.0)
    checker.record(0, 1, "t0", lst(6), 5, 2.0)  # same instance, same session: older than answered
    assert (
        len(checker.backwards) == 1 and "v=5" in checker.backwards[0] and "after v=6" in checker.backwards[0]
    )


def test_a_planted_backwards_answer_to_another_session_of_the_instance_is_caught() -> None:
    checker = Checker()
    checker.record(0, 0, "t0", lst(6), 6, 1.0)
    checker.record(0, 1, "t0", lst(5), 5, 2.0)  # the other session's list cannot see 6: not backwards
    checker.record(0, 2, "t0", lst(7), 5, 3.0)  # this list counts 6, which the instance answered: backwards
    assert len(checker.backwards) == 1 and "instance 0 answered v=6" in checker.backwards[0]


def test_a_planted_read_of_an_open_write_is_caught() -> None:
    checker = Checker()
    checker.record(0, 0, "t0", lst(1, open_ids={1}), 1, 1.0)  # the example: list t0:1:1:1:
    assert len(checker.uncommitted) == 1 and "open in the list" in checker.uncommitted[0]


def test_planted_reads_of_aborted_and_not_yet_committed_writes_are_caught() -> None:
    checker = Checker()
    checker.record(0, 0, "t0", lst(4, aborted={4}), 4, 1.0)
    checker.record(0, 1, "t0", lst(4), 7, 2.0)  # newer than the list, and never committed
    checker.record(0, 2, "t0", lst(4), 8, 3.0)  # committed, but only asked to commit after the answer
    checker.finish({("t0", 8): 3.5}, {("t0", 8)})
    assert len(checker.uncommitted) == 3
    assert "aborted in the list" in checker.uncommitted[0]
    assert "never committed" in checker.uncommitted[1]
    assert "before its commit" in checker.uncommitted[2]
