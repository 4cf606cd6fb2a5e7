"""Benchmark of S3 copies: our copy (server-side, parallel, verified) against boto3's transfer manager.

The replication load copies every changed file from the source warehouse (or its cmroot) to the target; on
S3 that is the bulk of its work. This measures, in one run against one S3 server:

- ``hmsrepl copy_files``: ``storage.copy_files`` with 16 threads; each file is one CopyObject (a
  multipart UploadPartCopy above 256 MiB), with the size taken from the event's checksum token (no HEAD)
  and the copy verified against that token with the CRC32C S3 reports (no download);
- ``boto3 client.copy (loop)``: the transfer manager's plain managed copy, ``s3.meta.client.copy`` with
  ``TransferConfig`` defaults, one file after the other (a HEAD, then multipart above 8 MiB);
- ``boto3 client.copy (16 threads)``: the same calls from 16 threads, to separate what parallelism gives
  from what the request pattern gives.

Workloads: large files (default 4 x 64 MB) and small files (default 2,000 x 4 KB). The server is moto's S3
server on loopback (started here, stopped after): it moves ~70-110 MB/s on these machines, so the ratios
are what carries over to a real store, not the absolute speeds. Each figure is the median of ``--rounds``
rounds; copies are deleted between rounds so the in-memory server does not grow.

Run:  python bench/bench_s3_copy.py [--large-count 4 --large-mb 64 --small-count 2000 --small-kb 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import boto3  # noqa: E402
import google_crc32c  # noqa: E402
from botocore.config import Config  # noqa: E402

from hmsrepl.storage import copy_files  # noqa: E402
from hmsrepl.storage.s3 import reset_default_s3_filesystem  # noqa: E402
from tests.s3server import aws_test_environment, moto_s3_server  # noqa: E402

THREADS = 16
BUCKET = "bench-copy"


@dataclass
class Workload:
    name: str
    count: int
    size: int


@dataclass
class Row:
    workload: str
    method: str
    seconds: float
    files: int
    size: int

    @property
    def mb_per_s(self) -> float:
        return self.files * self.size / 1e6 / self.seconds

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds


def token(data: bytes) -> str:
    return f"crc32c-{int.from_bytes(google_crc32c.Checksum(data).digest(), 'big'):08x}-{len(data)}"


def prepare(client: Any, workload: Workload) -> list[tuple[str, str]]:
    """Upload the sources (with a CRC32C, as everything this product writes); returns (key, token)."""
    sources = []

    def upload(index: int) -> tuple[str, str]:
        data = index.to_bytes(4, "big") * (workload.size // 4) + os.urandom(workload.size % 4)
        key = f"src/{workload.name}/f{index:05d}"
        client.put_object(Bucket=BUCKET, Key=key, Body=data, ChecksumAlgorithm="CRC32C")
        return key, token(data)

    with ThreadPoolExecutor(8) as pool:
        sources = list(pool.map(upload, range(workload.count)))
    return sources


def delete_prefix(client: Any, prefix: str) -> None:
    keys = [
        {"Key": obj["Key"]}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        for obj in page.get("Contents", [])
    ]
    for start in range(0, len(keys), 1000):
        client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys[start : start + 1000], "Quiet": True})


def ours(client: Any, sources: list[tuple[str, str]], prefix: str) -> None:
    tasks = [(f"s3://{BUCKET}/{key}", f"s3://{BUCKET}/{prefix}/{key}", expected) for key, expected in sources]
    copy_files(tasks, threads=THREADS)


def boto3_loop(client: Any, sources: list[tuple[str, str]], prefix: str) -> None:
    for key, _ in sources:
        client.copy({"Bucket": BUCKET, "Key": key}, BUCKET, f"{prefix}/{key}")


def boto3_threads(client: Any, sources: list[tuple[str, str]], prefix: str) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        list(
            pool.map(
                lambda item: client.copy({"Bucket": BUCKET, "Key": item[0]}, BUCKET, f"{prefix}/{item[0]}"),
                sources,
            )
        )


METHODS: list[tuple[str, Callable[[Any, list[tuple[str, str]], str], None]]] = [
    ("hmsrepl copy_files (server-side, 16 threads, verified)", ours),
    ("boto3 client.copy, TransferConfig defaults (loop)", boto3_loop),
    ("boto3 client.copy, TransferConfig defaults (16 threads)", boto3_threads),
]


def check_copies(client: Any, sources: list[tuple[str, str]], prefix: str) -> None:
    """Every copy exists with the source's size: a benchmark of copies that did not happen is worthless."""
    sizes = {
        obj["Key"][len(prefix) + 1 :]: obj["Size"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
        for obj in page.get("Contents", [])
    }
    for key, expected in sources:
        if sizes.get(key) != int(expected.rsplit("-", 1)[1]):
            raise SystemExit(f"copy of {key} under {prefix} is missing or has the wrong size")


def run(workloads: list[Workload], rounds: int) -> list[Row]:
    client = boto3.client("s3", config=Config(max_pool_connections=64))
    client.create_bucket(Bucket=BUCKET)
    rows = []
    for workload in workloads:
        sources = prepare(client, workload)
        for method_name, method in METHODS:
            timings = []
            for round_no in range(rounds):
                prefix = f"dst/{workload.name}/{method.__name__}/{round_no}"
                started = time.perf_counter()
                method(client, sources, prefix)
                timings.append(time.perf_counter() - started)
                check_copies(client, sources, prefix)
                delete_prefix(client, prefix + "/")
            rows.append(
                Row(workload.name, method_name, statistics.median(timings), workload.count, workload.size)
            )
        delete_prefix(client, f"src/{workload.name}/")
    return rows


def print_table(rows: list[Row]) -> None:
    print(f"{'workload':<24} {'method':<58} {'seconds':>8} {'MB/s':>8} {'files/s':>9} {'vs boto3 loop':>14}")
    for row in rows:
        baseline = next(
            r
            for r in rows
            if r.workload == row.workload and r.method.startswith("boto3") and r.method.endswith("(loop)")
        )
        ratio = baseline.seconds / row.seconds
        print(
            f"{row.workload:<24} {row.method:<58} {row.seconds:>8.2f} {row.mb_per_s:>8.1f} "
            f"{row.files_per_s:>9.1f} {ratio:>13.2f}x"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--large-count", type=int, default=4)
    parser.add_argument("--large-mb", type=int, default=64)
    parser.add_argument("--small-count", type=int, default=2000)
    parser.add_argument("--small-kb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workloads = [
        Workload(
            f"large {args.large_count} x {args.large_mb} MB", args.large_count, args.large_mb * 1_000_000
        ),
        Workload(f"small {args.small_count} x {args.small_kb} KB", args.small_count, args.small_kb * 1000),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp, moto_s3_server(Path(tmp)) as server:
        os.environ.update(aws_test_environment(server.endpoint_url, Path(tmp)))
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS"):
            os.environ.pop(name, None)
        reset_default_s3_filesystem()
        print(f"S3 server: moto at {server.endpoint_url}; {args.rounds} rounds per figure (median)")
        rows = run(workloads, args.rounds)
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
