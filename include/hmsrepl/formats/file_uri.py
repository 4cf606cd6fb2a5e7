"""The encoded file URI of events and ``_files``: ``fileuri#checksum#cmrooturi#subdir[#versionid]``.

The first four parts are Hive's layout. ``fileuri`` is where the file lived when the event happened,
``checksum`` identifies that exact content (``crc32c-<8 hex>-<size>``, see ``storage.checksum``),
``cmrooturi`` is the change-manager root the file is recycled into if it is later dropped or replaced, and
``subdir`` is the directory between the table/partition location and the file (e.g. a ``delta_*`` dir), so
a loader can put the file at the same place under the target location. Empty parts are allowed; trailing
``#`` separators may be omitted on read.

Object versions (beyond Hive)
-----------------------------
Where the store keeps object versions (an S3 bucket with versioning on), events also record the version id
of the exact object they describe, as an optional fifth part: ``fileuri#checksum#cmrooturi#subdir#versionid``.
It is written only when there is a version id, so unversioned files keep Hive's four-part form byte for
byte, and Hive's own decoder (``ReplChangeManager.decodeFileUri``) reads the first four parts and ignores a
fifth, so the extension does not break Hive tooling. The id is percent-encoded (every byte outside
``A-Z a-z 0-9 - . _ ~``): S3 version ids are opaque strings that may hold ``/`` or ``+``, and encoding them
keeps ``#`` out of the part. The version does not go into ``fileuri`` itself: a suffix such as
``?versionId=`` would be ambiguous (``?`` is legal in an S3 key, and keys are never URL-decoded here), and
``fileuri`` must stay the file's plain location, which loaders compare and re-root.

A *versioned reference* is the one-string form of "this object at this version" that
``ChangeManager.resolve`` returns and that storage read methods (``open_read``, ``checksum``, ``exists``,
copies) accept: the version id, percent-encoded, in the user-info part of the authority::

    s3://<versionid>@<bucket>/<key>      e.g.  s3://3HL4kqtJ%2BlcpX%2FroD@warehouse/sales.db/t/p=1/f.parquet

It is unambiguous because a bucket name never contains ``@`` and the encoded id holds neither ``@`` nor
``/``, so the authority always splits at the last ``@``; the key after the bucket is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

SEPARATOR = "#"
PARTS = ("file_uri", "checksum", "cmroot", "subdir")


def encode_version_id(version_id: str) -> str:
    """Percent-encode an opaque version id so it holds none of ``# / @ ? %``-ambiguities (lossless)."""
    return quote(version_id, safe="")


def decode_version_id(text: str) -> str:
    return unquote(text)


def versioned_reference(uri: str, version_id: str | None) -> str:
    """``scheme://<encoded version>@authority/path``; the plain URI when there is no version id."""
    if not version_id:
        return uri
    scheme, sep, rest = uri.partition("://")
    if not sep or not scheme or "@" in rest.split("/", 1)[0]:
        raise ValueError(f"cannot pin a version of '{uri}': it needs a 'scheme://authority/...' URI")
    return f"{scheme}://{encode_version_id(version_id)}@{rest}"


def split_versioned_reference(uri: str) -> tuple[str, str | None]:
    """Return (plain URI, version id or None): the inverse of ``versioned_reference``."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri, None
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return uri, None
    encoded, _, host = authority.rpartition("@")
    if not encoded:
        raise ValueError(f"'{uri}' has an empty version id before '@'")
    return f"{scheme}://{host}{slash}{path}", decode_version_id(encoded)


@dataclass(frozen=True)
class EncodedFileUri:
    file_uri: str
    checksum: str = ""
    cmroot: str = ""
    subdir: str = ""
    version_id: str = ""  # raw (decoded) id; empty when the store keeps no versions

    def encode(self) -> str:
        for part_name in PARTS:
            if SEPARATOR in getattr(self, part_name):
                raise ValueError(
                    f"{part_name} '{getattr(self, part_name)}' contains '#', which cannot be encoded"
                )
        parts = [self.file_uri, self.checksum, self.cmroot, self.subdir]
        if self.version_id:
            parts.append(encode_version_id(self.version_id))
        return SEPARATOR.join(parts)

    @property
    def file_name(self) -> str:
        return file_name_of(self.file_uri)

    @property
    def versioned_uri(self) -> str:
        """A reference to the exact object version the event saw (``file_uri`` when unversioned)."""
        return versioned_reference(self.file_uri, self.version_id or None)

    @classmethod
    def decode(cls, text: str) -> EncodedFileUri:
        parts = split_encoded(text)
        version = parts[4]
        return cls(parts[0], parts[1], parts[2], parts[3], decode_version_id(version) if version else "")


def split_encoded(text: str) -> list[str]:
    """The five parts of an encoded file URI as written (the version id still percent-encoded), for callers
    that need one part of each of many entries (a load asks a file's path and checksum several times, for
    every file of a bootstrap) without building an ``EncodedFileUri``; malformed text is refused alike."""
    parts = text.split(SEPARATOR)
    count = len(parts)
    if not parts[0] or count > 5:
        raise ValueError(
            f"malformed file URI '{text}'; expected 'fileuri#checksum#cmrooturi#subdir[#versionid]'"
        )
    if count < 5:
        parts += [""] * (5 - count)
    return parts


def file_name_of(file_uri: str) -> str:
    """The last segment of a file's URI: its name."""
    return file_uri.rstrip("/").rsplit("/", 1)[-1]
