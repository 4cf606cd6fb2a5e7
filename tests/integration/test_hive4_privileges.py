"""The role and privilege reads a Hive, Spark or Trino client makes are answered as a Hive metastore without
SQL-standard authorization answers them (roles ``admin`` and ``public``, every user in ``public``, the admin
users in ``admin`` with its global ``All``, no other grant); grants and role changes are refused in one line.

Over the wire with Hive 4's generated client (pyiceberg's ``hive_metastore``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4
from thrift.Thrift import TApplicationException

from tests.hive4_reference import hive4_client
from tests.servers import RunningMetastore

USER, ROLE, GROUP = h4.PrincipalType.USER, h4.PrincipalType.ROLE, h4.PrincipalType.GROUP


@pytest.fixture
def client(session_metastore: RunningMetastore) -> Iterator[Hive4.Client]:
    with hive4_client(session_metastore.port, "alice") as hive:
        yield hive


def test_roles_are_hives_built_in_ones(client: Hive4.Client) -> None:
    assert client.get_role_names() == ["admin", "public"]
    assert [r.roleName for r in client.list_roles("alice", USER)] == ["public"]
    assert [r.roleName for r in client.list_roles("hive", USER)] == ["admin", "public"]  # an admin user
    assert client.list_roles("analysts", GROUP) == []
    grants = client.get_role_grants_for_principal(h4.GetRoleGrantsForPrincipalRequest("alice", USER))
    assert [(g.roleName, g.principalName, g.principalType) for g in grants.principalGrants] == [
        ("public", "alice", USER)
    ]
    admins = client.get_principals_in_role(h4.GetPrincipalsInRoleRequest("admin")).principalGrants
    assert {"hive"} <= {g.principalName for g in admins}
    assert client.get_principals_in_role(h4.GetPrincipalsInRoleRequest("public")).principalGrants == []


def test_privilege_sets_list_the_principals_with_nothing_granted(client: Hive4.Client) -> None:
    table = h4.HiveObjectRef(h4.HiveObjectType.TABLE, "default", "t", None, None, "hive")
    got = client.get_privilege_set(table, "alice", ["analysts"])
    assert got == h4.PrincipalPrivilegeSet(
        userPrivileges={"alice": []}, groupPrivileges={"analysts": []}, rolePrivileges={"public": []}
    )
    everything = h4.HiveObjectRef(h4.HiveObjectType.GLOBAL, None, None, None, None)
    admin = client.get_privilege_set(everything, "hive", [])
    assert [p.privilege for p in admin.rolePrivileges["admin"]] == ["All"]
    assert admin.rolePrivileges["public"] == [] and admin.groupPrivileges is None
    assert client.list_privileges("alice", USER, table) == []
    assert [p.grantInfo.privilege for p in client.list_privileges("admin", ROLE, everything)] == ["All"]
    other = h4.HiveObjectRef(h4.HiveObjectType.TABLE, "default", "t", catName="spark")
    try:  # pyiceberg's exceptions are immutable: not for pytest.raises
        client.get_privilege_set(other, "alice", [])
    except h4.MetaException as refused:  # the one exception get_privilege_set declares
        assert "catalog 'spark' does not exist" in refused.message
    else:
        raise AssertionError("another catalog's object was answered")


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("grant_privileges", (h4.PrivilegeBag([]),)),
        ("create_role", (h4.Role("analysts", 0, "alice"),)),
        ("grant_role", ("admin", "alice", USER, "hive", USER, False)),
    ],
)
def test_grants_and_role_changes_are_refused_in_one_line(
    client: Hive4.Client, method: str, args: tuple[object, ...]
) -> None:
    with pytest.raises(TApplicationException) as info:
        getattr(client, method)(*args)
    assert info.value.type == TApplicationException.UNKNOWN_METHOD
    assert "\n" not in info.value.message
    assert "without SQL-standard authorization" in info.value.message
    assert client.list_roles("alice", USER)[0].roleName == "public"  # nothing granted, connection serving
