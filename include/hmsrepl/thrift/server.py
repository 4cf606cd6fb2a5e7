"""The threaded Thrift metastore server (binary protocol, buffered transport; TLS and SASL GSSAPI optional).

Each client connection gets its own thread and keeps it while open (Spark holds a second connection open),
so the accept loop never blocks on a slow client. Each accepted connection is first wrapped by the
server's security (``thrift.auth``: TLS, Kerberos SASL) in its own thread; a refused client is logged and
closed while others are served. The C-accelerated binary protocol of thriftpy2 keeps large partition lists
cheap to encode. A housekeeping thread aborts timed-out transactions, releases abandoned locks, completes
file work left pending by a crash (``metastore.intents``), lists the objects that declared writes left
unlisted (``Metastore.reconcile_listings``), applies event and cmroot retention and retires the replaced
version directories of replica databases whose readers' grace period has passed (``replication.leftovers``). With ``cache_enabled``,
a metadata cache answers reads; its updater thread starts with the server (prewarming in the background, while reads go to the database) and stops with it.

Every connection is bounded (``hmsrepl.bounds``): at most ``thrift_max_workers`` are served at once (more
wait in the listen backlog), a request larger than ``thrift_max_message_bytes`` is refused as it is read
(a string declaring more bytes than the request may still carry is refused before one of them is read), a
connection idle or a request unfinished for ``thrift_client_timeout_seconds`` is closed, and accept errors
(EMFILE) back off instead of spinning. SIGTERM stops accepting, lets calls in flight finish for up to
``thrift_drain_seconds``, runs the shutdown tasks and returns, so the process exits 0.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import itertools
import logging
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor
from thriftpy2.transport import (
    TCyBufferedTransport,
    TCyBufferedTransportFactory,
    TCyMemoryBuffer,
    TServerSocket,
    TSocket,
    TTransportException,
)

from hmsrepl.bounds import ResourceBounds, resource_bounds
from hmsrepl.cache import MetadataCache
from hmsrepl.metastore import Metastore
from hmsrepl.monitoring.endpoint import MetricsEndpoint
from hmsrepl.monitoring.server_metrics import ServerMetrics, ServerStateCollector
from hmsrepl.monitoring.settings import MetricsSettings, metrics_settings
from hmsrepl.replication.leftovers import retire_due_everywhere
from hmsrepl.thrift.auth import AuthenticationError, Peer, ThriftSecurity, check_bind
from hmsrepl.thrift.handler import EncodedStructs, ErrorMappingDispatcher, MetastoreHandler
from hmsrepl.thrift.idl import Service

log = logging.getLogger(__name__)

_READ_BUFFER = 4096  # thriftpy2's read buffer starts this large and grows to hold the largest value read
_KEEP_READ_BUFFER = 1 << 20  # a connection's read buffer grown beyond this is replaced after the call
_ACCEPT_POLL_SECONDS = 0.5  # how often the accept loop looks at the stop flag and for a free worker
_ACCEPT_BACKOFF_MAX_SECONDS = 1.0
_REFUSED_DRAIN_SECONDS = (
    5.0  # after refusing a request, read (and drop) the rest this long so the client sees why
)
_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class _Processor(TProcessor):
    """Answers unknown methods with a message naming the method (thriftpy2 sends none), and sends results
    whose encoding is already known (partitions served from the metadata cache) without encoding them again.
    """

    #: Told of each call of a method this metastore does not have (metrics count them under one label).
    on_unknown_method: Callable[[], None] | None = None

    def process_in(self, iprot: Any) -> Any:
        api, seqid, result, call = super().process_in(iprot)
        if isinstance(result, TApplicationException) and result.type == TApplicationException.UNKNOWN_METHOD:
            # repr and a cut: the name is the client's bytes (no newlines or megabytes into the log)
            log.warning("a client called %r, which this metastore does not serve", api[:128])
            if self.on_unknown_method is not None:
                self.on_unknown_method()
            result = TApplicationException(
                TApplicationException.UNKNOWN_METHOD,
                f"method '{api}' is not supported by this metastore (hmsrepl)",
            )
        return api, seqid, result, call

    def send_result(self, oprot: Any, api: str, result: Any, seqid: int) -> None:
        """The whole reply is encoded in memory, then written in one piece: encoded through the connection's
        4 KB write buffer, a 1,000-partition reply (~900 kB) took ~200 socket writes."""
        success = getattr(result, "success", None)
        if not isinstance(success, EncodedStructs):
            reply = TCyMemoryBuffer()
            super().send_result(TCyBinaryProtocol(reply), api, result, seqid)
            oprot.trans.write(reply.getvalue())
            oprot.trans.flush()
            return None
        oprot.write_message_begin(api, TMessageType.REPLY, seqid)
        oprot.trans.write(success.result_bytes())
        oprot.write_message_end()
        oprot.trans.flush()
        return None


class _NoDelayServerSocket(TServerSocket):
    """Sends replies at once: with Nagle's algorithm on, a reply larger than the 4 KB write buffer waits
    ~40 ms for the client's delayed ACK (thriftpy2 sets TCP_NODELAY on client sockets only)."""

    def accept(self) -> TSocket:
        client = super().accept()
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client


class RequestRefused(TTransportException):
    """A request broke a limit while being read; the connection ends after the client is told why."""

    def __init__(self, message: str) -> None:
        super().__init__(TTransportException.UNKNOWN, message)


class _BudgetedReader:
    """What the buffered transport reads from: the connection's transport, counted against one request's limit.

    The buffered transport grows its read buffer to the size of the largest value it must hold and then asks
    for that many bytes at once, so a read larger than the buffer so far is a declared string or binary
    length: refused before its bytes are read (or allocated) when the request cannot carry that much more.
    Lists and maps are bounded by the bytes of their elements as they arrive. The buffer size is tracked as an
    upper bound, so a read that merely refills a grown buffer is never mistaken for a declared length.
    """

    def __init__(self, trans: Any, max_bytes: int, timeout: float | None) -> None:
        self.trans = trans
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.used = 0
        self.started = 0.0
        self.buffer_bound = _READ_BUFFER

    def begin_request(self) -> None:
        self.used = 0

    def read(self, size: int) -> bytes:
        remaining = self.max_bytes - self.used
        if size > self.buffer_bound:
            if size > remaining:
                raise RequestRefused(
                    f"request refused: a value of {size} bytes exceeds the message size limit of "
                    f"{self.max_bytes} bytes (HMSREPL_THRIFT_MAX_MESSAGE_BYTES); send smaller requests"
                )
            self.buffer_bound += size
        if remaining <= 0:
            raise RequestRefused(
                f"request refused: larger than the message size limit of {self.max_bytes} bytes "
                "(HMSREPL_THRIFT_MAX_MESSAGE_BYTES); send smaller requests"
            )
        chunk = self.trans.read(min(size, remaining))
        now = time.monotonic()
        if self.used == 0:
            self.started = now
        elif self.timeout and now - self.started > self.timeout:
            raise RequestRefused(
                f"request refused: not received within {self.timeout:g} s "
                "(HMSREPL_THRIFT_CLIENT_TIMEOUT_SECONDS)"
            )
        self.used += len(chunk)
        return chunk

    def write(self, data: bytes) -> None:
        self.trans.write(data)

    def flush(self) -> None:
        self.trans.flush()

    def is_open(self) -> bool:
        return self.trans.is_open()

    def close(self) -> None:
        self.trans.close()


class _Protocol(TCyBinaryProtocol):
    """The accelerated binary protocol, remembering the call being read so a refusal can answer it."""

    def __init__(self, trans: Any, connection: _Connection) -> None:
        super().__init__(trans)
        self.connection = connection

    def read_message_begin(self) -> Any:
        api, ttype, seqid = super().read_message_begin()
        self.connection.call_started(api, seqid)
        return api, ttype, seqid


class _Connection:
    """One client connection, served by one worker thread until the client leaves, idles out or the server
    stops; ``busy`` while a call is being processed (what a graceful stop waits for)."""

    def __init__(self, server: BoundedThreadedServer, client: TSocket) -> None:
        self.server = server
        self.client = client
        self.busy = False
        self.evicted = False
        self.idle_since = time.monotonic()
        self.api = ""
        self.seqid = 0
        self.peer = _peer(client)

    def call_started(self, api: str, seqid: int) -> None:
        self.api, self.seqid = api, seqid
        with self.server.state:
            self.busy = True

    def interrupt(self) -> None:
        """Wake the worker out of a blocking read (the server stops): the client sees the connection close."""
        with contextlib.suppress(OSError, AttributeError):  # already closed
            self.client.sock.shutdown(socket.SHUT_RDWR)

    def serve(self) -> None:
        limits = self.server.limits
        opened = self._open()
        if opened is None:
            return
        trans, peer = opened
        self.server.begin_connection(peer)
        reader = _BudgetedReader(trans, limits.thrift_max_message_bytes, _timeout(limits))
        iprot = _Protocol(TCyBufferedTransport(reader), self)
        oprot = TCyBinaryProtocol(TCyBufferedTransport(trans))
        try:
            while not self.server.stopping.is_set():
                reader.begin_request()
                self.api, self.seqid = "", 0
                try:
                    self.server.processor.process(iprot, oprot)
                finally:
                    with self.server.state:
                        self.busy = False
                        self.idle_since = time.monotonic()
                        self.server.state.notify_all()
                if reader.buffer_bound > _KEEP_READ_BUFFER:
                    # The read buffer grew to hold a large value and would keep that size (and its memory)
                    # while the connection stays open. Clients wait for each reply, so it holds nothing now.
                    reader.buffer_bound = _READ_BUFFER
                    iprot = _Protocol(TCyBufferedTransport(reader), self)
        except RequestRefused as exc:
            log.warning("%s from %s: %s", self.api or "request", self.peer, exc)
            self._refuse(oprot, exc)
        except (TTransportException, OSError):
            pass  # the client left, idled out, or the server is stopping
        except Exception:
            log.exception("connection from %s failed", self.peer)
        finally:
            trans.close()

    def _open(self) -> tuple[Any, Peer] | None:
        """The one place where an accepted connection is wrapped (TLS, SASL) before requests are read:
        the transport and the authenticated peer, or None when the client is refused (logged, closed)."""
        try:
            trans, peer = self.server.open_connection(self.client)
        except AuthenticationError as exc:
            log.warning("refused a connection from %s: %s", self.peer, exc)
            self.client.close()
            return None
        except Exception:  # a connection must never take its thread down with a traceback
            log.exception("refused a connection from %s: unexpected error while opening it", self.peer)
            self.client.close()
            return None
        if peer.authenticated:
            log.info("connection from %s authenticated as %s (QOP %s)", peer.host, peer.principal, peer.qop)
        return trans, peer

    def _refuse(self, oprot: Any, exc: RequestRefused) -> None:
        """Tell the client why, then read out what it is still sending, for a bounded
        time, so its send completes and it reads the answer instead of a reset connection."""
        sock = self.client.sock
        if sock is None:
            return
        try:
            # Refused before its name was read, a call is answered as call 0 of no name: clients raise an
            # exception reply before they match it to their call.
            error = TApplicationException(TApplicationException.PROTOCOL_ERROR, exc.message)
            self.server.processor.send_exception(oprot, self.api, error, self.seqid)
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + _REFUSED_DRAIN_SECONDS
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                if not sock.recv(1 << 20):
                    break
        except OSError:
            pass


class BoundedThreadedServer:
    """Accepts connections and serves each on its own thread, at most ``thrift_max_workers`` at a time.

    ``processor`` and the protocol/transport factories are those of a thriftpy2 server (binary protocol,
    buffered transport, both compiled), so clients see exactly what Spark's Hive client expects.
    """

    def __init__(
        self,
        processor: TProcessor,
        server_socket: TServerSocket,
        limits: ResourceBounds,
        *,
        open_connection: Callable[[TSocket], tuple[Any, Peer]],
        begin_connection: Callable[[Peer], None],
    ) -> None:
        self.processor = processor
        self.open_connection = open_connection
        self.begin_connection = begin_connection
        self.trans = server_socket
        self.limits = limits
        self.iprot_factory = TCyBinaryProtocolFactory()
        self.itrans_factory = TCyBufferedTransportFactory()
        self.stopping = threading.Event()
        self.state = threading.Condition()
        self.connections: set[_Connection] = set()
        self._slots = threading.BoundedSemaphore(limits.thrift_max_workers)
        self._ids = itertools.count(1)

    def serve(self) -> None:
        self.trans.listen()
        self.trans.sock.settimeout(_ACCEPT_POLL_SECONDS)
        backoff = 0.0
        while not self.stopping.is_set():
            if not self._slots.acquire(timeout=_ACCEPT_POLL_SECONDS):
                self._make_room()  # every worker taken: new connections wait in the listen backlog
                continue
            try:
                client = self.trans.accept()
            except TimeoutError:
                self._slots.release()
                continue
            except OSError as exc:
                self._slots.release()
                if self.stopping.is_set() or self.trans.sock is None:
                    break
                backoff = min(max(backoff * 2, 0.05), _ACCEPT_BACKOFF_MAX_SECONDS)
                level = logging.WARNING if exc.errno in _RESOURCE_ERRNOS else logging.ERROR
                log.log(level, "accept failed (%s); retrying in %.2f s", exc, backoff)
                self.stopping.wait(backoff)
                continue
            backoff = 0.0
            self._start(client)
        self._close_listener()

    def _make_room(self) -> None:
        """With every worker taken and a client waiting, close the connection idle the longest (its client
        reconnects when it next calls, as Hive clients do), so idle or trickling connections cannot lock new
        clients out until they time out. Connections in a call are never closed."""
        listener = self.trans.sock
        try:
            if listener is None or not select.select([listener], [], [], 0)[0]:
                return  # nobody is waiting
        except (OSError, ValueError):
            return
        with self.state:
            idle = [c for c in self.connections if not c.busy and not c.evicted]
            if not idle:
                return
            oldest = min(idle, key=lambda c: c.idle_since)
            oldest.evicted = True
        log.info(
            "all %d workers taken and a client waiting: closing the connection from %s, idle for %.1f s",
            self.limits.thrift_max_workers,
            oldest.peer,
            time.monotonic() - oldest.idle_since,
        )
        oldest.interrupt()

    def _start(self, client: TSocket) -> None:
        client.sock.settimeout(_timeout(self.limits))
        connection = _Connection(self, client)
        with self.state:
            self.connections.add(connection)
        thread = threading.Thread(
            target=self._run, args=(connection,), name=f"thrift-conn-{next(self._ids)}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError:  # no thread could be started: drop this connection, keep serving the others
            log.exception("cannot start a worker for %s", connection.peer)
            self._finished(connection)
            client.close()

    def _run(self, connection: _Connection) -> None:
        try:
            connection.serve()
        finally:
            self._finished(connection)

    def _finished(self, connection: _Connection) -> None:
        with self.state:
            self.connections.discard(connection)
            self.state.notify_all()
        self._slots.release()

    def _close_listener(self) -> None:
        with contextlib.suppress(OSError):
            self.trans.close()

    def close(self) -> None:
        """Stop accepting: new connections are refused at once; the accept loop ends and closes the socket."""
        self.stopping.set()
        listener = self.trans.sock
        if listener is not None:
            with contextlib.suppress(OSError):  # not listening yet, or closed already
                listener.shutdown(socket.SHUT_RDWR)

    def drain(self, seconds: float) -> tuple[int, int]:
        """After ``close``: end idle connections, wait up to ``seconds`` for calls in flight.

        Returns (calls that finished while waiting, calls still running when the time was up).
        """
        deadline = time.monotonic() + seconds
        with self.state:
            waited = sum(1 for c in self.connections if c.busy)
            for connection in self.connections:
                if not connection.busy:
                    connection.interrupt()
            while (left := deadline - time.monotonic()) > 0 and any(c.busy for c in self.connections):
                self.state.wait(min(left, 0.2))
                for connection in self.connections:  # a call that ended leaves its connection idle
                    if not connection.busy:
                        connection.interrupt()
            running = sum(1 for c in self.connections if c.busy)
        return waited - running, running


def _timeout(limits: ResourceBounds) -> float | None:
    return limits.thrift_client_timeout_seconds or None


def _peer(client: TSocket) -> str:
    try:
        host, port = client.sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        return "unknown peer"


class MetastoreServer:
    def __init__(
        self,
        store: Metastore,
        host: str = "127.0.0.1",
        port: int = 9083,
        *,
        cache: MetadataCache | None = None,
        limits: ResourceBounds | None = None,
        metrics: MetricsSettings | None = None,
    ) -> None:
        """``metrics`` (default: ``HMSREPL_METRICS_*``) with a port serves Prometheus metrics while serving."""
        check_bind(store.config, host, port)
        self.security = ThriftSecurity(store.config)
        self.store = store
        if cache is None and store.config.cache_enabled:
            cache = MetadataCache.from_config(store)
        self.cache = cache
        self.limits = limits or resource_bounds()
        self.handler = MetastoreHandler(store, cache, security=self.security)
        self.socket = _NoDelayServerSocket(host=host, port=port, client_timeout=None)
        dispatcher: Any = ErrorMappingDispatcher(self.handler)
        settings = metrics if metrics is not None else metrics_settings()
        self.metrics: ServerMetrics | None = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        if settings.port:
            self.metrics = ServerMetrics()
            dispatcher = self.metrics.instrument(dispatcher, Service.thrift_services)
            self.metrics_endpoint = MetricsEndpoint(self.metrics.registry, settings.host, settings.port)
        processor = _Processor(Service, dispatcher)
        if self.metrics is not None:
            processor.on_unknown_method = self.metrics.unknown_method
        self.server = BoundedThreadedServer(
            processor,
            self.socket,
            self.limits,
            open_connection=self.security.open_connection,
            begin_connection=self.handler.begin_connection,
        )
        self.shutdown_tasks: list[tuple[str, Callable[[], object]]] = [
            ("file work left pending", store.complete_file_intents)
        ]
        self._stop = threading.Event()
        if self.metrics is not None:
            self.metrics.registry.register(
                ServerStateCollector(
                    store,
                    open_connections=lambda: len(self.server.connections),
                    busy_connections=lambda: sum(1 for c in list(self.server.connections) if c.busy),
                    max_connections=self.limits.thrift_max_workers,
                    cache=self.cache,
                )
            )

    @property
    def port(self) -> int:
        return self.socket.sock.getsockname()[1] if self.socket.sock else 0

    def add_shutdown_task(self, name: str, task: Callable[[], object]) -> None:
        """Work to run once calls have drained on a graceful stop (pending post-commit work); its result is
        logged."""
        self.shutdown_tasks.append((name, task))

    def housekeeping(self, interval_seconds: float) -> None:
        while not self._stop.wait(interval_seconds):
            try:
                self.store.txns.abort_timed_out()
                self.store.locks.release_timed_out()
                self.store.cleanup_events()
                self.store.complete_file_intents()
                self.store.reconcile_listings()
                self.store.cleanup_cmroot()
                retire_due_everywhere(self.store)  # replicas' replaced versions whose grace has passed
            except Exception:  # housekeeping must outlive a database hiccup
                log.exception("metastore housekeeping failed; retrying in %s s", interval_seconds)

    def serve_forever(self, housekeeping_interval: float = 60.0) -> None:
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.start()  # first: a port in use fails before anything else starts
        threading.Thread(target=self.housekeeping, args=(housekeeping_interval,), daemon=True).start()
        if self.cache is not None:
            self.cache.start()
        log.info(
            "metastore listening on %s:%s (%s; max %d connections, messages up to %d bytes)",
            self.socket.host,
            self.socket.port,
            self.security.describe(),
            self.limits.thrift_max_workers,
            self.limits.thrift_max_message_bytes,
        )
        try:
            # A 1,000-partition reply creates ~30,000 objects: with default thresholds the cyclic collector
            # runs ~90 times per call and rescans the start-up heap. Freeze what exists, collect less often.
            gc.collect()
            gc.freeze()
            gc.set_threshold(50_000, 20, 100)
            self.server.serve()
            if self.server.stopping.is_set():
                self._shut_down()
        finally:
            self._stop.set()
            if self.cache is not None:
                self.cache.stop()
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.stop()
            self.store.close()

    def _shut_down(self) -> None:
        """Graceful part of a stop: calls in flight finish (bounded), then pending post-commit work runs."""
        seconds = self.limits.thrift_drain_seconds
        log.info("stopping: no longer accepting connections; waiting up to %g s for calls in flight", seconds)
        started = time.monotonic()
        finished, running = self.server.drain(seconds)
        log.info(
            "stopping: %d call(s) in flight finished in %.1f s%s",
            finished,
            time.monotonic() - started,
            f"; {running} call(s) still running were abandoned (each commits whole or not at all)"
            if running
            else "",
        )
        if not self.shutdown_tasks:
            log.info(
                "stopping: no pending post-commit work (each finished call ran its own before answering)"
            )
        for name, task in self.shutdown_tasks:
            try:
                log.info("stopping: %s: %s", name, task())
            except Exception:
                log.exception("stopping: %s failed", name)
        log.info("stopped")

    def request_stop(self) -> None:
        """Begin a graceful stop (what SIGTERM does): serve_forever drains, finishes and returns."""
        self.server.close()

    def stop(self) -> None:
        self._stop.set()
        if self.cache is not None:
            self.cache.stop()
        self.server.close()


def install_signal_handlers(server: MetastoreServer | None = None) -> None:
    """SIGTERM stops the server gracefully (see ``MetastoreServer.request_stop``); a second SIGTERM, or one
    before a server exists, ends the process at once like Ctrl-C does."""

    def _terminate(signum: int, _frame: Any) -> None:
        if server is None or server.server.stopping.is_set():
            raise SystemExit(128 + signum)
        log.info("SIGTERM received: stopping gracefully")
        server.request_stop()

    signal.signal(signal.SIGTERM, _terminate)


__all__ = [
    "BoundedThreadedServer",
    "MetastoreServer",
    "RequestRefused",
    "install_signal_handlers",
]
