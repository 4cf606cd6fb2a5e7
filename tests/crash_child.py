"""One catalog operation in a process of its own, for the crash tests: it may be killed at a fault point.

Run as ``python -m tests.crash_child <operation> <config JSON>`` with ``HMSREPL_FAULT_POINT`` set; the
process SIGKILLs itself there (see ``hmsrepl.faults``). It opens the metastore without housekeeping, so
what it leaves behind is exactly what the crash left.
"""

from __future__ import annotations

import json
import sys

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Partition


def run(operation: str, store: Metastore) -> None:
    catalog = store.catalog
    if operation == "drop_table":
        catalog.drop_table("s", "t")
    elif operation == "drop_partition":
        catalog.drop_partitions("s", "p", [["a"]])
    elif operation == "truncate":
        catalog.truncate_table("s", "t")
    elif operation == "truncate_partitioned":
        catalog.truncate_table("s", "p")
    elif operation == "overwrite":
        catalog.insert(
            "s", "t", new_files=[catalog.get_table("s", "t").sd.location + "/new.parquet"], replace=True
        )
    elif operation == "drop_database":
        catalog.drop_database("s", cascade=True)
    elif operation == "add_partitions":
        parts = [Partition(values=[f"n{i}"], db_name="s", table_name="p") for i in range(50)]
        catalog.add_partitions("s", "p", parts)
    else:
        raise SystemExit(f"unknown operation '{operation}'")


if __name__ == "__main__":
    config = MetastoreConfig(**json.loads(sys.argv[2]))
    metastore = Metastore(config)
    run(sys.argv[1], metastore)
    metastore.close()
