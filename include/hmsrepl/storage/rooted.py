"""A file system bound to its roots: the one place that decides whether a path may be touched at all.

Every read, write, rename, link, delete and listing of warehouse, external root, cmroot, trash, dump and
staging paths goes through a ``RootedFileSystem`` made for the roots that piece of work may touch (a
change manager: its cmroot and the warehouse roots it recycles from; a load's sweep: the replica's
directory; a dump: the dump directory). Checks that used to live at the call sites that remembered them
live here, so a new feature cannot forget them:

- a path is canonicalised once, with the project's one normaliser (``formats.paths.canonical_uri``: one
  spelling per place, ``.``/``..``/empty segments and control characters refused, never URL-decoded);
- a local path's symlinks are resolved for containment (``realpath``: the nearest existing ancestor
  decides, as the kernel will when the path is used). Operations on a *name* (delete, the source of a
  move, the target of a write) resolve the parent only, so a link inside a root can itself be removed or
  replaced; operations on *content* (read, list, checksum) follow the whole path;
- anything outside the roots is refused with one error type, ``OutsideRootsError``, before any I/O.

Roots are resolved once, when the file system is made. The work itself is done by the store the URI
names (``filesystem_for``), so a rooted file system spans local and S3 roots alike.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import split_versioned_reference
from hmsrepl.formats.paths import (
    CONTROL_CHARACTERS,
    InvalidPathError,
    canonical_uri,
    is_below,
    is_plain_local,
    show,
)
from hmsrepl.storage.base import (
    FileIdentity,
    FileStatus,
    FileSystem,
    StoreTraits,
    copy_file,
    copy_files,
    filesystem_for,
    move_file,
    parent_uri,
    store_traits,
)


def real_path(path: str) -> str:
    """Where the kernel will act for a local absolute path: every symlink of its existing part followed, a
    missing tail kept as written. The one resolver of containment checks.

    The kernel resolves it (an ``O_PATH`` open, then the descriptor's name in ``/proc``): three system calls
    whatever the depth, where ``os.path.realpath`` makes one ``lstat`` per component in Python (ten or more
    for a partition's file, several times per recycled file). A name that cannot be opened is resolved by
    its parent; a dangling symlink, a missing path with ``.``/``..``/empty segments (the metastore's policy
    resolves client spellings), or a system without ``O_PATH``, by ``os.path.realpath``.
    """
    if _O_PATH is None:
        return os.path.realpath(path)
    path = path.rstrip("/") or "/"  # as realpath spells a directory: no trailing slash
    try:
        fd = os.open(path, _O_PATH)
    except (FileNotFoundError, NotADirectoryError):
        if path == "/" or "/." in path or "//" in path or os.path.islink(path):
            return os.path.realpath(path)  # '.', '..' or empty segments after a missing one: its rules
        parent, name = path.rsplit("/", 1)
        return os.path.join(real_path(parent or "/"), name)
    except OSError:
        return os.path.realpath(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


_O_PATH: int | None = getattr(os, "O_PATH", None) if os.path.isdir("/proc/self/fd") else None


def real_path_in(path: str, real_parent: str) -> str:
    """``real_path`` of a normalised absolute local ``path`` whose parent directory resolves to
    ``real_parent`` (resolved once by the caller for many names in it): one ``lstat`` instead of three
    calls. An entry that is no symlink, or no entry at all, is where its real parent names it, as the kernel
    acts; a symlink, or a name that cannot be examined, is resolved in full."""
    if not plain_entry(path):
        return real_path(path)
    return f"{real_parent.rstrip('/')}/{path.rsplit('/', 1)[1]}"


def plain_entry(path: str) -> bool:
    """Whether the kernel acts on local ``path`` where its resolved parent names it, as one ``lstat`` says: an
    entry that is no symlink, or no entry at all (the missing tail is kept as written); False for a symlink or
    a name that cannot be examined."""
    try:
        return not stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def plain_name(name: str) -> bool:
    """Whether ``name`` is one path segment naming an entry of the directory it is looked up in (relative to
    an ``open_directory`` descriptor): not empty, not ``.`` or ``..``, no ``/``, only printable characters.
    Any other name is checked as a whole path by its caller."""
    return name not in ("", ".", "..") and "/" not in name and name.isprintable()


@functools.lru_cache(maxsize=8192)
def _canonical_plain(uri: str) -> str:
    """``canonical_uri`` of a URI without its version (pure, so remembered: paths repeat within a batch)."""
    plain, _version = split_versioned_reference(uri)
    return canonical_uri(plain)


_CANONICAL_MAX_CHARS = 4096  # ``canonical_uri``'s limit


def _below_any(path: str, roots: Sequence[str]) -> bool:
    return any(is_below(path, root) for root in roots)


class OutsideRootsError(StorageError):
    """A path that a rooted file system refuses: outside its roots, or not a usable location at all."""


class RootedFileSystem(FileSystem):
    """Operations of ``FileSystem`` on paths below ``roots`` only; ``purpose`` names the work in errors."""

    def __init__(self, roots: Iterable[str], *, purpose: str) -> None:
        self.purpose = purpose
        self.roots = tuple(root for root in roots if root)
        if not self.roots:
            raise OutsideRootsError(f"{purpose}: no root to work in; configure one")
        canonical = [self._canonical(root) for root in self.roots]
        self._local = tuple(real_path(root) for root in canonical if root.startswith("/"))
        #: Each local root's canonical spelling and its real path: a path directly in a root (a cmroot file)
        #: needs no lookup of its parent.
        self._resolved = {root: real_path(root) for root in canonical if root.startswith("/")}
        self._remote = tuple(root for root in canonical if not root.startswith("/"))
        first = filesystem_for(self.roots[0])
        self.io_parallelism = first.io_parallelism
        self.move_keeps_mtime = first.move_keeps_mtime

    # -- the check -----------------------------------------------------------------------------------------
    def _canonical(self, uri: str) -> str:
        if is_plain_local(uri):  # returned unchanged by the parse, which is skipped (``_canonical_plain``)
            return uri
        try:
            return _canonical_plain(uri)
        except (InvalidPathError, ValueError) as exc:
            raise OutsideRootsError(f"{self.purpose}: refused {show(uri)}: it {exc}") from None

    def contains(self, uri: str, *, follow: bool = True) -> bool:
        """Whether ``uri`` lies at or below a root (no error: for callers that skip what is outside)."""
        try:
            self.check(uri, follow=follow)
        except OutsideRootsError:
            return False
        return True

    def check(self, uri: str, *, follow: bool = True) -> str:
        """``uri`` unchanged when it lies at or below a root, else ``OutsideRootsError``.

        The name itself must lie in a root once its parent is resolved (what a delete, rename or replace
        acts on: a symlink inside a root may be removed, wherever it points). With ``follow`` (operations
        on content: read, list, checksum, touch), a name that is a symlink must also lead into a root.
        """
        self._check(uri, follow)
        return uri

    def _check(self, uri: str, follow: bool, *, directory: bool = False) -> bool:
        """``check``; with ``directory``, also whether the directory of ``uri`` lies in a root itself (a
        root's own parent does not), from the resolution the check made: what ``admit`` admits with it."""
        canonical = self._canonical(uri)
        if not canonical.startswith("/"):
            self._require(canonical, canonical, self._remote)
            return directory and _below_any(canonical.rsplit("/", 1)[0], self._remote)
        if canonical == "/":
            self._require(canonical, canonical, self._local)
            return False
        parent, name = canonical.rsplit("/", 1)
        real_parent = self._resolved.get(parent) or self._real_directory(parent or "/")
        named = f"{real_parent.rstrip('/')}/{name}"
        self._require_named(canonical, real_parent, named)
        if follow and os.path.islink(named):
            self._require(canonical, real_path(named), self._local)
        return directory and _below_any(real_parent, self._local)

    #: Directories resolved in this batch (``batch``), by canonical path; None: each check resolves anew.
    _directories: dict[str, str] | None = None

    def _real_directory(self, path: str) -> str:
        """Where the kernel will act for a directory (``real_path``); a batch (``batch``) remembers it, and
        resolves a plain directory inside one it resolved with one ``lstat``."""
        memo = self._directories
        if memo is None:
            return real_path(path)
        known = memo.get(path)
        if known is not None:
            return known
        real = None
        parent, name = path.rsplit("/", 1)
        parent = parent or "/"
        if path != "/" and name not in ("", ".", ".."):
            real_parent = self._resolved.get(parent) or self._real_directory(parent)
            try:
                plain = stat.S_ISDIR(os.lstat(path).st_mode)  # a directory itself, not a symlink to one
            except OSError:
                plain = False
            if plain:
                real = f"{real_parent.rstrip('/')}/{name}"
        if real is None:
            real = real_path(path)
        memo[path] = real
        return real

    def open_directory(self, uri: str) -> int:
        """A descriptor of the local directory ``uri`` for many names in it (``dir_fd`` of ``os`` functions),
        checked once: the real path of the directory the kernel opened (read back from the descriptor, not
        resolved beside it) must lie in a root. A name of one segment (``plain_name``) opened relative to it
        is in that directory whatever the path ``uri`` names meanwhile: a directory swapped for a symlink
        after the check is never followed, and the next opening of ``uri`` refuses it. The caller closes it.

        Raises OutsideRootsError (a remote URI, or a directory outside the roots), OSError when it cannot
        be opened (missing, not a directory)."""
        canonical = self._canonical(uri)
        if not canonical.startswith("/"):
            raise OutsideRootsError(f"{self.purpose}: '{uri}' is not a local directory")
        fd = os.open(canonical, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            real = os.readlink(f"/proc/self/fd/{fd}") if _O_PATH is not None else real_path(canonical)
            self._require(canonical, real, self._local)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def batch(self) -> RootedFileSystem:
        """This file system for one piece of work on many paths of the same trees (recycling a dropped
        table's files): each directory's real path is resolved once for the batch, and a directory whose
        parent was resolved costs one ``lstat`` (a plain directory inside a resolved one is where it is
        named; a symlink is resolved in full). Every path is still checked; only the directories' answers
        are shared, for the length of the batch (made anew per batch, never kept)."""
        return _Batch(self)

    def _require_named(self, canonical: str, real_parent: str, named: str) -> None:
        """``_require`` of a name in the directory that resolves to ``real_parent`` (``named``: the two
        joined; a batch answers for the directory once)."""
        self._require(canonical, named, self._local)

    def _require(self, canonical: str, real: str, roots: Sequence[str]) -> None:
        for root in roots:  # a loop, not any(): this runs for every path checked
            if is_below(real, root):
                return
        shown = real if real == canonical else f"{canonical} (resolves to {real})"
        raise OutsideRootsError(
            f"{self.purpose}: refused '{shown}': it is outside the roots it may touch "
            f"({', '.join(self.roots)}); fix the location, or the configured roots if it belongs there"
        )

    def admit(self, *uris: str, content: bool = True) -> RootedFileSystem:
        """This file system with ``uris`` checked once: for several operations on the same few paths (a
        recycled file: checksum, rename, delete), which are then not resolved again. Their directories pass
        too, for every operation (the check resolved them into a root: syncing a rename there). Every other
        path is still checked on each use.

        ``content=False`` admits the names only (no ``lstat`` of the path itself): they then pass for the
        operations on a name (``has_entry``, ``delete``, the ends of a ``rename``) and for ``checksum`` and
        ``identify``, which never follow a final symlink; an operation that follows one (``exists``,
        ``size``, ``open_read``, ``touch``...) is checked in full as for any path."""
        return _Admitted(self, uris, content=content)

    def traits(self, uri: str) -> StoreTraits:
        """What the store of ``uri`` is like (hard links, directories, in-place writes, parallelism): callers
        ask the rooted file system, never the unbound store. No file is touched, so nothing is checked here:
        every operation on the path is."""
        return store_traits(uri)

    def _fs(self, uri: str, *, follow: bool = True) -> FileSystem:
        return filesystem_for(self.check(uri, follow=follow))

    # -- FileSystem, each operation checked first ---------------------------------------------------------
    def list_files(self, uri: str) -> Iterator[FileStatus]:
        return self._fs(uri).list_files(uri)

    def status(self, uri: str) -> FileStatus | None:
        return self._fs(uri).status(uri)

    def exists(self, uri: str) -> bool:
        return self._fs(uri).exists(uri)

    # Checksums are read without following a final symlink in every store (local: ``O_NOFOLLOW`` and
    # regular files only, see ``LocalFileSystem.checksum``; object stores and HDFS have no symlinks), so
    # their paths are checked as names: a link in a root leading out is refused by the store, not read, and
    # a dropped table's files cost no ``lstat`` each to identify or recycle.
    def checksum(self, uri: str) -> str:
        return self._fs(uri, follow=False).checksum(uri)

    def identify(self, uri: str) -> FileIdentity:
        return self._fs(uri, follow=False).identify(uri)

    def open_read(self, uri: str) -> BinaryIO:
        return self._fs(uri).open_read(uri)

    def expire_pins(self, root: str, cutoff: float) -> int:
        return self._fs(root).expire_pins(root, cutoff)

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._fs(uri, follow=False).write_bytes(uri, data)

    def write_stream(self, uri: str, stream: BinaryIO) -> str:
        return self._fs(uri, follow=False).write_stream(uri, stream)

    def copy(self, src: str, dst: str, size: int | None = None) -> str:
        self.check(src)
        self.check(dst, follow=False)
        return copy_file(src, dst)

    def copy_file(self, src: str, dst: str, expected_checksum: str | None = None) -> str:
        """``storage.base.copy_file`` (across stores, verified against ``expected_checksum``), both ends checked."""
        self.check(src)
        self.check(dst, follow=False)
        return copy_file(src, dst, expected_checksum)

    def copy_files(self, tasks: Iterable[Sequence[str | None]], threads: int = 16) -> list[str]:
        """``storage.base.copy_files`` with every source and target checked first (nothing copied if one is
        outside the roots)."""
        work = [tuple(task) for task in tasks]
        for src, dst, *_rest in work:
            if src:
                self.check(src)
            if dst:
                self.check(dst, follow=False)
        return copy_files(work, threads=threads)

    def link_or_copy(self, src: str, dst: str) -> None:
        """Give ``dst`` the content of ``src``: a hard link where the store allows it (replacing ``dst``),
        else a copy (server-side within one object store)."""
        if not self.link(src, dst, replace=True):
            self.copy_file(src, dst)

    def replace(self, src: str, dst: str) -> None:
        """Put ``src`` at ``dst`` whole (an atomic rename where the store has one, else the store's replace)."""
        if not self.rename(src, dst):
            self._fs(src, follow=False).replace(src, dst)

    def move(self, src: str, dst: str) -> None:
        self.check(src, follow=False)
        self.check(dst, follow=False)
        move_file(src, dst)

    def delete(self, uri: str) -> None:
        self._fs(uri, follow=False).delete(uri)

    def touch(self, uri: str, mtime: float) -> None:
        self._fs(uri).touch(uri, mtime)

    def makedirs(self, uri: str) -> None:
        self._fs(uri).makedirs(uri)

    def make_directory(self, uri: str) -> bool:
        """A new directory is a name, decided by its parent's resolution: no ``lstat`` of it first (a
        bootstrap makes one per partition). A name already there is checked as content too, so one that is a
        symlink leading out is refused as by every operation that follows it."""
        try:
            made = self._fs(uri, follow=False).make_directory(uri)
        except FileExistsError:
            self.check(uri)
            raise
        if not made:
            self.check(uri)
        return made

    def delete_tree(self, uri: str) -> None:
        self._fs(uri).delete_tree(uri)

    def size(self, uri: str) -> int | None:
        return self._fs(uri).size(uri)

    def has_entry(self, uri: str) -> bool:
        return self._fs(uri, follow=False).has_entry(uri)

    def link(self, src: str, dst: str, *, replace: bool = False) -> bool:
        source = self._fs(src, follow=False)
        target = self._fs(dst, follow=False)
        return source.same_store(target) and source.link(src, dst, replace=replace)

    def same_file(self, a: str, b: str) -> bool:
        first, second = self._fs(a), self._fs(b)
        return first.same_store(second) and first.same_file(a, b)

    def rename(self, src: str, dst: str) -> bool:
        source = self._fs(src, follow=False)
        target = self._fs(dst, follow=False)
        return source.same_store(target) and source.rename(src, dst)

    def sync_directory(self, uri: str) -> None:
        self._fs(uri).sync_directory(uri)

    def is_directory(self, uri: str) -> bool:
        return self._fs(uri).is_directory(uri)

    def directories(self, uri: str, *, deepest_first: bool = False) -> Iterator[str]:
        return self._fs(uri).directories(uri, deepest_first=deepest_first)

    def is_empty_directory(self, uri: str) -> bool:
        return self._fs(uri).is_empty_directory(uri)

    def entry_names(self, uri: str) -> frozenset[str] | None:
        return self._fs(uri).entry_names(uri)

    def remove_empty_directory(self, uri: str) -> bool:
        return self._fs(uri, follow=False).remove_empty_directory(uri)

    def write_unsynced(self, uri: str, data: bytes) -> None:
        self._fs(uri, follow=False).write_unsynced(uri, data)

    def write_unsynced_pieces(self, uri: str, pieces: Iterable[bytes]) -> None:
        self._fs(uri, follow=False).write_unsynced_pieces(uri, pieces)

    def sync_tree(self, uri: str) -> None:
        self._fs(uri).sync_tree(uri)

    def entry_kind(self, uri: str) -> str | None:
        return self._fs(uri, follow=False).entry_kind(uri)

    def entry_size(self, uri: str) -> tuple[str | None, int | None]:
        return self._fs(uri, follow=False).entry_size(uri)

    def stat_tree(self, uri: str) -> dict[str, tuple[int, int]]:
        return self._fs(uri).stat_tree(uri)

    def stat_pages(self, uri: str, page: int) -> Iterator[dict[str, tuple[int, int]]]:
        return self._fs(uri).stat_pages(uri, page)

    def stat_named(self, uri: str, names: Iterable[str]) -> dict[str, tuple[int, int]]:
        return self._fs(uri).stat_named(uri, names)

    def count_files(self, uri: str) -> int:
        return self._fs(uri).count_files(uri)

    def file_ids(self, uri: str) -> dict[str, int] | None:
        return self._fs(uri).file_ids(uri)

    def copy_verified(
        self, src: str, dst: str, checksum: str, *, temp_prefix: str, on_chunk: Callable[[], None]
    ) -> None:
        """A local copy across devices, verified before it is renamed into place (``LocalFileSystem``);
        across stores, ``copy_file`` verified against ``checksum``."""
        source, target = self._fs(src), self._fs(dst, follow=False)
        copy_verified = getattr(target, "copy_verified", None)
        if copy_verified is not None and source.same_store(target):
            copy_verified(src, dst, checksum, temp_prefix=temp_prefix, on_chunk=on_chunk)
            return
        copy_file(src, dst, checksum or None)

    def same_store(self, other: FileSystem) -> bool:
        return False  # a rooted file system spans stores: copies go through copy_file, checked here


def copy_files_between(
    source: RootedFileSystem, target: RootedFileSystem, tasks: Iterable[Sequence[str]], threads: int = 16
) -> list[str]:
    """``copy_files`` of ``(src, dst[, checksum])`` tasks, every source checked against ``source`` and every
    target against ``target`` before the first copy (one refused path: nothing is copied)."""
    work = [tuple(task) for task in tasks]
    for src, dst, *_rest in work:
        source.check(src)
        target.check(dst, follow=False)
    return copy_files(work, threads=threads)


def copy_between(
    source: RootedFileSystem,
    src: str,
    target: RootedFileSystem,
    dst: str,
    expected_checksum: str | None = None,
    *,
    unpublished: bool = False,
) -> str:
    """Copy ``src`` (below ``source``'s roots) to ``dst`` (below ``target``'s roots), verified against
    ``expected_checksum``: a load reads the source's files and writes the replica's, two sets of roots.
    ``unpublished``: ``dst`` is a staged name no reader looks at (``FileSystem.copy_unpublished``)."""
    source.check(src)
    target.check(dst, follow=False)
    return copy_file(src, dst, expected_checksum, unpublished=unpublished)


class _Admitted(RootedFileSystem):
    """A rooted file system that knows some paths passed already (``RootedFileSystem.admit``), with the store
    that serves each one (looked up on its first use, not on every operation): ``_admitted`` for every
    operation, ``_names`` for the operations on a name only."""

    _admitted: dict[str, FileSystem | None]
    _names: dict[str, FileSystem | None]

    def __init__(self, rooted: RootedFileSystem, uris: Sequence[str], *, content: bool = True) -> None:
        self.__dict__.update(rooted.__dict__)
        self._admitted = dict(getattr(rooted, "_admitted", {}))
        self._names = dict(getattr(rooted, "_names", {}))
        for uri in uris:
            self._admit_one(uri, content)

    def _admit_one(self, uri: str, content: bool) -> None:
        """Check ``uri`` (in full, or as a name) and admit it, with its directory for everything when that
        lies in a root itself (a root's own parent does not: only the root was checked)."""
        admitted = self._admitted
        if uri in admitted or (not content and uri in self._names):
            return
        parent = parent_uri(uri)
        if RootedFileSystem._check(self, uri, content, directory=parent not in admitted):
            admitted[parent] = None
        (admitted if content else self._names)[uri] = None

    def check(self, uri: str, *, follow: bool = True) -> str:
        if uri in self._admitted or (not follow and uri in self._names):
            return uri
        return RootedFileSystem.check(self, uri, follow=follow)

    def _fs(self, uri: str, *, follow: bool = True) -> FileSystem:
        admitted = self._admitted if uri in self._admitted else self._names if not follow else None
        if admitted is None or uri not in admitted:
            return filesystem_for(RootedFileSystem.check(self, uri, follow=follow))
        store = admitted[uri]
        if store is None:
            store = admitted[uri] = filesystem_for(uri)
        return store


class _Batch(_Admitted):
    """A rooted file system whose directory resolutions and admissions are remembered for one batch
    (``batch``).

    ``admit`` records its paths in the batch itself (checked once, then served from that record for the
    rest of the batch) instead of making a file system per call: a recycled file and its cmroot name are two
    admissions, a dropped table's thousands of files as many; making and filling a file system per admission
    cost more than the check did."""

    def __init__(self, rooted: RootedFileSystem) -> None:
        super().__init__(rooted, ())
        self._directories = {}
        self._parents: dict[str, str] = {}  # a parent as spelled -> its canonical form
        self._inside: set[str] = set()  # real directories at or below a local root (``_require_named``)

    def _require_named(self, canonical: str, real_parent: str, named: str) -> None:
        """A name in a real directory at or below a root lies below that root (the name is one segment, never
        ``.`` or ``..``: ``_canonical`` refused those), so the directory is compared with the roots once per
        batch, not each of its names. Any other name is compared itself, as outside a batch (it may be a root
        itself, or be refused)."""
        if real_parent in self._inside:
            return
        if _below_any(real_parent, self._local):
            self._inside.add(real_parent)
            return
        self._require(canonical, named, self._local)

    def _canonical(self, uri: str) -> str:
        """``canonical_uri`` of ``uri``, from its parent's canonical form when this batch has it: a valid last
        segment appended is the whole path's canonical form (the parser only checks each segment). A file
        of a partition of 1,000,000 costs a dictionary lookup, not a parse. Anything else parses in full."""
        parent, slash, name = uri.rpartition("/")
        if (
            not slash
            or name in ("", ".", "..")
            or parent.endswith("/")
            or len(uri) > _CANONICAL_MAX_CHARS
            or CONTROL_CHARACTERS.search(name)
        ):
            return RootedFileSystem._canonical(self, uri)
        known = self._parents.get(parent)
        if known is None:
            try:
                known = RootedFileSystem._canonical(self, parent)
            except OutsideRootsError:
                return RootedFileSystem._canonical(self, uri)  # the full parse says what is wrong
            self._parents[parent] = known
        if known.endswith("/"):  # a bucket's or the file system's root: parsed in full
            return RootedFileSystem._canonical(self, uri)
        return f"{known}/{name}"

    def admit(self, *uris: str, content: bool = True) -> RootedFileSystem:
        for uri in uris:
            self._admit_one(uri, content)
        return self
