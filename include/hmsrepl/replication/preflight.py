"""The load's pre-flight: a look at every source file a dump names, before the load's first change.

A load refuses to start when files are plainly gone, so a failure never leaves it half applied; local source
files must also be regular files whose real paths stay below the source roots (no symbolic link out of the
source warehouse), and every file is looked for through the source's roots and cmroot only.

The validation of the dump hands its checked file entries over a page at a time (``DumpValidator``'s
``file_pages``), and each page is looked at then: the dump's files are never held whole. What is kept
across pages is bounded by what is wrong: the first problem and a count of the others, and the lost files
(which a load that leaves their objects stale must attribute). The verdict waits for the end of the walk
(``finish``), so a refusal by the validation itself still comes first, as when the look followed the walk.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from hmsrepl.concurrency import bounded_map
from hmsrepl.exceptions import FileLostError
from hmsrepl.formats.file_uri import split_encoded
from hmsrepl.formats.paths import InvalidPathError, canonical_uri
from hmsrepl.replication import lost_files
from hmsrepl.replication.dump_checks import DumpValidationError, local_source_size
from hmsrepl.replication.filecopy import available_source
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.storage.base import parent_uri
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.rooted import RootedFileSystem

#: Directories whose store's kind is remembered at once (``Preflight._has_directories``).
DIRECTORIES_REMEMBERED = 4096


class Preflight:
    """Looks at the pages of a dump's source files (``check``), then refuses or answers the lost ones
    (``finish``)."""

    def __init__(
        self, source_cmroot: str, *, roots: SourceRoots, dump_uri: str = "", workers: int = 16
    ) -> None:
        self.source_cmroot, self.roots, self.dump_uri, self.workers = source_cmroot, roots, dump_uri, workers
        # Views that resolve each source directory once for the whole load (``batch``): a partition of
        # 1,000,000 files has one directory, not a million.
        self._names, self._readable = roots.files.batch(), roots.readable.batch()
        self._problem = ""  # the first file's problem
        self._problems = 0
        self._lost: list[str] = []
        self._stores: dict[str, bool] = {}  # a directory -> whether its store has directories

    def check(self, files: Sequence[str]) -> None:
        """Look at one page of checked file entries (encoded)."""
        unique = sorted(set(files))
        if self.workers <= 1 or _cpu_bound(self._names, unique):
            checked = list(map(self._examine, unique))
        else:
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                checked = list(bounded_map(pool, self._examine, unique, self.workers))
        for uri, outcome in zip(unique, checked, strict=True):
            if isinstance(outcome, str):
                self._problem = self._problem or outcome
                self._problems += 1
            elif not outcome:
                self._lost.append(uri)

    def _examine(self, uri: str) -> str | bool:
        """The file's problem, else whether a copy of it is available (a bool per file, nothing more held).
        A local file of the recorded size is: the look that found it a regular file in the roots measured
        it too. Any other is looked for where a copy may come from (its version, cmroot).

        The entry is split once (its path and checksum) and the store's kind asked once a directory (a
        partition of 1,000,000 files split each entry three times and built a million store descriptions)."""
        parts = split_encoded(uri)
        file_uri = parts[0]
        try:
            canonical = canonical_uri(file_uri)
            size = (
                local_source_size(file_uri, canonical, self._names)
                if self._has_directories(canonical)
                else None  # object stores have no links
            )
        except InvalidPathError as exc:
            return str(exc)
        checksum = parts[1]
        if size is not None and checksum and size == checksum_size(checksum):
            return True
        return available_source(self._readable, uri, self.source_cmroot) is not None

    def _has_directories(self, canonical: str) -> bool:
        """Whether the store of ``canonical`` has directories (and so links), asked once per directory."""
        parent = parent_uri(canonical)
        known = self._stores.get(parent)
        if known is None:
            # Bounded: a dump may name millions of directories.
            if len(self._stores) >= DIRECTORIES_REMEMBERED:
                self._stores.clear()
            known = self._stores[parent] = self._names.traits(canonical).has_directories
        return known

    def finish(self, *, allow_lost: bool = False) -> list[str]:
        """Refuse the dump for the first problem found, or for lost files unless ``allow_lost``; else the
        lost files (encoded, sorted), for ``lost_files`` to leave their objects stale."""
        if self._problems:
            more = f" ({self._problems - 1} more like it)" if self._problems > 1 else ""
            raise DumpValidationError(
                f"dump '{self.dump_uri}' refused, nothing was applied: {self._problem}{more}"
            )
        lost = sorted(set(self._lost))
        if lost and not allow_lost:
            raise FileLostError(
                f"{len(lost)} file(s) this load needs are gone from the source and its cmroot, e.g. "
                f"'{lost[0].split('#', 1)[0]}'; nothing was applied. The source changed or deleted them without "
                "the metastore, or cmroot retention removed them: run a bootstrap to re-replicate, or load WITH "
                f"('{lost_files.SETTING}'='{lost_files.SKIP_OBJECTS}') to apply the rest and mark their objects "
                "stale"
            )
        return lost


def _cpu_bound(fs: RootedFileSystem, uris: Sequence[str]) -> bool:
    """Whether every one of ``uris`` is on a store whose per-file looks keep this host's CPU busy (local
    files): a thread pool there only adds a hand-off per file, which cost more than the ``lstat`` itself
    (16 against 9 us a file). A directory's files share a store: each directory is asked once."""
    return all(fs.traits(directory).cpu_bound for directory in {parent_uri(uri) for uri in uris})
