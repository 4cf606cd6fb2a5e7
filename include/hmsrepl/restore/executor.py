"""Runs a restore plan through the catalog's ordinary write path, so the restore is logged like any write.

Each table is created (with its files in place: one CREATE_TABLE event with the complete listing), partitions
are added in batches (ADD_PARTITION events with their listings), a reverted object is overwritten (an INSERT
OVERWRITE event: the files that leave are recycled into cmroot like any overwrite's) and partitions that did
not exist then are dropped. Replicas replay these events like any others.

Files are put in place before the metadata names them, each under a hidden temporary name renamed into place,
never half-written under its own name. On local disks the content is hard-linked from cmroot (no bytes
copied; cmroot already verified it and the warehouse never rewrites a file in place); elsewhere it is copied
and verified against its checksum. Pending file work of a dropped object at the same place (its recycling)
is completed first, so it cannot take the restored files away.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Partition
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.plan import ObjectPlan, RestorePlan, TablePlan
from hmsrepl.storage.base import base_name, join_uri, parent_uri
from hmsrepl.storage.rooted import RootedFileSystem

BATCH = 500  # partitions per ADD_PARTITION event
COPY_THREADS = 16  # copies in flight (each is synced: latency-bound, not bandwidth-bound)


@dataclass
class RestoreResult:
    first_event: int  # the first event the restore logged (0: none)
    last_event: int
    files: int  # files placed
    bytes: int  # their bytes
    linked: int  # of them, hard-linked (no bytes copied)
    seconds: float


class RestoreExecutor:
    def __init__(self, store: Metastore, *, link: bool = True) -> None:
        self.store = store
        self.catalog = store.catalog
        self.link = link  # hard-link local content from cmroot (False: always copy, verified)
        self._linked = 0

    def run(self, plan: RestorePlan) -> RestoreResult:
        """Apply ``plan``; refused before any change when it needs files that are gone."""
        reason = plan.refusal()
        if reason:
            raise RestoreError(reason)
        started, before = time.monotonic(), self.store.events.current_event_id()
        if plan.database is not None:
            self.catalog.create_database(plan.database)
        for function in plan.functions:
            self.catalog.create_function(function)
        for table in plan.tables:
            self._table(table)
        after = self.store.events.current_event_id()
        return RestoreResult(
            before + 1 if after > before else 0,
            after if after > before else 0,
            len(plan.placements),
            plan.bytes,
            self._linked,
            time.monotonic() - started,
        )

    def _table(self, plan: TablePlan) -> None:
        table = plan.table
        objects = list(plan.objects)
        if plan.create:
            own = objects.pop(0)
            self._settle([own], table.qualified_name)
            [applied] = self._place([own])
            try:
                self.catalog.create_table(table, applied_files=None if table.partition_keys else applied)
            except BaseException:
                self._unplace(own)
                raise
        adds = [obj for obj in objects if obj.action == "add"]
        for start in range(0, len(adds), BATCH):
            self._add(plan, adds[start : start + BATCH])
        for obj in objects:
            if obj.action == "replace":
                self._replace(plan, obj)
        drops = [obj.values or [] for obj in objects if obj.action == "drop"]
        if drops:
            self.catalog.drop_partitions(table.db_name, table.table_name, drops)
        if plan.alter is not None:  # files put back first: the ALTER_TABLE lists them with the new metadata
            self._place([obj for obj in objects if obj.action == "iceberg"])
            self.catalog.alter_table(table.db_name, table.table_name, plan.alter)

    def _add(self, plan: TablePlan, batch: Sequence[ObjectPlan]) -> None:
        self._settle(batch, plan.table.qualified_name)
        applied = self._place(batch)
        parts = [Partition.model_validate(obj.snapshot) for obj in batch]
        try:
            self.catalog.add_partitions(
                plan.table.db_name, plan.table.table_name, parts, applied_files=applied
            )
        except BaseException:
            for obj in batch:
                self._unplace(obj)
            raise

    def _replace(self, plan: TablePlan, obj: ObjectPlan) -> None:
        """Overwrite one object with its wanted listing: an INSERT OVERWRITE naming every wanted file."""
        self.store.cm.preserve(obj.replaced)  # content overwritten in place stays fetchable from cmroot
        self._place([obj])
        self.catalog.insert(
            plan.table.db_name,
            plan.table.table_name,
            obj.values,
            new_files=[p.target for p in (*obj.keep, *obj.place)],
            replace=True,
        )

    def _settle(self, objects: Sequence[ObjectPlan], what: str) -> None:
        self.catalog.intents.settle([obj.location for obj in objects], f"restored '{what}'")

    def _place(self, objects: Sequence[ObjectPlan]) -> list[list[str]]:
        """Put the objects' files in place; returns each one's whole listing there, encoded (what the catalog
        records). Links are made one by one (no bytes move); copies run ``COPY_THREADS`` at a time.

        Every file goes through the metastore's rooted file system (its cmroot and data roots): a plan whose
        source or target left them would be refused before any byte moved. On a file system with directories
        a file is placed under a hidden temporary name, then renamed in; an object store's copy appears whole.
        """
        files = self.store.cm.files
        copies: list[tuple[str, str, str]] = []
        renames: list[tuple[str, str]] = []
        for placement in (p for obj in objects for p in obj.place):
            source, target = files.check(placement.source), files.check(placement.target, follow=False)
            if not files.traits(target).has_directories:
                copies.append((source, target, placement.checksum))  # an object store's copy appears whole
                continue
            tmp = join_uri(parent_uri(target), f".restore-{base_name(target)}-{uuid.uuid4().hex[:12]}")
            renames.append((tmp, target))
            if not (self.link and self._linked_into(files, source, tmp)):
                copies.append((source, tmp, placement.checksum))
        try:
            files.copy_files(copies, threads=COPY_THREADS)
            for tmp, dst in renames:
                if not files.rename(tmp, dst):
                    files.copy(tmp, dst)
                    files.delete(tmp)
        except BaseException:
            for tmp, _ in renames:
                with contextlib.suppress(Exception):
                    files.delete(tmp)
            raise
        cm = self.store.cm
        return [
            [cm.encode(p.target, p.checksum, _subdir(p.rel)) for p in (*obj.keep, *obj.place)]
            for obj in objects
        ]

    def _linked_into(self, files: RootedFileSystem, source: str, tmp: str) -> bool:
        """Link ``source`` (in cmroot, or a file left in place) to ``tmp``; False where links cannot be made
        (another device, an object store): the file is copied instead."""
        try:
            linked = files.link(source, tmp)
        except OSError:
            return False
        self._linked += int(linked)
        return linked

    def _unplace(self, obj: ObjectPlan) -> None:
        """Take back the files placed for an object whose metadata could not be written."""
        for placement in obj.place:
            with contextlib.suppress(Exception):
                self.store.cm.files.delete(placement.target)


def _subdir(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""
