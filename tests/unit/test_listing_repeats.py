"""A dump's listing naming one place twice is found across pages, in keys, without a wrong refusal."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hmsrepl.replication import listing_repeats
from hmsrepl.replication.listing_repeats import ListingRepeats

LOCATION = "file:///wh/sales.db/orders/day=d1"


def entry(name: str, checksum: str = "crc32c-00000000-1", subdir: str = "") -> str:
    folder = f"{LOCATION}/{subdir}" if subdir else LOCATION
    return f"{folder}/{name}#{checksum}##{subdir}"


def pages_of(entries: list[str], size: int) -> list[list[str]]:
    return [entries[at : at + size] for at in range(0, len(entries), size)]


def repeated(pages: Sequence[Sequence[str]]) -> tuple[str, int]:
    """The place found twice and how many times the listing was read again."""
    repeats, reads = ListingRepeats(), 0
    for page in pages:
        repeats.add(page)

    def read_again() -> Sequence[Sequence[str]]:
        nonlocal reads
        reads += 1
        return pages

    return repeats.repeated(read_again), reads


def test_a_listing_naming_each_place_once_passes_without_reading_it_again() -> None:
    entries = [entry(f"part-{n:06d}") for n in range(30_000)]
    assert repeated(pages_of(entries, 1_000)) == ("", 0)


@pytest.mark.parametrize("page", [10, 7, 1], ids=["same page", "pages apart", "one a page"])
def test_a_place_named_twice_is_found_on_any_page(page: int) -> None:
    entries = [entry(f"part-{n:02d}") for n in range(40)]
    entries.insert(8, entry("part-03", checksum="crc32c-ffffffff-1"))  # another checksum, the same place
    assert repeated(pages_of(entries, page))[0] == "part-03"


def test_the_place_is_the_subdirectory_and_name() -> None:
    entries = [entry("000000_0", subdir="delta_1_1"), entry("000000_0", subdir="delta_2_2")]
    assert repeated(pages_of(entries, 1)) == ("", 0)
    entries.append(entry("000000_0", subdir="delta_2_2"))
    assert repeated(pages_of(entries, 1))[0] == "delta_2_2/000000_0"


def test_keys_agreeing_by_chance_are_told_apart_by_reading_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing_repeats, "_key", lambda place: len(place))  # every key agrees
    entries = [entry(f"part-{n:02d}") for n in range(50)]
    assert repeated(pages_of(entries, 5)) == ("", 1)
    entries.append(entry("part-17"))
    assert repeated(pages_of(entries, 5)) == ("part-17", 1)


def test_keys_are_held_in_sorted_runs_not_as_places() -> None:
    repeats = ListingRepeats()
    for page in pages_of([entry(f"part-{n:06d}") for n in range(200_000)], 10_000):
        repeats.add(page)
    assert sum(len(run) for run in repeats._runs) + len(repeats._keys) == 200_000
    assert all(run.itemsize == 8 for run in repeats._runs)
