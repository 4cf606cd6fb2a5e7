"""Reverting an insert-only transactional table to a write id, through an ordinary overwrite transaction.

An insert-only table's state is chosen by its readers' ValidWriteIdList, not by a file listing: the files
visible as of write id W are those a reader with high watermark W (aborted and open ids below it excluded)
picks among the ``base_*``/``delta_*`` directories, which an overwrite leaves in place for older readers.
The revert opens a transaction, writes those files (hard links, or verified copies) into a new
``base_<N>`` under a fresh write id and commits: readers from then on see the table as of W, readers still
holding an older snapshot keep theirs, and replicas replay the commit like any other (COMMIT_TXN names the
files). Directories a cleaner already removed cannot be read back: such a revert is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from hmsrepl.acid.insert_only import InsertOnlyReader, InsertOnlyWriter, is_insert_only
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.protection import refusal
from hmsrepl.restore.errors import RestoreError
from hmsrepl.storage.base import join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem


@dataclass
class AcidObject:
    """One table or partition: the files a reader as of the write id saw, and how many it sees now."""

    name: str | None  # the partition's name; None: the table's own files
    what: str
    values: list[str] | None
    location: str
    files: list[str]  # URIs below ``location``
    now: int  # files visible now


@dataclass
class AcidRevertPlan:
    table: str
    write_id: int
    high_watermark: int
    objects: list[AcidObject] = field(default_factory=list)

    def text(self) -> str:
        lines = [
            f"revert of insert-only table '{self.table}' to write id {self.write_id} (now {self.high_watermark})"
        ]
        for obj in self.objects:
            lines.append(
                f"    overwrite {obj.what}: {len(obj.files)} files visible as of write id {self.write_id} "
                f"(now {obj.now}) into a new base directory"
            )
        lines.append("  nothing changed (preview); run without --preview to restore")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "action": "revert-write-id",
            "target": f"table '{self.table}'",
            "write_id": self.write_id,
            "high_watermark": self.high_watermark,
            "objects": [{"what": o.what, "files": o.files, "now": o.now} for o in self.objects],
        }


def plan_insert_only(
    store: Metastore, db: str, table: str, write_id: int, partitions: Sequence[str] = ()
) -> AcidRevertPlan:
    """What reverting ``db.table`` (or ``partitions`` of it) to ``write_id`` writes; nothing is changed."""
    found = store.catalog.get_table(db, table)
    if not is_insert_only(found):
        raise RestoreError(
            f"table '{found.qualified_name}' is not an insert-only transactional table; revert it with --event or --time"
        )
    reason = refusal(found.db_name, store.catalog.get_database(found.db_name).parameters)
    if reason:
        raise RestoreError(f"restore refused: {reason}")
    txns = store.txns
    valid_txns = txns.get_valid_txns()
    [entry] = txns.get_valid_write_ids([found.qualified_name], valid_txns)
    now = entry.write_ids
    if not 0 <= write_id <= now.high_watermark:
        raise RestoreError(
            f"write id {write_id} of table '{found.qualified_name}' is not between 0 and its high watermark "
            f"{now.high_watermark}"
        )
    then = ValidWriteIdList(
        now.table_name,
        write_id,
        frozenset(i for i in now.open_write_ids if i <= write_id),
        frozenset(i for i in now.aborted_write_ids if i <= write_id),
    )
    plan = AcidRevertPlan(found.qualified_name, write_id, now.high_watermark)
    try:
        past, present = InsertOnlyReader(store, db, table, then), InsertOnlyReader(store, db, table, now)
        current = {_values_key(p): len(files) for p, files in present.partition_files()}
        wanted = set(partitions)
        for part, files in past.partition_files():
            name = make_partition_name(found.partition_key_names, part.values) if part else None
            if wanted and name not in wanted:
                continue
            what = f"partition '{found.qualified_name}/{name}'" if part else f"table '{found.qualified_name}'"
            location = (part.sd if part else found.sd).location or ""
            values = list(part.values) if part else None
            plan.objects.append(
                AcidObject(name, what, values, location, files, current.get(_values_key(part), 0))
            )
    except InvalidObjectError as exc:
        raise RestoreError(
            f"cannot read table '{found.qualified_name}' as of write id {write_id}: {exc}; its directories were "
            "cleaned after a compaction"
        ) from exc
    missing = sorted(wanted - {obj.name for obj in plan.objects})
    if missing:
        raise RestoreError(f"partition '{missing[0]}' of table '{found.qualified_name}' does not exist")
    return plan


def run_insert_only(store: Metastore, plan: AcidRevertPlan) -> int:
    """Overwrite each object with its files as of the write id, one transaction each; returns files written."""
    db, table = plan.table.split(".", 1)
    written = 0
    for obj in plan.objects:
        with InsertOnlyWriter(store, db, table, obj.values, mode="overwrite") as writer:
            for uri in obj.files:
                rel = relative_to(uri, obj.location).replace("/", "-")  # delta_5_5_0000-000000_0: unique
                _link_or_copy(store.cm.files, uri, join_uri(writer.target_uri, rel))
                written += 1
    return written


def _link_or_copy(files: RootedFileSystem, source: str, target: str) -> None:
    """A hard link where the store has them (no bytes move), else a verified copy; both within the
    metastore's roots (its rooted file system refuses anything else)."""
    with contextlib.suppress(OSError):
        if files.link(source, target):
            return
    files.copy_verified(
        source, target, files.checksum(source), temp_prefix=".restore-", on_chunk=lambda: None
    )


def _values_key(part: object) -> tuple[str, ...]:
    return tuple(getattr(part, "values", None) or ())
