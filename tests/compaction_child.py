"""One compaction pass in a process of its own, for the kill tests: it may be killed at a fault point.

Run as ``python -m tests.compaction_child <config JSON>`` with ``HMSREPL_FAULT_POINT`` set; the process
SIGKILLs itself there (see ``hmsrepl.faults``). It opens the metastore without housekeeping, so what it
leaves behind is exactly what the kill left.
"""

from __future__ import annotations

import json
import sys

from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore

if __name__ == "__main__":
    metastore = Metastore(MetastoreConfig(**json.loads(sys.argv[1])))
    run_cycle(metastore, force=True, cleaner_delay_seconds=0)
    metastore.close()
