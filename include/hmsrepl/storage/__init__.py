"""File access for warehouses, cmroot and dump roots, one interface over every URI scheme.

``filesystem_for(uri)`` picks the implementation (local paths and ``file:``, ``s3://``, ``hdfs://``); ``copy_file``,
``move_file`` and ``copy_files`` work across any two locations (server-side within one S3 store). Outside
``storage/`` files are reached only through ``storage.rooted.RootedFileSystem`` (bound to the roots a piece of
work may touch); ``store_traits(uri)`` answers what a store is like without touching a file.
"""

from hmsrepl.storage.base import (
    FileIdentity,
    FileStatus,
    FileSystem,
    StoreTraits,
    copy_file,
    copy_files,
    filesystem_for,
    move_file,
    register_filesystem,
    store_traits,
    unregister_filesystem,
)

__all__ = [
    "FileIdentity",
    "FileStatus",
    "FileSystem",
    "StoreTraits",
    "copy_file",
    "copy_files",
    "filesystem_for",
    "move_file",
    "register_filesystem",
    "store_traits",
    "unregister_filesystem",
]
