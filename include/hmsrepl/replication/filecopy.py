"""Copy one file from the source warehouse (or its cmroot copy) to the target, verified by checksum.

The copy is written under a hidden staging name (``storage.staging``), its checksum computed while writing,
and compared before anything is published. Only a verified file is renamed into place, so readers never see
a partial or wrong file.

Loads publish an object's new state as a new *version directory* (``<location>.hmsrepl-v<event id>``, a
sibling of the object's logical location) that no metadata names until the load's transaction switches the
object's location to it; the helpers here name those directories and link unchanged files into them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hmsrepl.concurrency import bounded_map
from hmsrepl.exceptions import FileLostError, StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.paths import InvalidPathError, canonical_uri, is_below
from hmsrepl.storage.base import join_uri, parent_uri
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.directory_copies import OpenDirectories, copy_in_directories, rename_in_directories
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem, copy_between
from hmsrepl.storage.staging import STAGING_PREFIX, publish, staging_name, sync_parents

TEMP_PREFIX = ".tmp-"  # local atomic writes (storage.local) before their rename
# A version directory is the logical location plus this mark and the event id that made it (a counter after
# a dash when one batch makes two versions of the same object): ``t.hmsrepl-v120``, ``p=a.hmsrepl-v120-1``.
VERSION_MARK = ".hmsrepl-v"
_VERSION_RE = re.compile(re.escape(VERSION_MARK) + r"\d+(?:-\d+)?(?=/|$)")


def versioned_location(logical: str, version: int, attempt: int = 0) -> str:
    """The version directory of ``logical`` made at event ``version`` (a sibling, never inside it)."""
    return f"{logical.rstrip('/')}{VERSION_MARK}{version}" + (f"-{attempt}" if attempt else "")


# An object's *standby*: an old version directory of it, parked once its readers' grace period passed instead
# of being removed, that its next new version starts from (``replication.standby``): ``p=a.hmsrepl-standby``.
STANDBY_MARK = ".hmsrepl-standby"


def standby_location(logical: str) -> str:
    """Where the standby of the object at ``logical`` (its location without version marks) is parked."""
    return f"{logical.rstrip('/')}{STANDBY_MARK}"


def logical_location(location: str) -> str:
    """A location without its version marks: what the source calls it (``t.hmsrepl-v12/p=a`` -> ``t/p=a``)."""
    plain = location.rstrip("/")
    return _VERSION_RE.sub("", plain) if VERSION_MARK in plain else plain  # most have none: no regex


def is_staging_name(name: str) -> bool:
    """A load's or a local write's unpublished copy (never data, always removable once no load runs)."""
    return name.startswith((STAGING_PREFIX, TEMP_PREFIX))


def link_file(fs: RootedFileSystem, source_uri: str, target_uri: str) -> None:
    """Give ``target_uri`` the content of ``source_uri`` without copying data where the store allows it.

    Local: a hard link (O(1), same inode; neither name is ever written in place, so they never diverge),
    a copy across devices. S3: one server-side copy. An existing target is replaced. Both lie in ``fs``'s
    roots (the replica's), else ``OutsideRootsError`` and nothing is linked.
    """
    fs.link_or_copy(source_uri, target_uri)


@dataclass(frozen=True, slots=True)  # one per file staged ahead, held until its object is loaded
class CopyResult:
    target: str
    source_used: str
    bytes_copied: int
    from_cmroot: bool
    prefetched: bool = False
    #: Staged under its own name in its new version (``CopyTask.in_place``): no rename left to do.
    placed: bool = False


def copy_verified(
    encoded: str,
    target_uri: str,
    *,
    target: RootedFileSystem,
    default_cmroot: str = "",
    allowed: BelowAny,
    prefetched_at: str | None = None,
    source: RootedFileSystem | None = None,
    fresh: bool = False,
) -> CopyResult:
    """Stage a verified copy of the content ``encoded`` names at ``target_uri`` (not yet published).

    Tries the original location first and the cmroot copy second; raises FileLostError if neither yields
    the recorded checksum. ``prefetched_at``: where a copier working ahead of the load (the Spark load app)
    planned this file; a verified staged copy there is moved into place instead of copying again.
    ``allowed``: the roots the file may be read from (its object's location, the source cmroot), through a
    file system bound to them; ``target``: the replica's roots. A path outside either is refused before
    any I/O. ``source``: a file system bound to ``allowed.roots`` (default: one made for them), e.g. a
    ``batch`` view shared by the many copies of one load. ``fresh``: ``target_uri``'s directory did not exist
    when the load began, so no earlier attempt staged a copy there and none is looked for (a bootstrap's
    partition of 1,000,000 files: a ``stat`` per file saved).
    """
    entry = EncodedFileUri.decode(encoded)
    staged = staging_name(target_uri)
    prefetched = None if fresh else _verified_staged_copy(target, staged, entry.checksum)
    if prefetched is None and prefetched_at and prefetched_at != target_uri:
        ahead = staging_name(prefetched_at)
        prefetched = _verified_staged_copy(target, ahead, entry.checksum)
        if prefetched is not None:
            target.delete(staged)
            target.move(ahead, staged)
    if prefetched is not None:  # copied ahead of the load (e.g. by the Spark load app) and still valid
        return CopyResult(target_uri, staged, prefetched, from_cmroot=False, prefetched=True)
    cmroot = entry.cmroot or default_cmroot
    tried = []
    for candidate in copy_candidates(entry, default_cmroot):
        # A version reference names the same key as the file URI, in another spelling: check the key.
        if not allowed(entry.file_uri if candidate == entry.versioned_uri else candidate):
            raise StorageError(
                f"'{candidate}' is outside the source locations this dump may read (its object's location and "
                "the source cmroot); the dump is corrupt or was edited"
            )
        if source is None:
            source = bound(allowed.roots, "source files of this load")
        try:  # the copy opens the source: a missing one is told apart only when the copy fails
            written = copy_between(
                source, candidate, target, staged, entry.checksum or None, unpublished=True
            )
        except OutsideRootsError:
            raise
        except (StorageError, OSError) as exc:  # the source missing, or a copy not of the recorded checksum
            if not source.exists(candidate):
                tried.append(f"{candidate} (missing)")
                continue
            if not isinstance(exc, StorageError):
                raise  # a disk error of the replica (no space...), not this candidate's
            tried.append(f"{candidate} ({exc})")  # the copy was removed
            continue
        return CopyResult(
            target_uri, candidate, checksum_size(written), from_cmroot=_in_cmroot(candidate, cmroot)
        )
    raise FileLostError(
        f"no copy of '{entry.file_uri}' with checksum {entry.checksum} is left: tried "
        + "; ".join(tried)
        + ". The source changed it after the event and cmroot no longer has it (retention passed?); "
        "run a bootstrap to re-replicate"
    )


def _in_cmroot(candidate: str, cmroot: str) -> bool:
    """Whether a copy read from ``candidate`` came from cmroot (counted apart)."""
    return bool(cmroot) and candidate.startswith(cmroot.rstrip("/") + "/")


def copy_candidates(entry: EncodedFileUri, default_cmroot: str = "") -> list[str]:
    """Where a copy of ``entry``'s content may be read, in the order to try: the file, the version the event
    saw (a versioned store), its cmroot copy (named by checksum)."""
    candidates = [entry.file_uri]
    if entry.version_id:  # a versioned store keeps the exact version the event saw
        candidates.append(entry.versioned_uri)
    cmroot = entry.cmroot or default_cmroot
    if entry.checksum and cmroot:
        candidates.append(join_uri(cmroot, f"{entry.file_name}_{entry.checksum}"))
    return candidates


def adopt_staged_copy(
    fs: RootedFileSystem, ahead: CopyResult, planned: str, target_uri: str, *, publish: bool = False
) -> CopyResult | None:
    """Take the copy this process staged and verified at ``planned`` for ``target_uri``, without reading it
    again (None when it is gone: copy as usual).

    ``publish``: rename it to ``target_uri`` itself rather than to its staged name there, one rename instead
    of two; only for a directory no reader sees (a new version directory, which no metadata names until the
    batch commits, and whose files an interrupted attempt leaves are verified again before reuse)."""
    ahead_staged, staged = staging_name(planned), target_uri if publish else staging_name(target_uri)
    if ahead_staged != staged:
        try:  # one atomic rename where the store has one (replacing a leftover staged copy)
            renamed = fs.rename(ahead_staged, staged)
        except FileNotFoundError:
            return None
        if not renamed:
            if not fs.exists(ahead_staged):
                return None
            fs.delete(staged)
            fs.move(ahead_staged, staged)
    elif not fs.exists(staged):
        return None
    return CopyResult(target_uri, ahead.source_used, ahead.bytes_copied, ahead.from_cmroot, ahead.prefetched)


def publish_staged_copy(
    fs: RootedFileSystem, ahead: CopyResult, planned: str, target_uri: str, opened: OpenDirectories
) -> CopyResult | None:
    """``adopt_staged_copy`` with ``publish``, renamed relative to the directories of ``opened`` (a page of
    renames from one staging area into one new version: each directory opened and checked once, not each
    path per rename); by full paths where that way does not apply."""
    moved = rename_in_directories(staging_name(planned), target_uri, fs=fs, opened=opened)
    if moved is None:
        return adopt_staged_copy(fs, ahead, planned, target_uri, publish=True)
    return dataclasses.replace(ahead, target=target_uri) if moved else None


@dataclass(frozen=True, slots=True)  # one per file a load copies
class CopyTask:
    """One file a load needs: what to copy, where it goes, which source roots it may be read from.

    Plain data, so a batch of tasks can be shipped to Spark executors (``run_copy_task`` there stages a
    verified copy; the load then only publishes it).
    """

    encoded: str
    target_uri: str
    allowed_roots: tuple[str, ...]
    default_cmroot: str = ""
    #: The replica's roots the copy may be staged in (its warehouse and data roots, cmroot).
    target_roots: tuple[str, ...] = ()
    #: ``target_uri`` lies in a new version directory that no metadata names until the load commits (a
    #: bootstrap's big listing, ``CopyPlanner.pages``): the copy is written under its own name there,
    #: and the load has no rename left to do for it.
    in_place: bool = False

    @property
    def staged_uri(self) -> str:
        """Where the verified copy waits for the load: its hidden staged name, or its own (``in_place``)."""
        return self.target_uri if self.in_place else staging_name(self.target_uri)


@dataclass(frozen=True)
class BelowAny:
    """A predicate: is a URI below one of ``roots`` (the places a dump's files may be read from)?

    Compared normalised and segment by segment (``formats.paths``), so ``<root>/../x`` is never below
    ``<root>`` and ``file:/r`` is the same place as ``/r``. The load validated the dump against its
    configured roots already (``dump_validation``); this is the copier's own last check, and ``roots`` are
    those its reads are bound to (``copy_verified``).
    """

    roots: tuple[str, ...]
    canonical: tuple[str | None, ...]

    def __call__(self, uri: str) -> bool:
        child = canonical_or_none(uri)
        return child is not None and any(
            root and is_below(child, root, strictly=True) for root in self.canonical
        )


def below_any(*roots: str | None) -> BelowAny:
    """``BelowAny`` of the given roots (empty ones left out)."""
    given = tuple(root for root in roots if root)
    return BelowAny(given, tuple(canonical_or_none(root) for root in given))


def canonical_or_none(uri: str) -> str | None:
    try:
        return canonical_uri(uri)
    except InvalidPathError:
        return None


def run_copy_task(task: CopyTask) -> CopyResult:
    allowed = below_any(*task.allowed_roots)
    return copy_verified(
        task.encoded,
        task.target_uri,
        target=bound(task.target_roots, "replica files of this load"),
        default_cmroot=task.default_cmroot,
        allowed=allowed,
    )


class CopyRunner:
    """Runs the many copy tasks of one load in this process (``run_copy_task`` for each, in effect), sharing
    per set of roots one ``batch`` view of a rooted file system (each directory's real path resolved once,
    not per file: a partition of 1,000,000 files has one directory) and one ``BelowAny``. Made per load,
    never kept: directories are re-resolved by the next one. Safe to call from several threads.

    ``fresh``: target directories the load makes itself (none existed before it): no staged copy of an
    earlier attempt can be in them, so their copies do not look for one."""

    def __init__(self, fresh: Iterable[str] = ()) -> None:
        self._views: dict[tuple[tuple[str, ...], str], RootedFileSystem] = {}
        self._allowed: dict[tuple[str, ...], BelowAny] = {}
        self._fresh = frozenset(fresh)
        self._directories = OpenDirectories()

    def __enter__(self) -> CopyRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the directories the copies were made in (``storage.directory_copies``)."""
        self._directories.close()

    def _view(self, roots: tuple[str, ...], purpose: str) -> RootedFileSystem:
        view = self._views.get((roots, purpose))
        if view is None:
            view = self._views.setdefault((roots, purpose), bound(roots, purpose).batch())
        return view

    def __call__(self, task: CopyTask) -> CopyResult:
        allowed = self._allowed.get(task.allowed_roots)
        if allowed is None:
            allowed = self._allowed.setdefault(task.allowed_roots, below_any(*task.allowed_roots))
        target = self._view(task.target_roots, "replica files of this load")
        source = self._view(allowed.roots, "source files of this load")
        fresh = bool(self._fresh) and parent_uri(task.target_uri) in self._fresh
        if fresh:  # no earlier copy to look for: the file itself first, through its open directories
            direct = self._direct(task, allowed, source, target)
            if direct is not None:
                return direct
        result = copy_verified(
            task.encoded,
            task.target_uri,
            target=target,
            default_cmroot=task.default_cmroot,
            allowed=allowed,
            source=source,
            fresh=fresh,
        )
        if task.in_place:  # made by full paths, under its staged name: renamed in its unnamed version
            publish(target, task.target_uri)
        return result

    def _direct(
        self, task: CopyTask, allowed: BelowAny, source: RootedFileSystem, target: RootedFileSystem
    ) -> CopyResult | None:
        """``copy_verified``'s first candidate (the file itself) staged through its open directories
        (``storage.directory_copies``); None when that way did not make it."""
        entry = EncodedFileUri.decode(task.encoded)
        if not allowed(entry.file_uri):
            return None  # refused with its reason by copy_verified
        staged = task.staged_uri
        if not copy_in_directories(
            entry.file_uri, staged, entry.checksum, source=source, target=target, opened=self._directories
        ):
            return None
        cmroot = entry.cmroot or task.default_cmroot
        return CopyResult(
            task.target_uri,
            entry.file_uri,
            checksum_size(entry.checksum),
            from_cmroot=_in_cmroot(entry.file_uri, cmroot),
        )


@functools.lru_cache(maxsize=64)
def bound(roots: tuple[str, ...], purpose: str) -> RootedFileSystem:
    """A rooted file system for ``roots``, made once per process for the many tasks that share them (its
    roots' real paths are resolved when it is made)."""
    return RootedFileSystem(roots, purpose=purpose)


def _verified_staged_copy(fs: RootedFileSystem, staged: str, checksum: str) -> int | None:
    """The size of an existing staged copy whose checksum is the expected one, else None."""
    if not checksum:
        return None
    size = checksum_size(checksum)
    for status in fs.list_files(staged):
        if status.uri.rstrip("/") == staged and status.size == size and fs.checksum(staged) == checksum:
            return size
    return None


def available_source(fs: RootedFileSystem, encoded: str, default_cmroot: str = "") -> str | None:
    """A cheap pre-flight check: where a copy would come from, judged by existence and size, or None.

    The checksum is verified during the copy itself; this only catches files that are plainly gone, so a
    load can refuse to start instead of stopping half way. ``fs``: the source's data roots and cmroot.
    """
    entry = EncodedFileUri.decode(encoded)
    size = checksum_size(entry.checksum) if entry.checksum else None
    if _present(fs, entry.file_uri, size):
        return entry.file_uri
    if entry.version_id and fs.exists(entry.versioned_uri):
        return entry.versioned_uri
    cmroot = entry.cmroot or default_cmroot
    if entry.checksum and cmroot:
        # A pin is a hard link to the warehouse file: a writer that rewrote the file in place changed it too.
        candidate = join_uri(cmroot, f"{entry.file_name}_{entry.checksum}")
        if _present(fs, candidate, size):
            return candidate
    return None


def _present(fs: RootedFileSystem, uri: str, size: int | None) -> bool:
    """A file exists at ``uri`` with ``size`` bytes (any size when None): one listing request or stat."""
    return any(
        status.uri.rstrip("/") == uri.rstrip("/") and (size is None or status.size == size)
        for status in fs.list_files(uri)
    )


def publish_all(fs: RootedFileSystem, target_uris: Sequence[str], *, durable: bool = True) -> None:
    """Publish verified staged copies, then make the local renames durable: one ``syncfs`` per file system.

    Call it before the load records the change as applied: a rename still only in memory when the machine
    stops would leave the target's metadata naming a file that is still under its staged name. Renames
    run ``io_parallelism`` at a time (on S3 each is a copy and a delete; locally they wait on the journal).
    ``durable=False`` leaves the sync to the caller, who syncs once for many calls (a load batch).
    """
    if not target_uris:
        return
    threads = min(len(target_uris), fs.traits(target_uris[0]).io_parallelism)
    if threads == 1:  # most objects of a load get one new file: no pool for those
        for uri in target_uris:
            publish(fs, uri)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for _ in bounded_map(
                pool, lambda uri: publish(fs, uri), target_uris, threads
            ):  # the first failure raises
                pass
    if durable:
        sync_parents(target_uris)


def remove_staging_leftovers(
    fs: RootedFileSystem,
    directory: str,
    keep: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """Delete staged copies left behind by an interrupted load, except those about to be used (``keep``)."""
    for status in fs.list_files(directory):
        if status.uri.rsplit("/", 1)[-1].startswith(STAGING_PREFIX) and status.uri not in keep:
            fs.delete(status.uri)
