"""Signed dumps: a load can refuse a dump its source did not write, or that was changed afterwards.

Path and checksum checks (``dump_validation``) stop a dump from reaching outside the source's roots, but a
dump forged with valid paths (say, one that drops a table, or points a table at another table's files)
passes them. With a key shared by the dumping and the loading side (``HMSREPL_DUMP_SIGNING_KEY``), the dump
writes ``_signature`` just before its ``_finished_dump`` acknowledgement: a manifest of every file of the
dump (relative path, size, SHA-256; ``_dumpmetadata`` included) and an HMAC-SHA256 of that manifest. A load
with the key refuses, before anything else, a dump without ``_signature``, one whose HMAC does not verify
(written with another key, or the manifest edited), and one whose files differ from the manifest (changed,
added or removed), naming the file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

from hmsrepl.replication.layout import ACK, SIGNATURE, DumpDir, DumpError
from hmsrepl.storage.base import relative_to

SIGNING_KEY_ENV = "HMSREPL_DUMP_SIGNING_KEY"
ALGORITHM = "HMAC-SHA256"
MIN_KEY_BYTES = 16
_DOMAIN = b"hmsrepl-dump-manifest-v1\n"  # what the HMAC covers is this product's manifest, nothing else


class DumpSignatureError(DumpError):
    """A load with a signing key got a dump that is unsigned, signed with another key, or altered."""


def signing_key(environ: dict[str, str] | None = None) -> bytes | None:
    """The shared key from ``HMSREPL_DUMP_SIGNING_KEY`` (None when unset); refuses keys too short to matter."""
    text = (os.environ if environ is None else environ).get(SIGNING_KEY_ENV)
    if not text:
        return None
    key = text.encode()
    if len(key) < MIN_KEY_BYTES:
        raise DumpSignatureError(
            f"{SIGNING_KEY_ENV} is {len(key)} bytes; use a random key of at least {MIN_KEY_BYTES} bytes "
            "(e.g. 'openssl rand -hex 32'), the same on the dumping and the loading side"
        )
    return key


def manifest(dump: DumpDir) -> dict[str, list[Any]]:
    """Every file of the dump but the signature and the acknowledgement: relative path -> [size, sha256]."""
    out: dict[str, list[Any]] = {}
    for status in dump.fs.list_files(dump.uri):
        relative = relative_to(status.uri, dump.uri)
        if relative in (SIGNATURE, ACK):
            continue
        digest = hashlib.sha256()
        with dump.fs.open_read(status.uri) as stream:
            while chunk := stream.read(1024 * 1024):
                digest.update(chunk)
        out[relative] = [status.size, digest.hexdigest()]
    return out


def _mac(key: bytes, files: dict[str, list[Any]]) -> str:
    text = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, _DOMAIN + text, hashlib.sha256).hexdigest()


def sign(dump: DumpDir, key: bytes) -> None:
    """Write ``_signature`` for everything the dump holds now (call it last, before the acknowledgement)."""
    files = manifest(dump)
    body = {"algorithm": ALGORITHM, "files": files, "hmac": _mac(key, files)}
    dump.fs.write_bytes(dump.path(SIGNATURE), json.dumps(body, sort_keys=True).encode())


def verify(dump: DumpDir, key: bytes) -> None:
    """Refuse (DumpSignatureError, one line) a dump that is not exactly what the holder of ``key`` signed."""
    where = f"dump '{dump.uri}' refused, nothing was applied"
    if not dump.fs.exists(dump.path(SIGNATURE)):
        raise DumpSignatureError(
            f"{where}: it has no {SIGNATURE}, and this load requires signed dumps ({SIGNING_KEY_ENV} is set); "
            "dump with the same key"
        )
    try:
        body = dump.read_json(SIGNATURE)
        files, mac = body["files"], body["hmac"]
        valid = isinstance(files, dict) and isinstance(mac, str) and body.get("algorithm") == ALGORITHM
    except (DumpError, KeyError, TypeError):
        valid = False
    if not valid or not hmac.compare_digest(_mac(key, files), mac):
        raise DumpSignatureError(
            f"{where}: its {SIGNATURE} does not verify with this load's {SIGNING_KEY_ENV}; it was not written "
            "by a source with the same key, or was edited"
        )
    found = manifest(dump)
    for relative in sorted(set(files) | set(found)):
        if relative not in found:
            raise DumpSignatureError(f"{where}: signed file '{relative}' is missing")
        if relative not in files:
            raise DumpSignatureError(f"{where}: file '{relative}' was added after the dump was signed")
        if found[relative] != files[relative]:
            raise DumpSignatureError(f"{where}: file '{relative}' was changed after the dump was signed")
