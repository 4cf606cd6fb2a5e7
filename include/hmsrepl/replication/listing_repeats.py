"""Finding a file a dump's ``_files`` listing names twice, in about 8 bytes a file.

A listing names each of its object's files once. One that names a place twice is corrupt, or made to confuse:
the two lines may carry other checksums, and a load that publishes a big partition a page at a time would copy
the place twice and log it twice while the catalog counts it once (a load holding the listing whole kept the
last line). The validation refuses such a dump before anything is applied.

A listing of 1,000,000 files is read a page at a time, so its places are never held as strings: a listing of
one page is checked exactly, a longer one keeps its places as sorted 64-bit keys (``hash`` of the place, this
process's, as the keys never leave it). Places whose keys agree are told apart exactly by reading the listing
again for just those keys: a pair of places whose keys agree only by chance (one pair in some 10**7 listings of
1,000,000 files) costs one more read, never a wrong refusal.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

from hmsrepl.metastore.payloads import relative_path

RUN = 65_536  # keys sorted at a time while pages come in


class ListingRepeats:
    """Watches one listing's pages (``add``) and answers the first place it names twice (``repeated``)."""

    def __init__(self) -> None:
        self._keys: array[int] = array("q")
        self._runs: list[array[int]] = []
        self._first: Sequence[str] = ()  # the first page, looked at once a second comes (most have one)
        self._pages = 0

    def add(self, page: Sequence[str]) -> None:
        """Take one page of encoded entries (already checked to be entries)."""
        self._pages += 1
        if self._pages == 1:
            self._first = page
            return
        if self._first:
            first, self._first = self._first, ()
            self._look(first)
        self._look(page)

    def _look(self, page: Sequence[str]) -> None:
        self._keys.extend(_key(relative_path(encoded)) for encoded in page)
        if len(self._keys) >= RUN:
            self._runs.append(array("q", sorted(self._keys)))
            self._keys = array("q")

    def repeated(self, read_again: Callable[[], Iterable[Sequence[str]]]) -> str:
        """The first place named twice ("" when none), reading the listing again (``read_again``) only when
        keys of two pages agree, to tell a repeat from two places whose keys agree by chance."""
        if self._pages <= 1:
            first, self._first = self._first, ()
            return repeated_place(first)
        suspects = set(_agreeing(_merged([*self._runs, array("q", sorted(self._keys))])))
        if not suspects:
            return ""
        return _first_repeat(
            place for page in read_again() for place in map(relative_path, page) if _key(place) in suspects
        )


def _key(place: str) -> int:
    """A place's key: this process's hash (keys are made and compared by the validating process alone)."""
    return hash(place)


def _merged(runs: list[array[int]]) -> Iterator[int]:
    return heapq.merge(*runs) if len(runs) > 1 else iter(runs[0])


def _agreeing(keys: Iterator[int]) -> Iterator[int]:
    """Each key that a sorted stream holds more than once (once per run of equal keys, or more: a set
    takes them)."""
    previous = None
    for key in keys:
        if key == previous:
            yield key
        previous = key


def repeated_place(entries: Sequence[str]) -> str:
    """The first place a listing held whole (a partition page's line) names twice ("" when none)."""
    return _first_repeat(map(relative_path, entries)) if len(entries) > 1 else ""


def _first_repeat(places: Iterable[str]) -> str:
    """The first place of ``places`` seen before ("" when none)."""
    seen: set[str] = set()
    for place in places:
        if place in seen:
            return place
        seen.add(place)
    return ""
