"""Moving a renamed managed table's directory, with every directory below it.

A rename of a managed table at its default location moves its data (as Hive does). Moving only the files
would lose every directory that holds none: an empty partition's directory, which readers then fail on
(Spark: "Input path does not exist"). So the tree is recreated at the new place first, then the files
move, then the partitions' new locations are made sure of (object stores have no directories: a no-op).
"""

from __future__ import annotations

from collections.abc import Iterable

from hmsrepl.storage.rooted import RootedFileSystem


def move_directory(source: str, target: str, named: Iterable[str] = ()) -> None:
    """Move ``source``'s files and directories to ``target``; ``named``: locations that must exist after
    (the moved partitions' new locations), created even where the source had no directory to carry.

    Bound to the two directories: nothing outside them is read, made or moved (``storage.rooted``)."""
    fs = RootedFileSystem([source, target], purpose=f"move of '{source}' to '{target}'")
    fs.makedirs(target)  # an empty table's directory moves too: readers of the renamed table list it
    source_root, target_root = source.rstrip("/"), target.rstrip("/")
    for directory in list(fs.directories(source)):  # none on object stores
        fs.makedirs(target_root + directory[len(source_root) :])
    for status in list(fs.list_files(source)):
        fs.move(status.uri, target_root + status.uri[len(source_root) :])
    for location in named:
        fs.makedirs(location)
    fs.delete_tree(source)
