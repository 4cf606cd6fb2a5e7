"""The Thrift server's event-driven front end: one thread holds every connection and hands complete requests
to the workers.

A thread per connection let 250 idle sockets (or 330 that never start SASL) lock legitimate clients out.
Here one thread multiplexes every socket (``selectors``): it accepts without ever waiting on a peer, runs TLS
handshakes and reads bytes without blocking, finds where each request ends (``frames.MessageScanner``), and
only then gives the request to a worker (``concurrency.PriorityWorkers``). The worker decodes it, runs the call,
writes what the socket takes of the reply and gives the connection back; the front end sends the rest as the
client reads (``WRITING``, ``output.OutputBuffer``). A slow or silent client therefore costs a socket and its
bytes, never a worker.

Admission (``admission.Admission``): a connection limit, a per-address limit and a share reserved for admin
principals; over a limit the longest-idle connection is closed at once. Deadlines: the first call (or SASL
START) within ``thrift_handshake_seconds``, TLS and SASL done within ``HANDSHAKE_TIMEOUT_SECONDS``, a request
received within ``thrift_client_timeout_seconds``, an idle connection closed after as long. Memory: every
received byte and the estimated cost of decoding it is charged to the server's ``budget.MemoryBudget`` as it
arrives; when the budget is spent the connection stops being read (TCP pushes back on its client) for up to
``thrift_memory_wait_seconds``, then its request is refused with a retriable error naming the limit.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from hmsrepl.bounds import ResourceBounds
from hmsrepl.thrift import sasl
from hmsrepl.thrift.admission import Admission
from hmsrepl.thrift.auth import HANDSHAKE_TIMEOUT_SECONDS, Peer
from hmsrepl.thrift.budget import MemoryBudget, budget_message
from hmsrepl.thrift.frames import MessageRefused, MessageScanner
from hmsrepl.thrift.idl import Service, hms
from hmsrepl.thrift.output import OutputBuffer

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_SWEEP_SECONDS = 0.25
_SUMMARY_SECONDS = 10.0
_REFUSED_DRAIN_SECONDS = 5.0  # after refusing a request, read (and drop) the rest so the client sees why
_ACCEPT_BACKOFF_MAX_SECONDS = 1.0
_ACCEPTS_PER_ROUND = 256
_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_FRAME_LENGTH = struct.Struct("!I")

TLS, SASL, READY, BUSY, WRITING, DRAIN, CLOSED = "tls", "sasl", "ready", "busy", "writing", "drain", "closed"


def refusal(name: str, seqid: int, message: str, *, retriable: bool) -> bytes:
    """The reply refusing call ``name``: a retriable refusal (the memory budget) as the ``MetaException`` the
    method declares, as Hive's clients expect of a server-side failure; otherwise, or when the method declares
    none, a ``TApplicationException`` (clients raise it before they match it to their call)."""
    reply = TCyMemoryBuffer()
    protocol = TCyBinaryProtocol(reply)
    result_type = getattr(Service, f"{name}_result", None) if name in Service.thrift_services else None
    field = None
    if retriable and result_type is not None:
        field = next(
            (
                spec[1]
                for spec in result_type.thrift_spec.values()
                if len(spec) > 2 and spec[2] is hms.MetaException
            ),
            None,
        )
    if field is not None and result_type is not None:
        result = result_type()
        setattr(result, field, hms.MetaException(message))
        protocol.write_message_begin(name, TMessageType.REPLY, seqid)
        result.write(protocol)
    else:
        kind = TApplicationException.INTERNAL_ERROR if retriable else TApplicationException.PROTOCOL_ERROR
        protocol.write_message_begin(name, TMessageType.EXCEPTION, seqid)
        TApplicationException(kind, message).write(protocol)
    protocol.write_message_end()
    protocol.trans.flush()
    answer: bytes = reply.getvalue()
    return answer


class Connection:
    """One client connection; owned by the front end except while a worker runs its call (``BUSY``)."""

    def __init__(self, sock: socket.socket, host: str, port: int, now: float, out: OutputBuffer) -> None:
        self.sock: Any = sock
        self.host = host
        self.address = f"{host}:{port}"
        self.admin = False
        self.state = READY
        self.opened = now
        self.idle_since = now
        self.request_started = 0.0
        self.greeted = False  # the first call (or SASL START) began
        self.peer: Peer | None = None
        self.handler_state: Any = None
        self.raw = bytearray()  # SASL: received bytes not yet a whole negotiation message or frame
        self.data = bytearray()  # Thrift bytes of the request being received (and any after it)
        self.scanner: MessageScanner | None = None
        self.charged = 0  # budget bytes held for the request being received or run
        self.waiting_since = 0.0  # reading paused for the memory budget since then (0: not waiting)
        self.negotiation: sasl.ServerNegotiation | None = None
        self.framed = False  # SASL data frames after the negotiation
        self.codec: tuple[Any, Any] | None = None
        self.drain_until = 0.0
        self.events = 0
        #: Set by the worker that completed the SASL negotiation; the front end then admits the principal.
        self.authenticated_as: Peer | None = None
        #: Reply bytes not yet taken by the client: the worker's, then (``WRITING``) the front end's to send.
        self.out = out
        self.wrote_at = 0.0  # when the client last took reply bytes while WRITING

    @property
    def busy(self) -> bool:
        return self.state == BUSY

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def frame(self, payload: bytes) -> bytes:
        """``payload`` as the client reads it: a SASL data frame (wrapped under auth-int/conf) or as is."""
        if not self.framed:
            return payload
        if self.codec is not None:
            payload = self.codec[0](payload)
        return _FRAME_LENGTH.pack(len(payload)) + payload


class FrontEnd:
    """Accepts, admits, reads and dispatches; see the module docstring. Runs ``serve`` in its own thread."""

    def __init__(
        self,
        listener: socket.socket,
        limits: ResourceBounds,
        budget: MemoryBudget,
        *,
        dispatch: Callable[[Connection, bytearray, MessageScanner], None],
        negotiate: Callable[[Connection, int, bytes], None] | None,
        begin: Callable[[Connection, Peer], None],
        is_admin: Callable[[Peer], bool],
        tls: ssl.SSLContext | None,
    ) -> None:
        self.listener = listener
        self.limits = limits
        self.budget = budget
        self.dispatch = dispatch
        self.negotiate = negotiate
        self.begin = begin
        self.is_admin = is_admin
        self.tls = tls
        self.admission = Admission(
            limits.thrift_max_connections,
            limits.thrift_max_connections_per_peer,
            limits.thrift_admin_reserved_connections,
            stale_seconds=limits.thrift_handshake_seconds,
        )
        self.connections: set[Connection] = set()
        self.stopping = threading.Event()
        self.state = threading.Condition()  # guards handbacks; notified when a call ends (graceful stop)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._handbacks: collections.deque[Connection] = collections.deque()
        self._closes: collections.deque[Connection] = collections.deque()
        self._waiting: set[Connection] = set()
        self._listening_again = 0.0
        self._backoff = 0.0
        self._counts = collections.Counter[str]()
        self._summary_at = 0.0
        budget.on_release = self._budget_released

    # -- called from other threads ----------------------------------------------------------------------------
    def wake(self) -> None:
        """Make the loop look at handbacks and waiting requests now (one byte, unless one is unread)."""
        with self.state:
            if self._woken:
                return
            self._woken = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def hand_back(self, conn: Connection) -> None:
        """A worker is done with ``conn``: the front end reads its next request."""
        with self.state:
            self._handbacks.append(conn)
            self.state.notify_all()
        self.wake()

    def close_from_worker(self, conn: Connection) -> None:
        with self.state:
            self._closes.append(conn)
            self.state.notify_all()
        self.wake()

    def _woken_up(self) -> None:
        """Read the wake-up bytes; later hand-backs send a new one (the flag is reset with the queues taken)."""
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass

    def _budget_released(self) -> None:
        if self._waiting:
            self.wake()

    def stop(self) -> None:
        self.stopping.set()
        self.wake()

    # -- the loop ----------------------------------------------------------------------------------------------
    def serve(self) -> None:
        self.listener.setblocking(False)
        self._selector.register(self.listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        next_sweep = time.monotonic() + _SWEEP_SECONDS
        try:
            while not self.stopping.is_set():
                now = time.monotonic()
                for key, _mask in self._selector.select(timeout=max(0.0, next_sweep - now)):
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        self._woken_up()
                    else:
                        self._on_event(key.data)
                self._take_handbacks()
                if self._waiting:
                    self._retry_waiting()
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + _SWEEP_SECONDS
        finally:
            self._close_listener()

    def _close_listener(self) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(self.listener)
        with contextlib.suppress(OSError):
            self.listener.close()

    def close_idle(self) -> None:
        """On a graceful stop (the loop has ended): close every connection not in a call, after sending what
        the client takes now of a reply still being written (``WRITING``: closed once it is all sent)."""
        self._take_handbacks()
        for conn in list(self.connections):
            if conn.state == WRITING:
                self._write(conn)
            if conn.state not in (BUSY, WRITING):
                self._close(conn)

    def close_unsent(self) -> None:
        """End of a graceful stop: close the connections whose replies were not all taken in time."""
        for conn in list(self.connections):
            if conn.state == WRITING:
                self._close(conn)

    def _take_handbacks(self) -> None:
        with self.state:
            handbacks, self._handbacks = self._handbacks, collections.deque()
            closes, self._closes = self._closes, collections.deque()
            self._woken = False  # from now on a hand-back (or a release of memory) sends a new wake-up byte
        for conn in closes:
            self._close(conn)
        for conn in handbacks:
            if conn.state == CLOSED:
                continue
            conn.state = SASL if conn.negotiation is not None and not conn.negotiation.complete else READY
            if conn.authenticated_as is not None:
                peer, conn.authenticated_as = conn.authenticated_as, None
                self._authenticated(conn, peer)
                log.info(
                    "connection from %s authenticated as %s (QOP %s)", conn.address, peer.principal, peer.qop
                )
            conn.idle_since = time.monotonic()
            with contextlib.suppress(OSError):
                conn.sock.setblocking(False)
            if self.stopping.is_set():
                self._close(conn)
                continue
            if conn.out:  # the reply's rest is sent as the client reads; its next request after that
                conn.state = WRITING
                conn.wrote_at = conn.idle_since
                self.admission.active(conn)
                self._watch(conn, selectors.EVENT_WRITE)
                continue
            self._watch(conn, selectors.EVENT_READ)
            if conn.data or conn.raw:
                self._consume(conn)  # the client sent its next request before this reply (pipelining)
            elif conn.state in (READY, SASL):
                self.admission.idle(conn)

    # -- accepting ---------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                self._backoff = 0.0
                return
            except OSError as exc:
                if self.stopping.is_set():
                    return
                self._backoff = min(max(self._backoff * 2, 0.05), _ACCEPT_BACKOFF_MAX_SECONDS)
                level = logging.WARNING if exc.errno in _RESOURCE_ERRNOS else logging.ERROR
                log.log(level, "accept failed (%s); retrying in %.2f s", exc, self._backoff)
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(self.listener)
                self._listening_again = time.monotonic() + self._backoff
                return
            self._admit(sock, str(address[0]), int(address[1]))

    def _admit(self, sock: socket.socket, host: str, port: int) -> None:
        allowed, victims = self.admission.admit(host, time.monotonic())
        if not allowed:
            self._counts["refused (no connection to displace)"] += 1
            with contextlib.suppress(OSError):
                sock.close()
            return
        for victim in victims:
            self._counts["closed idle to make room"] += 1
            self._close(victim)  # type: ignore[arg-type]
        now = time.monotonic()
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(sock, host, port, now, OutputBuffer(self.budget))
        self.connections.add(conn)
        self.admission.add(conn)
        if self.tls is not None:
            try:
                conn.sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ssl.SSLError) as exc:
                self._refused(conn, f"TLS handshake with {host} failed: {exc}")
                return
            conn.state = TLS
        elif self.negotiate is not None:
            self._start_sasl(conn)
        else:
            self._authenticated(conn, Peer(host))
        self._watch(conn, selectors.EVENT_READ)
        self.admission.idle(conn)

    def _start_sasl(self, conn: Connection) -> None:
        conn.state = SASL
        conn.negotiation = None

    def _authenticated(self, conn: Connection, peer: Peer) -> None:
        conn.peer = peer
        conn.state = READY
        if peer.authenticated and self.is_admin(peer):
            self.admission.promote(conn)
        self.begin(conn, peer)

    # -- reading -----------------------------------------------------------------------------------------------
    def _watch(self, conn: Connection, events: int) -> None:
        if conn.events == events:
            return
        try:
            if conn.events:
                if events:
                    self._selector.modify(conn.sock, events, conn)
                else:
                    self._selector.unregister(conn.sock)
            elif events:
                self._selector.register(conn.sock, events, conn)
        except (KeyError, ValueError, OSError):
            self._close(conn)
            return
        conn.events = events

    def _on_event(self, conn: Connection) -> None:
        if conn.state == TLS:
            self._tls_step(conn)
            return
        if conn.state == WRITING:
            self._write(conn)
            return
        if conn.state in (BUSY, CLOSED):
            self._watch(conn, 0)
            return
        received = self._receive(conn)
        if received is None:
            return
        if conn.state == DRAIN:
            conn.raw.clear()
            conn.data.clear()
            return
        self._consume(conn)

    def _receive(self, conn: Connection) -> int | None:
        """Read what is there (into ``raw`` under SASL, else ``data``); None when the connection ended."""
        target = conn.raw if (conn.state == SASL or conn.framed) else conn.data
        total = 0
        try:
            while True:
                chunk = conn.sock.recv(_CHUNK)
                if not chunk:
                    self._close(conn)
                    return None
                target += chunk
                total += len(chunk)
                if len(chunk) < _CHUNK and not (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
                    break
                if total >= 4 * _CHUNK:
                    break  # let other connections have their turn
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (OSError, ssl.SSLError):
            self._close(conn)
            return None
        return total

    def _consume(self, conn: Connection) -> None:
        """Make progress on what ``conn`` has sent: SASL messages, frames, the request being received."""
        if conn.state == SASL:
            self._sasl_messages(conn)
            return
        if conn.state != READY:
            return
        if conn.framed and not self._unframe(conn):
            return
        if not conn.data:
            return
        self.admission.active(conn)
        if conn.scanner is None:
            conn.scanner = MessageScanner(self.limits.thrift_max_message_bytes)
            conn.request_started = time.monotonic()
        scanner = conn.scanner
        try:
            end = scanner.feed(conn.data)
        except MessageRefused as exc:
            self._refuse(conn, str(exc))
            return
        if scanner.started:
            conn.greeted = True
        if not self._charge(conn, (end or len(conn.data)) + scanner.decoded_estimate):
            return
        if end is None:
            return
        if end == len(conn.data):
            request, conn.data = conn.data, bytearray()
        else:
            request, conn.data = conn.data[:end], conn.data[end:]
        conn.scanner = None
        conn.state = BUSY
        self._watch(conn, 0)
        self.dispatch(conn, request, scanner)

    def _write(self, conn: Connection) -> None:
        """Send what the client of a ``WRITING`` connection takes; once all is sent, read its next request."""
        try:
            sent = conn.out.send(conn.sock)
        except (OSError, ssl.SSLError):
            self._close(conn)
            return
        now = time.monotonic()
        if sent:
            conn.wrote_at = now
        if conn.out:
            return
        conn.state = READY
        conn.idle_since = now
        self._watch(conn, selectors.EVENT_READ)
        if conn.data or conn.raw:
            self._consume(conn)  # sent while its reply was still being written
        else:
            self.admission.idle(conn)

    def _charge(self, conn: Connection, wanted: int) -> bool:
        """Hold ``wanted`` bytes of the budget for ``conn``'s request; False (reading paused) when it must wait."""
        delta = wanted - conn.charged
        if delta <= 0:
            return True
        if wanted > self.budget.limit:
            self._refuse(conn, budget_message(self.budget.limit, wanted), budget=True)
            return False
        if self.budget.try_reserve(delta):
            conn.charged += delta
            if conn.waiting_since:
                conn.waiting_since = 0.0
                self._waiting.discard(conn)
                self._watch(conn, selectors.EVENT_READ)
            return True
        if not conn.waiting_since:
            conn.waiting_since = time.monotonic()
            self._waiting.add(conn)
            self._watch(conn, 0)  # stop reading: the client waits in its TCP send buffer
            self._counts["waited for memory"] += 1
            self._break_deadlock()
        return False

    def _retry_waiting(self) -> None:
        for conn in sorted(self._waiting, key=lambda c: c.request_started):
            if conn.state == CLOSED:
                self._waiting.discard(conn)
                continue
            self._consume(conn)
        self._break_deadlock()

    def _break_deadlock(self) -> None:
        """Requests half received can hold the whole budget between them, each waiting for the others: when
        the memory not held by waiting requests is too little for any of them to finish (nothing running will
        give back enough), the youngest is refused at once, so the oldest finishes instead of all timing out."""
        while len(self._waiting) > 1:
            held = sum(c.charged for c in self._waiting)
            if self.budget.limit - held >= self.budget.limit // 4:  # enough is elsewhere, and comes back
                return
            youngest = max(self._waiting, key=lambda c: c.request_started)
            self._refuse(
                youngest,
                budget_message(self.budget.limit, youngest.charged + _CHUNK),
                budget=True,
            )
            for conn in sorted(self._waiting, key=lambda c: c.request_started):
                self._consume(conn)

    def _unframe(self, conn: Connection) -> bool:
        """Move whole SASL data frames from ``raw`` to ``data`` (unwrapped); False when the connection ended."""
        raw = conn.raw
        offset = 0
        while len(raw) - offset >= 4:
            (length,) = _FRAME_LENGTH.unpack_from(raw, offset)
            if length > sasl.MAX_FRAME:  # not a frame of ours: nothing sensible can be sent back
                log.warning(
                    "closed the connection from %s: SASL frame of %d bytes is larger than the limit of %d",
                    conn.address,
                    length,
                    sasl.MAX_FRAME,
                )
                self._close(conn)
                return False
            if len(raw) - offset - 4 < length:
                break
            payload = bytes(raw[offset + 4 : offset + 4 + length])
            offset += 4 + length
            if conn.codec is not None:
                try:
                    payload = conn.codec[1](payload)
                except Exception as exc:  # a tampered or foreign frame: this connection is over
                    log.warning(
                        "closed the connection from %s: SASL frame failed its integrity check: %s",
                        conn.address,
                        exc,
                    )
                    self._close(conn)
                    return False
            conn.data += payload
        if offset:
            del raw[:offset]
        if raw and conn.scanner is None and not conn.data:
            conn.request_started = conn.request_started or time.monotonic()
            self.admission.active(conn)
        return True

    def _sasl_messages(self, conn: Connection) -> None:
        try:
            parsed = sasl.parse_message(conn.raw)
        except sasl.SaslRefusal as exc:
            self._sasl_refuse(conn, exc)
            return
        if parsed is None:
            if conn.raw:
                self.admission.active(conn)
            return
        status, payload, used = parsed
        del conn.raw[:used]
        conn.greeted = True
        conn.state = BUSY
        self._watch(conn, 0)
        assert self.negotiate is not None
        self.negotiate(conn, status, payload)

    def _sasl_refuse(self, conn: Connection, exc: sasl.SaslRefusal) -> None:
        with contextlib.suppress(OSError):
            conn.sock.send(sasl.encode_message(exc.status, str(exc).encode()))
        self._refused(conn, f"SASL negotiation with {conn.host} failed: {exc}")

    def _tls_step(self, conn: Connection) -> None:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ssl.SSLError) as exc:
            self._refused(conn, f"TLS handshake with {conn.host} failed: {exc}")
            return
        self._watch(conn, selectors.EVENT_READ)
        if self.negotiate is not None:
            self._start_sasl(conn)
        else:
            self._authenticated(conn, Peer(conn.host))
        self.admission.idle(conn)
        if conn.sock.pending():
            self._on_event(conn)

    # -- refusing and closing ----------------------------------------------------------------------------------
    def _refuse(self, conn: Connection, message: str, budget: bool = False) -> None:
        """Tell the client why its request is refused, then read out (and drop) the rest for a while."""
        scanner = conn.scanner
        name, seqid = (scanner.name, scanner.seqid) if scanner is not None and scanner.started else ("", 0)
        log.warning("%s from %s: %s", name or "request", conn.address, message)
        self._counts["requests refused"] += 1
        with contextlib.suppress(OSError, ssl.SSLError):  # best effort, never waiting: a small reply
            conn.sock.send(conn.frame(refusal(name, seqid, message, retriable=budget)))
            if not isinstance(conn.sock, ssl.SSLSocket):
                conn.sock.shutdown(socket.SHUT_WR)
        self._release(conn)
        self._waiting.discard(conn)
        conn.waiting_since = 0.0
        conn.scanner = None
        conn.data = bytearray()
        conn.raw = bytearray()
        conn.state = DRAIN
        conn.drain_until = time.monotonic() + _REFUSED_DRAIN_SECONDS
        self.admission.active(conn)
        self._watch(conn, selectors.EVENT_READ)

    def _refused(self, conn: Connection, reason: str) -> None:
        log.warning("refused a connection from %s: %s", conn.address, reason)
        self._close(conn)

    def _release(self, conn: Connection) -> None:
        charged, conn.charged = conn.charged, 0
        self.budget.release(charged)

    def _close(self, conn: Connection) -> None:
        if conn.state == CLOSED:
            return
        if conn.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(conn.sock)
            conn.events = 0
        conn.state = CLOSED
        self._release(conn)
        conn.out.clear()
        self._waiting.discard(conn)
        self.admission.remove(conn)
        self.connections.discard(conn)
        with contextlib.suppress(OSError):
            conn.sock.close()
        conn.raw = bytearray()
        conn.data = bytearray()
        with self.state:
            self.state.notify_all()

    # -- deadlines ---------------------------------------------------------------------------------------------
    def _sweep(self, now: float) -> None:
        if self._listening_again and now >= self._listening_again and not self.stopping.is_set():
            self._listening_again = 0.0
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.register(self.listener, selectors.EVENT_READ, None)
        limits = self.limits
        first = limits.thrift_handshake_seconds
        timeout = limits.thrift_client_timeout_seconds
        for conn in list(self.connections):
            state = conn.state
            if state in (BUSY, CLOSED):
                continue
            if state == DRAIN:
                if now >= conn.drain_until:
                    self._close(conn)
                continue
            if state == WRITING:
                if timeout and now - conn.wrote_at > timeout:
                    self._counts["closed: reply not read within the client timeout"] += 1
                    self._close(conn)
                elif now - conn.wrote_at > first:
                    self.admission.idle(conn)  # reading this slowly, it may be displaced like an idle one
                continue
            age = now - conn.opened
            if not conn.greeted and age > first:
                self._counts["closed: no call within the handshake deadline"] += 1
                log.debug("closed %s: nothing within %g s", conn.address, first)
                self._close(conn)
            elif state in (TLS, SASL) and age > HANDSHAKE_TIMEOUT_SECONDS:
                self._refused(conn, f"TLS/SASL not completed within {HANDSHAKE_TIMEOUT_SECONDS:g} s")
            elif conn.waiting_since and now - conn.waiting_since > limits.thrift_memory_wait_seconds:
                self._refuse(
                    conn,
                    budget_message(self.budget.limit, conn.scanner.decoded_estimate if conn.scanner else 0),
                    budget=True,
                )
            elif conn.scanner is not None or conn.raw:
                started = conn.request_started or conn.idle_since
                if timeout and now - started > timeout:
                    self._refuse(
                        conn,
                        f"request refused: not received within {timeout:g} s (HMSREPL_THRIFT_CLIENT_TIMEOUT_SECONDS)",
                    )
                elif now - started > first:
                    self.admission.idle(conn)  # receiving this slowly, it may be displaced like an idle one
            elif state == READY and timeout and now - conn.idle_since > timeout:
                self._counts["closed idle past the client timeout"] += 1
                self._close(conn)
        if now - self._summary_at >= _SUMMARY_SECONDS:
            self._summary_at = now
            if self._counts:
                summary = ", ".join(f"{count} {what}" for what, count in sorted(self._counts.items()))
                log.info(
                    "admission in the last %g s: %s (%d connections open)",
                    _SUMMARY_SECONDS,
                    summary,
                    len(self.connections),
                )
                self._counts.clear()


__all__ = ["BUSY", "WRITING", "Connection", "FrontEnd"]
