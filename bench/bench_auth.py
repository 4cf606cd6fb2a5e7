"""The cost of authentication on the Thrift port: get_table with and without Kerberos (SASL GSSAPI), same run.

A real MIT KDC (tests/security/kdc.py) runs on loopback; two metastore server processes serve the same table
from their own SQLite files, one without authentication and one with HMSREPL_THRIFT_AUTH=kerberos. One
long-lived client per server (as Spark keeps its connections) calls get_table, call by call interleaved
(alternating which server goes first), so machine noise hits both alike. Also measured: opening a connection
(TCP + SASL negotiation with a ticket already in the client's cache), which Kerberos pays once per connection.

Run:  python bench/bench_auth.py [--iterations 2000] [--connections 100]

Prints p50/p99 per side and the ratios; exits non-zero when a server cannot start or a call fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.thrift.auth import client_credentials, connect  # noqa: E402
from tests.helpers import make_table  # noqa: E402
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, kerberos_settings, running_kdc  # noqa: E402
from tests.servers import metastore_server  # noqa: E402

DB, TABLE = "bench_auth", "orders"


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def _prepare(root: Path) -> str:
    url = f"sqlite:///{root}/metastore.db"
    store = Metastore.open(
        MetastoreConfig(db_url=url, warehouse=str(root / "warehouse"), cmroot=str(root / "cm"))
    )
    try:
        store.catalog.create_database(Database(name=DB))
        store.catalog.create_table(make_table(DB, TABLE, partition_keys=("dt",)))
    finally:
        store.close()
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tmp:
        root = Path(tmp)
        with running_kdc(root / "kdc") as kdc:
            os.environ.update(kdc.env)
            kdc.service_keytab = kdc.add_principal(SERVICE_PRINCIPAL)  # type: ignore[attr-defined]
            keytab = kdc.add_principal("hive")
            (root / "plain").mkdir()
            (root / "krb").mkdir()
            plain_url, krb_url = _prepare(root / "plain"), _prepare(root / "krb")
            with (
                metastore_server(root / "plain", plain_url) as plain_server,
                metastore_server(root / "krb", krb_url, **kerberos_settings(kdc)) as krb_server,
            ):
                creds = client_credentials(f"hive@{REALM}", str(keytab), f"FILE:{root}/cc-hive")

                def open_plain():  # type: ignore[no-untyped-def]
                    return connect("127.0.0.1", plain_server.port)

                def open_krb():  # type: ignore[no-untyped-def]
                    return connect(
                        "127.0.0.1", krb_server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds
                    )

                plain, krb = open_plain(), open_krb()
                sides = {"none": plain, "kerberos": krb}
                samples: dict[str, list[float]] = {"none": [], "kerberos": []}
                for client in sides.values():  # warm-up
                    for _ in range(50):
                        client.get_table(DB, TABLE)
                for i in range(args.iterations):
                    order = ("none", "kerberos") if i % 2 == 0 else ("kerberos", "none")
                    for side in order:
                        samples[side].append(_timed(lambda c=sides[side]: c.get_table(DB, TABLE)))
                plain.close()
                krb.close()
                connects: dict[str, list[float]] = {"none": [], "kerberos": []}
                openers = {"none": open_plain, "kerberos": open_krb}
                for i in range(args.connections):
                    order = ("none", "kerberos") if i % 2 == 0 else ("kerberos", "none")
                    for side in order:
                        start = time.perf_counter()
                        client = openers[side]()
                        client.getVersion()
                        connects[side].append((time.perf_counter() - start) * 1000)
                        client.close()

    print(f"get_table, {args.iterations} calls per side interleaved on one connection each (ms):")
    print(f"{'auth':<10} {'p50':>8} {'p99':>8} {'mean':>8}")
    for side, values in samples.items():
        print(
            f"{side:<10} {_percentile(values, 0.5):8.3f} {_percentile(values, 0.99):8.3f} "
            f"{statistics.fmean(values):8.3f}"
        )
    p50 = _percentile(samples["kerberos"], 0.5) / _percentile(samples["none"], 0.5)
    p99 = _percentile(samples["kerberos"], 0.99) / _percentile(samples["none"], 0.99)
    print(f"ratio kerberos/none: p50 {p50:.2f}x, p99 {p99:.2f}x")
    print(f"\nopen connection + getVersion, {args.connections} per side interleaved (ms):")
    for side, values in connects.items():
        print(f"{side:<10} p50 {_percentile(values, 0.5):8.3f} p99 {_percentile(values, 0.99):8.3f}")
    ratio = _percentile(connects["kerberos"], 0.5) / _percentile(connects["none"], 0.5)
    print(f"ratio kerberos/none: p50 {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
