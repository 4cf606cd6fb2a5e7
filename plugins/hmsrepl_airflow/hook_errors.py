"""What a failed metastore call means for the task: an outage is retried, a mistake fails at once.

An Airflow retry helps only when the cause can go away by itself: a metastore restarting, a network blip, a KDC
briefly unreachable. A host name that does not resolve, credentials the KDC or the metastore refuses, a user the
notification API does not serve, or a port where something other than a Thrift metastore answers stay wrong
until an operator fixes the connection; retrying them only delays the alert by the retry delays. Those are
``MetastoreConfigError`` (with ``MetastoreAuthError`` and ``MetastoreProtocolError`` for the two kinds that
need telling apart in a message), which the operators turn into ``AirflowFailException``.

A refused TCP connection stays an outage: it is also what a metastore that is restarting looks like, and a port
nothing listens on cannot be told from one whose server is down.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator


class MetastoreHookError(Exception):
    """The metastore of a connection could not answer; the message says which one and what to check."""


class MetastoreConfigError(MetastoreHookError):
    """The connection itself is wrong (missing, incomplete, unknown host): retrying cannot help."""


class MetastoreAuthError(MetastoreConfigError):
    """The KDC or the metastore refused the connection's identity, or the identity may not read the log."""


class MetastoreProtocolError(MetastoreConfigError):
    """What answers at the connection's address does not speak the Hive Metastore Thrift protocol."""


#: getaddrinfo's answers for a name that does not exist (EAI_AGAIN, a resolver that timed out, retries).
_UNKNOWN_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
#: What MIT Kerberos says when no KDC answered: an outage of the KDC, not a refusal.
_KDC_DOWN = ("cannot contact any kdc", "cannot find kdc", "resource temporarily unavailable")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and every exception it was raised from or during (thriftpy2 chains implicitly)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def unknown_host(exc: BaseException) -> bool:
    """Whether the connection failed because its host name does not resolve at all."""
    return any(isinstance(e, socket.gaierror) and e.errno in _UNKNOWN_NAME for e in _chain(exc))


def not_thrift(exc: BaseException) -> bool:
    """Whether the peer answered bytes that are no Thrift binary-protocol reply (HTTP, SSH, TLS, ...)."""
    from thriftpy2.protocol.exc import TProtocolException

    for e in _chain(exc):
        if isinstance(e, TProtocolException):
            return True
        # The compiled protocol raises its own class, outside TProtocolException's hierarchy.
        if type(e).__name__ == "ProtocolError" and type(e).__module__.startswith("thriftpy2.protocol"):
            return True
    return False


def kdc_unreachable(exc: BaseException) -> bool:
    """Whether a Kerberos failure is the KDC not answering (worth a retry) rather than a refusal."""
    return any(marker in str(e).lower() for e in _chain(exc) for marker in _KDC_DOWN)
