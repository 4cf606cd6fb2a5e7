"""A load folds an object's successive changes in one batch into one; runs of one-file additions stay marked.

``AddedOneByOne`` tells the load that every step added one new file, so publishing the files one after the
other in step order shows readers only listings the source had; anything else must appear at once.
"""

from __future__ import annotations

from functools import reduce

import pytest

from hmsrepl.metastore.messages import DataChange, relative_path
from hmsrepl.replication.replica_files import AddedOneByOne, compose


def added(*names: str) -> DataChange:
    return DataChange(tuple(f"file:/wh/t/{name}#c{name}#" for name in names), (), False, 0, None)


EMPTY = DataChange()


def composed(*steps: DataChange) -> DataChange | None:
    return reduce(compose, steps, None)


@pytest.mark.parametrize(
    "steps",
    [
        (added("a"), added("b")),
        (added("a"), EMPTY, added("b"), EMPTY, added("c")),  # Spark's alter + insert pairs
        (EMPTY, added("a"), added("b")),
    ],
)
def test_successive_one_file_additions_compose_one_by_one_in_step_order(
    steps: tuple[DataChange, ...],
) -> None:
    change = composed(*steps)
    assert isinstance(change, AddedOneByOne)
    names = [relative_path(e) for step in steps for e in step.added]
    assert [relative_path(e) for e in change.added] == names


@pytest.mark.parametrize(
    "steps",
    [
        (added("a"),),  # one step: the plain one-file change
        (added("a"), added("b", "c")),  # a step of two files must appear at once
        (added("a", "b"), added("c")),
        (added("a"), added("a")),  # the same path again: a replacement
        (added("a"), DataChange((), ("x",), False, 0, None)),  # a removal
        (added("a"), DataChange.full([])),  # an overwrite
    ],
)
def test_anything_else_composes_to_a_plain_change(steps: tuple[DataChange, ...]) -> None:
    assert type(composed(*steps)) is DataChange


def test_a_run_broken_once_stays_broken() -> None:
    assert type(composed(added("a"), added("b", "c"), added("d"))) is DataChange
    assert type(composed(added("a"), added("b"), added("a"))) is DataChange
