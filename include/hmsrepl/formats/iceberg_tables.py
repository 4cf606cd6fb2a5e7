"""Which files an Iceberg table may name: only files below its own location.

An Iceberg table in a Hive metastore is a table with ``table_type=ICEBERG`` whose ``metadata_location``
names a metadata JSON (Iceberg's Hive catalog writes it, and every later one, as
``<table location>/metadata/<version>-<uuid>.metadata.json``); that JSON names manifest lists, manifests and
data files by absolute path. Replication copies what lies below the table's location and reads the copies,
so a path that leaves the location (``<location>/../../elsewhere/conf.json``, another directory, a path
spelled with ``.``/``..``) would make a load read and write outside every root. The metastore refuses such
a ``metadata_location`` when a table is created or altered, a load's dump validation refuses it in a dump,
and a load refuses paths inside the metadata that leave the table's location.

Containment is tested on normalised forms (``formats.paths.canonical_uri`` for local and S3 paths, the same
rules for other schemes such as ``hdfs://``: one spelling per place, ``.``, ``..`` and empty segments
refused, not resolved), never as a string prefix. Pure functions: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hmsrepl.formats.paths import CONTROL_CHARACTERS, InvalidPathError, canonical_uri, is_below, show

TABLE_TYPE = "table_type"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
METADATA_KEYS = (METADATA_LOCATION, PREVIOUS_METADATA_LOCATION)


def is_iceberg(parameters: Mapping[str, str]) -> bool:
    return str(parameters.get(TABLE_TYPE, "")).upper() == "ICEBERG"


def path_below(path: str, location: str) -> str | None:
    """The relative path of ``path`` strictly below ``location`` (both normalised), or None when it is not
    below it or either is not a clean URI."""
    child, root = _normalised(path), _normalised(location)
    if child is None or root is None or not is_below(child, root, strictly=True):
        return None
    return child[len(root.rstrip("/")) + 1 :]


_OTHER_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/]+)(/.*)?")


def _normalised(uri: str) -> str | None:
    """One spelling per place: local paths and S3 as ``canonical_uri`` has them; other file systems a
    metastore may hold tables on (``hdfs://nn:8020/...``) as ``scheme://authority/path`` with a lower-case
    scheme and the same refusal of ``.``, ``..`` and empty segments. None for anything else."""
    try:
        return canonical_uri(uri)
    except InvalidPathError:
        pass
    found = _OTHER_SCHEME.fullmatch(uri) if isinstance(uri, str) else None
    if found is None or CONTROL_CHARACTERS.search(uri):
        return None
    scheme, authority, path = found.group(1).lower(), found.group(2), found.group(3) or "/"
    body = path[:-1] if len(path) > 1 and path.endswith("/") else path
    if body != "/" and any(segment in ("", ".", "..") for segment in body.split("/")[1:]):
        return None
    return f"{scheme}://{authority}{'' if body == '/' else body}"


def metadata_refusal(table_name: str, parameters: Mapping[str, str], location: str | None) -> str | None:
    """Why an Iceberg table's metadata location(s) may not be stored, as one line; None if they may."""
    if not is_iceberg(parameters):
        return None
    for key in METADATA_KEYS:
        path = parameters.get(key)
        if path and (not location or path_below(path, location) is None):
            return (
                f"Iceberg table '{table_name}': {key} {show(path)} is not below the table's location "
                f"{show(location or '')}; keep the metadata in '<location>/metadata/' (no '.' or '..' "
                "segments, no 'write.metadata.path' elsewhere)"
            )
    return None
