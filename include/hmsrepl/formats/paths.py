"""Normalised locations: one spelling per place, and containment that cannot be fooled by ``..``.

Locations and file URIs arrive from clients and from dumps spelled many ways (``/w/t``, ``file:/w/t``,
``file:///w/t``; ``s3a://`` for ``s3://``) and possibly with segments that lead elsewhere (``/w/t/../../x``).
``canonical_uri`` turns an allowed spelling into one form and refuses the rest, so that containment is a
segment-wise test on canonical forms (``is_below``), never a raw string prefix. Pure functions: no I/O.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

LOCAL_SCHEMES = ("file",)
S3_SCHEMES = ("s3", "s3a", "s3n")
HDFS_SCHEMES = ("hdfs",)
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class InvalidPathError(ValueError):
    """A location or file URI that is not a normalised URI of an allowed scheme."""


def show(value: Any, limit: int = 160) -> str:
    """A value quoted for a one-line message: control characters escaped, long values cut."""
    text = repr(value) if not isinstance(value, str) else repr(value)[1:-1]
    return f"'{text[:limit]}...'" if len(text) > limit else f"'{text}'"


def canonical_uri(uri: Any, max_chars: int = 4096) -> str:
    """The normalised form of a location or file URI, or InvalidPathError saying what is wrong with it.

    Local paths (``/x``, ``file:/x``, ``file:///x``, ``file://localhost/x``) become ``/x``; ``s3a://`` and
    ``s3n://`` become ``s3://``; ``hdfs://`` keeps its NameNode address, lower-cased. Segments are kept
    verbatim (never URL-decoded: ``%2E%2E`` is a directory name, not ``..``); a ``.``, ``..`` or empty
    segment is refused rather than resolved, since no writer of this product produces one and resolving
    would hide where a path was meant to lead.
    """
    if isinstance(uri, str) and is_plain_local(uri, max_chars):
        return uri  # the parse would return it unchanged: most paths a load checks are such
    scheme, authority, path = parse_uri(uri, max_chars=max_chars)
    return path if scheme == "file" else f"{scheme}://{authority}{path}"


def is_plain_local(uri: str, max_chars: int = 4096) -> bool:
    """Whether ``uri`` is a local path that ``canonical_uri`` returns unchanged, decided without the parse:
    absolute, no trailing ``/``, no empty segment, none that starts with ``.`` (so no ``.`` or ``..``), only
    printable characters (so no control character), at most ``max_chars`` long. Stricter than the parser
    (a name starting with ``.`` is valid): what this refuses is left to the parser, which decides."""
    return (
        1 < len(uri) <= max_chars
        and uri[0] == "/"
        and uri[-1] != "/"
        and "//" not in uri
        and "/." not in uri
        and uri.isprintable()
    )


def parse_uri(uri: Any, *, lenient: bool = False, max_chars: int | None = 4096) -> tuple[str, str, str]:
    """The one parser of locations and file URIs: ``(scheme, authority, path)``, ``path`` starting with ``/``.

    Strict (the default, ``canonical_uri``): what files and dumps may name; ``.``/``..``/empty segments and
    schemes other than local, S3 and HDFS are refused. ``lenient``: what a client may send the metastore
    as a location (``metastore.locations``): any ``scheme://authority`` form, and ``.``/``..``/repeated
    slashes of local and HDFS-like paths resolved lexically (POSIX rules), S3 keys still refused them (S3
    keeps them as literal key characters). Either way: never URL-decoded, NUL and control characters refused,
    local ``file:`` URIs with no host or ``localhost`` only, S3 aliases spelled ``s3``.
    """
    if not isinstance(uri, str) or not uri or (lenient and not uri.strip()):
        raise InvalidPathError("is empty" if lenient else "is empty or not a string")
    if max_chars is not None and len(uri) > max_chars:
        raise InvalidPathError(f"is longer than {max_chars} characters")
    found = CONTROL_CHARACTERS.search(uri)
    if found:
        raise InvalidPathError(
            f"contains the control character {ord(found.group()):#04x}"
            if lenient
            else "holds a NUL or control character"
        )
    if lenient:
        return _parse_lenient(uri)
    if uri.startswith("/"):
        return _strict_path("file", "", uri)
    scheme, colon, rest = uri.partition(":")
    scheme = scheme.lower()
    if not colon or scheme not in LOCAL_SCHEMES + S3_SCHEMES + HDFS_SCHEMES:
        shown = scheme if colon else "none (a relative path)"
        raise InvalidPathError(
            f"has scheme {shown}; only absolute local paths, file:, s3/s3a/s3n and hdfs URIs are allowed"
        )
    if scheme in LOCAL_SCHEMES:
        path = _local_part(rest)
        if not path.startswith("/"):
            raise InvalidPathError("is not an absolute path")
        return _strict_path("file", "", path)
    if not rest.startswith("//"):
        form = "hdfs://namenode/path" if scheme in HDFS_SCHEMES else "s3://bucket/key"
        raise InvalidPathError(f"is not of the form {form}")
    authority, slash, path = rest[2:].partition("/")
    if scheme in HDFS_SCHEMES:
        if not authority or "@" in authority:
            raise InvalidPathError("has no plain NameNode address (hdfs://namenode:port/path)")
        return _strict_path("hdfs", authority.lower(), slash + path)
    if not authority or "@" in authority:
        raise InvalidPathError("has no plain bucket name (s3://bucket/key)")
    return _strict_path("s3", authority, slash + path)


def _local_part(rest: str) -> str:
    """The native path of a ``file:`` URI's remainder, not URL-decoded: ``//host/p`` only for no host or
    ``localhost``."""
    if not rest.startswith("//"):
        return rest
    authority, slash, path = rest[2:].partition("/")
    if authority not in ("", "localhost"):
        raise InvalidPathError(f"names host {show(authority)}; a file: URI must be local")
    return slash + path


def _strict_path(scheme: str, authority: str, path: str) -> tuple[str, str, str]:
    """A strict path: one trailing ``/`` dropped, no ``.``, ``..`` or empty segment."""
    body = path[:-1] if len(path) > 1 and path.endswith("/") else path
    if body and body != "/":
        for segment in body.split("/")[1:]:
            if segment in ("", ".", ".."):
                raise InvalidPathError(f"has a {show(segment) if segment else 'empty'} path segment")
    return scheme, authority, body or "/"


def local_path_of(uri: str) -> str:
    """The native path a local location names, exactly as the kernel will be given it (not normalised;
    lenient spellings: a plain path, ``file:`` with no host or ``localhost``)."""
    scheme, rest = _lenient_scheme(uri)
    if scheme != "file":
        raise InvalidPathError(f"is not a local path ({scheme}://)")
    try:
        path = _local_part(rest)
    except InvalidPathError:
        authority = rest[2:].partition("/")[0]
        raise InvalidPathError(f"names host '{authority}'; only local file URIs are supported") from None
    if not path.startswith("/"):
        raise InvalidPathError("is a relative path; give an absolute path or a file:/ URI")
    return path


def _lenient_scheme(uri: str) -> tuple[str, str]:
    """(lower-case scheme, rest after ``scheme:``) of a client's location; plain paths are ``file``."""
    if "://" in uri:
        scheme, rest = uri.split("://", 1)
        if not scheme or not all(ch.isalnum() or ch in "+-." for ch in scheme):
            raise InvalidPathError("has a malformed scheme")
        return scheme.lower(), "//" + rest
    if uri.lower().startswith("file:"):
        return "file", uri[len("file:") :]
    return "file", "/" + uri.lstrip("/") if uri.startswith("/") else uri


def _parse_lenient(uri: str) -> tuple[str, str, str]:
    scheme, rest = _lenient_scheme(uri)
    if scheme == "file":
        return "file", "", posixpath.normpath("/" + local_path_of(uri).lstrip("/"))  # normpath keeps '//'
    authority, _, key = rest[2:].partition("/")
    if not authority:
        raise InvalidPathError(f"has no bucket or host after '{scheme}://'")
    if scheme in S3_SCHEMES:
        segments = key.rstrip("/").split("/") if key.rstrip("/") else []
        if any(segment in ("", ".", "..") for segment in segments):
            raise InvalidPathError("has an empty, '.' or '..' segment, which S3 would keep as a literal key")
        return "s3", authority, "/" + "/".join(segments)
    return scheme, authority.lower(), posixpath.normpath("/" + key)


def child_name(uri: str, parent: str, max_chars: int = 4096) -> str | None:
    """The name of ``uri`` when it is the direct child of canonical ``parent`` spelled as ``canonical_uri``
    would give it (``parent``, a ``/`` and one segment that is not ``.``, ``..`` or empty and holds only
    printable characters), else None: then ``canonical_uri(uri)`` is ``uri`` itself and costs no parse (a
    table's partitions in Hive's layout, checked after their table). Anything else is left to the parser."""
    size = len(parent)
    if (
        len(uri) > max_chars
        or not uri.startswith(parent)
        or not uri.startswith("/", size)
        or parent.endswith("/")
    ):
        return None
    name = uri[size + 1 :]
    if "/" in name or name in ("", ".", "..") or not name.isprintable():
        return None
    return name


def is_below(child: str, root: str, *, strictly: bool = False) -> bool:
    """Whether canonical ``child`` is ``root`` or below it (segment-wise; ``strictly``: below only)."""
    if child == root:
        return not strictly
    return child.startswith(root if root.endswith("/") else root + "/")


def check_relative_path(text: Any, what: str) -> None:
    """A path below an object's location (``subdir``): relative, clean segments, no separators to escape."""
    if not isinstance(text, str):
        raise InvalidPathError(f"{what} is not a string")
    if not text:
        return
    if text.startswith("/") or "\\" in text or CONTROL_CHARACTERS.search(text):
        raise InvalidPathError(
            f"{what} {show(text)} must be a relative path without '\\' or control characters"
        )
    for segment in text.rstrip("/").split("/"):
        if segment in ("", ".", ".."):
            raise InvalidPathError(
                f"{what} {show(text)} has a {show(segment) if segment else 'empty'} segment"
            )
