"""Tying a metadata change to the transaction (and write id) that made it.

Hive 4 sends the write id of a transactional ALTER in ``AlterTableRequest.writeId`` (field 6); the Hive 2.3
interface this server speaks has no such field, and the catalog's ALTER_TABLE / ALTER_PARTITION /
ADD_PARTITION events carry no txn. So:

- A client names its txn in the EnvironmentContext of ``alter_table_with_environment_context``,
  ``alter_partition(s)_with_environment_context`` or ``add_partition_with_environment_context``: property
  ``hmsrepl.txnId`` (and optionally ``hmsrepl.writeId``; by default the txn's write id on that table,
  allocated with ``allocate_table_write_ids`` first).
- The metastore stamps the changed object's parameters with ``hmsrepl.txnWrite = "<txnId>:<writeId>"``, so
  the event's own snapshot says which txn wrote it, and then records the write (ACID_WRITE, which also
  advances the object's write id and lists it in the txn's COMMIT_TXN; the catalog records these for
  partitions and unpartitioned tables only, so a table-level change of a partitioned table has just the
  stamp).
- A cache applying the event holds a newly stamped change back until that txn's COMMIT_TXN, and drops it at
  ABORT_TXN. A stamp copied unchanged from the previous version (clients send whole objects back) or naming
  a write id that is not open claims nothing.

Changes without a claim on a transactional table are still applied, conservatively (see the applier).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hmsrepl.exceptions import InvalidOperationError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Partition, Table

TXN_WRITE_PARAM = "hmsrepl.txnWrite"
TXN_ID_PROPERTY = "hmsrepl.txnId"
WRITE_ID_PROPERTY = "hmsrepl.writeId"


@dataclass(frozen=True)
class TxnWrite:
    """A write id of one table, held by an open txn."""

    txn_id: int
    write_id: int

    def stamp(self) -> str:
        return f"{self.txn_id}:{self.write_id}"

    @classmethod
    def from_stamp(cls, text: str | None) -> TxnWrite | None:
        """The claim of a stamp, or None for anything that is not one (never an error: it is user data)."""
        if not text:
            return None
        txn, sep, write = text.partition(":")
        if not sep or not txn.isdigit() or not write.isdigit():
            return None
        return cls(int(txn), int(write))


def claimed_write(before: Mapping[str, str] | None, after: Mapping[str, str]) -> TxnWrite | None:
    """The txn write a new object version newly claims (its stamp differs from the old version's)."""
    stamp = after.get(TXN_WRITE_PARAM)
    if before is not None and before.get(TXN_WRITE_PARAM) == stamp:
        return None
    return TxnWrite.from_stamp(stamp)


def requested_txn(properties: Mapping[str, str] | None) -> tuple[int, int | None] | None:
    """(txn id, write id or None) named in an EnvironmentContext, or None when it names no txn."""
    if not properties or TXN_ID_PROPERTY not in properties:
        return None
    try:
        txn_id = int(properties[TXN_ID_PROPERTY])
        write = properties.get(WRITE_ID_PROPERTY)
        return txn_id, int(write) if write else None
    except ValueError:
        raise InvalidOperationError(
            f"EnvironmentContext properties {TXN_ID_PROPERTY}/{WRITE_ID_PROPERTY} must be integers, "
            f"got {properties.get(TXN_ID_PROPERTY)!r}/{properties.get(WRITE_ID_PROPERTY)!r}"
        ) from None


class TxnWriter:
    """Catalog changes made on behalf of an open transaction, stamped and recorded under its write id."""

    def __init__(self, store: Metastore) -> None:
        self.store = store

    def resolve(self, txn_id: int, write_id: int | None, db_name: str, table_name: str) -> TxnWrite:
        """Check that ``txn_id`` is open and holds ``write_id`` (default: its write id) on the table.

        Checked before changing anything, so a bad request never leaves a change no txn claims.
        """
        state = self.store.txns.txn_state(txn_id)
        if state != "open":
            raise InvalidOperationError(f"transaction {txn_id} is {state}; changes can only join an open one")
        held = self.store.txns.txn_write_id(txn_id, db_name, table_name)
        if held is None:
            raise InvalidOperationError(
                f"transaction {txn_id} has no write id on '{db_name}.{table_name}'; "
                "call allocate_table_write_ids for it first"
            )
        if write_id is not None and write_id > 0 and write_id != held:
            raise InvalidOperationError(
                f"write id {write_id} of '{db_name}.{table_name}' does not belong to transaction {txn_id} "
                f"(it holds {held})"
            )
        return TxnWrite(txn_id, held)

    def alter_table(self, db_name: str, table_name: str, new_table: Table, write: TxnWrite) -> Table:
        stamped = new_table.model_copy(
            update={"parameters": {**new_table.parameters, TXN_WRITE_PARAM: write.stamp()}}
        )
        altered = self.store.catalog.alter_table(db_name, table_name, stamped)
        if not altered.partition_keys:  # the catalog records writes of partitioned tables per partition only
            self._record(write, altered.db_name, altered.table_name, None)
        return altered

    def alter_partitions(
        self, db_name: str, table_name: str, parts: Sequence[Partition], write: TxnWrite
    ) -> None:
        stamped = [self._stamped(part, write) for part in parts]
        self.store.catalog.alter_partitions(db_name, table_name, stamped)
        for part in stamped:
            self._record(write, db_name, table_name, part.values)

    def add_partitions(
        self, db_name: str, table_name: str, parts: Sequence[Partition], write: TxnWrite
    ) -> list[Partition]:
        added = self.store.catalog.add_partitions(
            db_name, table_name, [self._stamped(p, write) for p in parts]
        )
        for part in added:
            self._record(write, db_name, table_name, part.values)
        return added

    @staticmethod
    def _stamped(part: Partition, write: TxnWrite) -> Partition:
        return part.model_copy(update={"parameters": {**part.parameters, TXN_WRITE_PARAM: write.stamp()}})

    def _record(self, write: TxnWrite, db_name: str, table_name: str, values: Sequence[str] | None) -> None:
        self.store.txns.add_write_notification(
            write.txn_id, write.write_id, db_name, table_name, list(values) if values else None, []
        )
