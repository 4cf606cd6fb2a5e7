"""A Spark workload on a stock Hive Metastore 3.1.3 or 4.2.0, replicated and verified at each stage.

    python bench/hive_source_spark.py [--hive 4.2.0|3.1.3] [--limit 5]

Too slow for ``make test`` (two Spark sessions, ~1 min each on 2 busy cores), so it runs here and prints its
timings. Spark talks to the metastore through Spark's Hive 3.1.3 client (``tests.peers.hive31``; the
built-in 2.3 client calls ``get_table``, which Hive 4.2 no longer answers) and writes the replication-source
workload of ``tests/integration/stock_hms_spark.py``: a first state (``mart-setup``), bootstrapped; then
append, overwrite, add/drop partition, rename, drop and re-create (``mart-change``), replayed from the
metastore's own notification log (hcatalog's ``DbNotificationListener``) in LIMIT batches. Exits 1 unless
``repl verify``'s comparison finds the replica equal to the source after both stages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from hmsrepl.hive_source.source import StockHiveSource  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.replication.verify import verify  # noqa: E402
from tests.helpers import open_store  # noqa: E402
from tests.integration.test_hive_import import _spark  # noqa: E402
from tests.integration.test_hive_source import _replicate, stock_roots  # noqa: E402
from tests.peers import hive31, hive_metastore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hive", choices=sorted(hive_metastore.RELEASES), default=hive_metastore.HIVE_4.version
    )
    parser.add_argument("--limit", type=int, default=5, help="events per incremental dump")
    args = parser.parse_args()
    os.environ["STOCK_HMS_SPARK_CONF"] = json.dumps(hive31.spark_settings(hive31.fetch().jars))
    release = hive_metastore.RELEASES[args.hive]
    differences: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hive-source-spark-") as tmp:
        root = Path(tmp)
        started = time.monotonic()
        with hive_metastore.running(release, root / "hive") as hive:
            print(f"Hive Metastore {release.version} up in {time.monotonic() - started:.1f} s", flush=True)
            warehouse = str(hive.root / "warehouse")
            source = StockHiveSource(hive.uri, **stock_roots(hive))
            target = open_store(root, "replica")
            engine = ReplicationEngine(str(root / "dumps"), source, target)
            try:
                for stage in ("mart-setup", "mart-change"):
                    began = time.monotonic()
                    _spark(stage, hive.uri, warehouse)
                    wrote = time.monotonic() - began
                    began, batches = time.monotonic(), 0
                    if stage == "mart-setup":
                        last = _replicate(engine, "REPL DUMP mart", "mart_dr")
                        batches = 1
                    current = source.get_current_notification_event_id()
                    while last < current:
                        last = _replicate(engine, f"REPL DUMP mart FROM {last} LIMIT {args.limit}", "mart_dr")
                        batches += 1
                    found = verify(source, "mart", target, "mart_dr")
                    differences += found
                    print(
                        f"{stage}: Spark {wrote:.1f} s; replicated to event {last} in {batches} dump(s), "
                        f"{time.monotonic() - began:.1f} s; verify: {found or 'equal'}",
                        flush=True,
                    )
            finally:
                source.close()
                target.close()
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
