"""Where a replicated object lives on the target.

Locations below the source database's location keep their relative path under the target database's
location; anything else (external data, or a table the source keeps elsewhere in its warehouse) goes under
the replica database's own external root, ``<target warehouse>/_external/<replica db>/``, with its full
source path: two sources never collide, and neither do two replicas of one source database in one target
metastore (a load of one never writes a directory the other names). Relative paths are kept verbatim
(escaped partition names are never decoded).

Locations are compared in their normalised form (``formats.paths.canonical_uri``: ``file:/x``,
``file:///x`` and ``/x`` are one place, ``s3a://`` is ``s3://``), segment by segment, and a location that
does not normalise (``..``, ``.`` or empty segments, another scheme, a NUL) raises ``InvalidPathError``
instead of being mapped: with clean relative parts, a mapped location is always below the target root it
was mapped onto.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from hmsrepl.formats.paths import canonical_uri
from hmsrepl.storage.base import join_uri

EXTERNAL_DIR = "_external"
# The replica database's parameter naming its own external root (set by the load; never replicated).
EXTERNAL_ROOT = "hmsrepl.external.root"


def _below(canonical: str, root: str) -> str | None:
    """The part of ``canonical`` below canonical ``root``, "" for the root itself, None if outside."""
    if not root:
        return None
    if canonical == root:
        return ""
    prefix = root if root.endswith("/") else root + "/"
    return canonical[len(prefix) :] if canonical.startswith(prefix) else None


def _path_part(canonical: str) -> str:
    return canonical.split("://", 1)[1] if "://" in canonical else canonical


def default_external_root(target_warehouse: str, replica_db: str) -> str:
    """The directory a replica database's external data goes under unless its database records another."""
    return join_uri(target_warehouse, EXTERNAL_DIR, replica_db.lower())


def legacy_external_root(target_warehouse: str) -> str:
    """Where replicas made before per-replica roots put external data: shared by every replica."""
    return join_uri(target_warehouse, EXTERNAL_DIR)


def relocated_legacy(location: str, target_warehouse: str, external_root: str) -> str | None:
    """Where a location of the shared layout (``<warehouse>/_external/<source path>``) belongs under the
    replica's own ``external_root`` (same source path), or None for a location outside the shared layout."""
    rel = _below(canonical_uri(location), canonical_uri(legacy_external_root(target_warehouse)))
    return join_uri(external_root, rel) if rel else None


@dataclass(frozen=True)
class LocationMapper:
    """Maps source locations onto one replica database, whose own external data goes below
    ``external_root`` (``replica_layout.external_root_for``)."""

    source_warehouse: str
    source_db_location: str
    target_warehouse: str
    target_db_location: str
    external_root: str

    @cached_property
    def _db_root(self) -> str:
        """The canonical source database location; computed once per mapper."""
        return canonical_uri(self.source_db_location) if self.source_db_location else ""

    def map(self, source: str | None) -> str | None:
        if not source:
            return source
        return self.map_canonical(canonical_uri(source))

    def keeps_relative(self, canonical: str) -> bool:
        """Whether canonical ``canonical`` lies in the source database's directory, where a location keeps
        its path relative to it: the mapping of its child is then the child of its mapping."""
        return _below(canonical, self._db_root) is not None

    def map_canonical(self, canonical: str) -> str:
        """``map`` of a location in its canonical form already (a checked one: not parsed again)."""
        rel = _below(canonical, self._db_root)
        if rel is not None:
            return join_uri(self.target_db_location, rel) if rel else self.target_db_location.rstrip("/")
        return join_uri(self.external_root, _path_part(canonical).lstrip("/"))
