"""The freshness rule: may a cached entry answer a reader holding a given ValidWriteIdList?

A cached table (with its partitions) shows exactly the changes of the write ids its tag marks committed. A
reader's list says which changes it must see. Comparing the two committed sets decides, with no database
call, whether the entry shows what the reader must see (HIVE-21637). Only the committed sets matter: two
lists with different watermarks can describe the same snapshot (``hwm=4`` versus ``hwm=5`` with 5 aborted).

- ``SAME``: the entry is exactly the reader's snapshot; always served.
- ``CACHE_NEWER``: the entry holds everything the reader must see plus later commits. Serving it is no
  staler than a database read made now (the database always holds the latest version), so it is served
  under the ``contains`` policy (the default, Hive's "fresh or newer") and refused under ``equal``, which
  serves snapshot-exact answers only.
- ``CACHE_BEHIND``: a write the reader must see is missing from the entry; never served. This is also how
  read-your-writes works: a reader's list marks its own open txn committed, which no cached tag does yet.
- ``INCOMPARABLE``: each side has a commit the other lacks; never served. Hive's ``TxnIdUtils.compare``
  answers +-1 here (HIVE-24975), which would let such lists pass for "newer"; ``compare_committed`` does not.
"""

from __future__ import annotations

from enum import StrEnum

from hmsrepl.formats.writeids import ValidWriteIdList, compare_committed


class Freshness(StrEnum):
    """Which cached entries may answer a reader (setting ``HMSREPL_CACHE_FRESHNESS``)."""

    EQUAL = "equal"
    CONTAINS = "contains"


class Verdict(StrEnum):
    """How a cached entry's committed write ids relate to a reader's."""

    SAME = "same"
    CACHE_NEWER = "cache_newer"
    CACHE_BEHIND = "cache_behind"
    INCOMPARABLE = "incomparable"


_BY_SIGN: dict[int | None, Verdict] = {
    0: Verdict.SAME,
    1: Verdict.CACHE_NEWER,
    -1: Verdict.CACHE_BEHIND,
    None: Verdict.INCOMPARABLE,
}


def compare(cached: ValidWriteIdList, query: ValidWriteIdList) -> Verdict:
    """Relate the entry's tag to the reader's list (both of the same table, else ValueError)."""
    return _BY_SIGN[compare_committed(cached, query)]


def may_serve(verdict: Verdict, policy: Freshness) -> bool:
    """True when an entry with this verdict may answer the reader under ``policy``."""
    return verdict is Verdict.SAME or (verdict is Verdict.CACHE_NEWER and policy is Freshness.CONTAINS)
