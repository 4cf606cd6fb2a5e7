"""The copies a load staged ahead, held in a few bytes a file until it publishes each one."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from hmsrepl.replication.filecopy import CopyResult
from hmsrepl.replication.staged_copies import RUN, StagedCopies, add_names, names_digest
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import staging_name

COPIED = CopyResult("", "", 8, from_cmroot=False)
FROM_CMROOT = CopyResult("", "", 8, from_cmroot=True)
PREFETCHED = CopyResult("", "", 8, from_cmroot=False, prefetched=True)


def _entry(uri: str, size: int = 8) -> str:
    return f"{uri}#crc32c-00000001-{size}##"


def test_each_staged_copy_is_taken_once_with_how_it_was_made() -> None:
    copies = StagedCopies()
    names = [f"/w/t/p=a/part-{i:07d}.parquet" for i in range(RUN + 1_000)]  # more than one sorted run
    kinds = [COPIED, FROM_CMROOT, PREFETCHED]
    for i, uri in enumerate(names):
        copies.add(uri, kinds[i % 3])
    copies.add("/w/t/p=b/one", COPIED)
    assert len(copies) == len(names) + 1
    assert copies.take("/w/t/p=a/never-staged", _entry("/s/x")) is None
    assert copies.take("/w/t/p=c/part-0000001.parquet", _entry("/s/x")) is None, "another directory"
    for i, uri in reversed(list(enumerate(names))):  # in any order
        taken = copies.take(uri, _entry(f"/s/{i}", size=i))
        assert taken is not None, uri
        assert (taken.from_cmroot, taken.prefetched) == (kinds[i % 3].from_cmroot, kinds[i % 3].prefetched)
        assert (taken.target, taken.bytes_copied) == (uri, i), (
            "named and sized as the entry it was copied for"
        )
        assert copies.take(uri, _entry(f"/s/{i}")) is None, "taken twice"
    assert len(copies) == 1
    assert copies.take("/w/t/p=b/one", _entry("/s/one")) is not None
    assert len(copies) == 0 and copies.directories() == [], "nothing held once every copy is taken"


def test_staged_copies_hold_a_few_bytes_each() -> None:
    # A million behaves the same, five times over, and takes 20 s of a test run under tracemalloc.
    count = 200_000
    uris = (f"/warehouse/db.db/table/p=a/part-{i:07d}-c000.snappy.parquet" for i in range(count))
    tracemalloc.start()
    try:
        copies = StagedCopies()
        for uri in uris:
            copies.add(uri, COPIED)
        held = tracemalloc.get_traced_memory()[0]
        assert copies.take("/warehouse/db.db/table/p=a/part-0000007-c000.snappy.parquet", _entry("/s/7"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held < 12 * count, held  # a URI and a dictionary entry a file held some 200 bytes
    assert peak < 40 * count, peak  # sorting them never held an int object a file


def test_unused_copies_are_the_staged_ones_not_taken_nor_owed(tmp_path: Path) -> None:
    directory = tmp_path / "p=a"
    directory.mkdir()
    fs = RootedFileSystem([str(tmp_path)], purpose="test")
    copies = StagedCopies()
    uris = [f"{directory}/f{i}" for i in range(5)]
    for uri in uris:
        Path(staging_name(uri)).write_bytes(b"x")
        copies.add(uri, COPIED)
    (directory / "f9").write_bytes(b"published, not staged")
    copies.take(uris[0], _entry("/s/f0"))
    owed = {staging_name(uris[1])}
    assert sorted(copies.unused(fs, owed)) == uris[2:]


def _digest(names: list[str]) -> bytes:
    digest = names_digest()
    add_names(digest, names)
    return digest.digest()


def test_the_copies_placed_in_a_version_are_taken_at_once_only_when_they_are_the_listing() -> None:
    version = "/w/t/p=a.hmsrepl-v5"
    names = [f"part-{i:05d}.parquet" for i in range(1_000)]

    def placed(unpinned: int = -1) -> StagedCopies:
        copies = StagedCopies()
        for i, name in enumerate(names):
            copies.add(f"{version}/{name}", [COPIED, FROM_CMROOT][i % 2], placed=True, pinned=i != unpinned)
        copies.add("/w/t/p=b/one", COPIED)
        return copies

    copies = placed()
    others = [*names[:-1], "part-99999.parquet"]  # as many names, one of them another
    assert copies.take_placed(version, len(others), _digest(others)) is None
    assert copies.take_placed(version, len(names) - 1, _digest(names[:-1])) is None, "one name short"
    assert copies.take_placed(version, len(names), _digest(names[::-1])) is None, "another order"
    joined = [names[0] + names[1], *names[2:], ""]  # the same characters cut elsewhere
    assert copies.take_placed(version, len(joined), _digest(joined)) is None
    assert copies.take_placed("/w/t/p=b", 1, _digest(["one"])) is None, "not placed there"
    assert len(copies) == len(names) + 1, "nothing taken by a refused call"

    taken = copies.take_placed(version, len(names), _digest(names))
    assert taken is not None
    totals, pinned = taken
    assert (totals.files_copied, totals.bytes_copied, totals.files_from_cmroot) == (
        len(names),
        8 * len(names),
        len(names) // 2,
    )
    assert pinned, "every copy was pinned as it was staged"
    assert len(copies) == 1
    taken = placed(unpinned=500).take_placed(version, len(names), _digest(names))
    assert taken is not None and not taken[1], "one copy the staging did not pin: the record pins them all"
    assert copies.take(f"{version}/{names[0]}", _entry("/s/x")) is None, "taken already"

    copies = placed()
    assert copies.take(f"{version}/{names[0]}", _entry("/s/x")) is not None
    assert copies.take_placed(version, len(names), _digest(names)) is None, "one was taken by name"
