"""Locations as the metastore checks them: normalised, scheme-aware, and contained in configured roots.

A location is data the client sends, and the metastore later lists, checksums, moves and deletes what lies
under it. Before any of that it must be clear *which* directory a location names and whether that directory
belongs to the object: ``<warehouse>/a.db/../b.db`` is database ``b``'s directory, ``file:///w/x`` is
``/w/x``, and a symlink inside the warehouse may point anywhere. This module answers those questions and
nothing else (the catalog decides what to refuse, see ``LocationPolicy``).

- ``normalise`` is pure (``formats.paths.parse_uri``, the project's one parser, in its lenient mode): one
  canonical ``Location`` per spelling (``file:`` URIs and plain paths are the same
  local path; ``s3a://`` and ``s3n://`` are ``s3://``), ``.``/``..`` and repeated slashes resolved lexically
  for local paths, NUL and control characters refused. It never URL-decodes: ``p=k%3Av`` is a directory
  named with a literal ``%3A`` (Hive's escaping), a different directory from ``p=k:v``.
- ``resolve`` adds what the file system says: a local path's symlinks are followed (``realpath``), exactly
  as the kernel will when the path is used, so a containment check sees where a delete would land. S3 keys
  have no links and no directory semantics, so ``.``, ``..`` and empty segments, which S3 keeps as literal key
  characters but Hadoop clients would read otherwise, are refused instead of interpreted.
- ``is_within``/``overlaps`` compare canonical forms segment by segment (``/w/ab`` is not inside ``/w/a``).

Stored locations stay exactly as the client sent them: the canonical form is used for checks only.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from hmsrepl.formats import paths
from hmsrepl.storage.rooted import plain_entry, real_path, real_path_in

S3_ALIASES = paths.S3_SCHEMES


class BadLocationError(ValueError):
    """A location that cannot be used at all (control characters, relative, malformed)."""


@dataclass(frozen=True)
class Location:
    """A canonical location: lower-case scheme (``file``, ``s3``, ...), authority (bucket, host) and path.

    ``path`` starts with ``/``, has no empty, ``.`` or ``..`` segments and no trailing ``/`` (``/`` itself
    is the root of its scheme and authority).
    """

    scheme: str
    authority: str
    path: str

    def __str__(self) -> str:
        if self.scheme == "file":
            return self.path
        return f"{self.scheme}://{self.authority}{'' if self.path == '/' else self.path}"

    def is_within(self, root: Location) -> bool:
        """True when this location is ``root`` or below it (whole segments: ``/w/ab`` is not in ``/w/a``)."""
        if (self.scheme, self.authority) != (root.scheme, root.authority):
            return False
        if root.path == "/":
            return True
        return self.path == root.path or self.path.startswith(root.path + "/")

    def overlaps(self, other: Location) -> bool:
        """True when one of the two holds the other (deleting either would touch the other)."""
        return self.is_within(other) or other.is_within(self)

    def ancestors(self) -> list[Location]:
        """Every location strictly above this one, nearest first (``/a/b`` -> ``/a``, ``/``)."""
        out = []
        path = self.path
        while path != "/":
            path = posixpath.dirname(path)
            out.append(Location(self.scheme, self.authority, path))
        return out


def check_characters(uri: str) -> None:
    """Refuse NUL and control characters: they cut paths short in C calls or hide what a log shows."""
    found = paths.CONTROL_CHARACTERS.search(uri)
    if found:
        raise BadLocationError(f"contains the control character {ord(found.group()):#04x}")


def local_path_of(uri: str) -> str:
    """The native path a local location names, exactly as the kernel will be given it (not normalised)."""
    if not uri or not uri.strip():
        raise BadLocationError("is empty")
    check_characters(uri)
    try:
        return paths.local_path_of(uri)
    except paths.InvalidPathError as exc:
        raise BadLocationError(str(exc)) from None


@functools.lru_cache(maxsize=16_384)
def normalise(uri: str) -> Location:
    """The canonical form of ``uri`` (pure: no file system access). Raises ``BadLocationError``.

    The project's one parser (``formats.paths.parse_uri``) in its lenient mode: a client's ``..`` in a
    local or HDFS-like path is resolved lexically here (``canonical`` resolves it as the kernel does).

    Remembered per string (a ``Location`` is immutable; a refusal is not remembered): every location check
    compares the new location with the databases around it, whose locations are the same strings each time."""
    try:
        scheme, authority, path = paths.parse_uri(uri, lenient=True, max_chars=None)
    except paths.InvalidPathError as exc:
        raise BadLocationError(str(exc)) from None
    return Location(scheme, authority, path)


def resolve(location: Location) -> Location:
    """``location`` with local symlinks followed (existing parts), else as is."""
    if location.scheme != "file":
        return location
    return Location("file", "", real_path(location.path))


def canonical(uri: str) -> Location:
    """The form every containment check compares: where the file system will really act.

    A local path is resolved as the kernel resolves it, component by component from the raw path
    (``realpath``): ``<link>/..`` is the parent of the link's *target*, which lexical normalisation first
    would get wrong. Other schemes are their normalised form.
    """
    loc = normalise(uri)
    if loc.scheme != "file":
        return loc
    return Location("file", "", real_path(local_path_of(uri)))


class TreeResolver:
    """``canonical`` for many locations of one tree, checked together (a table's partitions): each parent
    directory is resolved once, and a location whose parent was resolved costs one ``lstat`` (an entry that
    is no symlink, or no entry at all, is where its resolved parent names it, as the kernel would act; a
    symlink is resolved in full). Spellings the lexical normaliser changes (``..``, ``.``, repeated or
    trailing slashes) are resolved in full too, from the raw path. Made per check, never kept: a directory's
    answer is shared only for the length of one check."""

    def __init__(self) -> None:
        self._parents: dict[str, str] = {}

    def canonical(self, uri: str) -> Location:
        loc = normalise(uri)
        if loc.scheme != "file":
            return loc
        path = local_path_of(uri)
        if path != loc.path or path == "/":
            return Location("file", "", real_path(path))
        parent = path.rsplit("/", 1)[0] or "/"
        real_parent = self._parents.get(parent)
        if real_parent is None:
            real_parent = self._parents[parent] = real_path(parent)
        return Location("file", "", real_path_in(path, real_parent))


class ChildResolver:
    """``canonical`` for the direct children of one directory, answered without a parse: a URI spelled as
    that directory's own URI, a ``/`` and one plain name (a table's partitions in Hive's layout, and a
    replica's version directories beside them) is its parent's canonical location and that name, after one
    ``lstat`` of a local entry. So every answer lies directly inside the parent; anything else answers None,
    for the caller to resolve and check in full: a local entry that is a symlink, a name that is empty, holds
    a ``/``, starts with ``.`` (``.``, ``..``) or is not printable, another spelling of the parent, or a
    parent whose local path is not already in normal form."""

    def __init__(self, uri: str, location: Location) -> None:
        """``uri``: the parent as stored; ``location``: its ``canonical`` form (resolved by the caller)."""
        self.parent = uri.rstrip("/")
        self.location = location
        self.local_prefix = ""  # the parent's local path and a "/", as the kernel is given a child's

    @classmethod
    def of(cls, uri: str, location: Location) -> ChildResolver | None:
        """A resolver for the children of ``uri`` (canonical form ``location``), or None where its spelling
        leaves a child's form to the parser: a root, or a local path that normalising would change."""
        try:
            lexical = normalise(uri)
        except BadLocationError:
            return None
        if lexical.path == "/" or location.path == "/":
            return None
        resolver = cls(uri, location)
        if lexical.scheme == "file":
            local = local_path_of(uri).rstrip("/")
            if local != lexical.path:
                return None
            resolver.local_prefix = local + "/"
        return resolver

    def canonical(self, uri: str) -> Location | None:
        """``canonical(uri)`` when ``uri`` is a plain child, else None."""
        name = paths.child_name(uri, self.parent)
        if name is None or name[0] == ".":  # dotted names (hidden entries too) take the full checks
            return None
        parent = self.location
        if parent.scheme == "file" and not plain_entry(self.local_prefix + name):
            return None  # a symlink: it leads elsewhere, which only the full checks may judge
        return Location(parent.scheme, parent.authority, f"{parent.path}/{name}")


def canonical_or_none(uri: str | None) -> Location | None:
    """The canonical form, or ``None`` for an empty or unusable location (for stored, possibly old, data)."""
    if not uri:
        return None
    try:
        return canonical(uri)
    except BadLocationError:
        return None


#: Characters of a location's lookup key that are stored and indexed: a B-tree entry must stay under
#: PostgreSQL's ~2,700 bytes and MariaDB's 3,072 at four bytes a character. A longer key is cut: the cut key
#: still starts with every prefix up to this length, so it remains a candidate that the exact check sorts out.
LOCATION_KEY_CHARS = 600


def key_of(location: Location) -> str:
    """The lookup key of a canonical location: its string form with one trailing ``/``, cut to
    ``LOCATION_KEY_CHARS``. Every location inside ``location`` has a key starting with this key, and keys
    sort by code point on the column's binary collation, so "inside" is one index range and "above" a few
    equality look-ups."""
    text = str(location)
    return (text if text.endswith("/") else text + "/")[:LOCATION_KEY_CHARS]


def location_key(uri: str | None) -> str | None:
    """The lookup key stored beside a location (``None`` for none or an unusable one: it overlaps nothing)."""
    loc = canonical_or_none(uri)
    return None if loc is None else key_of(loc)


def key_range_end(key: str) -> str:
    """The smallest string above every string that starts with ``key`` (code point order)."""
    while key:
        last = ord(key[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:  # surrogates are not characters: no stored key holds one
            last = 0xE000
        if last <= 0x10FFFF:
            return key[:-1] + chr(last)
        key = key[:-1]
    raise ValueError("a key made only of U+10FFFF has no end")


def is_within(uri: str, root: str) -> bool:
    """Whether ``uri`` lies in ``root`` (both canonicalised; an unusable location is in nothing)."""
    child, parent = canonical_or_none(uri), canonical_or_none(root)
    return child is not None and parent is not None and child.is_within(parent)


def within_any(location: Location, roots: Iterable[Location]) -> Location | None:
    """The first root holding ``location``, if any."""
    return next((root for root in roots if location.is_within(root)), None)


def safe_join(root: str, relative: str) -> str | None:
    """``root/relative`` when ``relative`` stays inside ``root`` lexically, else ``None`` (no ``..`` escape)."""
    check_characters(relative)
    joined = posixpath.normpath(posixpath.join(root, relative.lstrip("/")))
    base = posixpath.normpath(root)
    return joined if joined == base or joined.startswith(base.rstrip("/") + "/") else None
