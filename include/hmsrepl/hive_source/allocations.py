"""Which write ids each transaction of a stock Hive Metastore allocated, read from its notification log.

Hive's COMMIT_TXN and ABORT_TXN messages name only the txn (``{"txnid": N}``); the tables and write ids it
holds are in the ALLOC_WRITE_ID_EVENT events logged between its OPEN_TXN and its end. Those are remembered
as the log is read (pages read one after another from one place, so a txn whose OPEN_TXN was seen has every
allocation seen too); a txn opened before what was read (a window starting mid-txn, a bootstrap with txns
open) is found by reading the log backwards from its end until its OPEN_TXN, in growing spans.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from hmsrepl.exceptions import HmsReplError

if TYPE_CHECKING:  # messages translates with this module: imported when used, not at import time
    from hmsrepl.hive_source.messages import HiveEvent

OPEN_TXN = "OPEN_TXN"
ALLOC_WRITE_ID = "ALLOC_WRITE_ID_EVENT"
#: Txns remembered at most (their allocations): older ones are read again from the log when asked for.
REMEMBERED_TXNS = 100_000
#: The first span read backwards for a txn not remembered; each further span is four times longer.
FIRST_SPAN = 1_000

Fetch = Callable[[int, int], "list[HiveEvent]"]


class Allocation(NamedTuple):
    """A write id a txn holds on one table."""

    db: str
    table: str
    write_id: int


class TxnNotInLogError(HmsReplError):
    """A txn's OPEN_TXN is no longer in the stock metastore's log: its write ids cannot be known."""


def opened_txns(doc: dict[str, Any]) -> list[int]:
    """The txns of an OPEN_TXN message: Hive 3 and 4 write a range (``fromTxnId``..``toTxnId``)."""
    if doc.get("txnIds"):
        return [int(t) for t in doc["txnIds"]]
    first, last = doc.get("fromTxnId"), doc.get("toTxnId")
    return list(range(int(first), int(last) + 1)) if first is not None and last is not None else []


def allocations(doc: dict[str, Any]) -> list[tuple[int, Allocation]]:
    """(txn, allocation) of an ALLOC_WRITE_ID_EVENT message."""
    db, table = str(doc.get("dbName") or "").lower(), str(doc.get("tableName") or "").lower()
    pairs = zip(doc.get("txnIdList") or [], doc.get("writeIdList") or [], strict=True)
    return [(int(txn), Allocation(db, table, int(write_id))) for txn, write_id in pairs]


class TxnAllocations:
    """Each txn's allocations, remembered from the pages read and otherwise read back from the log."""

    def __init__(self, fetch: Fetch) -> None:
        """``fetch(after, count)``: the events after ``after``, at most ``count`` (Hive's numbering has no gaps)."""
        self.fetch = fetch
        self._opened: OrderedDict[int, int] = OrderedDict()  # txn -> its OPEN_TXN's event id
        self._held: dict[int, list[Allocation]] = {}
        self._last = -1  # last event id of the contiguous run of pages remembered

    def record(self, after: int, events: Iterable[HiveEvent]) -> None:
        """Remember the txn events of a page read after event ``after``; a page not following the previous
        one starts a new run (what was remembered still holds, but txns opened before it are not complete)."""
        if after > self._last:
            self._opened.clear()
            self._held.clear()
        for event in events:
            if event.event_id <= self._last:
                continue
            self._remember(event, self._opened, self._held)
            self._last = event.event_id
        while len(self._opened) > REMEMBERED_TXNS:
            txn, _ = self._opened.popitem(last=False)
            self._held.pop(txn, None)

    @staticmethod
    def _remember(event: HiveEvent, opened: dict[int, int], held: dict[int, list[Allocation]]) -> None:
        from hmsrepl.hive_source.messages import decode

        if event.event_type == OPEN_TXN:
            for txn in opened_txns(decode(event)):
                opened[txn] = event.event_id
        elif event.event_type == ALLOC_WRITE_ID:
            for txn, allocation in allocations(decode(event)):
                held.setdefault(txn, []).append(allocation)

    def of(self, txn: int, before: int) -> list[Allocation]:
        """The write ids ``txn`` allocated before event ``before`` (its COMMIT_TXN or ABORT_TXN)."""
        if txn in self._opened and self._last >= before - 1:
            return list(self._held.get(txn, []))
        return self.read_back({txn}, before)[txn]

    def read_back(self, txns: set[int], before: int) -> dict[int, list[Allocation]]:
        """The allocations of ``txns`` made before event ``before``, read backwards from it until every
        txn's OPEN_TXN is found. A txn whose OPEN_TXN is gone (Hive's cleaner) is refused: its write ids are
        unknown."""
        opened, held = self._scan(before, lambda opened, held: txns <= opened.keys())
        if not txns <= opened.keys():
            missing = sorted(txns - opened.keys())
            raise TxnNotInLogError(
                f"the OPEN_TXN of txn(s) {missing} is no longer in the stock metastore's notification log, "
                "so the write ids they hold are unknown; take a bootstrap dump"
            )
        return {txn: held.get(txn, []) for txn in txns}

    def owners(self, db: str, write_ids: set[tuple[str, int]], before: int) -> dict[tuple[str, int], int]:
        """The txn holding each (table, write id) of ``db``, from the allocations before event ``before``:
        only as far back as they lie (a long-open txn of another table does not matter here)."""

        def found(opened: dict[int, int], held: dict[int, list[Allocation]]) -> dict[tuple[str, int], int]:
            return {(a.table, a.write_id): txn for txn, made in held.items() for a in made if a.db == db}

        _, held = self._scan(before, lambda opened, held: write_ids <= found(opened, held).keys())
        owned = found({}, held)
        if not write_ids <= owned.keys():
            missing = sorted(write_ids - owned.keys())
            raise TxnNotInLogError(
                f"the allocation of write id(s) {missing} of '{db}' is no longer in the stock metastore's "
                "notification log, so the txns holding them are unknown; take the bootstrap once they ended"
            )
        return {key: owned[key] for key in write_ids}

    def _scan(
        self, before: int, done: Callable[[dict[int, int], dict[int, list[Allocation]]], bool]
    ) -> tuple[dict[int, int], dict[int, list[Allocation]]]:
        """OPEN_TXN and allocations before event ``before``, in spans growing backwards until ``done``."""
        span = FIRST_SPAN
        while True:
            start = max(0, before - 1 - span)
            opened: dict[int, int] = {}
            held: dict[int, list[Allocation]] = {}
            after = start
            while after < before - 1:
                page = [
                    e for e in self.fetch(after, min(FIRST_SPAN, before - 1 - after)) if e.event_id < before
                ]
                for event in page:
                    self._remember(event, opened, held)
                if not page:
                    break
                after = page[-1].event_id
            if done(opened, held) or start == 0:
                return opened, held
            span *= 4
