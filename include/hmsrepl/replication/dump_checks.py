"""The checks of a dump's names, partition values and file entries, each a pure function of what the dump says
and the load's own source roots (``source_roots.SourceRoots``), and the look at a local source file.

``dump_validation.DumpValidator`` walks a dump and applies them; the pre-flight looks at each file
(``local_source_size``). Every refusal is ``InvalidPathError`` naming the value, turned by the walk into one
``DumpValidationError`` line naming the dump and the object as well.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.paths import (
    CONTROL_CHARACTERS,
    InvalidPathError,
    canonical_uri,
    check_relative_path,
    is_below,
    show,
)
from hmsrepl.metastore.names import identifier_problem, partition_problem
from hmsrepl.replication.layout import ACID_STATE, FILES, FUNCTIONS_DIR, METADATA, DumpError
from hmsrepl.storage.checksum import is_checksum_token
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem

if TYPE_CHECKING:
    from hmsrepl.replication.source_roots import SourceRoots

#: Names the dump layout uses for itself below a database directory: a table cannot be called so.
RESERVED_NAMES = frozenset({METADATA, FILES, FUNCTIONS_DIR, ACID_STATE})


class DumpValidationError(DumpError):
    """A dump names something a load must not touch, or is malformed; nothing was applied."""


def check_name(kind: str, name: Any, max_chars: int = 128) -> str:
    """A database, table, function or partition key name: bounded, one path segment, printable."""
    if not isinstance(name, str) or not name:
        raise InvalidPathError(f"{kind} name {show(name)} is empty or not a string")
    if len(name) > max_chars:
        raise InvalidPathError(f"{kind} name {show(name)} is longer than {max_chars} characters")
    if "/" in name or "\\" in name or CONTROL_CHARACTERS.search(name) or name in (".", ".."):
        raise InvalidPathError(f"{kind} name {show(name)} holds a path separator or control character")
    if kind == "table" and name in RESERVED_NAMES:
        raise InvalidPathError(f"table name {show(name)} is reserved by the dump layout")
    problem = identifier_problem(name) if kind in ("database", "table", "function") else None
    if problem:  # the catalog would refuse it half way through the load
        raise InvalidPathError(f"{kind} name {show(name)} {problem}")
    return name


def check_partition_values(keys: Sequence[str], values: Any, max_chars: int = 1024) -> list[str]:
    """Partition values: one per key, bounded strings with no NUL/control character or ``.``/``..`` segment."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidPathError(f"partition values {show(values)} are not a list of strings")
    if len(values) != len(keys):
        raise InvalidPathError(f"partition values {show(values)} do not match the table's keys {list(keys)}")
    for value in values:
        if len(value) > max_chars:
            raise InvalidPathError(f"partition value {show(value)} is longer than {max_chars} characters")
        if CONTROL_CHARACTERS.search(value) or any(
            seg in (".", "..") for seg in value.replace("\\", "/").split("/")
        ):
            raise InvalidPathError(
                f"partition value {show(value)} has a '..'/'.' segment or control character"
            )
    problem = partition_problem(keys, values)
    if problem:  # the catalog would refuse it half way through the load
        raise InvalidPathError(problem)
    return values


def _is_compacted_base_of(canonical: str, subdir: str, name: str) -> bool:
    """Whether a bootstrap entry placed under ``base_<wid>`` (or ``delta_<min>_<max>``) comes from the
    compactor's ``base_<wid>_v<txn>`` (``delta_<min>_<max>_v<txn>``) of the same write ids
    (``acid_replay.dump_acid_files`` drops the suffix, which names a source txn)."""
    top, _, rest = subdir.partition("/")
    if not re.fullmatch(r"base_[0-9]+|delta_[0-9]+_[0-9]+", top):
        return False
    tail = f"{rest.rstrip('/')}/{name}" if rest else name
    return re.search(rf"/{re.escape(top)}_v[0-9]+/{re.escape(tail)}$", canonical) is not None


def check_file_entry(
    encoded: Any,
    *,
    object_location: str | None,
    roots: SourceRoots,
    require_subdir: bool = False,
) -> EncodedFileUri:
    """One ``fileuri#checksum#cmroot#subdir[#version]`` entry, checked against trusted roots only.

    ``object_location`` (canonical) is the table/partition the file belongs to; None for ACID commit writes,
    whose files are placed below the replica's own table location by their ``subdir`` and name.
    """
    if not isinstance(encoded, str):
        raise InvalidPathError(f"file entry {show(encoded)} is not a string")
    try:
        entry = EncodedFileUri.decode(encoded)
    except ValueError as exc:
        raise InvalidPathError(str(exc)) from None
    try:
        canonical = canonical_uri(entry.file_uri)
    except InvalidPathError as exc:
        raise InvalidPathError(f"file {show(entry.file_uri)} {exc}") from None
    if not roots.may_hold_data(canonical):
        raise InvalidPathError(
            f"file {show(entry.file_uri)} is outside the source warehouse and external roots of this load's "
            f"configuration ({roots.describe()})"
        )
    if object_location is not None and not is_below(canonical, object_location, strictly=True):
        raise InvalidPathError(f"file {show(entry.file_uri)} is not below its object's location")
    name = canonical.rsplit("/", 1)[-1]
    if entry.file_uri.endswith("/") or not name:
        raise InvalidPathError(f"file {show(entry.file_uri)} names a directory, not a file")
    check_relative_path(entry.subdir, "subdir")
    if require_subdir and not entry.subdir:
        raise InvalidPathError(
            f"committed file {show(entry.file_uri)} is not inside a write directory (delta_*/base_*)"
        )
    relative = f"{entry.subdir.rstrip('/')}/{name}" if entry.subdir else name
    if not canonical.endswith("/" + relative) and not _is_compacted_base_of(canonical, entry.subdir, name):
        raise InvalidPathError(
            f"file {show(entry.file_uri)} does not end with its subdir {show(entry.subdir)}"
        )
    if not is_checksum_token(entry.checksum):
        raise InvalidPathError(
            f"file {show(entry.file_uri)} has checksum {show(entry.checksum)}; every file needs one of the "
            "form 'crc32c-<8 hex>-<size>'"
        )
    if entry.cmroot:
        try:
            cmroot = canonical_uri(entry.cmroot)
        except InvalidPathError as exc:
            raise InvalidPathError(
                f"cmroot {show(entry.cmroot)} of file {show(entry.file_uri)} {exc}"
            ) from None
        if not is_below(cmroot, roots.canonical_cmroot):
            raise InvalidPathError(
                f"cmroot {show(entry.cmroot)} of file {show(entry.file_uri)} is not the source cmroot of this "
                f"load's configuration ({roots.cmroot})"
            )
    return entry


def local_source_size(file_uri: str, canonical: str, files: RootedFileSystem) -> int | None:
    """A local source file a load would read (``canonical``; ``file_uri`` as its entry spells it, for messages)
    is a regular file whose real path stays below the source roots; answers its size (None: gone). For a
    store with directories (an object store has no links: its caller asks the store's kind first, once a
    directory).

    The textual checks cannot see a symbolic link planted in the source warehouse (``t/f -> /etc/shadow``)
    or a FIFO that would hang the copy; this one looks at the file system. Files that are gone pass (the
    copy then falls back to cmroot, whose entries are recycled copies, never links). ``files``: a view of
    the source roots to check through (a ``batch`` one for the many files of a load: each directory is
    resolved into the roots once). The name is checked against the roots with its directory resolved; a
    regular file (not a link) then is where that name says, so the size comes from the same ``lstat`` and
    the pre-flight needs no second look at the file."""
    try:
        kind, size = files.entry_size(canonical)  # the name only: a link is refused below, never followed
    except OutsideRootsError:
        raise InvalidPathError(f"file {show(file_uri)} resolves outside the source roots") from None
    except StorageError as exc:
        raise InvalidPathError(f"file {show(file_uri)} cannot be examined: {exc}") from None
    if kind is None:
        return None
    if kind != "file":
        raise InvalidPathError(f"file {show(file_uri)} is not a regular file (a link, FIFO or device)")
    return size
