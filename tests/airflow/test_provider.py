"""The metastore connection type as Airflow sees it: registered by the installed distribution, with its form,
and a "Test" button that really calls the metastore."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hmsrepl.airflow_provider import CONNECTION_TYPE, get_provider_info
from tests.servers import RunningMetastore, free_port


def test_the_installed_distribution_registers_the_connection_type() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "hmsrepl" in manager.providers
    hook = manager.hooks[CONNECTION_TYPE]
    assert hook is not None and hook.hook_class_name == "hmsrepl_airflow.hooks.MetastoreNotificationHook"
    behaviour = manager.field_behaviours[CONNECTION_TYPE]
    assert behaviour["hidden_fields"] == ["schema"] and "host" in behaviour["relabeling"]
    fields = {k for k in manager.connection_form_widgets if k.startswith(f"extra__{CONNECTION_TYPE}__")}
    assert {f"extra__{CONNECTION_TYPE}__{name}" for name in ("auth", "principal", "keytab", "qop")} <= fields
    # Registered by the distribution's entry point; the provider info is plain data (no Airflow import).
    from importlib.metadata import entry_points

    found = [
        ep.value for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("hmsrepl")
    ]
    assert found == ["hmsrepl.airflow_provider:get_provider_info"]
    assert get_provider_info()["package-name"] == "hmsrepl"


def _hook(monkeypatch: pytest.MonkeyPatch, port: int, user: str = "hive") -> Any:
    from hmsrepl_airflow.hooks import MetastoreNotificationHook

    conn = {"conn_type": CONNECTION_TYPE, "host": "127.0.0.1", "port": port, "login": user}
    monkeypatch.setenv("AIRFLOW_CONN_PROVIDER_TEST", json.dumps(conn))
    return MetastoreNotificationHook("provider_test")


def test_the_test_button_calls_the_metastore(
    session_metastore: RunningMetastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, message = _hook(monkeypatch, session_metastore.port).test_connection()
    assert ok, message
    assert f"127.0.0.1:{session_metastore.port} answers as hive" in message

    ok, message = _hook(monkeypatch, free_port()).test_connection()
    assert not ok and "cannot reach the metastore of connection 'provider_test'" in message

    ok, message = _hook(monkeypatch, session_metastore.port, user="nobody").test_connection()
    assert not ok and "admin" in message.lower()


def test_the_connection_type_is_a_valid_uri_scheme_and_the_former_name_still_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Airflow writes a connection's type as its URI scheme: a type with ``_`` makes it warn on every
    ``get_uri`` (RFC 3986), and one with ``-`` comes back from a URI as ``_``. Connections saved under the
    former name keep their form and hook."""
    from airflow.models.connection import Connection
    from airflow.providers_manager import ProvidersManager

    from hmsrepl.airflow_provider import LEGACY_CONNECTION_TYPE

    assert CONNECTION_TYPE.isalnum()
    conn = Connection(
        conn_id="scheme_test", conn_type=CONNECTION_TYPE, host="metastore", port=9083, login="hive"
    )
    with caplog.at_level("WARNING"):
        uri = conn.get_uri()
    assert not [r for r in caplog.records if "shall not contain" in r.getMessage()]
    assert Connection(conn_id="back", uri=uri).conn_type == CONNECTION_TYPE

    hooks = ProvidersManager().hooks
    legacy = hooks[LEGACY_CONNECTION_TYPE]
    assert legacy is not None and legacy.hook_class_name.endswith("LegacyTypeMetastoreNotificationHook")
    from hmsrepl_airflow.hooks import LegacyTypeMetastoreNotificationHook, MetastoreNotificationHook

    assert issubclass(LegacyTypeMetastoreNotificationHook, MetastoreNotificationHook)
    assert LegacyTypeMetastoreNotificationHook.conn_type == LEGACY_CONNECTION_TYPE
