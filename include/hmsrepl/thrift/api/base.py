"""The state the handler's API areas share: the metastore, the cache, and the connection's own state."""

from __future__ import annotations

import functools
import threading
import types
from typing import TYPE_CHECKING, Any

from hmsrepl.cache import CachedReads, MetadataCache
from hmsrepl.cache.attribution import TxnWriter
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore

if TYPE_CHECKING:  # annotations only: the server hands the handler its security settings and peers
    from hmsrepl.thrift.auth import Peer, ThriftSecurity


@functools.lru_cache(maxsize=4096)
def _write_ids(text: str | None) -> ValidWriteIdList | None:
    """Parsed once per distinct list: every call of a query repeats its lists, and parsing is half a hit's cost.

    No list (an old client, or a non-transactional table) means a read that does not ask for a snapshot.
    """
    return ValidWriteIdList.parse(text) if text else None


def _properties(environment_context: Any) -> dict[str, str] | None:
    return getattr(environment_context, "properties", None) if environment_context is not None else None


class HandlerContext:
    """What every API area of the handler shares: the metastore, its metadata cache, the security settings,
    and the state of the connection whose call this thread runs (one instance serves every connection)."""

    def __init__(
        self, store: Metastore, cache: MetadataCache | None = None, *, security: ThriftSecurity | None = None
    ) -> None:
        self.store = store
        self.security = security
        self.catalog = store.catalog
        self.cache = cache
        self.reads = CachedReads(store.catalog, cache)
        self.txn_writes = TxnWriter(store)
        self._current = threading.local()

    def begin_connection(self, peer: Peer) -> types.SimpleNamespace:
        """A new connection's state (who it is, what set_ugi said, declared writes), current in this thread.

        The server keeps it with the connection and makes it current (``resume_connection``) in whichever worker
        thread runs the connection's next call."""
        state = types.SimpleNamespace(peer=peer, user=peer.user or "", declared={}, declares=False)
        self._current.state = state
        return state

    def resume_connection(self, state: types.SimpleNamespace) -> None:
        self._current.state = state

    @property
    def local(self) -> types.SimpleNamespace:
        """The state of the connection whose call this thread runs (in-process callers: one per thread)."""
        state = getattr(self._current, "state", None)
        if state is None:
            state = self._current.state = types.SimpleNamespace()
        return state

    @property
    def peer(self) -> Peer | None:
        return getattr(self.local, "peer", None)

    @property
    def caller(self) -> str:
        """The user the notification API authorizes for this connection.

        Without authentication: what set_ugi claimed (empty until the client identifies itself). With it: the
        authenticated user; a principal that impersonates another user through set_ugi gets the lesser of the
        two (an admin acting as alice is alice, a proxy acting as an admin is still the proxy).
        """
        user = getattr(self.local, "user", "")
        peer = self.peer
        if peer is None or not peer.authenticated:
            return user
        if user != peer.user and peer.user in self.store.config.admin_users:
            return user
        return peer.user or ""

    def declared(self) -> dict[tuple[str, str, tuple[str, ...]], None]:
        """This connection's partitions whose INSERT came and whose alter has not, oldest first."""
        pending = getattr(self.local, "declared", None)
        if pending is None:
            pending = self.local.declared = {}
        return pending


class Area:
    """One API area of the handler (databases, tables, ...): its public methods are Thrift methods (and a few
    in-process ones), found by name through the handler's dispatch table."""

    def __init__(self, context: HandlerContext) -> None:
        self.context = context
        self.store = context.store
        self.security = context.security
        self.catalog = context.catalog
        self.cache = context.cache
        self.reads = context.reads
        self.txn_writes = context.txn_writes

    @property
    def _local(self) -> types.SimpleNamespace:
        return self.context.local

    @property
    def peer(self) -> Peer | None:
        return self.context.peer

    @property
    def caller(self) -> str:
        return self.context.caller

    def _declared(self) -> dict[tuple[str, str, tuple[str, ...]], None]:
        return self.context.declared()
