"""Which write ids a stored object's state comes from, and whether a reader's ValidWriteIdList may see it.

The catalog applies a transactional change at once and never rolls it back: while its txn is open, and for
good after it aborted, the database holds a version of the table (or partition) that no committed snapshot
has. Hive keeps the write id with what a transactional write changed (its statistics) and judges that
write id against the reader's list; this does the same for the whole object. An object's state names its
writes in two places: the ``write_id`` column (advanced by ACID_WRITE) and the ``hmsrepl.txnWrite`` stamp
of the last change a txn claimed (see ``attribution``). The state is visible to a reader only when every
write id it names is one the reader may see: committed in its list, or committed since and newer than its
list (the database's answer is then the latest committed version, as a cache under ``contains`` gives).
Anything else is refused with ``WriteNotVisibleError``, which is retryable: the answer is not wrong for
ever, only until a later write commits (or the reader takes a newer list).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from hmsrepl.cache.attribution import TXN_WRITE_PARAM, TxnWrite
from hmsrepl.exceptions import WriteNotVisibleError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.schema import txn_to_write_id, txns

_STATES = {"o": "open", "c": "committed", "a": "aborted"}


def state_write_ids(model: Table | Partition) -> set[int]:
    """The write ids whose changes ``model``'s state may include (0, "no transactional change", left out)."""
    stamp = TxnWrite.from_stamp(model.parameters.get(TXN_WRITE_PARAM))
    return {w for w in (model.write_id or 0, stamp.write_id if stamp is not None else 0) if w > 0}


def aborted_write_id(models: Iterable[Table | Partition], write_ids: ValidWriteIdList) -> int | None:
    """An aborted write id whose change one of ``models`` still shows (None: none does).

    Such content can serve no reader until a later committed write replaces it (see the loader). A table
    with no aborted write id costs nothing here (a prewarm checks every partition).
    """
    if not write_ids.aborted_write_ids:
        return None
    for model in models:
        for write_id in state_write_ids(model):
            if write_id in write_ids.aborted_write_ids:
                return write_id
    return None


def write_id_state(events: EventLog, db_name: str, table_name: str, write_id: int) -> str:
    """'open', 'committed' or 'aborted' for the txn holding ``write_id`` of a table; 'unknown' if none."""
    query = (
        select(txns.c.state)
        .select_from(txn_to_write_id.join(txns, txns.c.txn_id == txn_to_write_id.c.txn_id))
        .where(
            txn_to_write_id.c.db_name == db_name.lower(),
            txn_to_write_id.c.tbl_name == table_name.lower(),
            txn_to_write_id.c.write_id == write_id,
        )
    )
    with events.reader() as conn:
        state = conn.execute(query).scalar()
    return _STATES.get(state, "unknown") if state is not None else "unknown"


def check_visible(
    events: EventLog,
    what: str,
    key: tuple[str, str],
    model: Table | Partition,
    write_ids: ValidWriteIdList,
) -> None:
    """Raise ``WriteNotVisibleError`` unless every write id ``model`` shows may be seen with ``write_ids``.

    Write ids at or below the list's watermark are judged by the list alone (open or aborted for the
    reader means invisible, whatever happened since); newer ones by their txn's state now, which costs a
    query only on that (rare) path.
    """
    for write_id in sorted(state_write_ids(model), reverse=True):
        if write_ids.is_write_id_valid(write_id):
            continue
        if write_id <= write_ids.high_watermark:
            state = "aborted" if write_id in write_ids.aborted_write_ids else "open"
            raise WriteNotVisibleError(what, write_id, f"{state} in the reader's list", write_ids.to_string())
        state = write_id_state(events, key[0], key[1], write_id)
        if state != "committed":
            raise WriteNotVisibleError(what, write_id, state, write_ids.to_string())
