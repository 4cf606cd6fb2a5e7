"""Normalised locations: one spelling per place, and containment that cannot be fooled by ``..``.

Locations and file URIs arrive from clients and from dumps spelled many ways (``/w/t``, ``file:/w/t``,
``file:///w/t``; ``s3a://`` for ``s3://``) and possibly with segments that lead elsewhere (``/w/t/../../x``).
``canonical_uri`` turns an allowed spelling into one form and refuses the rest, so that containment is a
segment-wise test on canonical forms (``is_below``), never a raw string prefix. Pure functions: no I/O.
"""

from __future__ import annotations

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
    ``s3n://`` become ``s3://``; ``hdfs://`` keeps its NameNode address, lower-cased. Segments are kept verbatim (never URL-decoded: ``%2E%2E`` is a directory
    name, not ``..``); a ``.``, ``..`` or empty segment is refused rather than resolved, since no writer of
    this product produces one and resolving would hide where a path was meant to lead.
    """
    if not isinstance(uri, str) or not uri:
        raise InvalidPathError("is empty or not a string")
    if len(uri) > max_chars:
        raise InvalidPathError(f"is longer than {max_chars} characters")
    if CONTROL_CHARACTERS.search(uri):
        raise InvalidPathError("holds a NUL or control character")
    if uri.startswith("/"):
        prefix, path = "", uri
    else:
        scheme, colon, rest = uri.partition(":")
        scheme = scheme.lower()
        if not colon or scheme not in LOCAL_SCHEMES + S3_SCHEMES + HDFS_SCHEMES:
            shown = scheme if colon else "none (a relative path)"
            raise InvalidPathError(
                f"has scheme {shown}; only absolute local paths, file:, s3/s3a/s3n and hdfs URIs are allowed"
            )
        if scheme in LOCAL_SCHEMES:
            if rest.startswith("//"):
                authority, slash, path = rest[2:].partition("/")
                if authority not in ("", "localhost"):
                    raise InvalidPathError(f"names host {show(authority)}; a file: URI must be local")
                path = slash + path
            else:
                path = rest
            if not path.startswith("/"):
                raise InvalidPathError("is not an absolute path")
            prefix = ""
        elif scheme in HDFS_SCHEMES:
            if not rest.startswith("//"):
                raise InvalidPathError("is not of the form hdfs://namenode/path")
            authority, slash, path = rest[2:].partition("/")
            if not authority or "@" in authority:
                raise InvalidPathError("has no plain NameNode address (hdfs://namenode:port/path)")
            prefix, path = f"hdfs://{authority.lower()}", slash + path
        else:
            if not rest.startswith("//"):
                raise InvalidPathError("is not of the form s3://bucket/key")
            bucket, slash, path = rest[2:].partition("/")
            if not bucket or "@" in bucket:
                raise InvalidPathError("has no plain bucket name (s3://bucket/key)")
            prefix, path = f"s3://{bucket}", slash + path
    body = path[:-1] if len(path) > 1 and path.endswith("/") else path
    segments = body.split("/")[1:] if body != "/" else []
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidPathError(f"has a {show(segment) if segment else 'empty'} path segment")
    return prefix + (body if body else "/")


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
