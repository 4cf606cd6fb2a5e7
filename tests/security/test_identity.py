"""Who a connection is: principal names, proxy-user rules and the user the notification API checks."""

from __future__ import annotations

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import AccessDeniedError
from hmsrepl.metastore import Metastore
from hmsrepl.thrift.auth import (
    Peer,
    SecuritySettingError,
    ThriftSecurity,
    parse_proxy_users,
    server_principal,
    split_principal,
)
from hmsrepl.thrift.handler import MetastoreHandler


def test_principal_names() -> None:
    assert split_principal("alice/host.example.com@EXAMPLE.COM") == (
        "alice",
        "host.example.com",
        "EXAMPLE.COM",
    )
    assert split_principal("alice@EXAMPLE.COM") == ("alice", None, "EXAMPLE.COM")
    assert server_principal("hive/_HOST@R", "Meta.Example.com") == "hive/meta.example.com@R"
    assert server_principal("hive/fixed@R", "other") == "hive/fixed@R"
    assert "_HOST" not in server_principal("hive/_HOST@R", "0.0.0.0")


def test_proxy_rules_match_users_and_hosts() -> None:
    rules = parse_proxy_users(
        {
            "svc": {"users": ["alice"], "hosts": ["10.0.0.0/8", "127.0.0.1"]},
            "etl": {"users": ["*"], "hosts": ["*"]},
        }
    )
    assert rules["svc"].allows("alice", "10.1.2.3") and rules["svc"].allows("alice", "127.0.0.1")
    assert not rules["svc"].allows("alice", "192.168.0.1")
    assert not rules["svc"].allows("bob", "10.1.2.3")
    assert rules["etl"].allows("anyone", "203.0.113.9")
    with pytest.raises(SecuritySettingError, match="neither an address"):
        parse_proxy_users({"svc": {"users": ["alice"], "hosts": ["no-such-host.invalid"]}})


@pytest.fixture
def handler(sqlite_metastore: Metastore) -> MetastoreHandler:
    config = MetastoreConfig(
        proxy_users={
            "svc": {"users": ["alice", "hive"], "hosts": ["127.0.0.1"]},
            "hive": {"users": ["alice"], "hosts": ["*"]},
        }
    )
    return MetastoreHandler(sqlite_metastore, security=ThriftSecurity(config))


def test_set_ugi_only_narrows_an_authenticated_connection(handler: MetastoreHandler) -> None:
    handler.begin_connection(Peer("127.0.0.1", "alice@R", "alice"))
    with pytest.raises(AccessDeniedError, match="may not act as 'hive'"):
        handler.set_ugi("hive", [])
    assert handler.caller == "alice"

    handler.begin_connection(
        Peer("10.9.9.9", "svc@R", "svc")
    )  # a proxy, but from a host its rule does not list
    with pytest.raises(AccessDeniedError, match="may not act as 'alice'"):
        handler.set_ugi("alice", [])

    handler.begin_connection(Peer("127.0.0.1", "svc@R", "svc"))
    handler.set_ugi("hive", [])
    assert handler.caller == "svc", "a proxy acting as an admin is checked as itself"

    handler.begin_connection(Peer("127.0.0.1", "hive@R", "hive"))
    assert handler.caller == "hive"
    handler.set_ugi("alice", [])
    assert handler.caller == "alice", "an admin acting for alice is checked as alice"
    with pytest.raises(AccessDeniedError, match="user 'alice' may not"):
        handler.get_current_notificationEventId()


def test_without_authentication_set_ugi_names_the_user(handler: MetastoreHandler) -> None:
    handler.begin_connection(Peer("127.0.0.1"))
    assert handler.caller == ""
    handler.set_ugi("hive", [])
    assert handler.caller == "hive"
    handler.begin_connection(Peer("127.0.0.1"))  # a new connection on a reused thread starts anonymous
    assert handler.caller == ""
