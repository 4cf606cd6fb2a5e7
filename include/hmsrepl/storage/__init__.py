"""File access for warehouses, cmroot and dump roots, one interface over every URI scheme.

``filesystem_for(uri)`` picks the implementation (local paths and ``file:``, ``s3://``, ``hdfs://``); ``copy_file``,
``move_file`` and ``copy_files`` work across any two locations (server-side within one S3 store).
"""

from hmsrepl.storage.base import (
    FileIdentity,
    FileStatus,
    FileSystem,
    copy_file,
    copy_files,
    filesystem_for,
    move_file,
    register_filesystem,
    unregister_filesystem,
)

__all__ = [
    "FileIdentity",
    "FileStatus",
    "FileSystem",
    "copy_file",
    "copy_files",
    "filesystem_for",
    "move_file",
    "register_filesystem",
    "unregister_filesystem",
]
