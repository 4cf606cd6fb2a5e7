"""Load of one incremental event adding one file into a partition of an S3 replica, by what it holds.

    python bench/bench_s3_append_load.py [--files 1,100,1000] [--repeats 3]

Source and replica warehouses sit in two versioned buckets of an S3-protocol server (moto's server mode, a
separate process on loopback, started here and stopped after). For each size a partition of that many 4 KB
objects is written and bootstrapped (not timed); each repeat then appends one 4 KB object on the source (an
INSERT naming it), dumps that one event and times ``REPL LOAD`` of it, counting the S3 requests the load
makes by operation (botocore's ``before-call`` hook on the store's client). The baseline, timed in the same
run, is one server-side copy of the new object (CopyObject): what copying the change alone costs.

moto answers from memory on this machine's CPU, so the request counts carry over to a real store and the
times only as ratios. Prints median and min seconds over the repeats, each median's ratio to the 1-file
case, and the median request count per operation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

os.environ["HMSREPL_REPL_RETIRE_GRACE_SECONDS"] = "0"  # replaced versions go inside the timed load

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.storage import filesystem_for  # noqa: E402
from hmsrepl.storage.s3 import default_s3_filesystem, reset_default_s3_filesystem  # noqa: E402
from tests.helpers import make_partition, make_table  # noqa: E402
from tests.s3server import aws_test_environment, create_bucket, moto_s3_server  # noqa: E402

OBJECT_BYTES = 4096


class RequestCounter:
    """S3 requests by operation, from the moment it is reset."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        default_s3_filesystem().client.meta.events.register("before-call.s3", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def take(self) -> Counter[str]:
        out, self.calls = self.calls, Counter()
        return out


def open_store(root: Path, name: str, bucket: str) -> Metastore:
    return Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{root}/{name}.db",
            warehouse=f"s3://{bucket}/warehouse",
            cmroot=f"s3://{bucket}/cmroot",
            trash_root="",
        )
    )


def put(uri: str) -> str:
    filesystem_for(uri).write_bytes(uri, os.urandom(OBJECT_BYTES))
    return uri


def bench_size(root: Path, client: Any, files: int, repeats: int, counter: RequestCounter) -> dict[str, Any]:
    src_bucket = create_bucket(client, f"src-{files}", versioned=True)
    dst_bucket = create_bucket(client, f"dst-{files}", versioned=True)
    source = open_store(root, f"src-{files}", src_bucket)
    target = open_store(root, f"dst-{files}", dst_bucket)
    try:
        engine = ReplicationEngine(f"s3://{src_bucket}/repl", source, target)
        source.catalog.create_database(Database(name="bench"))
        table = source.catalog.create_table(make_table("bench", "t", partition_keys=("p",)))
        [part] = source.catalog.add_partitions("bench", "t", [make_partition(table, "a")])
        for i in range(files):
            put(f"{part.sd.location}/part-{i:05d}.parquet")
        source.catalog.insert("bench", "t", ["a"])
        boot = engine.execute("REPL DUMP bench").dump_dir
        engine.execute(f"REPL LOAD bench_dr FROM '{boot}'")
        times: dict[str, list[float]] = {"CopyObject of the file": [], "REPL LOAD": []}
        requests: list[Counter[str]] = []
        for r in range(repeats):
            new = put(f"{part.sd.location}/new-{r:03d}.parquet")
            source.catalog.insert("bench", "t", ["a"], new_files=[new])
            last = engine.execute("REPL STATUS bench_dr")
            dump = engine.execute(f"REPL DUMP bench FROM {last}").dump_dir
            start = time.perf_counter()
            client.copy_object(
                Bucket=dst_bucket,
                Key=f"baseline/new-{r:03d}",
                CopySource={"Bucket": src_bucket, "Key": new[5:].split("/", 1)[1]},
            )
            copied = time.perf_counter()
            counter.take()
            engine.execute(f"REPL LOAD bench_dr FROM '{dump}'")
            loaded = time.perf_counter()
            requests.append(counter.take())
            times["CopyObject of the file"].append(copied - start)
            times["REPL LOAD"].append(loaded - copied)
        [replica] = target.catalog.get_partitions_by_names("bench_dr", "t", ["p=a"])
        held = sum(1 for _ in filesystem_for(replica.sd.location).list_files(replica.sd.location))
        assert held == files + repeats, f"the replica holds {held} files, not {files + repeats}"
        return {"files": files, "times": times, "requests": requests}
    finally:
        source.close()
        target.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1,100,1000", help="objects the partition holds, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(text) for text in args.files.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-s3-append-") as tmp, moto_s3_server(Path(tmp)) as server:
        os.environ.update(aws_test_environment(server.endpoint_url, Path(tmp)))
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS"):
            os.environ.pop(name, None)
        reset_default_s3_filesystem()
        import boto3

        client = boto3.client("s3")
        counter = RequestCounter()
        results = [bench_size(Path(tmp), client, files, args.repeats, counter) for files in sizes]
    print(
        f"load of one event adding one {OBJECT_BYTES // 1024} KB object to an S3 replica partition, "
        f"moto on loopback, {args.repeats} repeats; python {sys.version.split()[0]}"
    )
    print(
        f"{'partition holds':>16} {'what':<24} {'median s':>9} {'min s':>9} {'x 1-file':>9}  requests (median)"
    )
    base = statistics.median(results[0]["times"]["REPL LOAD"])
    for result in results:
        for what, samples in result["times"].items():
            ratio = f"{statistics.median(samples) / base:.2f}x" if what == "REPL LOAD" else ""
            calls = ""
            if what == "REPL LOAD":
                ops = sorted({op for counts in result["requests"] for op in counts})
                calls = ", ".join(
                    f"{op} {statistics.median(c[op] for c in result['requests']):g}" for op in ops
                )
            print(
                f"{result['files']:>16,} {what:<24} {statistics.median(samples):>9.3f} {min(samples):>9.3f} "
                f"{ratio:>9}  {calls}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
