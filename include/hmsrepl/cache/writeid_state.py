"""A cached table's write-id state, advanced by ALLOC_WRITE_ID, COMMIT_TXN and ABORT_TXN events.

Replaying the log keeps each cached table's ValidWriteIdList equal to what the database would report at the
applied position: allocated ids are open, then become committed or aborted. Write ids of a table are dense
and allocated in log order, so any id the state cannot place means an event was missed; that raises
``WriteIdStateError`` and the caller reloads the table rather than guess.
"""

from __future__ import annotations

from hmsrepl.formats.writeids import ValidWriteIdList


class WriteIdStateError(Exception):
    """An event names a write id the cached state cannot account for (an event was missed)."""


def allocated(ids: ValidWriteIdList, write_id: int) -> ValidWriteIdList:
    """The state after ``write_id`` was allocated to an (open) txn; it must be the next id."""
    if write_id != ids.high_watermark + 1:
        raise WriteIdStateError(
            f"write id {write_id} of {ids.table_name} allocated, but the cached state is at {ids.high_watermark}"
        )
    return ValidWriteIdList(ids.table_name, write_id, ids.open_write_ids | {write_id}, ids.aborted_write_ids)


def committed(ids: ValidWriteIdList, write_id: int) -> ValidWriteIdList:
    """The state after the txn holding ``write_id`` committed (a repeat is a no-op)."""
    _check_known(ids, write_id)
    if write_id not in ids.open_write_ids:
        return ids
    return ValidWriteIdList(
        ids.table_name, ids.high_watermark, ids.open_write_ids - {write_id}, ids.aborted_write_ids
    )


def aborted(ids: ValidWriteIdList, write_id: int) -> ValidWriteIdList:
    """The state after the txn holding ``write_id`` aborted: the id stays listed, as aborted, for ever."""
    _check_known(ids, write_id)
    if write_id not in ids.open_write_ids:
        return ids
    return ValidWriteIdList(
        ids.table_name,
        ids.high_watermark,
        ids.open_write_ids - {write_id},
        ids.aborted_write_ids | {write_id},
    )


def _check_known(ids: ValidWriteIdList, write_id: int) -> None:
    if write_id > ids.high_watermark:
        raise WriteIdStateError(
            f"write id {write_id} of {ids.table_name} finished, but its allocation was never seen "
            f"(cached state is at {ids.high_watermark})"
        )
