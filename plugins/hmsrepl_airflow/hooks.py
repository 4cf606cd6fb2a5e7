"""An Airflow hook over a metastore's Thrift API: the notification log and the target's ``repl.last.id``.

The connection holds what a Hive Metastore client needs: host, port (default 9083) and login, the user the
hook identifies as with ``set_ugi`` (the notification API serves admin/proxy users only; default ``hive``).
The product registers the connection type ``hmsrepl`` (its own name: ``hive_metastore`` belongs to the
apache-hive provider; one word, as Airflow turns a type into a URI scheme) with a form in the UI and a working
"Test" button. The type's former name ``hmsrepl_metastore`` stays registered for connections saved with it.
Any other type works too (``generic`` from an environment variable, say):

    AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE='{"conn_type": "hmsrepl", "host": "127.0.0.1",
                                            "port": 9083, "login": "hive"}'

For a metastore with Kerberos (``HMSREPL_THRIFT_AUTH=kerberos``) the connection's extra says how the hook
authenticates (SASL GSSAPI, as Hive clients do): from a keytab (a kinit into a ticket cache private to the
hook) or, without ``keytab``, from the connection's password. ``login``, if set, is what ``set_ugi`` asks for
(the principal's own short name, or a user it may impersonate); ``qop`` asks for signed (``auth-int``) or
encrypted (``auth-conf``) frames; ``tls_ca`` turns on TLS:

    {"conn_type": "generic", "host": "metastore", "port": 9083, "extra": {"auth": "kerberos",
     "principal": "hive@REALM", "keytab": "/etc/security/hive.keytab",
     "service_principal": "hive/_HOST@REALM", "qop": "auth-conf", "tls_ca": "/etc/ssl/metastore-ca.pem"}}

The Spark applications open the metastore's database, not its Thrift API; the same connection tells them
where it is (``database_settings``): extra ``db_url`` (a SQLAlchemy URL, best without its password),
``db_password`` (masked by Airflow like every extra key naming a password), ``warehouse``, ``cmroot`` and, for
a source, ``external_roots`` (comma-separated). The operators hand these to the applications in their
environment, never on a command line (``hmsrepl_airflow.app_settings``).

Nothing is imported or opened at import time: the Thrift client exists only inside ``get_conn``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from hmsrepl.airflow_provider import CONNECTION_TYPE, LEGACY_CONNECTION_TYPE
from hmsrepl_airflow.hook_errors import (
    MetastoreAuthError,
    MetastoreConfigError,
    MetastoreHookError,
    MetastoreProtocolError,
    kdc_unreachable,
    not_thrift,
    unknown_host,
)

if TYPE_CHECKING:
    from hmsrepl.metastore.events import NotificationEvent

#: Connection extra keys the Spark applications need besides Thrift (``database_settings``).
DATABASE_FIELDS = ("db_url", "warehouse", "cmroot", "external_roots")
DEFAULT_PORT = 9083
DEFAULT_USER = "hive"
#: Events read per call when a stock metastore (Hive 2.3) has no count call and they are counted here.
COUNT_PAGE = 1000
#: Thrift calls time out after this long (a metastore that accepts but never answers must not hang a task).
TIMEOUT_MS = 60_000


__all__ = [
    "MetastoreAuthError",
    "MetastoreConfigError",
    "MetastoreHookError",
    "MetastoreNotificationHook",
    "MetastoreProtocolError",
]


class MetastoreNotificationHook(BaseHook):
    """Reads a metastore's notification log and database parameters over the Hive Metastore Thrift protocol."""

    conn_name_attr = "metastore_conn_id"
    default_conn_name = "hmsrepl_source_metastore"
    conn_type = CONNECTION_TYPE
    hook_name = "Hive Metastore (hmsrepl)"

    def __init__(self, metastore_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.metastore_conn_id = metastore_conn_id

    # -- connection ---------------------------------------------------------------------------------------
    def address(self) -> tuple[str, int, str]:
        """(host, port, user) of the connection; a missing or incomplete connection says how to define it."""
        try:
            conn = self.get_connection(self.metastore_conn_id)
        except AirflowNotFoundException as exc:
            env = f"AIRFLOW_CONN_{self.metastore_conn_id.upper()}"
            raise MetastoreConfigError(
                f"Airflow connection '{self.metastore_conn_id}' is not defined; define it (Admin > Connections, "
                f'or {env}=\'{{"conn_type": "generic", "host": "HOST", "port": {DEFAULT_PORT}, '
                f'"login": "{DEFAULT_USER}"}}\') pointing at the metastore\'s Thrift server'
            ) from exc
        if not conn.host:
            raise MetastoreConfigError(
                f"Airflow connection '{self.metastore_conn_id}' has no host; set it to the metastore's Thrift host"
            )
        return conn.host, int(conn.port or DEFAULT_PORT), conn.login or DEFAULT_USER

    def _security(self) -> dict[str, Any]:
        """The connection's authentication and TLS settings (its extra), checked before any network use."""
        conn = self.get_connection(self.metastore_conn_id)
        extra = conn.extra_dejson or {}
        auth = extra.get("auth", "none")
        if auth not in ("none", "kerberos"):
            raise MetastoreConfigError(
                f"Airflow connection '{self.metastore_conn_id}': extra 'auth' is {auth!r}; use 'kerberos' or 'none'"
            )
        settings: dict[str, Any] = {
            "auth": auth,
            "tls_ca": extra.get("tls_ca"),
            "qop": extra.get("qop", "auth"),
        }
        if settings["qop"] not in ("auth", "auth-int", "auth-conf"):
            raise MetastoreConfigError(
                f"Airflow connection '{self.metastore_conn_id}': extra 'qop' is {settings['qop']!r}; use 'auth', "
                "'auth-int' or 'auth-conf'"
            )
        if auth == "kerberos":
            principal, keytab = extra.get("principal"), extra.get("keytab")
            if not principal or "@" not in principal or not (keytab or conn.password):
                raise MetastoreConfigError(
                    f"Airflow connection '{self.metastore_conn_id}' uses Kerberos but lacks a principal "
                    "(user@REALM) or a keytab (extra 'principal' and 'keytab', or the connection's password)"
                )
            realm = principal.partition("@")[2]
            settings.update(
                principal=principal,
                keytab=keytab,
                password=None if keytab else conn.password,
                service_principal=extra.get("service_principal") or f"hive/_HOST@{realm}",
            )
        return settings

    def _credentials(self, settings: dict[str, Any]) -> Any:
        """Kerberos credentials of the connection: a kinit from the keytab into this hook's own ticket cache,
        or from the password into memory; never the ticket cache of whoever runs the worker."""
        import os
        import tempfile

        import gssapi
        import gssapi.raw

        from hmsrepl.thrift.auth import client_credentials

        if settings["keytab"]:
            if getattr(self, "_ccache_dir", None) is None:
                self._ccache_dir = tempfile.mkdtemp(prefix="hmsrepl-krb5cc-")  # 0700
            ccache = f"FILE:{os.path.join(self._ccache_dir, 'ccache')}"
            return client_credentials(settings["principal"], settings["keytab"], ccache)
        name = gssapi.Name(settings["principal"], gssapi.NameType.kerberos_principal)
        return gssapi.raw.acquire_cred_with_password(
            name, settings["password"].encode(), usage="initiate"
        ).creds

    def database_settings(self) -> dict[str, str]:
        """The metastore's database URL (password set from ``db_password``) and roots, as the connection gives
        them; keys of ``DATABASE_FIELDS`` that it leaves out are absent."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        extra = self.get_connection(self.metastore_conn_id).extra_dejson or {}
        found = {k: str(extra[k]).strip() for k in DATABASE_FIELDS if str(extra.get(k) or "").strip()}
        password = extra.get("db_password")
        if "db_url" in found:
            try:
                url = make_url(found["db_url"])
            except ArgumentError as exc:
                raise MetastoreConfigError(
                    f"Airflow connection '{self.metastore_conn_id}': extra 'db_url' is not a database URL "
                    f"({_reason(exc)}); use e.g. postgresql+psycopg://user@host:5432/metastore"
                ) from exc
            if password:
                url = url.set(password=str(password))
            found["db_url"] = url.render_as_string(hide_password=False)
        elif password:
            raise MetastoreConfigError(
                f"Airflow connection '{self.metastore_conn_id}' has a 'db_password' but no 'db_url'; set 'db_url' "
                "to the metastore's database URL"
            )
        return found

    def identity(self) -> Any:
        """The metastore as this connection reaches it now (``hmsrepl.identity``): its newest event."""
        from hmsrepl.identity import MetastoreIdentity

        newest = self.current_event_id()
        events = self.next_events(newest - 1, 1) if newest > 0 else []
        event = events[0] if events and events[0].event_id == newest else None
        return MetastoreIdentity.of(self.metastore_conn_id, self.describe(), event)

    def describe(self) -> str:
        """``thrift://host:port`` of the connection, for messages."""
        host, port, _ = self.address()
        return f"thrift://{host}:{port}"

    @contextmanager
    def get_conn(self) -> Iterator[Any]:
        """A Thrift client identified as the connection's user, closed afterwards."""
        from thriftpy2.rpc import make_client

        from hmsrepl.thrift.idl import Service, hms

        host, port, user = self.address()
        security = self._security()
        try:
            if security["auth"] == "kerberos" or security["tls_ca"]:
                client = self._secure_client(host, port, security)
                if security["auth"] == "kerberos":
                    login = self.get_connection(self.metastore_conn_id).login
                    user = login or security["principal"].partition("@")[0].partition("/")[0]
            else:
                client = make_client(Service, host, port, timeout=TIMEOUT_MS)
        except MetastoreHookError:
            raise
        except Exception as exc:  # thriftpy2 raises TTransportException wrapping the socket error
            if unknown_host(exc):
                raise MetastoreConfigError(
                    f"the host of connection '{self.metastore_conn_id}', '{host}', does not resolve "
                    f"({_reason(exc.__context__ or exc)}); set the connection's host to the metastore's Thrift host"
                ) from exc
            raise MetastoreHookError(
                f"cannot reach the metastore of connection '{self.metastore_conn_id}' at thrift://{host}:{port}: "
                f"{_reason(exc)}; check the connection's host and port and that the metastore server is running"
            ) from exc
        try:
            client.set_ugi(user, [])
        except hms.MetaException as exc:  # Kerberos: the principal may not act as that user
            client.close()
            raise MetastoreAuthError(
                f"metastore of connection '{self.metastore_conn_id}' at thrift://{host}:{port} refused set_ugi "
                f"for user '{user}': {_reason(exc)}"
            ) from exc
        except Exception as exc:  # e.g. a server that accepts connections but never answers (TIMEOUT_MS)
            client.close()
            if not_thrift(exc):
                raise MetastoreProtocolError(
                    f"what answers at thrift://{host}:{port} (connection '{self.metastore_conn_id}') does not speak "
                    f"the Hive Metastore Thrift protocol ({_reason(exc)}); set the connection's port to the "
                    f"metastore's Thrift port ({DEFAULT_PORT} by default)"
                ) from exc
            raise MetastoreHookError(
                f"metastore of connection '{self.metastore_conn_id}' at thrift://{host}:{port} did not answer "
                f"set_ugi for user '{user}': {_reason(exc)}; check that the metastore server is running and "
                "answering"
            ) from exc
        try:
            yield client
        finally:
            client.close()

    def _secure_client(self, host: str, port: int, security: dict[str, Any]) -> Any:
        """A client over TLS and/or SASL GSSAPI; a Kerberos failure names the principal and what to check."""
        from gssapi.raw.misc import GSSError

        from hmsrepl.thrift.auth import connect
        from hmsrepl.thrift.sasl import SaslError

        kerberos = security["auth"] == "kerberos"
        try:
            credentials = self._credentials(security) if kerberos else None
            return connect(
                host,
                port,
                kerberos_principal=security.get("service_principal") if kerberos else None,
                credentials=credentials,
                tls_ca=security["tls_ca"],
                timeout_ms=TIMEOUT_MS,
                qop=security["qop"],
            )
        except (GSSError, SaslError) as exc:
            error = MetastoreHookError if kdc_unreachable(exc) else MetastoreAuthError
            raise error(
                f"connection '{self.metastore_conn_id}' could not authenticate to thrift://{host}:{port} as "
                f"{security.get('principal')}: {_reason(exc)}; check the keytab or password, the principal, "
                "extra 'service_principal' and that the KDC is reachable"
            ) from exc

    def _call(self, what: str, method: str, *args: Any) -> Any:
        """Call one Thrift method; remote errors become one message naming the connection and the fix."""
        from thriftpy2.thrift import TApplicationException
        from thriftpy2.transport import TTransportException

        with self.get_conn() as client:
            try:
                return getattr(client, method)(*args)
            except TApplicationException as exc:
                message = _reason(exc)
                refused_user = "may not" in message or "admin" in message.lower()
                if refused_user:
                    message += (
                        f"; give connection '{self.metastore_conn_id}' an admin user (HMSREPL_ADMIN_USERS)"
                    )
                error = MetastoreAuthError if refused_user else MetastoreHookError
                raise error(
                    f"metastore of connection '{self.metastore_conn_id}' refused {what}: {message}"
                ) from exc
            except (TTransportException, OSError) as exc:
                raise MetastoreHookError(
                    f"lost the metastore of connection '{self.metastore_conn_id}' while reading {what}: "
                    f"{_reason(exc)}; check that the metastore server is running"
                ) from exc

    # -- notification API ---------------------------------------------------------------------------------
    def test_connection(self) -> tuple[bool, str]:
        """What the UI's "Test" button runs: one call of the notification API, as the DAGs make it.

        It passes only if the metastore answers and lets this connection's user read the notification log
        (an admin or proxy user), which is what the replication tasks need.
        """
        try:
            event_id = self.current_event_id()
        except MetastoreHookError as exc:
            return False, str(exc)
        host, port, user = self.address()
        return (
            True,
            f"metastore at {host}:{port} answers as {user}; its notification log is at event {event_id}",
        )

    def current_event_id(self) -> int:
        """Id of the newest event in the notification log (0 when empty)."""
        return int(self._call("the current event id", "get_current_notificationEventId").eventId)

    def next_events(
        self, last_event_id: int, max_events: int | None = None, skip_types: list[str] | None = None
    ) -> list[NotificationEvent]:
        """Events after ``last_event_id`` in id order, at most ``max_events`` of them (messages still encoded)."""
        from hmsrepl.metastore.events import NotificationEvent
        from hmsrepl.thrift.idl import hms

        request = hms.NotificationEventRequest(
            lastEvent=last_event_id, maxEvents=max_events, eventTypeSkipList=skip_types
        )
        response = self._call(f"events after {last_event_id}", "get_next_notification", request)
        return [
            NotificationEvent(
                e.eventId, e.eventTime, e.eventType, e.dbName, e.tableName, e.message, e.messageFormat
            )
            for e in response.events
        ]

    def events_count(self, db_name: str, from_event_id: int, to_event_id: int | None = None) -> int:
        """Number of ``db_name``'s events with ``from_event_id`` < id <= ``to_event_id``."""
        from hmsrepl.thrift.idl import hms

        request = hms.NotificationEventsCountRequest(
            fromEventId=from_event_id, dbName=db_name, toEventId=to_event_id
        )
        what = f"the event count of database '{db_name}'"
        try:
            return int(self._call(what, "get_notification_events_count", request).eventsCount)
        except MetastoreHookError as exc:
            if not _unknown_method(exc.__cause__):
                raise
        return self._count_by_reading(db_name, from_event_id, to_event_id)

    def _count_by_reading(self, db_name: str, from_event_id: int, to_event_id: int | None) -> int:
        """The count on a stock Hive 2.3 metastore, which has no count call: its log read page by page."""
        count, last = 0, from_event_id
        while to_event_id is None or last < to_event_id:
            page = self.next_events(last, COUNT_PAGE)
            for event in page:
                if to_event_id is not None and event.event_id > to_event_id:
                    return count
                count += (event.db_name or "").lower() == db_name.lower()
                last = event.event_id
            if len(page) < COUNT_PAGE:
                break
        return count

    def first_event_of(self, db_name: str, after: int, upto: int) -> NotificationEvent | None:
        """``db_name``'s first event with ``after`` < id <= ``upto``, or None: a bisection on event counts
        (about log2(upto - after) calls), so a replica far behind a busy source costs no scan of its log."""
        if upto <= after or self.events_count(db_name, after, upto) == 0:
            return None
        low, high = after, upto  # no event of db_name in (after, low]; at least one in (low, high]
        while high - low > 1:
            middle = (low + high) // 2
            if self.events_count(db_name, low, middle) > 0:
                high = middle
            else:
                low = middle
        found = self.next_events(high - 1, 1)
        return found[0] if found and found[0].event_id == high else None

    # -- databases -------------------------------------------------------------------------------------------
    def database_parameters(self, db_name: str) -> dict[str, str] | None:
        """A database's parameters, or None when the database does not exist."""
        from thriftpy2.thrift import TException

        from hmsrepl.thrift.idl import hms

        with self.get_conn() as client:
            try:
                return dict(client.get_database(db_name).parameters or {})
            except hms.NoSuchObjectException:
                return None
            except (TException, OSError) as exc:  # OSError: the socket timed out or was reset, as in _call
                raise MetastoreHookError(
                    f"metastore of connection '{self.metastore_conn_id}' could not read database "
                    f"'{db_name}': {_reason(exc)}"
                ) from exc

    def repl_last_id(self, db_name: str) -> int | None:
        """The last source event id replicated into ``db_name`` (its ``repl.last.id``), None if not a replica."""
        from hmsrepl.replication.target import REPL_LAST_ID

        params = self.database_parameters(db_name)
        value = (params or {}).get(REPL_LAST_ID)
        return int(value) if value is not None else None


def _unknown_method(exc: BaseException | None) -> bool:
    """Whether the metastore does not have the called method (an older Hive than the call)."""
    from thriftpy2.thrift import TApplicationException

    return isinstance(exc, TApplicationException) and exc.type == TApplicationException.UNKNOWN_METHOD


def _reason(exc: BaseException) -> str:
    """One line: the exception's message, or its cause's when the wrapper says nothing useful."""
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    cause = exc.__cause__ or exc.__context__
    if cause is not None and (not text or text == type(exc).__name__):
        return _reason(cause)
    return text or type(exc).__name__


class LegacyTypeMetastoreNotificationHook(MetastoreNotificationHook):
    """The same hook under the connection type's former name, so connections saved with it keep working."""

    conn_type = LEGACY_CONNECTION_TYPE
    hook_name = "Hive Metastore (hmsrepl, former type)"
