"""Plans a restore: which state to bring back (as of just before a drop, or as of an event), into which name,
and where each needed file's content is now. Nothing is changed here.

Refusals come first and say the fix in one line: a target name that is taken, a protected replica (a restore
there would diverge it from its source), a table format whose files the log does not describe alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hmsrepl.exceptions import FileLostError, NoSuchDatabaseError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.iceberg_tables import METADATA_LOCATION, PREVIOUS_METADATA_LOCATION, is_iceberg
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import DropDatabaseMessage, DropFunctionMessage, checksum_of
from hmsrepl.metastore.model import Database, Function, Table
from hmsrepl.metastore.names import check_identifier
from hmsrepl.metastore.protection import refusal
from hmsrepl.restore import history
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.images import ObjectImage, TableImage, replay
from hmsrepl.restore.plan import FilePlacement, ObjectPlan, RestorePlan, TablePlan
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.rooted import RootedFileSystem


def split_name(qualified: str, default_db: str | None = None) -> tuple[str, str]:
    """``db.table`` (or ``table`` in ``default_db``) as lower-case parts; one-line error otherwise."""
    parts = qualified.strip().lower().split(".")
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    if len(parts) == 1 and parts[0] and default_db:
        return default_db, parts[0]
    raise RestoreError(f"'{qualified}' is not a table name; write it as DB.TABLE")


class RestorePlanner:
    """Builds ``RestorePlan``s against one metastore (the one the restore will write to)."""

    def __init__(self, store: Metastore, *, verify: bool = True) -> None:
        self.store = store
        self.catalog = store.catalog
        self.log = store.events
        self.verify = verify  # read each needed file to check its checksum (else existence only)

    # -- the four kinds of restore ---------------------------------------------------------------------
    def undrop_table(self, db: str, table: str, *, into: str | None = None) -> RestorePlan:
        """The table as it was just before its last drop, under its name or ``into`` (``NAME``/``DB.NAME``)."""
        db, table = db.lower(), table.lower()
        drop = history.last_event(self.log, EventType.DROP_TABLE, db, table)
        if drop is None:
            raise RestoreError(
                f"the log holds no drop of table '{db}.{table}'; check the name ('hmsrepl events show')"
            )
        target_db, target_name = split_name(into, db) if into else (db, table)
        plan = self._plan("undrop-table", f"table '{target_db}.{target_name}'", drop.event_id - 1)
        database = self._writable_database(target_db)
        self._free_table(target_db, target_name)
        image = self._image(db, table, drop.event_id - 1)
        plan.tables.append(self._create(plan, image, database, target_name))
        return plan

    def undrop_partitions(self, db: str, table: str, names: Sequence[str] = ()) -> RestorePlan:
        """Partitions as they were just before the drop that removed each (default: the last drop's)."""
        db, table = db.lower(), table.lower()
        self._writable_database(db)
        current = self.catalog.get_table(db, table)
        drops = self._partition_drops(db, table, list(names))
        existing = set(self.catalog.get_partition_names(db, table))
        taken = sorted(existing & {name for group in drops.values() for name in group})
        if taken:
            raise RestoreError(
                f"partition '{taken[0]}' of table '{db}.{table}' exists; drop it first, or restore the table "
                "into another name ('hmsrepl restore revert ... --into NEW')"
            )
        plan = self._plan("undrop-partitions", f"partitions of table '{db}.{table}'", max(drops) - 1)
        for drop_id, group in sorted(drops.items()):
            image = self._image(db, table, drop_id - 1)
            target = TablePlan(current, image.name, drop_id - 1, create=False)
            for name in group:
                target.objects.append(self._add(plan, image, current, name, image.partitions[name]))
            plan.tables.append(target)
        return plan

    def undrop_database(self, db: str, *, into: str | None = None) -> RestorePlan:
        """The database with the tables and functions its drop removed, each as of just before its own drop."""
        db = db.lower()
        target = (into or db).lower()
        check_identifier(target, "database")
        drop = history.last_event(self.log, EventType.DROP_DATABASE, db)
        if drop is None:
            raise RestoreError(
                f"the log holds no drop of database '{db}'; check the name ('hmsrepl events show')"
            )
        try:
            self.catalog.get_database(target)
        except NoSuchDatabaseError:
            pass
        else:
            raise RestoreError(
                f"database '{target}' exists; restore into another name with --into NEW, or drop it first"
            )
        dropped = parse_event(drop)
        if not isinstance(dropped, DropDatabaseMessage):
            raise RestoreError(f"event {drop.event_id} is no drop of database '{db}'; the log is damaged")
        snapshot = dropped.database
        reason = refusal(db, snapshot.parameters)
        if reason:  # it would come back protected, and refuse its own tables
            raise RestoreError(f"restore refused: {reason}")
        location = snapshot.location_uri if target == db else None
        database = Database.model_validate(
            {
                **snapshot.to_json(),
                "name": target,
                "location_uri": location or self.catalog.default_db_location(target),
            }
        )
        plan = self._plan("undrop-database", f"database '{target}'", drop.event_id - 1)
        plan.database = database
        for event in history.drop_run(self.log, db, drop.event_id):
            message = parse_event(event)
            if isinstance(message, DropFunctionMessage):
                plan.functions.append(
                    Function.model_validate({**message.function.to_json(), "db_name": target})
                )
                continue
            image = self._image(db, str(event.table_name), event.event_id - 1)
            plan.tables.append(self._create(plan, image, database, str(event.table_name)))
        return plan

    def revert_table(
        self,
        db: str,
        table: str,
        as_of: int,
        *,
        partitions: Sequence[str] = (),
        into: str | None = None,
    ) -> RestorePlan:
        """Table ``db.table`` (or only ``partitions`` of it) brought back to its state as of event ``as_of``;
        with ``into`` the state goes into a new table and the table itself is left alone."""
        db, table = db.lower(), table.lower()
        image = self._image(db, table, as_of, iceberg=not into)
        if is_iceberg(image.table.get("parameters") or {}):
            return self._revert_iceberg(image, db, table)
        if into:
            target_db, target_name = split_name(into, db)
            plan = self._plan("revert", f"table '{target_db}.{target_name}'", as_of)
            database = self._writable_database(target_db)
            self._free_table(target_db, target_name)
            if partitions:
                keep = set(self._known(image, None, partitions))
                image.partitions = {n: p for n, p in image.partitions.items() if n in keep}
            plan.tables.append(self._create(plan, image, database, target_name))
            return plan
        plan = self._plan("revert", f"table '{db}.{table}'", as_of)
        self._writable_database(db)
        current_table = self.catalog.get_table(db, table)
        now = self._image(db, table, self.log.current_event_id())
        target = TablePlan(current_table, image.name, as_of, create=False)
        if not current_table.partition_keys:
            obj = self._replace(
                plan, f"table '{db}.{table}'", current_table.sd.location, None, image.files, now.files
            )
            if obj is not None:
                target.objects.append(obj)
        else:
            for name in self._known(image, now, partitions):
                before, after = image.partitions.get(name), now.partitions.get(name)
                if before is None:
                    values = (after.snapshot if after else {}).get("values") or []
                    target.objects.append(
                        ObjectPlan(f"partition '{db}.{table}/{name}'", "drop", None, values)
                    )
                elif after is None:
                    target.objects.append(self._add(plan, image, current_table, name, before))
                else:
                    obj = self._replace(
                        plan,
                        f"partition '{db}.{table}/{name}'",
                        after.location,
                        after.snapshot["values"],
                        before.files,
                        after.files,
                    )
                    if obj is not None:
                        target.objects.append(obj)
        if (image.table.get("sd") or {}).get("cols") != (now.table.get("sd") or {}).get("cols"):
            plan.notes.append(
                f"the columns of '{db}.{table}' changed after event {as_of}; the current ones are kept"
            )
        plan.tables.append(target)
        return plan

    def _revert_iceberg(self, image: TableImage, db: str, table: str) -> RestorePlan:
        """An Iceberg table pointed back at the metadata file it had as of the image, as Iceberg's rollback
        would: newer metadata and data files stay (older readers and time travel keep working), and any file
        the old snapshot needs that is gone from the location (expired) is put back from cmroot first."""
        plan = self._plan("revert", f"table '{db}.{table}'", image.as_of)
        self._writable_database(db)
        current = self.catalog.get_table(db, table)
        old_params = image.table.get("parameters") or {}
        root = current.sd.location or ""
        present = {
            rel: enc
            for rel, enc in image.files.items()
            if _holds(self.store.cm.files, join_uri(root, rel), checksum_of(enc))
        }
        obj = ObjectPlan(f"table '{db}.{table}'", "iceberg", root)
        self._placements(plan, obj, image.files, present)
        params = dict(current.parameters)
        params[METADATA_LOCATION] = old_params.get(METADATA_LOCATION, "")
        params[PREVIOUS_METADATA_LOCATION] = current.parameters.get(METADATA_LOCATION, "")
        target = TablePlan(current, image.name, image.as_of, create=False, objects=[obj])
        target.alter = current.model_copy(update={"parameters": params})
        plan.notes.append(
            f"metadata_location goes back to {params[METADATA_LOCATION]} (now {params[PREVIOUS_METADATA_LOCATION]})"
        )
        plan.tables.append(target)
        return plan

    def event_for_time(self, timestamp: int) -> int:
        return history.event_at(self.log, timestamp)

    # -- parts -----------------------------------------------------------------------------------------
    def _plan(self, action: str, target: str, as_of: int | None) -> RestorePlan:
        return RestorePlan(action, target, as_of, self.store.config.cm_retention_seconds)

    def _image(self, db: str, table: str, as_of: int, *, iceberg: bool = False) -> TableImage:
        image = replay(history.table_history(self.log, db, table, as_of), as_of)
        params = image.table.get("parameters") or {}
        if is_iceberg(params) and not iceberg:
            raise RestoreError(
                f"table '{image.name}' is an Iceberg table: its metadata names its files by absolute path, so it "
                "is only reverted in place ('hmsrepl restore revert DB.TABLE --event ID', no --into); an "
                "undropped Iceberg table is registered again with Iceberg's register_table"
            )
        if Table.model_validate(image.table).is_transactional:
            raise RestoreError(
                f"table '{image.name}' is transactional: its readers' state is chosen by write ids, not by its "
                "listing; revert an insert-only table in place with 'hmsrepl restore revert --write-id ID' "
                "(full ACID tables and undrops of transactional tables are not supported)"
            )
        return image

    def _writable_database(self, name: str) -> Database:
        try:
            database = self.catalog.get_database(name)
        except NoSuchDatabaseError:
            raise RestoreError(
                f"database '{name}' does not exist; undrop it first ('hmsrepl restore database {name}')"
            ) from None
        reason = refusal(database.name, database.parameters)
        if reason:
            raise RestoreError(f"restore refused: {reason}")
        return database

    def _free_table(self, db: str, name: str) -> None:
        check_identifier(name, "table")  # before any file is placed under it
        if self.catalog.find_table(db, name) is not None:
            raise RestoreError(
                f"table '{db}.{name}' exists; restore into another name with --into NEW, or drop or rename it first"
            )

    def _known(self, image: TableImage, now: TableImage | None, names: Sequence[str]) -> list[str]:
        everything = set(image.partitions) | set(now.partitions if now else {})
        if not names:
            return sorted(everything)
        unknown = [name for name in names if name not in everything]
        if unknown:
            raise RestoreError(
                f"partition '{unknown[0]}' of table '{image.name}' exists neither now nor as of event "
                f"{image.as_of}; name partitions as KEY=VALUE[/KEY=VALUE]"
            )
        return list(dict.fromkeys(names))

    def _partition_drops(self, db: str, table: str, names: list[str]) -> dict[int, list[str]]:
        """Drop event id -> the wanted partitions it dropped (each partition's last drop)."""
        wanted = set(names)
        found: dict[int, list[str]] = {}
        seen: set[str] = set()
        for event in history.backwards(
            self.log,
            self.log.current_event_id() + 1,
            db_name=db,
            table_name=table,
            event_types=[EventType.DROP_PARTITION.value, EventType.CREATE_TABLE.value],
        ):
            if event.event_type == EventType.CREATE_TABLE:
                break  # drops before it belong to an earlier table of the name
            dropped = [n for n in parse_event(event).partition_names() if n not in seen]
            picked = [n for n in dropped if not wanted or n in wanted]
            if picked:
                found[event.event_id] = picked
                seen.update(picked)
            if found and (not wanted or wanted <= seen):
                break
        missing = sorted(wanted - seen)
        if missing or not found:
            what = f"partition '{missing[0]}'" if missing else "any partition"
            raise RestoreError(f"the log holds no drop of {what} of table '{db}.{table}'; check the names")
        return found

    def _create(self, plan: RestorePlan, image: TableImage, database: Database, name: str) -> TablePlan:
        """A new table made from ``image`` in ``database`` under ``name``, with all its files placed."""
        table = Table.model_validate(image.table)
        location = table.sd.location
        if location and table.is_managed:
            location = join_uri(
                database.location_uri or self.catalog.default_db_location(database.name), name
            )
        table = table.model_copy(
            update={
                "db_name": database.name,
                "table_name": name,
                "id": None,
                "write_id": 0,
                "sd": table.sd.model_copy(update={"location": location}),
            }
        )
        if location:
            with self.log.reader() as conn:
                self.catalog.locations.check_table(
                    conn, table.qualified_name, location, managed=table.is_managed
                )
        target = TablePlan(table, image.name, image.as_of, create=True)
        own = ObjectPlan(f"table '{table.qualified_name}'", "create", location)
        if not table.partition_keys:
            self._placements(plan, own, image.files, {})
        target.objects.append(own)
        for pname, part in sorted(image.partitions.items()):
            target.objects.append(self._add(plan, image, table, pname, part))
        return target

    def _add(
        self, plan: RestorePlan, image: TableImage, table: Table, name: str, part: ObjectImage
    ) -> ObjectPlan:
        """A partition of ``image`` added to ``table`` (which may be new), under ``table``'s location."""
        location = _rerooted(part.location, image.location, table.sd.location)
        snapshot: dict[str, Any] = {
            **part.snapshot,
            "db_name": table.db_name,
            "table_name": table.table_name,
            "write_id": 0,
            "sd": {**(part.snapshot.get("sd") or {}), "location": location},
        }
        obj = ObjectPlan(
            f"partition '{table.qualified_name}/{name}'",
            "add",
            location,
            list(part.snapshot["values"]),
            snapshot,
        )
        self._placements(plan, obj, part.files, {})
        return obj

    def _replace(
        self,
        plan: RestorePlan,
        what: str,
        location: str | None,
        values: list[str] | None,
        wanted: Mapping[str, str],
        current: Mapping[str, str],
    ) -> ObjectPlan | None:
        obj = ObjectPlan(what, "replace", location, values)
        self._placements(plan, obj, wanted, current)
        obj.remove = sorted(rel for rel, enc in current.items() if wanted.get(rel) is None)
        obj.replaced = [
            enc
            for rel, enc in current.items()
            if rel in wanted and checksum_of(wanted[rel]) != checksum_of(enc)
        ]
        return obj if obj.place or obj.remove else None

    def _placements(
        self, plan: RestorePlan, obj: ObjectPlan, wanted: Mapping[str, str], current: Mapping[str, str]
    ) -> None:
        for rel, encoded in sorted(wanted.items()):
            target = join_uri(obj.location or "", rel)
            checksum = checksum_of(encoded)
            held = current.get(rel)
            if held is not None and checksum_of(held) == checksum:
                obj.keep.append(FilePlacement(rel, target, target, checksum, False))
                continue
            try:
                source = self.store.cm.resolve(encoded, verify=self.verify)
            except FileLostError:
                plan.missing.append(EncodedFileUri.decode(encoded).file_uri)
                continue
            placement = FilePlacement(
                rel, source, target, checksum, source != EncodedFileUri.decode(encoded).file_uri
            )
            (obj.keep if source == target else obj.place).append(placement)


def _rerooted(location: str | None, old_root: str | None, new_root: str | None) -> str | None:
    """A partition location below its table's old location, moved below the new one (others stay)."""
    if not location or not old_root or not new_root:
        return location
    old = old_root.rstrip("/") + "/"
    return new_root.rstrip("/") + "/" + location[len(old) :] if location.startswith(old) else location


def _holds(fs: RootedFileSystem, uri: str, checksum: str) -> bool:
    """Whether ``uri`` is there with the size ``checksum`` records (a file the writer never rewrites in place:
    the size is enough to tell it is the recorded one, without reading it)."""
    status = fs.status(uri)
    return status is not None and status.size == checksum_size(checksum)
