"""Whether a Hive 3 client's INSERT event replaced the data it names (INSERT OVERWRITE) or added to it.

Hive 3 put ``bool replace`` at field 1 of ``InsertEventRequestData``, where Hive 2.3 (the wire shape this
server reads, for Spark's built-in client) has the list of files: the flag cannot be read, so it is told
from the location instead. Hive 3's overwrite leaves exactly the new files there (the earlier ones went to
the trash or were deleted); an append leaves the earlier ones beside them. Without this, an overwrite's
INSERT would log the new files as added to the old ones, and a replica would read both until the listing
is reconciled.
"""

from __future__ import annotations

from collections.abc import Sequence

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.metastore.capture import relative_names
from hmsrepl.metastore.catalog import CatalogService
from hmsrepl.metastore.file_capture import stat_listing


def hive3_overwrote(
    catalog: CatalogService,
    db_name: str,
    table_name: str,
    partition_values: Sequence[str] | None,
    files: Sequence[str],
) -> bool:
    """True when the written table's or partition's location holds exactly ``files`` (one listing of sizes,
    nothing read). An insert into an empty location counts as one: both record the same listing."""
    if not files:
        return False
    try:
        table = catalog.get_table(db_name, table_name)
        target = (
            catalog.get_partition(db_name, table_name, list(partition_values)) if partition_values else table
        )
    except NoSuchObjectError:
        return False  # the insert itself reports what is missing
    location = target.sd.location or ""
    return set(stat_listing(catalog.cm.files, location)) == set(relative_names(location, files))
