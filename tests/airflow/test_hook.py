"""The notification hook against a real metastore server process (Thrift over loopback)."""

from __future__ import annotations

import json

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.airflow.conftest import metastore_connection
from tests.servers import RunningMetastore, answering, free_port

CONN = "hmsrepl_test_metastore"


@pytest.fixture
def hook(target_metastore: RunningMetastore, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from hmsrepl_airflow.hooks import MetastoreNotificationHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", metastore_connection(target_metastore.port))
    return MetastoreNotificationHook(CONN)


def test_current_id_next_events_and_count_follow_the_log(hook, target_store: Metastore) -> None:  # type: ignore[no-untyped-def]
    before = hook.current_event_id()
    assert before == target_store.get_current_notification_event_id()
    target_store.catalog.create_database(Database(name="hook_a"))
    target_store.catalog.create_database(Database(name="hook_b"))
    target_store.catalog.alter_database("hook_a", Database(name="hook_a", parameters={"k": "v"}))
    assert hook.current_event_id() == before + 3

    events = hook.next_events(before)
    assert [(e.event_id, e.event_type, e.db_name) for e in events] == [
        (before + 1, "CREATE_DATABASE", "hook_a"),
        (before + 2, "CREATE_DATABASE", "hook_b"),
        (before + 3, "ALTER_DATABASE", "hook_a"),
    ]
    assert [e.event_id for e in hook.next_events(before, max_events=2)] == [before + 1, before + 2]
    assert [e.event_type for e in hook.next_events(before, skip_types=["CREATE_DATABASE"])] == [
        "ALTER_DATABASE"
    ]
    assert hook.events_count("hook_a", before) == 2
    assert hook.events_count("hook_a", before, before + 1) == 1
    assert hook.events_count("hook_b", before + 2) == 0


def test_reads_repl_last_id_of_replicas_only(hook, target_store: Metastore) -> None:  # type: ignore[no-untyped-def]
    target_store.catalog.create_database(Database(name="hook_replica", parameters={"repl.last.id": "42"}))
    target_store.catalog.create_database(Database(name="hook_plain"))
    assert hook.repl_last_id("hook_replica") == 42
    assert hook.repl_last_id("hook_plain") is None
    assert hook.repl_last_id("hook_missing") is None
    assert hook.database_parameters("hook_missing") is None
    assert hook.database_parameters("hook_replica") == {"repl.last.id": "42"}


def test_non_admin_user_is_told_what_to_change(
    target_metastore: RunningMetastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hmsrepl_airflow.hooks import MetastoreAuthError, MetastoreNotificationHook

    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_MALLORY", metastore_connection(target_metastore.port, "mallory"))
    # A user the notification API does not serve stays refused: no retry (MetastoreAuthError is a config error).
    with pytest.raises(MetastoreAuthError, match=r"(?s)hmsrepl_mallory.*mallory.*HMSREPL_ADMIN_USERS"):
        MetastoreNotificationHook("hmsrepl_mallory").current_event_id()


def test_unknown_host_fails_for_good_naming_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.hooks import MetastoreConfigError, MetastoreNotificationHook

    conn = json.dumps({"conn_type": "generic", "host": "metastore.invalid", "port": 9083, "login": "hive"})
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_NOHOST", conn)
    with pytest.raises(
        MetastoreConfigError,
        match=r"host of connection 'hmsrepl_nohost', 'metastore\.invalid', does not resolve",
    ):
        MetastoreNotificationHook("hmsrepl_nohost").current_event_id()


@pytest.mark.parametrize(
    "banner",
    [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", b"SSH-2.0-OpenSSH_9.2\r\n"],
    ids=["http", "ssh"],
)
def test_a_port_that_does_not_speak_thrift_fails_for_good(
    banner: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hmsrepl_airflow.hooks import MetastoreNotificationHook, MetastoreProtocolError

    with answering(banner) as port:
        monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_WRONG_PORT", metastore_connection(port))
        with pytest.raises(
            MetastoreProtocolError,
            match=f"thrift://127.0.0.1:{port} .* does not speak the Hive Metastore Thrift protocol",
        ):
            MetastoreNotificationHook("hmsrepl_wrong_port").current_event_id()


def test_unreachable_metastore_names_connection_and_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.hooks import MetastoreConfigError, MetastoreHookError, MetastoreNotificationHook

    port = free_port()  # nothing listens there
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_GONE", metastore_connection(port))
    with pytest.raises(
        MetastoreHookError, match=f"cannot reach .*'hmsrepl_gone' at thrift://127.0.0.1:{port}"
    ) as exc:
        MetastoreNotificationHook("hmsrepl_gone").current_event_id()
    assert not isinstance(exc.value, MetastoreConfigError)  # a server can come back: retries make sense


def test_silent_metastore_names_connection_and_address(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from hmsrepl_airflow import hooks

    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        monkeypatch.setattr(hooks, "TIMEOUT_MS", 200)
        monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SILENT", metastore_connection(port))
        with pytest.raises(
            hooks.MetastoreHookError, match=f"'hmsrepl_silent' at thrift://127.0.0.1:{port} did not answer"
        ) as exc:
            hooks.MetastoreNotificationHook("hmsrepl_silent").current_event_id()
    assert not isinstance(exc.value, hooks.MetastoreConfigError)  # a server can recover: retries make sense


def test_lost_metastore_while_reading_a_database_names_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from collections.abc import Iterator
    from contextlib import contextmanager

    from hmsrepl_airflow.hooks import MetastoreHookError, MetastoreNotificationHook

    class TimingOut:
        def get_database(self, name: str) -> None:
            raise TimeoutError("timed out")

    @contextmanager
    def conn() -> Iterator[TimingOut]:
        yield TimingOut()

    hook = MetastoreNotificationHook("hmsrepl_flaky")
    monkeypatch.setattr(hook, "get_conn", conn)
    with pytest.raises(
        MetastoreHookError, match="'hmsrepl_flaky' could not read database 'sales_dr': timed out"
    ):
        hook.repl_last_id("sales_dr")


def test_missing_connection_says_how_to_define_it() -> None:
    from hmsrepl_airflow.hooks import MetastoreConfigError, MetastoreNotificationHook

    with pytest.raises(
        MetastoreConfigError, match=r"'hmsrepl_nowhere' is not defined.*AIRFLOW_CONN_HMSREPL_NOWHERE"
    ):
        MetastoreNotificationHook("hmsrepl_nowhere").repl_last_id("sales_dr")


def test_lag_seconds_between_the_replica_event_and_the_source_event(hook, target_store: Metastore) -> None:  # type: ignore[no-untyped-def]
    import time

    from hmsrepl_airflow.operators import lag_behind_seconds

    target_store.catalog.create_database(Database(name="lag_a"))
    first = hook.current_event_id()
    time.sleep(1.1)
    target_store.catalog.create_database(Database(name="lag_b"))
    second = hook.current_event_id()
    assert lag_behind_seconds(hook, second, second) == 0
    assert lag_behind_seconds(hook, first, second) >= 1  # event times have 1 s resolution
    assert lag_behind_seconds(hook, 0, second) is None  # no event 0 to date the replica by


def test_count_on_a_stock_hive_2_metastore_reads_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hive 2.3 has no get_notification_events_count: the hook counts the database's events itself."""
    from hmsrepl_airflow import hooks
    from thriftpy2.thrift import TApplicationException

    from hmsrepl.metastore.events import NotificationEvent

    log = [
        NotificationEvent(i, 0, "ALTER_TABLE", "sales" if i % 3 else "other", "t", "{}", "json-0.2")
        for i in range(1, 8)
    ]

    def call(self: object, what: str, method: str, *args: object) -> object:
        assert method == "get_notification_events_count"
        raise hooks.MetastoreHookError(what) from TApplicationException(TApplicationException.UNKNOWN_METHOD)

    def next_events(self: object, last: int, max_events: int | None = None) -> list[NotificationEvent]:
        return [e for e in log if e.event_id > last][:max_events]

    monkeypatch.setattr(hooks.MetastoreNotificationHook, "_call", call)
    monkeypatch.setattr(hooks.MetastoreNotificationHook, "next_events", next_events)
    monkeypatch.setattr(hooks, "COUNT_PAGE", 2)
    hook = hooks.MetastoreNotificationHook(CONN)
    assert hook.events_count("sales", 0) == 5
    assert hook.events_count("sales", 1, 5) == 3
    assert hook.events_count("other", 0, 6) == 2
