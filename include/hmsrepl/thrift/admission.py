"""Who may hold one of the Thrift server's connections, and whom a new client displaces when they are all held.

Connections are cheap for the event-driven front end (no thread each), but not free: file descriptors and
buffers. So there is a limit (``thrift_max_connections``), a smaller one per client address
(``thrift_max_connections_per_peer``), and a share (``thrift_admin_reserved_connections``) that only
authenticated admin principals may hold. A new connection over a limit closes, at once, the connection that has
been idle the longest within that limit (its client reconnects on its next call, as Hive clients do): a peer
over its own limit displaces only its own connections, and at the total limit the newcomer displaces the
longest-idle connection of the address holding the most, so a flood from a few addresses displaces itself, not
the clients that hold a few connections each. Connections in a call are never displaced; admin connections never by others. When nobody can be
displaced the new connection is refused.

Bookkeeping only, no I/O and no locks: the front end's one thread owns it. Idle connections are kept in the
order they became idle, so the oldest is found in constant time however many a flood holds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Protocol


class Member(Hashable, Protocol):
    host: str
    admin: bool
    idle_since: float


class Admission:
    def __init__(
        self, max_connections: int, per_peer: int, admin_reserved: int, stale_seconds: float = 0.0
    ) -> None:
        self.max_connections = max_connections
        self.stale_seconds = stale_seconds
        self.per_peer = per_peer
        self.admin_reserved = min(admin_reserved, max_connections - 1)
        self.members: set[Member] = set()
        self.admins = 0
        self._by_peer: dict[str, int] = {}
        self._idle: OrderedDict[Member, None] = OrderedDict()  # non-admin, oldest first
        self._idle_by_peer: dict[str, OrderedDict[Member, None]] = {}

    @property
    def others(self) -> int:
        """Connections not (yet) known to be an admin's: they share what the reservation leaves."""
        return len(self.members) - self.admins

    def admit(self, host: str, now: float) -> tuple[bool, list[Member]]:
        """Whether a new connection from ``host`` may be held, and the idle connections to close for it.

        A newcomer displaces a connection of its own address only when that one has been idle for
        ``stale_seconds``: a client reconnecting as fast as it is displaced would otherwise churn its own
        connections as fast as it can (a flood's favourite loop); it is refused instead, which costs an accept."""
        victims: list[Member] = []
        if self._by_peer.get(host, 0) >= self.per_peer:
            victim = self._oldest_idle(self._idle_by_peer.get(host))
            if victim is None or now - victim.idle_since < self.stale_seconds:
                return False, []
            victims.append(victim)
        others = self.others - sum(1 for v in victims if not v.admin)
        if others >= self.max_connections - self.admin_reserved or (
            len(self.members) - len(victims) >= self.max_connections
        ):
            # A fresh connection is displaced only for a client holding fewer than its address (by two, so two
            # floods of one size cannot displace each other back and forth); a stale one for anybody.
            heaviest = self._heaviest(host)
            victim = self._oldest_idle(self._idle_by_peer.get(heaviest), skip=victims)
            outweighed = self._by_peer.get(heaviest, 0) > self._by_peer.get(host, 0) + 1
            if victim is None or (not outweighed and now - victim.idle_since < self.stale_seconds):
                victim = self._oldest_idle(self._idle, skip=victims)
                if victim is not None and now - victim.idle_since < self.stale_seconds:
                    victim = None
            if victim is None:
                return False, []
            victims.append(victim)
        return True, victims

    @staticmethod
    def _oldest_idle(
        idle: OrderedDict[Member, None] | None, skip: list[Member] | None = None
    ) -> Member | None:
        if not idle:
            return None
        for member in idle:
            if not skip or member not in skip:
                return member
        return None

    def _heaviest(self, newcomer: str) -> str:
        """The address holding the most connections (counting the newcomer) among those with an idle one."""
        best, most = newcomer, -1
        for host in self._idle_by_peer:
            held = self._by_peer.get(host, 0) + (1 if host == newcomer else 0)
            if held > most:
                best, most = host, held
        return best

    def add(self, member: Member) -> None:
        self.members.add(member)
        self._by_peer[member.host] = self._by_peer.get(member.host, 0) + 1

    def remove(self, member: Member) -> None:
        if member not in self.members:
            return
        self.active(member)
        self.members.discard(member)
        if member.admin:
            self.admins -= 1
        left = self._by_peer.get(member.host, 1) - 1
        if left:
            self._by_peer[member.host] = left
        else:
            self._by_peer.pop(member.host, None)

    def promote(self, member: Member) -> None:
        """``member`` authenticated as an admin principal: it now holds one of the reserved connections."""
        if member in self.members and not member.admin:
            self.active(member)
            member.admin = True
            self.admins += 1

    def idle(self, member: Member) -> None:
        """``member`` waits for its client's next call: the newest idle connection (admins are never listed)."""
        if member.admin or member not in self.members:
            return
        self._idle.pop(member, None)
        self._idle[member] = None
        peer = self._idle_by_peer.setdefault(member.host, OrderedDict())
        peer.pop(member, None)
        peer[member] = None

    def active(self, member: Member) -> None:
        """``member`` is receiving or running a call: not to be displaced."""
        self._idle.pop(member, None)
        peer = self._idle_by_peer.get(member.host)
        if peer is not None:
            peer.pop(member, None)
            if not peer:
                del self._idle_by_peer[member.host]


__all__ = ["Admission", "Member"]
