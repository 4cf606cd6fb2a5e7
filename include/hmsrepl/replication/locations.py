"""Where a replicated object lives on the target.

Locations below the source database's location keep their relative path under the target database's
location; other locations below the source warehouse keep theirs under the target warehouse; anything else
(external data) goes under ``<target warehouse>/_external/`` with its full source path, so two sources
never collide. Relative paths are kept verbatim (escaped partition names are never decoded).

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


@dataclass(frozen=True)
class LocationMapper:
    source_warehouse: str
    source_db_location: str
    target_warehouse: str
    target_db_location: str

    @cached_property
    def _roots(self) -> tuple[tuple[str, str], ...]:
        """(canonical source root, target root), most specific first; computed once per mapper."""
        return tuple(
            (canonical_uri(src) if src else "", dst)
            for src, dst in (
                (self.source_db_location, self.target_db_location),
                (self.source_warehouse, self.target_warehouse),
            )
        )

    def map(self, source: str | None) -> str | None:
        if not source:
            return source
        canonical = canonical_uri(source)
        for src_root, dst_root in self._roots:
            rel = _below(canonical, src_root)
            if rel is not None:
                return join_uri(dst_root, rel) if rel else dst_root.rstrip("/")
        return join_uri(self.target_warehouse, EXTERNAL_DIR, _path_part(canonical).lstrip("/"))
