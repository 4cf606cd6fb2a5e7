"""Table rows a write transaction holds locked: read once per transaction, not once per call.

A bootstrap load writes a table and its partitions in one transaction through several catalog calls (create
the table, then add its partitions a page at a time), and each call starts from the table's row: four reads
of the same row per table, a round trip each on a server backend. Once the transaction has the row locked
(``FOR UPDATE``) or inserted it, no other writer can change it before the commit, so the calls answer from
the copy kept here (the row's own values: each call builds its models from them, as from a read), and the
transaction's own changes to the row keep the copy current (``hold_row``) or drop it (``forget_table``), so
the next call reads it again.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

from sqlalchemy import Connection

from hmsrepl.metastore.eventlog import EventLog, MetastoreTransaction

_HELD_TABLES = "catalog_held_tables"  # MetastoreTransaction.shared key


class HeldRow(NamedTuple):
    """The columns of a table's row the catalog's look-ups read (``rows._TABLE_ROW``)."""

    tbl_id: int
    doc: str
    write_id: int
    location_key: str | None
    odd_partitions: int | None


#: (database name, table name), lower case as stored -> the row.
HeldTables: TypeAlias = dict[tuple[str, str], HeldRow]


def held_tables(events: EventLog, conn: Connection) -> HeldTables | None:
    """The table rows this thread's open transaction on ``conn`` holds, by name; None outside one (a read
    outside a transaction must see what others committed)."""
    tx = events.current_transaction()
    if tx is None or tx.conn is not conn:
        return None
    held: HeldTables = tx.shared.setdefault(_HELD_TABLES, {})
    return held


def hold_row(held: HeldTables, db_name: str, table_name: str, row: HeldRow) -> None:
    """Keep the row as the transaction now has it."""
    forget_in(held, row.tbl_id)
    held[(db_name, table_name)] = row


def forget_table(tx: MetastoreTransaction, tbl_id: int) -> None:
    """The transaction changed the table's row in a way not kept here: the next call reads it again."""
    forget_in(tx.shared.get(_HELD_TABLES, {}), tbl_id)


def forget_in(held: HeldTables, tbl_id: int) -> None:
    for key in [key for key, row in held.items() if row.tbl_id == tbl_id]:
        del held[key]


_WITHOUT_PARTITIONS = "catalog_new_tables_without_partitions"  # MetastoreTransaction.shared key


def note_without_partitions(tx: MetastoreTransaction, tbl_id: int) -> None:
    """The transaction inserted the partitioned table ``tbl_id``: it has no partitions yet, and no other
    writer can add one before the commit (the table's row is the transaction's own until then)."""
    tx.shared.setdefault(_WITHOUT_PARTITIONS, set()).add(tbl_id)


def created_without_partitions(events: EventLog, conn: Connection, tbl_id: int) -> bool:
    """Whether the open transaction on ``conn`` created the table ``tbl_id`` and added no partition to it yet:
    then it has none, and a read of its partitions can be answered without a round trip."""
    tx = events.current_transaction()
    return tx is not None and tx.conn is conn and tbl_id in tx.shared.get(_WITHOUT_PARTITIONS, ())


def take_without_partitions(events: EventLog, conn: Connection, tbl_id: int) -> bool:
    """``created_without_partitions``, for a caller about to add some: from then on the table may have
    partitions, so this answers it once."""
    if not created_without_partitions(events, conn, tbl_id):
        return False
    tx = events.current_transaction()
    assert tx is not None  # created_without_partitions found it
    tx.shared[_WITHOUT_PARTITIONS].discard(tbl_id)
    return True
