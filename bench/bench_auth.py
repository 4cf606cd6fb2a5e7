"""The cost of authentication on the Thrift port: get_table without auth, with Kerberos (SASL GSSAPI, QOP
auth) and with Kerberos and encrypted frames (QOP auth-conf), same run.

A real MIT KDC (tests/security/kdc.py) runs on loopback; two metastore server processes serve the same table
from their own SQLite files, one without authentication and one with HMSREPL_THRIFT_AUTH=kerberos. One
long-lived client per side (as Spark keeps its connections) calls get_table, call by call interleaved
(rotating which side goes first), so machine noise hits all alike. A second server without auth is the
control: the difference between the two plain servers is the noise floor of comparing server processes. Also measured: opening a connection
(TCP + SASL negotiation with a ticket already in the client's cache), which Kerberos pays once per connection,
and, without network or server, what the security layer adds per message: GSS wrap + unwrap of a
get_table-sized reply under auth-int and auth-conf (auth adds only the 4-byte frame header).

Run:  python bench/bench_auth.py [--iterations 2000] [--connections 100]

Prints p50/p99 per side and the ratios to no auth; exits non-zero when a server cannot start or a call fails.
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

from thriftpy2.utils import serialize  # noqa: E402

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


def _layer_cost(keytab: Path, service_keytab: Path, root: Path, size: int, rounds: int) -> dict[str, float]:
    """Microseconds per message to wrap (sender) and unwrap (receiver) ``size`` bytes, per protected QOP."""
    import gssapi

    creds = client_credentials(f"hive@{REALM}", str(keytab), f"FILE:{root}/cc-layer")
    target = gssapi.Name(SERVICE_PRINCIPAL, gssapi.NameType.kerberos_principal)
    initiator = gssapi.SecurityContext(name=target, creds=creds, usage="initiate")
    acceptor_creds = gssapi.Credentials(name=target, usage="accept", store={"keytab": str(service_keytab)})
    acceptor = gssapi.SecurityContext(creds=acceptor_creds, usage="accept")
    token = initiator.step()
    while not (initiator.complete and acceptor.complete):
        token = acceptor.step(token)
        if token and not initiator.complete:
            token = initiator.step(token)
    payload = os.urandom(size)
    costs: dict[str, float] = {}
    for qop, encrypt in (("auth-int", False), ("auth-conf", True)):
        start = time.perf_counter()
        for _ in range(rounds):
            acceptor.unwrap(initiator.wrap(payload, encrypt).message)
        costs[qop] = (time.perf_counter() - start) / rounds * 1e6
    return costs


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
            for name in ("plain", "plain2", "krb"):
                (root / name).mkdir()
            plain_url, plain2_url, krb_url = (_prepare(root / name) for name in ("plain", "plain2", "krb"))
            with (
                metastore_server(root / "plain", plain_url) as plain_server,
                metastore_server(root / "plain2", plain2_url) as plain2_server,
                metastore_server(root / "krb", krb_url, **kerberos_settings(kdc)) as krb_server,
            ):
                creds = client_credentials(f"hive@{REALM}", str(keytab), f"FILE:{root}/cc-hive")

                def opener(port: int, **kwargs: str):  # type: ignore[no-untyped-def]
                    return lambda: connect("127.0.0.1", port, **kwargs)  # type: ignore[arg-type]

                krb = {"kerberos_principal": SERVICE_PRINCIPAL, "credentials": creds}
                openers = {
                    "none": opener(plain_server.port),
                    "none #2": opener(
                        plain2_server.port
                    ),  # control: two servers without auth differ this much
                    "kerberos": opener(krb_server.port, **krb, qop="auth"),
                    "krb+conf": opener(krb_server.port, **krb, qop="auth-conf"),
                }
                names = list(openers)
                sides = {name: open_() for name, open_ in openers.items()}
                samples: dict[str, list[float]] = {name: [] for name in names}
                for client in sides.values():  # warm-up
                    for _ in range(50):
                        client.get_table(DB, TABLE)
                for i in range(args.iterations):
                    for side in names[i % len(names) :] + names[: i % len(names)]:  # rotate who goes first
                        samples[side].append(_timed(lambda c=sides[side]: c.get_table(DB, TABLE)))
                reply_size = len(serialize(sides["none"].get_table(DB, TABLE)))
                for client in sides.values():
                    client.close()
                connects: dict[str, list[float]] = {name: [] for name in names}
                for i in range(args.connections):
                    for side in names[i % len(names) :] + names[: i % len(names)]:
                        start = time.perf_counter()
                        client = openers[side]()
                        client.getVersion()
                        connects[side].append((time.perf_counter() - start) * 1000)
                        client.close()
            layer = _layer_cost(keytab, kdc.service_keytab, root, reply_size, 5000)  # type: ignore[attr-defined]

    print(f"get_table, {args.iterations} calls per side interleaved on one connection each (ms):")
    print(f"{'auth':<10} {'p50':>8} {'p99':>8} {'mean':>8} {'p50 ratio':>10} {'p99 ratio':>10}")
    for side, values in samples.items():
        print(
            f"{side:<10} {_percentile(values, 0.5):8.3f} {_percentile(values, 0.99):8.3f} "
            f"{statistics.fmean(values):8.3f} "
            f"{_percentile(values, 0.5) / _percentile(samples['none'], 0.5):9.2f}x "
            f"{_percentile(values, 0.99) / _percentile(samples['none'], 0.99):9.2f}x"
        )
    print(f"\nopen connection + getVersion, {args.connections} per side interleaved (ms):")
    for side, values in connects.items():
        ratio = _percentile(values, 0.5) / _percentile(connects["none"], 0.5)
        print(
            f"{side:<10} p50 {_percentile(values, 0.5):8.3f} p99 {_percentile(values, 0.99):8.3f}  "
            f"p50 ratio {ratio:.2f}x"
        )
    print(
        f"\nsecurity layer per message of {reply_size} bytes (a get_table reply), wrap + unwrap, no network:"
    )
    for qop, micros in layer.items():
        print(f"{qop:<10} {micros:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
