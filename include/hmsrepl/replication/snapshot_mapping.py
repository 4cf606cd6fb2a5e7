"""Maps a source's snapshots to the replica's objects: the one place that decides what a replica's table or
partition is made of, before the writer puts it.

A snapshot becomes the replica's object by three rules: it is renamed into the replica database; its
location is mapped onto the replica's directories (``locations.LocationMapper``, a source that is itself a
replica seen without its version marks); and the parameters that belong to one side only (the replica's
position, scope, protection and stale marks; ``TARGET_ONLY_PARAMS``) are never taken from the source. The
mapped object is validated once, as the target's: a model copy would cost as much as a validation.
"""

from __future__ import annotations

import functools
from typing import Any

from hmsrepl.formats.paths import InvalidPathError, canonical_uri, child_name
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.protection import LOCAL_PARAMS
from hmsrepl.replication.filecopy import VERSION_MARK, logical_location
from hmsrepl.replication.locations import EXTERNAL_ROOT, LocationMapper
from hmsrepl.replication.lost_files import STALE
from hmsrepl.replication.replica_scope import SCOPE_PARAMS

REPL_LAST_ID = "repl.last.id"
REPLICA_OF = "hmsrepl.replica.of"
SOURCE_DB_LOCATION = "hmsrepl.source.db.location"
SOURCE_WAREHOUSE = "hmsrepl.source.warehouse"
# Set while a bootstrap load is under way (the dump it loads): the replica's tables are then a mix of two
# points in time, and no incremental load may apply events to it until the bootstrap has finished.
BOOTSTRAP_IN_PROGRESS = "hmsrepl.bootstrap.in.progress"
TARGET_ONLY_PARAMS = (
    REPL_LAST_ID,
    REPLICA_OF,
    SOURCE_DB_LOCATION,
    SOURCE_WAREHOUSE,
    BOOTSTRAP_IN_PROGRESS,
    STALE,  # the replica's own mark of an object whose data is behind the source (lost_files)
    *SCOPE_PARAMS,  # the policy and data mode the replica was loaded with (replica_scope)
    EXTERNAL_ROOT,  # the replica's own external directory (a source's, in a chain, is not this one's)
    *LOCAL_PARAMS,  # failover and protection state of one side
)

#: Tables whose mapping a mapper keeps for their partitions: an event batch alternates between a few.
PARENTS_REMEMBERED = 64


class SnapshotMapper:
    """The replica ``target_db``'s table or partition for a source snapshot, located by ``locations``."""

    def __init__(self, target_db: str, locations: LocationMapper) -> None:
        self.db = target_db
        self.locations = locations
        # Per source table location: its canonical form and its mapping, when its children map to the
        # children of its mapping (``_child_location``); None when they do not. A few tables' at a time.
        self._parent = functools.lru_cache(maxsize=PARENTS_REMEMBERED)(self._parent_of)

    def location(self, source_location: str | None, parent: str | None = None) -> str | None:
        """The target's logical location of a source location (a source that is itself a replica: without
        its version marks). ``parent``: the source location of the object's table, for a partition."""
        if parent and source_location:
            child = self._child_location(source_location, parent)
            if child is not None:
                return child
        mapped = self.locations.map(logical_location(source_location) if source_location else source_location)
        return logical_location(mapped) if mapped else mapped

    def _child_location(self, source_location: str, parent: str) -> str | None:
        """``location`` of a partition directly in its table's directory, spelled canonically and without
        version marks, when the table keeps its path relative to the source database: the child of the
        table's mapping, with no parse (a bootstrap maps 100,000 such partitions of one table). Else None."""
        known = self._parent(parent)
        if known is None or VERSION_MARK in source_location:
            return None
        name = child_name(source_location, known[0])
        return None if name is None else f"{known[1]}/{name}"

    def _parent_of(self, parent: str) -> tuple[str, str] | None:
        try:
            canonical = canonical_uri(parent)
        except InvalidPathError:
            return None
        if VERSION_MARK in parent or not self.locations.keeps_relative(canonical):
            return None
        mapped = self.location(parent)
        return (canonical, mapped) if mapped else None

    def table(self, snapshot: dict[str, Any]) -> Table:
        params = snapshot.get("parameters") or {}
        return Table.model_validate(
            {
                **snapshot,
                "db_name": self.db,
                "sd": self._sd(snapshot),
                "id": None,
                "parameters": {k: v for k, v in params.items() if k not in TARGET_ONLY_PARAMS},
            }
        )

    def partition(
        self, snapshot: dict[str, Any], table_name: str, table_location: str | None = None
    ) -> Partition:
        """``table_location``: the table's source location (its partitions are mapped through it, once)."""
        params = snapshot.get("parameters") or {}
        return Partition.model_validate(
            {
                **snapshot,
                "db_name": self.db,
                "table_name": table_name,
                "sd": self._sd(snapshot, table_location),
                "parameters": {k: v for k, v in params.items() if k != STALE},
            }
        )

    def _sd(self, snapshot: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
        sd = snapshot.get("sd") or {}
        return {**sd, "location": self.location(sd.get("location"), parent)}
