"""A bootstrap dump places a compactor's ``base_<wid>_v<txn>`` as ``base_<wid>``; the dump's path check accepts
exactly that renaming and nothing else (a file must still be where its entry says, up to the suffix)."""

from __future__ import annotations

import pytest

from hmsrepl.replication.dump_checks import _is_compacted_base_of

LOC = "file:/wh/sales.db/orders"


@pytest.mark.parametrize(
    ("canonical", "subdir", "name", "accepted"),
    [
        (f"{LOC}/base_0000005_v0000012/part-0", "base_0000005", "part-0", True),
        (f"{LOC}/base_0000005_v0000012/a/part-0", "base_0000005/a", "part-0", True),
        (f"{LOC}/base_0000006_v0000012/part-0", "base_0000005", "part-0", False),  # another write id
        (f"{LOC}/delta_0000005_0000005_0000/part-0", "base_0000005", "part-0", False),
        (f"{LOC}/base_0000005_v0000012/part-1", "base_0000005", "part-0", False),  # another file
        (f"{LOC}/delta_0000005_0000005_0000_v12/part-0", "delta_0000005_0000005_0000", "part-0", False),
        (f"{LOC}/base_0000005_vx/part-0", "base_0000005", "part-0", False),
    ],
)
def test_only_the_compactor_suffix_of_a_base_may_differ(canonical, subdir, name, accepted) -> None:
    assert _is_compacted_base_of(canonical, subdir, name) is accepted
