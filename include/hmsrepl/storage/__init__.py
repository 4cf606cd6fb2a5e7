"""File access for warehouses, cmroot and dump roots, one interface over every URI scheme."""

from hmsrepl.storage.base import FileStatus, FileSystem, filesystem_for

__all__ = ["FileStatus", "FileSystem", "filesystem_for"]
