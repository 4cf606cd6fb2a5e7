"""A real MIT Kerberos KDC for tests: its own realm, database and config files, on a free loopback port.

``krb5kdc -n`` runs in the foreground as a child process and is stopped (and reaped) afterwards. Clients and
servers find it through ``KRB5_CONFIG`` (and the KDC tools their database through ``KRB5_KDC_PROFILE``):
``Kdc.env`` holds both, for child processes and for this one while the fixture lasts.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hmsrepl.thrift.process import free_port, stop_process

REALM = "HMSREPL.TEST"
#: Client principals: "hive" is an admin user (HMSREPL_ADMIN_USERS default), "alice" is not, "svc" is a
#: proxy user allowed to act as alice and hive from loopback (acting as hive gives it no admin rights).
CLIENTS = ("hive", "alice", "svc")
PROXY_USERS = {"svc": {"users": ["alice", "hive"], "hosts": ["127.0.0.1"]}}
#: The metastore's service principal in these tests; clients connect to ``localhost``.
SERVICE_PRINCIPAL = f"hive/localhost@{REALM}"
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def kdc_tools_missing() -> str | None:
    """Why a KDC cannot run here (Debian packages krb5-kdc, krb5-admin-server, krb5-user), or None."""
    for tool in ("krb5kdc", "kdb5_util", "kadmin.local"):
        if not _tool(tool):
            return f"{tool} not installed (Debian: apt-get install krb5-kdc krb5-admin-server krb5-user; make setup)"
    return None


def _tool(name: str) -> str | None:
    return shutil.which(name) or next((str(Path(d) / name) for d in _SBIN if (Path(d) / name).exists()), None)


@dataclass
class Kdc:
    root: Path
    port: int
    realm: str = REALM
    env: dict[str, str] = field(default_factory=dict)

    def add_principal(self, name: str, keytab: Path | None = None) -> Path:
        """Create ``name`` (random key; realm added) and export its keys to ``keytab``; returns the keytab."""
        principal = name if "@" in name else f"{name}@{self.realm}"
        keytab = keytab or self.root / f"{principal.split('@')[0].replace('/', '_')}.keytab"
        self.kadmin(f"addprinc -randkey {principal}")
        self.kadmin(f"ktadd -k {keytab} {principal}")
        return keytab

    def kadmin(self, query: str) -> str:
        result = subprocess.run(
            [_tool("kadmin.local"), "-r", self.realm, "-q", query],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0 or "error" in result.stderr.lower():
            raise RuntimeError(f"kadmin.local -q {query!r} failed: {result.stderr or result.stdout}")
        return result.stdout


def _write_configs(root: Path, port: int) -> dict[str, str]:
    krb5_conf, kdc_conf = root / "krb5.conf", root / "kdc.conf"
    krb5_conf.write_text(
        f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = true
    default_ccache_name = FILE:{root}/ccache-default

[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {REALM}
"""
    )
    kdc_conf.write_text(
        f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {REALM} = {{
        database_name = {root}/principal
        key_stash_file = {root}/stash
        acl_file = {root}/kadm5.acl
        kdc_listen = 127.0.0.1:{port}
        kdc_tcp_listen = 127.0.0.1:{port}
        max_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{root}/kdc.log
"""
    )
    (root / "kadm5.acl").write_text("")
    return {
        "KRB5_CONFIG": str(krb5_conf),
        "KRB5_KDC_PROFILE": str(kdc_conf),
        "KRB5CCNAME": f"FILE:{root}/ccache-default",
    }


def tcp_listeners(port: int) -> int:
    """How many sockets listen on TCP ``port`` on this machine (``/proc/net/tcp``, IPv4 and IPv6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                count += 1
    return count


@contextmanager
def running_kdc(root: Path, attempts: int = 5) -> Iterator[Kdc]:
    """Create a realm under ``root``, serve it with ``krb5kdc -n`` on a free loopback port, stop it after.

    krb5kdc binds with address reuse, so two KDCs started at once (one per test worker) can end up on the
    same port, and a client then reaches either: its tickets fail with "Decrypt integrity check failed". A
    KDC that finds another listener on its port is stopped and started again on a new one.
    """
    for attempt in range(attempts):
        with _kdc_process(root / f"try{attempt}" if attempt else root) as (server, alone):
            if alone or attempt == attempts - 1:
                yield server
                return


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@contextmanager
def _kdc_process(root: Path) -> Iterator[tuple[Kdc, bool]]:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = _write_configs(root, port)
    full_env = {**os.environ, **env}
    subprocess.run(
        [_tool("kdb5_util"), "-r", REALM, "create", "-s", "-P", "master-password-for-tests"],
        env=full_env,
        check=True,
        capture_output=True,
    )
    log = open(root / "krb5kdc.out", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [_tool("krb5kdc"), "-n", "-r", REALM, "-P", str(root / "kdc.pid")],
        env=full_env,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"krb5kdc exited with {proc.returncode}: {(root / 'krb5kdc.out').read_text()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
                if "commencing operation" in _read(root / "kdc.log"):  # not merely another KDC's port
                    break
                raise OSError("not serving yet")
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc did not listen on {port} within 20 s") from None
                time.sleep(0.1)
        yield Kdc(root, port, env=env), tcp_listeners(port) == 1
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    """A KDC for the session with the service principal and the ``CLIENTS``, each with its own keytab."""
    missing = kdc_tools_missing()
    if missing:
        pytest.fail(missing)  # the Makefile installs them: a missing KDC is a broken setup, not a skip
    root = tmp_path_factory.mktemp("kdc")
    saved = {key: os.environ.get(key) for key in ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME")}
    with running_kdc(root) as server:
        os.environ.update(server.env)  # this process's GSSAPI clients find the realm through these
        server.service_keytab = server.add_principal(SERVICE_PRINCIPAL)  # type: ignore[attr-defined]
        server.keytabs = {name: server.add_principal(name) for name in CLIENTS}  # type: ignore[attr-defined]
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def kerberos_settings(kdc: Kdc) -> dict[str, str]:
    """The metastore server's environment for Kerberos against ``kdc``."""
    return {
        **kdc.env,
        "HMSREPL_THRIFT_AUTH": "kerberos",
        "HMSREPL_KERBEROS_PRINCIPAL": SERVICE_PRINCIPAL,
        "HMSREPL_KERBEROS_KEYTAB": str(kdc.service_keytab),  # type: ignore[attr-defined]
        "HMSREPL_PROXY_USERS": json.dumps(PROXY_USERS),
    }
