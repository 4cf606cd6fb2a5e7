"""Roles and privileges, read as a Hive metastore without SQL-standard authorization answers them.

This metastore keeps no grants: access is its own (Kerberos at the port, the admin users of
``HMSREPL_ADMIN_USERS``, replica protection), as a Hive metastore run with
``hive.security.authorization.enabled=false`` and no ``GRANT`` ever issued. Such a metastore still answers the
reads Hive, Spark and Trino make (``SHOW ROLES``, ``SHOW CURRENT ROLES``, a table's privilege set before a
query), and answers them from what its ``HMSHandler`` sets up at start:

- two roles, ``admin`` and ``public``; every user is implicitly in ``public`` (Hive's ``ObjectStore`` adds it
  to any user's roles), and the users of ``hive.users.in.admin.role`` (here: the admin users) are granted
  ``admin``, which holds the global privilege ``All``;
- no other grant: a privilege set lists the asking user (and each of its groups and roles) with no
  privileges, and ``list_privileges`` is empty.

Grants and role changes are refused by name (``thrift.refusals``).
"""

from __future__ import annotations

from typing import Any

from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.idl import hms

ADMIN, PUBLIC = "admin", "public"
#: Hive's name for every privilege at once, which its start-up grants the admin role on the global object.
ALL = "All"
_USER, _ROLE = hms.PrincipalType.USER, hms.PrincipalType.ROLE


class PrivilegeApi(Area):
    """The read side of Hive's roles and privileges, from the admin users of this metastore's configuration."""

    def _is_admin(self, user: str | None) -> bool:
        return bool(user) and user in self.store.config.admin_users

    def _roles_of(self, name: str | None, principal_type: int | None) -> list[str]:
        """The roles a principal holds: a user holds ``public`` (and ``admin`` when an admin user); groups and
        roles hold none, since nothing was ever granted to them."""
        if principal_type != _USER:
            return []
        return [ADMIN, PUBLIC] if self._is_admin(name) else [PUBLIC]

    def get_role_names(self) -> list[str]:
        return [ADMIN, PUBLIC]

    def list_roles(self, principal_name: str, principal_type: int) -> list[Any]:
        return [
            hms.Role(roleName=role, createTime=0, ownerName=role)
            for role in self._roles_of(principal_name, principal_type)
        ]

    def get_principals_in_role(self, request: Any) -> Any:
        """Only ``admin`` has stored members (the admin users); ``public``'s are implicit, as in Hive."""
        members = self.store.config.admin_users if request.roleName == ADMIN else []
        return hms.GetPrincipalsInRoleResponse(principalGrants=[_grant(ADMIN, user) for user in members])

    def get_role_grants_for_principal(self, request: Any) -> Any:
        roles = self._roles_of(request.principal_name, request.principal_type)
        return hms.GetRoleGrantsForPrincipalResponse(
            principalGrants=[_grant(role, request.principal_name) for role in roles]
        )

    def get_privilege_set(self, hiveObject: Any, user_name: str, group_names: list[str] | None) -> Any:
        """Hive's shape: the user, each of its groups and each of its roles, with what was granted to it on the
        object, which is nothing here but the admin role's ``All`` on the global object."""
        global_object = hiveObject is None or hiveObject.objectType == hms.HiveObjectType.GLOBAL
        roles = {
            role: [_all()] if role == ADMIN and global_object else []
            for role in self._roles_of(user_name, _USER)
        }
        return hms.PrincipalPrivilegeSet(
            userPrivileges={user_name: []} if user_name else None,
            groupPrivileges={group: [] for group in group_names} if group_names else None,
            rolePrivileges=roles or None,
        )

    def list_privileges(self, principal_name: str, principal_type: int, hiveObject: Any) -> list[Any]:
        """Grants to the principal on the object (every object when None): the admin role's ``All`` on the
        global object is the only one there is."""
        if principal_type != _ROLE or principal_name != ADMIN:
            return []
        if hiveObject is not None and hiveObject.objectType != hms.HiveObjectType.GLOBAL:
            return []
        return [
            hms.HiveObjectPrivilege(
                hiveObject=hms.HiveObjectRef(objectType=hms.HiveObjectType.GLOBAL),
                principalName=ADMIN,
                principalType=_ROLE,
                grantInfo=_all(),
                authorizer="hmsrepl",
            )
        ]


def _grant(role: str, principal: str) -> Any:
    return hms.RolePrincipalGrant(
        roleName=role,
        principalName=principal,
        principalType=_USER,
        grantOption=role == ADMIN,
        grantTime=0,
        grantorName=ADMIN,
        grantorPrincipalType=_ROLE,
    )


def _all() -> Any:
    return hms.PrivilegeGrantInfo(
        privilege=ALL, createTime=0, grantor=ADMIN, grantorType=_ROLE, grantOption=True
    )
