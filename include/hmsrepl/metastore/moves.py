"""Moving a renamed managed table's directory, with every directory below it.

A rename of a managed table at its default location moves its data (as Hive does). Moving only the files
would lose every directory that holds none: an empty partition's directory, which readers then fail on
(Spark: "Input path does not exist"). So the tree is recreated at the new place first, then the files
move, then the partitions' new locations are made sure of (object stores have no directories: a no-op).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from hmsrepl.storage.base import filesystem_for
from hmsrepl.storage.local import is_local_uri, local_path


def _subdirectories(root: str) -> Iterator[str]:
    """Every directory below a local ``root``, relative to it ('a', 'a/b'), never through a symlink."""
    base = local_path(root)
    for dirpath, dirnames, _ in os.walk(base):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                yield os.path.relpath(full, base)


def move_directory(source: str, target: str, named: Iterable[str] = ()) -> None:
    """Move ``source``'s files and directories to ``target``; ``named``: locations that must exist after
    (the moved partitions' new locations), created even where the source had no directory to carry."""
    fs = filesystem_for(source)
    fs.makedirs(target)  # an empty table's directory moves too: readers of the renamed table list it
    source_root, target_root = source.rstrip("/"), target.rstrip("/")
    if is_local_uri(source):
        for relative in _subdirectories(source):
            fs.makedirs(f"{target_root}/{relative}")
    for status in list(fs.list_files(source)):
        fs.move(status.uri, target_root + status.uri[len(source_root) :])
    for location in named:
        fs.makedirs(location)
    fs.delete_tree(source)
