"""Which external directory belongs to a replica database, and moving replicas of the shared layout into it.

Every location a replica holds outside its database's directory lies below its own *external root*,
``<target warehouse>/_external/<replica db>/`` (``locations.LocationMapper``), recorded in the database
parameter ``hmsrepl.external.root`` when the replica is made. Two replicas of one source database in one
target metastore then never share a directory, so a load of one never adds, links over or retires a file
another one's readers list.

Replicas made before that kept their external data in one tree shared by all of them,
``<target warehouse>/_external/<source path>``; they have no such parameter. Their next load moves them
(``move_to_own_root``), in one batch under the database's row lock, before it applies any event: each
table and partition there gets a version directory below the replica's own root holding exactly the files
the replica's record lists (hard links, no data copy; a file another replica added to the shared directory
is left behind), its location is switched in the batch's transaction together with the parameter, and the
old directories are retired like any replaced version, only once no metadata (of any database) names them.
Iceberg tables, whose metadata names absolute paths, are left where they are and move with their next
change, which always makes a new version below the replica's own root.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import or_, select

from hmsrepl.exceptions import HmsReplError, NoSuchObjectError
from hmsrepl.formats import paths
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.replication import iceberg
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.leftovers import Retirement
from hmsrepl.replication.locations import EXTERNAL_ROOT, default_external_root, relocated_legacy

if TYPE_CHECKING:
    from hmsrepl.replication.target import TargetWriter

log = logging.getLogger(__name__)


class ExternalRootConflictError(HmsReplError):
    """Another database names a location below the external root a replica is about to take."""


def external_root_for(store: Metastore, db_name: str) -> str:
    """The external root a load maps this replica's external locations to: the one its database records,
    else the default (a new replica, or one of the shared layout its load is about to move)."""
    try:
        recorded = store.catalog.get_database(db_name).parameters.get(EXTERNAL_ROOT)
    except NoSuchObjectError:
        recorded = None
    return recorded or default_external_root(store.config.warehouse, db_name)


def owned_external_root(store: Metastore, db_name: str) -> str | None:
    """The external directory that belongs to this replica database alone: every file and directory below
    it is the replica's (data its metadata names, or leftovers of its loads), so a check or a cleanup of
    the replica covers it. None for a database with no such directory: not a replica, or a replica of the
    shared layout that its next load has not moved yet (whose external data may be another replica's too).
    Raises ``NoSuchObjectError`` for an unknown database."""
    return store.catalog.get_database(db_name).parameters.get(EXTERNAL_ROOT) or None


def is_below(location: str | None, root: str | None) -> bool:
    """``location`` is ``root`` or inside it (``formats.paths.is_below``, segment-wise), for locations that
    may be missing (none is below anything) or carry a trailing ``/``."""
    if not location or not root:
        return False
    return paths.is_below(location.rstrip("/") or "/", root.rstrip("/") or "/")


def check_root_is_free(store: Metastore, db_name: str, root: str) -> None:
    """Refuse a root that another database's table or partition lies in (a replica of the shared layout
    whose source path starts with this database's name): taking it would mix the two replicas' files."""
    prefix = root.rstrip("/")
    with store.events.reader() as conn:
        for column, join in ((tbls.c.location, tbls), (partitions.c.location, partitions.join(tbls))):
            query = (
                select(column, dbs.c.name)
                .select_from(join.join(dbs, tbls.c.db_id == dbs.c.db_id))
                .where(or_(column == prefix, column.startswith(prefix + "/", autoescape=True)))
                .where(dbs.c.name != db_name)
                .limit(1)
            )
            row = conn.execute(query).first()
            if row is not None:
                raise ExternalRootConflictError(
                    f"replica '{db_name}': its external directory '{prefix}' holds '{row[0]}' of database "
                    f"'{row[1]}'; load '{row[1]}' first (its next load moves its external data out of the "
                    f"shared layout), then load '{db_name}' again"
                )


def check_before_load(store: Metastore, db_name: str) -> None:
    """Before a load's first change: refuse (``ExternalRootConflictError``) a replica about to take an
    external root that another database's data lies in (a new replica, or one its load is to move)."""
    try:
        if owned_external_root(store, db_name) is not None:
            return
    except NoSuchObjectError:
        pass
    check_root_is_free(store, db_name, external_root_for(store, db_name))


def needs_move(store: Metastore, db_name: str) -> bool:
    """An existing replica without a recorded external root (made before per-replica roots)."""
    try:
        return EXTERNAL_ROOT not in store.catalog.get_database(db_name).parameters
    except NoSuchObjectError:
        return False


def move_to_own_root(writer: TargetWriter) -> int:
    """Move a shared-layout replica's external data below its own root; returns the objects moved.

    Call inside a load batch (``LoadEngine._batch``): it takes the database's row lock first, so a second
    load running at the same time waits and then finds the parameter set and moves nothing.
    """
    catalog, db = writer.catalog, writer.db
    database = catalog.lock_database(db)
    if EXTERNAL_ROOT in database.parameters:
        return 0  # moved by a load that held the lock before this one
    root = writer.mapper.external_root
    check_root_is_free(writer.target, db, root)
    warehouse = writer.target.config.warehouse
    moved = 0
    for name in catalog.get_tables(db):
        table = catalog.get_table(db, name)
        if iceberg.is_iceberg(table):
            continue  # metadata names absolute paths: its next change makes a version below the own root
        new_parts = []
        if table.partition_keys:
            parts = catalog.get_partitions(db, name)
            names = [make_partition_name(table.partition_key_names, p.values) for p in parts]
            ids = writer.partition_ids(table, names)
            for part, part_name in zip(parts, names, strict=True):
                target = _relocated(part.sd.location, warehouse, root)
                if target is None or table.id is None or part_name not in ids:
                    continue
                key = ObjectKey(table.id, ids[part_name])
                location = writer.relink(part.sd.location or "", target, key)
                new_parts.append(
                    part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})
                )
        target = _relocated(table.sd.location, warehouse, root)
        if target is not None:
            if table.partition_keys:  # a container: its partitions hold the data
                writer.retire(Retirement(table.sd.location or ""))
                if writer.copy_data:
                    writer.target.cm.files.makedirs(target)  # readers list even an empty table
                location = target
            else:
                key = ObjectKey(table.id) if table.id is not None else None
                location = writer.relink(table.sd.location or "", target, key)
            catalog.alter_table(
                db, name, table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})
            )
            moved += 1
        if new_parts:
            catalog.alter_partitions(db, name, new_parts)
            moved += len(new_parts)
    params = {**database.parameters, EXTERNAL_ROOT: root}
    catalog.alter_database(db, database.model_copy(update={"parameters": params}))
    log.info("moved %d external objects of replica '%s' below its own directory '%s'", moved, db, root)
    return moved


def _relocated(location: str | None, warehouse: str, root: str) -> str | None:
    """Where a location of the shared layout moves; None if it stays (already below the own root, e.g. made
    by a failback's load, or not of the shared layout)."""
    if not location or is_below(logical_location(location), root):
        return None
    return relocated_legacy(logical_location(location), warehouse, root)
