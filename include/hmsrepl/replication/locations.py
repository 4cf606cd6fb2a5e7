"""Where a replicated object lives on the target.

Locations below the source database's location keep their relative path under the target database's
location; other locations below the source warehouse keep theirs under the target warehouse; anything else
(external data) goes under ``<target warehouse>/_external/`` with its full source path, so two sources
never collide. Relative paths are kept verbatim (escaped partition names are never decoded).
"""

from __future__ import annotations

from dataclasses import dataclass

from hmsrepl.storage.base import join_uri

EXTERNAL_DIR = "_external"


def _below(uri: str, root: str) -> str | None:
    root = root.rstrip("/")
    if uri.rstrip("/") == root:
        return ""
    return uri[len(root) + 1 :] if root and uri.startswith(root + "/") else None


def _path_part(uri: str) -> str:
    if "://" in uri:
        return uri.split("://", 1)[1]
    return uri.split(":", 1)[1] if uri.startswith("file:") else uri


@dataclass(frozen=True)
class LocationMapper:
    source_warehouse: str
    source_db_location: str
    target_warehouse: str
    target_db_location: str

    def map(self, source: str | None) -> str | None:
        if not source:
            return source
        for src_root, dst_root in (
            (self.source_db_location, self.target_db_location),
            (self.source_warehouse, self.target_warehouse),
        ):
            rel = _below(source, src_root)
            if rel is not None:
                return join_uri(dst_root, rel) if rel else dst_root.rstrip("/")
        return join_uri(self.target_warehouse, EXTERNAL_DIR, _path_part(source).lstrip("/"))
