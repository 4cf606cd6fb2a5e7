"""Hive's guard on databases marked as sources of replication: no table is renamed into or out of them.

Hive's own replication reads a database's events by the database they are logged under, so a table renamed
across databases would escape a dump; Hive therefore refuses such a rename when either database is a source
of replication (``HiveMetaStore.isRenameAllowed``: the database parameter ``repl.source.for``, a
comma-separated list of policy names, is set and not empty), answering a ``MetaException`` from its alter
handler. This product's own dumps follow such renames (``replication.crossing``), but a database Hive's REPL
(or a tool that trusts the marker) replicates keeps Hive's promise here.
"""

from __future__ import annotations

from hmsrepl.exceptions import MetastoreError
from hmsrepl.metastore.model import Database

SOURCE_OF_REPLICATION = "repl.source.for"  # Hive's ReplConst.SOURCE_OF_REPLICATION
DEFAULT_CATALOG = "hive"


class RenameAcrossReplicationSourceError(MetastoreError):
    """A table rename across databases where one of them is a source of replication (Hive: MetaException)."""


def is_source_of_replication(db: Database) -> bool:
    """Hive's ``ReplChangeManager.isSourceOfReplication``: ``repl.source.for`` is set to a non-empty value."""
    return bool(db.parameters.get(SOURCE_OF_REPLICATION))


def check_rename_allowed(old_db: Database, new_db: Database, table_name: str, new_table_name: str) -> None:
    """Refuse moving ``old_db.table_name`` to ``new_db.new_table_name`` if either database is a source of
    replication; a rename within one database is always allowed."""
    if old_db.name.lower() == new_db.name.lower():
        return
    marked = next((db for db in (old_db, new_db) if is_source_of_replication(db)), None)
    if marked is None:
        return
    old = f"{DEFAULT_CATALOG}.{old_db.name.lower()}.{table_name}"
    new = f"{DEFAULT_CATALOG}.{new_db.name.lower()}.{new_table_name}"
    policies = marked.parameters[SOURCE_OF_REPLICATION]
    # Hive's message first, as it words it (clients may match it), then why and what to do.
    raise RenameAcrossReplicationSourceError(
        f"Alter table not allowed for table {old}to new table = {new}: database '{marked.name.lower()}' "
        f"is a source of replication ({SOURCE_OF_REPLICATION}={policies}); rename the table within its "
        f"database, or copy it into '{new_db.name.lower()}' (CREATE TABLE ... AS SELECT) and drop it"
    )
