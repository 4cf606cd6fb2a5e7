"""Transactional (ACID) tables: Hive's base/delta directory layout and insert-only ("micro-managed") tables.

Only ``directories`` and ``insert_only`` are imported here; ``hmsrepl.acid.spark`` needs PySpark and is
imported explicitly by Spark jobs.
"""

from hmsrepl.acid.directories import (
    DirKind,
    ParsedDirectory,
    base_dir_name,
    delta_dir_name,
    parse_directory_name,
    visible_directories,
)
from hmsrepl.acid.insert_only import InsertOnlyReader, InsertOnlyWriter, require_insert_only, visible_files

__all__ = [
    "DirKind",
    "InsertOnlyReader",
    "InsertOnlyWriter",
    "ParsedDirectory",
    "base_dir_name",
    "delta_dir_name",
    "parse_directory_name",
    "require_insert_only",
    "visible_directories",
    "visible_files",
]
