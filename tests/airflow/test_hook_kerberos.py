"""The notification hook authenticates with Kerberos (SASL GSSAPI) from its Airflow connection: a keytab
(kinit into a ticket cache of its own) or a password, against a real KDC and a Kerberos-enabled metastore."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc, kerberos_settings
from tests.servers import RunningMetastore, metastore_server


@pytest.fixture(scope="module")
def kerberized(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp("kerberized-metastore")
    with metastore_server(root, f"sqlite:///{root}/metastore.db", **kerberos_settings(kdc)) as server:
        yield server


def _connection(
    server: RunningMetastore, login: str | None = None, password: str | None = None, **extra
) -> str:  # type: ignore[no-untyped-def]
    conn = {"conn_type": "generic", "host": "127.0.0.1", "port": server.port, "extra": extra}
    if login:
        conn["login"] = login
    if password:
        conn["password"] = password
    return json.dumps(conn)


def _hook(monkeypatch: pytest.MonkeyPatch, name: str, value: str):  # type: ignore[no-untyped-def]
    from hmsrepl_airflow.hooks import MetastoreNotificationHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", value)
    return MetastoreNotificationHook(name)


def test_keytab_login_reads_the_notification_log(
    kdc: Kdc,
    kerberized: RunningMetastore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keytab = str(kdc.keytabs["hive"])  # type: ignore[attr-defined]
    hook = _hook(
        monkeypatch,
        "krb_hive",
        _connection(
            kerberized,
            auth="kerberos",
            principal=f"hive@{REALM}",
            keytab=keytab,
            service_principal=SERVICE_PRINCIPAL,
            qop="auth-conf",
        ),
    )
    store = Metastore(kerberized.config)
    try:
        before = hook.current_event_id()
        store.catalog.create_database(Database(name="krb_hook"))
        assert [e.db_name for e in hook.next_events(before)] == ["krb_hook"]
    finally:
        store.close()
    # The ticket went to the hook's own cache, not to the worker's default one.
    assert not Path(kdc.env["KRB5CCNAME"].removeprefix("FILE:")).exists()
    assert Path(hook._ccache_dir, "ccache").stat().st_size > 0
    assert f"authenticated as hive@{REALM} (QOP auth-conf)" in kerberized.log_path.read_text()


def test_the_hook_is_its_principal_not_its_login(
    kdc: Kdc,
    kerberized: RunningMetastore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hmsrepl_airflow.hooks import MetastoreAuthError

    keytab = str(kdc.keytabs["alice"])  # type: ignore[attr-defined]
    alice = {"auth": "kerberos", "principal": f"alice@{REALM}", "keytab": keytab}
    hook = _hook(
        monkeypatch, "krb_alice", _connection(kerberized, service_principal=SERVICE_PRINCIPAL, **alice)
    )
    with pytest.raises(MetastoreAuthError, match="user 'alice' may not read the notification log"):
        hook.current_event_id()
    claiming = _hook(
        monkeypatch,
        "krb_claims_hive",
        _connection(kerberized, "hive", service_principal=SERVICE_PRINCIPAL, **alice),
    )
    with pytest.raises(MetastoreAuthError, match=r"refused set_ugi for user 'hive'.*may not act as 'hive'"):
        claiming.current_event_id()


def test_password_login(kdc: Kdc, kerberized: RunningMetastore, monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.hooks import MetastoreAuthError

    kdc.kadmin(f"addprinc -pw correct-horse carol@{REALM}")
    good = _connection(
        kerberized,
        password="correct-horse",
        auth="kerberos",
        principal=f"carol@{REALM}",
        service_principal=SERVICE_PRINCIPAL,
    )
    with pytest.raises(MetastoreAuthError, match="user 'carol' may not read"):  # authenticated as carol
        _hook(monkeypatch, "krb_carol", good).current_event_id()
    bad = _connection(
        kerberized,
        password="wrong",
        auth="kerberos",
        principal=f"carol@{REALM}",
        service_principal=SERVICE_PRINCIPAL,
    )
    with pytest.raises(MetastoreAuthError, match=r"could not authenticate .* as carol@HMSREPL\.TEST"):
        _hook(monkeypatch, "krb_carol_bad", bad).current_event_id()


def test_incomplete_or_wrong_kerberos_settings_are_named(
    kdc: Kdc,
    kerberized: RunningMetastore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hmsrepl_airflow.hooks import MetastoreAuthError, MetastoreConfigError, MetastoreHookError

    with pytest.raises(MetastoreConfigError, match="lacks a principal"):
        _hook(monkeypatch, "krb_none", _connection(kerberized, auth="kerberos")).current_event_id()
    with pytest.raises(MetastoreConfigError, match="extra 'auth' is 'ntlm'"):
        _hook(monkeypatch, "krb_ntlm", _connection(kerberized, auth="ntlm")).current_event_id()
    wrong_keytab = str(kdc.keytabs["alice"])  # type: ignore[attr-defined]
    conn = _connection(kerberized, auth="kerberos", principal=f"hive@{REALM}", keytab=wrong_keytab)
    with pytest.raises(
        MetastoreAuthError, match=r"could not authenticate to thrift://127\.0\.0\.1:\d+ as hive@"
    ):
        _hook(monkeypatch, "krb_wrong_keytab", conn).current_event_id()
    # Without Kerberos the hook's plain client is refused by the Kerberos-enabled server.
    plain = json.dumps(
        {"conn_type": "generic", "host": "127.0.0.1", "port": kerberized.port, "login": "hive"}
    )
    with pytest.raises(MetastoreHookError):
        _hook(monkeypatch, "krb_plain", plain).current_event_id()
