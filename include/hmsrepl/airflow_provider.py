"""What Airflow learns about this product when it is installed: its metastore connection type.

Airflow finds providers through the ``apache_airflow_provider`` entry point of installed distributions
(``pyproject.toml``) and reads this dictionary without importing any hook, so the connection form (fields,
labels, placeholders) appears in the UI at once; the hook itself (``hmsrepl_airflow.hooks``, on Airflow's
plugins path) is imported only when a connection is used or tested. Plain data: the core never imports
Airflow.
"""

from __future__ import annotations

from typing import Any

#: The connection type: one word, because Airflow writes a type into a URI scheme (where ``_`` is not allowed
#: by RFC 3986, and Airflow warns) and reads a ``-`` in a scheme back as ``_``.
CONNECTION_TYPE = "hmsrepl"
HOOK_CLASS = "hmsrepl_airflow.hooks.MetastoreNotificationHook"
#: The type's former name, still registered so that connections saved with it keep their form and hook.
LEGACY_CONNECTION_TYPE = "hmsrepl_metastore"
LEGACY_HOOK_CLASS = "hmsrepl_airflow.hooks.LegacyTypeMetastoreNotificationHook"


def _text(
    label: str, description: str, *, default: str | None = None, secret: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if default is not None:
        schema["default"] = default
    if secret:
        schema["format"] = "password"
    return {"label": label, "description": description, "schema": schema}


def _connection_type(connection_type: str, hook_class: str, hook_name: str) -> dict[str, Any]:
    """One connection type's form: the fields a metastore connection holds, relabelled for the UI."""
    return {
        "connection-type": connection_type,
        "hook-class-name": hook_class,
        "hook-name": hook_name,
        "ui-field-behaviour": {
            "hidden-fields": ["schema"],
            "relabeling": {
                "host": "Metastore host",
                "port": "Thrift port",
                "login": "User (set_ugi; the principal's short name with Kerberos)",
                "password": "Kerberos password (when no keytab is given)",
            },
            "placeholders": {"host": "metastore.example.com", "port": "9083", "login": "hive"},
        },
        "conn-fields": {
            "auth": _text("Authentication", "'none' or 'kerberos' (SASL GSSAPI)", default="none"),
            "principal": _text("Kerberos principal", "the client's principal, e.g. hive@REALM"),
            "keytab": _text("Keytab", "path of the client's keytab on the Airflow workers"),
            "service_principal": _text(
                "Metastore principal", "the server's principal, e.g. hive/_HOST@REALM"
            ),
            "qop": _text("SASL QOP", "auth, auth-int or auth-conf", default="auth"),
            "tls_ca": _text("TLS CA file", "CA bundle that signs the metastore's certificate"),
            # What the Spark applications open (they work on the database, not over Thrift).
            "db_url": _text(
                "Database URL",
                "SQLAlchemy URL of this metastore's database, without password, e.g. "
                "postgresql+psycopg://hive@db:5432/metastore",
            ),
            "db_password": _text("Database password", "password of the database URL", secret=True),
            "warehouse": _text("Warehouse", "the metastore's warehouse root, e.g. s3://lake/warehouse"),
            "cmroot": _text("cmroot", "the metastore's change-manager root, e.g. s3://lake/cmroot"),
            "external_roots": _text(
                "External roots", "comma-separated roots of external tables (a source's)"
            ),
        },
    }


def get_provider_info() -> dict[str, Any]:
    """The provider's description in Airflow's runtime provider-info schema."""
    from importlib.metadata import version

    return {
        "package-name": "hmsrepl",
        "name": "hmsrepl",
        "description": "Hive-style warehouse replication: the metastore notification API and replica state.",
        "versions": [version("hmsrepl")],
        "connection-types": [
            _connection_type(CONNECTION_TYPE, HOOK_CLASS, "Hive Metastore (hmsrepl)"),
            _connection_type(
                LEGACY_CONNECTION_TYPE,
                LEGACY_HOOK_CLASS,
                f"Hive Metastore (hmsrepl, former type; use {CONNECTION_TYPE!r})",
            ),
        ],
    }
