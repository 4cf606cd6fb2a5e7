"""A stock Hive Metastore's transaction state, read over Thrift: what a bootstrap and ``repl verify`` need.

``get_open_txns`` gives the txn snapshot (Hive's ``abortedBits`` tell aborted from open), and
``get_valid_write_ids`` each ACID table's write-id state under it, so the replica is given the same
ValidWriteIdList. Which txn holds an open write id Hive does not say over Thrift: it is read from the
txns' ALLOC_WRITE_ID_EVENT events (``allocations``). Hive's log and its txn tables are read in separate
calls, so the snapshot is taken again until the log's last event is the same before and after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.hive_import.reader import StockMetastoreError, StockMetastoreReader, unknown_method
from hmsrepl.hive_source.allocations import TxnAllocations
from hmsrepl.metastore.transactions import ReplicationSnapshot, TableWriteIds
from hmsrepl.thrift.idl import hms

#: Snapshots taken at most while the stock metastore keeps logging events meanwhile.
SNAPSHOT_ATTEMPTS = 10


class UnsteadySourceError(HmsReplError):
    """The stock metastore logged events during every attempt at its txn snapshot."""


def set_bits(bits: bytes | None, count: int) -> list[bool]:
    """Java's ``BitSet.toByteArray`` (bit ``i`` is bit ``i % 8`` of byte ``i // 8``) as ``count`` flags."""
    data = bits or b""
    return [i // 8 < len(data) and bool(data[i // 8] >> (i % 8) & 1) for i in range(count)]


class StockTxns:
    """The txn reads of the replication source interface over a stock metastore (Hive 3 and later)."""

    def __init__(
        self, reader: StockMetastoreReader, current_event_id: Callable[[], int], allocations: TxnAllocations
    ) -> None:
        self.reader, self.current_event_id, self.allocations = reader, current_event_id, allocations
        self._write_ids: bool | None = None

    def has_write_ids(self) -> bool:
        """Whether the release keeps write ids (Hive 3 and later), asked once with an empty
        ``get_valid_write_ids``. Hive 2 does not, and logs no txn events: a replica must not open its txns."""
        if self._write_ids is None:
            request = hms.GetValidWriteIdsRequest(fullTableNames=[], validTxnList=ValidTxnList(0).to_string())
            try:
                self.reader.call("its write ids", "get_valid_write_ids", request)
                self._write_ids = True
            except StockMetastoreError as exc:
                if not unknown_method(exc.__cause__):
                    raise
                self._write_ids = False
        return self._write_ids

    def get_valid_txns(self) -> ValidTxnList:
        if not self.has_write_ids():
            return ValidTxnList(0)
        response = self.reader.call("its open transactions", "get_open_txns")
        txns = list(response.open_txns or [])
        aborted = set_bits(response.abortedBits, len(txns))
        return ValidTxnList(
            int(response.txn_high_water_mark),
            frozenset(t for t, gone in zip(txns, aborted, strict=True) if not gone),
            frozenset(t for t, gone in zip(txns, aborted, strict=True) if gone),
        )

    def get_valid_write_ids(
        self, table_names: Sequence[str], valid_txns: ValidTxnList | None = None
    ) -> list[TableWriteIds]:
        """Each ``db.table``'s ValidWriteIdList under ``valid_txns`` (default: now), as Hive computes it."""
        if not table_names:
            return []
        if not self.has_write_ids():
            raise StockMetastoreError(
                f"transactional tables ({', '.join(table_names)}) of a Hive 2 metastore are not replicated: it "
                "keeps no write ids; leave them out of the policy ('db.[...]' excludes)"
            )
        snapshot = valid_txns or self.get_valid_txns()
        request = hms.GetValidWriteIdsRequest(
            fullTableNames=list(table_names), validTxnList=snapshot.to_string()
        )
        response = self.reader.call(
            f"the write ids of {', '.join(table_names)}", "get_valid_write_ids", request
        )
        out = []
        for name, table in zip(table_names, response.tblValidWriteIds, strict=True):
            invalid = list(table.invalidWriteIds or [])
            aborted = set_bits(table.abortedBits, len(invalid))
            ids = ValidWriteIdList(
                name.lower(),
                int(table.writeIdHighWaterMark),
                frozenset(w for w, gone in zip(invalid, aborted, strict=True) if not gone),
                frozenset(w for w, gone in zip(invalid, aborted, strict=True) if gone),
            )
            out.append(TableWriteIds(0, ids))
        return out

    def _acid_tables(self, db_name: str) -> list[str]:
        names = self.reader.table_names(db_name)
        return [n for n in names if self.reader.table(db_name, n).is_transactional]

    def replication_snapshot(self, db_name: str) -> ReplicationSnapshot:
        """Every txn open at the snapshot's event (of any database: their COMMIT_TXN and ABORT_TXN reach
        every dump, and a replica closes only txns it opened), and each ACID table's write ids with their
        owners."""
        for _ in range(SNAPSHOT_ATTEMPTS):
            event_id = self.current_event_id()
            if not self.has_write_ids():  # Hive 2: no write ids, no txn events
                return ReplicationSnapshot(event_id, ValidTxnList(0), (), {})
            valid_txns = self.get_valid_txns()
            names = self._acid_tables(db_name)
            listed = self.get_valid_write_ids([f"{db_name}.{n}" for n in names], valid_txns)
            if self.current_event_id() != event_id:
                continue
            open_txns = tuple(sorted(valid_txns.open_txns))
            needed = {(n, w) for n, e in zip(names, listed, strict=True) for w in e.write_ids.open_write_ids}
            owners = self.allocations.owners(db_name, needed, event_id + 1) if needed else {}
            tables = {
                name: (entry.write_ids, {w: owners[(name, w)] for w in entry.write_ids.open_write_ids})
                for name, entry in zip(names, listed, strict=True)
            }
            return ReplicationSnapshot(event_id, valid_txns, open_txns, tables)
        raise UnsteadySourceError(
            f"the stock metastore logged events during each of {SNAPSHOT_ATTEMPTS} reads of its transaction "
            f"state for '{db_name}'; run the bootstrap dump again when it is quieter"
        )

    def open_txns_writing(self, db_name: str) -> list[int]:
        """None waited for: Hive does not say over Thrift which database an open txn writes."""
        return []

    def txn_states(self, txn_ids: Sequence[int]) -> dict[int, str]:
        return {}

    def abort_txns(self, txn_ids: Sequence[int], *, reason: str = "") -> None:
        return None
