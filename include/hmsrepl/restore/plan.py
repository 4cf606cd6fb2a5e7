"""What a restore will do: the objects it creates or changes, each file it places and from where.

A plan is made before anything changes and holds everything the executor needs, so ``--preview`` shows
exactly what a run would do, and a plan whose files cmroot no longer holds is refused before any change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hmsrepl.metastore.model import Database, Function, Table
from hmsrepl.storage.checksum import checksum_size


@dataclass(frozen=True)
class FilePlacement:
    """One file the restore puts back: its content is read at ``source`` and lands at ``target``."""

    rel: str  # place below the object's location (subdirectory and name)
    source: str  # where the content is now: cmroot, a versioned object, or the original file
    target: str
    checksum: str
    from_cmroot: bool

    @property
    def size(self) -> int:
        return max(checksum_size(self.checksum), 0)


@dataclass
class ObjectPlan:
    """One table's own data or one partition: ``create`` (with its table), ``add``, ``replace``, ``drop``."""

    what: str
    action: str
    location: str | None
    values: list[str] | None = None  # partition values; None: the table's own files
    snapshot: dict[str, Any] | None = None  # the partition to add, with the target's names and location
    place: list[FilePlacement] = field(default_factory=list)
    keep: list[FilePlacement] = field(default_factory=list)  # files already holding the wanted content
    remove: list[str] = field(default_factory=list)  # relative paths that leave the listing
    replaced: list[str] = field(default_factory=list)  # encoded current files a placement overwrites

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.place)


@dataclass
class TablePlan:
    """One table: created from its image (``create``), or an existing one changed object by object."""

    table: Table  # the target: its names and location as the restore makes them
    source: str  # the table the image was taken of, as it was named then
    as_of: int
    create: bool
    objects: list[ObjectPlan] = field(default_factory=list)
    alter: Table | None = None  # the table's new metadata (an Iceberg table's metadata_location), logged last


@dataclass
class RestorePlan:
    action: str  # undrop-table, undrop-partitions, undrop-database, revert
    target: str
    as_of: int | None
    retention_seconds: int
    database: Database | None = None  # created first (an undropped database)
    functions: list[Function] = field(default_factory=list)
    tables: list[TablePlan] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # file URIs no place holds any longer
    notes: list[str] = field(default_factory=list)

    @property
    def objects(self) -> list[ObjectPlan]:
        return [obj for table in self.tables for obj in table.objects]

    @property
    def placements(self) -> list[FilePlacement]:
        return [p for obj in self.objects for p in obj.place]

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.placements)

    def refusal(self) -> str | None:
        """Why the plan must not run (files gone), as one line; None when it may."""
        if not self.missing:
            return None
        shown = ", ".join(f"'{uri}'" for uri in self.missing[:3])
        more = f" and {len(self.missing) - 3} more" if len(self.missing) > 3 else ""
        hours = self.retention_seconds / 3600
        return (
            f"cannot restore {self.target}: {len(self.missing)} needed files are gone from their place and from "
            f"cmroot: {shown}{more}; cmroot keeps recycled files {hours:g} h (HMSREPL_CM_RETENTION_SECONDS) and "
            "'hmsrepl cm cleanup' deleted older ones; nothing was changed (pick a later event, or restore "
            "from a backup or a replica)"
        )
