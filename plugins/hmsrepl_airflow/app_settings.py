"""The Spark applications' metastore settings, from the same Airflow connections the hook uses.

One definition per metastore: the connection (Thrift host and port for the checks; extra ``db_url``,
``db_password``, ``warehouse``, ``cmroot``, ``external_roots`` for the applications, see
``hmsrepl_airflow.hooks``). The applications read ``HMSREPL_<SIDE>_*`` variables; this module builds them from
the connection and hands them over in the child's environment, which only its user can read
(``/proc/<pid>/environ``), never as arguments that ``ps`` shows. A setting the connection leaves out keeps the
worker's own ``HMSREPL_<SIDE>_*`` value: the fallback for deployments that set them, and what the applications
read when run by hand.

Each side also gets ``HMSREPL_<SIDE>_IDENTITY``: the metastore as the connection reached it just now, which
the application compares with the database it opens (``hmsrepl.identity``), so a connection and a database URL
naming different metastores fail at start with one line naming both.

Spark's cluster deploy mode starts the driver elsewhere, without this environment: ``cluster_settings`` hands
the same variables, identity included, to the driver through the cluster manager's environment settings.
"""

from __future__ import annotations

from collections.abc import Mapping

from hmsrepl_airflow.hooks import MetastoreNotificationHook

#: Connection extra key -> the applications' variable suffix.
VARIABLES = {
    "db_url": "DB_URL",
    "warehouse": "WAREHOUSE",
    "cmroot": "CMROOT",
    "external_roots": "EXTERNAL_ROOTS",
}


def side_environment(side: str, hook: MetastoreNotificationHook) -> dict[str, str]:
    """``HMSREPL_<SIDE>_*`` from ``hook``'s connection, plus the identity the application must find."""
    prefix = f"HMSREPL_{side.upper()}_"
    env = {prefix + VARIABLES[key]: value for key, value in hook.database_settings().items()}
    env[prefix + "IDENTITY"] = hook.identity().to_json()
    return env


def application_environment(
    sides: Mapping[str, MetastoreNotificationHook], base: Mapping[str, str]
) -> dict[str, str]:
    """``base`` (the worker's environment) with each side's settings from its connection laid over it."""
    env = dict(base)
    for side, hook in sides.items():
        env.update(side_environment(side, hook))
    return env


def side_database(side: str, hook: MetastoreNotificationHook, base: Mapping[str, str]) -> dict[str, str]:
    """``db_url``/``warehouse``/``cmroot`` of one side for work done in the worker itself (no application):
    the connection's, else the worker's ``HMSREPL_<SIDE>_*`` (also when the connection is not defined)."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    prefix = f"HMSREPL_{side.upper()}_"
    try:
        found = hook.database_settings()
    except AirflowNotFoundException:
        found = {}
    return {
        key: value
        for key in ("db_url", "warehouse", "cmroot")
        if (value := found.get(key) or base.get(prefix + VARIABLES[key], ""))
    }
