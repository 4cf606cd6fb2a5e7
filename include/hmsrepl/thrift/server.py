"""The Thrift metastore server (binary protocol, buffered transport; TLS and SASL GSSAPI optional).

One event-driven front end (``thrift.frontend``) holds every connection: it accepts without waiting on any
peer, runs TLS handshakes, reads bytes as they come and hands each complete request (and each SASL negotiation
step) to one of ``thrift_max_workers`` worker threads, which decodes it, runs the call, writes the reply and
gives the connection back. Idle, silent or trickling clients therefore hold a socket, not a worker; Spark keeps a
second connection open at no cost. Admission (``thrift.admission``) bounds connections in total, per address
and for non-admins, closing the longest-idle one at once for a newcomer; one memory budget (``thrift.budget``)
covers requests being received and decoded, the handler's work (``budget.CallMemory``) and replies not yet
sent. Partition lists longer than ``partition_pages.PAGE_ROWS`` are read from the database in keyset pages and
encoded and written a page at a time; other large list replies in pages of ``REPLY_PAGE`` structs. Replies are
written without blocking: what the client does not take at once is sent by the front end (``thrift.output``),
so a slow reader holds no worker. The C-accelerated binary protocol of thriftpy2 keeps large partition lists
cheap to encode.

A housekeeping thread aborts timed-out transactions, releases abandoned locks, completes
file work left pending by a crash (``metastore.intents``), lists the objects that declared writes left
unlisted (``Metastore.reconcile_listings``), applies event and cmroot retention and retires the replaced
version directories of replica databases whose readers' grace period has passed (``replication.leftovers``). With ``cache_enabled``,
a metadata cache answers reads; its updater thread starts with the server (prewarming in the background, while reads go to the database) and stops with it.

Limits (``hmsrepl.bounds``): a request larger than ``thrift_max_message_bytes`` is refused as it is read (a
string or list declaring more than the request may still carry before any of it arrives); a connection must
start its first call (or SASL) within ``thrift_handshake_seconds``; a connection idle or a request unfinished
for ``thrift_client_timeout_seconds`` is closed or refused; accept errors (EMFILE) back off instead of spinning.
SIGTERM stops accepting, lets calls in flight finish for up to ``thrift_drain_seconds``, runs the shutdown tasks
and returns, so the process exits 0.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import select
import signal
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor, TType
from thriftpy2.transport import TCyBufferedTransport, TCyMemoryBuffer, TTransportException

from hmsrepl.bounds import ResourceBounds, resource_bounds
from hmsrepl.cache import MetadataCache
from hmsrepl.concurrency import PriorityWorkers
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.partition_pages import PartitionPages
from hmsrepl.monitoring.endpoint import MetricsEndpoint
from hmsrepl.monitoring.server_metrics import ServerMetrics, ServerStateCollector
from hmsrepl.monitoring.settings import MetricsSettings, metrics_settings
from hmsrepl.replication.leftovers import retire_due_everywhere
from hmsrepl.thrift import sasl
from hmsrepl.thrift.auth import AuthenticationError, Peer, ThriftSecurity, check_bind
from hmsrepl.thrift.budget import BudgetExceeded, CallMemory, MemoryBudget, return_freed_memory
from hmsrepl.thrift.frames import MessageRefused, MessageScanner
from hmsrepl.thrift.frontend import BUSY, WRITING, Connection, FrontEnd
from hmsrepl.thrift.handler import EncodedStructs, ErrorMappingDispatcher, MetastoreHandler
from hmsrepl.thrift.idl import Service
from hmsrepl.thrift.refusals import refusal

log = logging.getLogger(__name__)

_LISTEN_BACKLOG = 1024  # the front end accepts at once; this only covers a burst between two of its rounds
#: Structs per page of a large list reply (~90 kB of partitions): encoded, charged and written one at a time.
REPLY_PAGE = 100
_LIST_OF_STRUCTS = struct.Struct("!bhbi")
#: After a call whose request held this much of the budget, freed heap pages are given back to the system.
_TRIM_AFTER_BYTES = 16 * 1024 * 1024
#: How long a worker that just answered waits for the same client's next call before giving the connection
#: back to the front end (only when no other call waits for a worker), and how much it reads then.
_LINGER_SECONDS = 0.01
_LINGER_READ = 64 * 1024
#: Unsent reply bytes a connection holds at least before its worker waits for the client (else 1/64 of the
#: memory budget): larger replies to slow readers hold a worker, smaller ones never do.
_HELD_MIN = 4 * 1024 * 1024
#: Pieces of a reply up to this size in total are joined into one write; larger ones are written one by one
#: (a page of a large reply is not copied again).
_JOIN_MAX = 64 * 1024


class _Processor(TProcessor):
    """Answers a method our IDL does not declare (thriftpy2 skips its arguments and sends no message) with Hive's
    unknown-method error naming the method and the reason it is refused (``thrift.refusals``), lets a request's bytes go
    once decoded, and writes large list replies in pages (those of the metadata cache already encoded).
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
            result = refusal(api)
        return api, seqid, result, call

    def process(self, iprot: Any, oprot: Any, decoded: Callable[[], None] | None = None) -> None:
        """thriftpy2's ``process``, telling ``decoded`` when the request's bytes are no longer needed."""
        api, seqid, result, call = self.process_in(iprot)
        if decoded is not None:
            decoded()
        if isinstance(result, TApplicationException):
            return self.send_exception(oprot, api, result, seqid)
        try:
            result.success = call()
        except TApplicationException as exc:
            return self.send_exception(oprot, api, exc, seqid)
        except Exception as exc:
            if not self.handle_exception(exc, result):
                raise
        if not result.oneway:
            self.send_result(oprot, api, result, seqid)
        return None

    def send_result(self, oprot: Any, api: str, result: Any, seqid: int) -> None:
        """A list reply of more than ``REPLY_PAGE`` structs is encoded and written a page at a time, each page
        held in the memory budget while written; any other reply is encoded in memory and written in one piece
        (through the connection's 4 KB write buffer, a 1,000-partition reply took ~200 socket writes)."""
        success = getattr(result, "success", None)
        writer = getattr(oprot, "writer", None)
        if writer is not None and isinstance(success, PartitionPages):
            self._send_stream(writer, api, success, seqid)
            return None
        if (
            writer is not None
            and isinstance(success, list)
            and len(success) > REPLY_PAGE
            and hasattr(success[0], "write")  # structs (partitions); lists of names are small
        ):
            self._send_pages(writer, api, success, seqid)
            return None
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

    @staticmethod
    def _reply_header(api: str, seqid: int, count: int) -> bytes:
        """The reply's message header and the start of its success field, a list of ``count`` structs."""
        head = TCyMemoryBuffer()
        protocol = TCyBinaryProtocol(head)
        protocol.write_message_begin(api, TMessageType.REPLY, seqid)
        protocol.trans.flush()
        header: bytes = head.getvalue() + _LIST_OF_STRUCTS.pack(TType.LIST, 0, TType.STRUCT, count)
        return header

    @staticmethod
    def _encoded(items: Iterable[Any]) -> bytes:
        buffer = TCyMemoryBuffer()
        protocol = TCyBinaryProtocol(buffer)
        for item in items:
            item.write(protocol)
        protocol.trans.flush()
        page: bytes = buffer.getvalue()
        return page

    def _send_stream(self, writer: _ReplyWriter, api: str, items: PartitionPages, seqid: int) -> None:
        """A reply read from the database a page at a time (``partition_pages``): each page encoded and
        written before the next is read, so no more than one page of structs exists at once. A failure
        after the first bytes ends the connection (the client sees a broken reply, never a wrong one)."""
        try:
            writer.write(self._reply_header(api, seqid, len(items)))
            for page in items.pages():
                while page:  # encoded REPLY_PAGE structs at a time, each let go once encoded
                    encoded = self._encoded(page[:REPLY_PAGE])
                    del page[:REPLY_PAGE]
                    writer.send_page(encoded)
                    del encoded
                del page  # not held while the next page is read
            writer.send_page(b"\x00")  # the STOP that closes the result struct
        except Exception as exc:
            if isinstance(exc, OSError):
                raise
            log.error("%s: the reply broke off after it began; closing the connection", api, exc_info=exc)
            raise TTransportException(TTransportException.UNKNOWN, f"{api}: reply broke off") from exc
        finally:
            items.close()

    def _send_pages(self, writer: _ReplyWriter, api: str, items: list[Any], seqid: int) -> None:
        header = self._reply_header(api, seqid, len(items))
        encoded = items.encoded if isinstance(items, EncodedStructs) else None
        for start in range(0, len(items), REPLY_PAGE):
            if encoded is not None:
                page = b"".join(encoded[start : start + REPLY_PAGE])
            else:
                page = self._encoded(items[start : start + REPLY_PAGE])
            if start == 0:
                page = header + page
            if start + REPLY_PAGE >= len(items):
                page += b"\x00"  # the STOP that closes the result struct
            writer.send_page(page)


class _RequestReader:
    """A received request as the buffered transport reads it; ``close`` lets its bytes go once decoded."""

    def __init__(self, data: bytearray) -> None:
        self._view: memoryview | None = memoryview(data)
        self._data: bytearray | None = data
        self._pos = 0

    def read(self, size: int) -> bytes:
        if self._view is None:
            return b""
        chunk = bytes(self._view[self._pos : self._pos + size])
        self._pos += len(chunk)
        return chunk

    def close(self) -> None:
        if self._view is not None:
            self._view.release()
        self._view = self._data = None

    def is_open(self) -> bool:
        return self._view is not None


class _ReplyWriter:
    """Where a reply goes: the connection's socket without blocking, one SASL frame per flush. What the
    socket does not take at once waits in the connection's ``OutputBuffer`` (charged to the memory budget),
    sent by the front end once the call is over; the worker waits for its client only while the connection
    holds more than ``held_max`` unsent bytes, at most the client timeout without progress."""

    def __init__(self, conn: Connection, held_max: int, timeout: float | None) -> None:
        self.conn = conn
        self.held_max = held_max
        self.timeout = timeout
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._parts.append(data)

    def flush(self) -> None:
        parts, self._parts = self._parts, []
        if not parts:
            return
        if len(parts) > 1 and sum(len(part) for part in parts) <= _JOIN_MAX:
            parts = [b"".join(parts)]  # small pieces (a reply's header and body): one send, one SASL frame
        conn = self.conn
        for part in parts:
            if part:
                conn.out.write(conn.sock, conn.frame(part))
        del part
        parts.clear()
        if conn.out.size > self.held_max:
            conn.out.wait_below(conn.sock, self.held_max // 2, self.timeout)

    def send_page(self, data: bytes) -> None:
        """Write one page of a reply (buffered parts first)."""
        self._parts.append(data)
        self.flush()

    def is_open(self) -> bool:
        return True

    def close(self) -> None:
        pass


class _ReplyProtocol(TCyBinaryProtocol):
    """The accelerated binary protocol writing to a connection, with the writer at hand for paged replies."""

    def __init__(self, writer: _ReplyWriter) -> None:
        super().__init__(TCyBufferedTransport(writer))
        self.writer = writer


class ThriftServer:
    """The event-driven front end (``thrift.frontend``) with ``thrift_max_workers`` worker threads.

    ``processor`` is a thriftpy2 processor (binary protocol, buffered transport, both compiled), so clients see
    exactly what Spark's Hive client expects.
    """

    def __init__(
        self,
        processor: _Processor,
        host: str,
        port: int,
        limits: ResourceBounds,
        security: ThriftSecurity,
        *,
        begin_connection: Callable[[Peer], Any],
        resume_connection: Callable[[Any], None],
        is_admin: Callable[[Peer], bool],
    ) -> None:
        self.processor = processor
        self.host = host
        self.requested_port = port
        self.limits = limits
        self.security = security
        self.begin_connection = begin_connection
        self.resume_connection = resume_connection
        self.is_admin = is_admin
        self.budget = MemoryBudget(limits.thrift_memory_budget_bytes)
        self.workers = PriorityWorkers(limits.thrift_max_workers, "thrift-worker")
        self._lingering = 0
        self._lingering_lock = threading.Lock()
        self._max_lingering = max(1, limits.thrift_max_workers // 4)
        #: Unsent reply bytes a connection may hold before its worker waits for the client to read.
        self._held_max = max(_HELD_MIN, limits.thrift_memory_budget_bytes // 64)
        self.stopping = threading.Event()
        self.listener: socket.socket | None = None
        self.frontend: FrontEnd | None = None

    @property
    def connections(self) -> set[Connection]:
        return self.frontend.connections if self.frontend is not None else set()

    @property
    def state(self) -> threading.Condition:
        assert self.frontend is not None
        return self.frontend.state

    def bind(self) -> socket.socket:
        if self.listener is None:
            family = socket.getaddrinfo(self.host or None, self.requested_port, type=socket.SOCK_STREAM)[0][0]
            self.listener = socket.create_server(
                (self.host, self.requested_port), family=family, backlog=_LISTEN_BACKLOG
            )
            self.frontend = FrontEnd(
                self.listener,
                self.limits,
                self.budget,
                dispatch=self._dispatch,
                negotiate=self._negotiate if self.security.kerberos else None,
                begin=self._begin,
                is_admin=self.is_admin,
                tls=self.security.tls,
            )
        return self.listener

    def serve(self) -> None:
        self.bind()
        assert self.frontend is not None
        if self.stopping.is_set():
            self.frontend.stop()
        self.frontend.serve()

    # -- the front end's callbacks (its thread) -----------------------------------------------------------------
    def _begin(self, conn: Connection, peer: Peer) -> None:
        conn.handler_state = self.begin_connection(peer)

    def _dispatch(self, conn: Connection, request: bytearray, scanner: MessageScanner) -> None:
        priority = 0 if conn.admin else 1
        self.workers.submit(lambda: self._call(conn, request), priority)

    def _negotiate(self, conn: Connection, status: int, payload: bytes) -> None:
        self.workers.submit(lambda: self._sasl_step(conn, status, payload), 0 if conn.admin else 1)

    # -- the workers -----------------------------------------------------------------------------------------
    def _own(self, conn: Connection) -> None:
        """Blocking writes, bounded by the client timeout, while this worker owns the connection."""
        conn.sock.setblocking(True)
        conn.sock.settimeout(_timeout(self.limits))

    def _sasl_step(self, conn: Connection, status: int, payload: bytes) -> None:
        frontend = self.frontend
        assert frontend is not None
        try:
            self._own(conn)
            if conn.negotiation is None:
                conn.negotiation = self.security.negotiation()
            try:
                answer = conn.negotiation.step(status, payload)
            except sasl.SaslRefusal as exc:
                with contextlib.suppress(OSError):
                    conn.sock.sendall(sasl.encode_message(exc.status, str(exc).encode()))
                raise AuthenticationError(f"SASL negotiation with {conn.host} failed: {exc}") from None
            except sasl.SaslError as exc:
                raise AuthenticationError(f"SASL negotiation with {conn.host} failed: {exc}") from None
            if answer is not None:
                conn.sock.sendall(sasl.encode_message(*answer))
            if conn.negotiation.complete:
                peer, codec = self.security.negotiated(conn.host, conn.negotiation)
                conn.codec, conn.framed, conn.authenticated_as = codec, True, peer
        except AuthenticationError as exc:
            log.warning("refused a connection from %s: %s", conn.address, exc)
            frontend.close_from_worker(conn)
            return
        except Exception as exc:  # the client left, or the mechanism failed unexpectedly
            if not isinstance(exc, OSError):
                log.exception("refused a connection from %s: unexpected error while opening it", conn.address)
            frontend.close_from_worker(conn)
            return
        frontend.hand_back(conn)

    def _call(self, conn: Connection, request: bytearray) -> None:
        """Run ``request``, then the connection's next ones while they come at once (``_next_request``)."""
        frontend = self.frontend
        assert frontend is not None
        next_request: bytearray | None = request
        del request
        over = False
        while next_request is not None and not over:
            reader = _RequestReader(next_request)
            next_request = None
            try:
                over = self._process(conn, reader)  # its buffers and decoded values are gone when it returns
            finally:
                reader.close()
                charged, conn.charged = conn.charged, 0
                self.budget.release(charged)
                if charged >= _TRIM_AFTER_BYTES:
                    return_freed_memory()
            if not over:
                next_request, over = self._next_request(conn)
        if over:
            frontend.close_from_worker(conn)
        else:
            frontend.hand_back(conn)

    def _next_request(self, conn: Connection) -> tuple[bytearray | None, bool]:
        """The connection's next request when it arrives whole within ``_LINGER_SECONDS``, no other work
        waits for a worker and at most a quarter of the workers wait like this: a client calling in a loop is then served without two thread hand-offs through the
        front end per call (each a scheduling delay on a busy machine). Anything else goes back to the front
        end, bytes received so far included. Returns (request or None, whether the connection is over)."""
        if conn.framed or self.workers.queued or self.stopping.is_set() or conn.data or conn.out:
            return None, False
        with self._lingering_lock:
            if self._lingering >= self._max_lingering:  # keep most workers free for calls yet to come
                return None, False
            self._lingering += 1
        try:
            return self._wait_next_request(conn)
        finally:
            with self._lingering_lock:
                self._lingering -= 1

    def _wait_next_request(self, conn: Connection) -> tuple[bytearray | None, bool]:
        sock = conn.sock
        try:
            pending = sock.pending() if hasattr(sock, "pending") else 0
            if not pending:
                poller = select.poll()  # not select.select: descriptors above 1023 are common here
                poller.register(sock, select.POLLIN)
                if not poller.poll(_LINGER_SECONDS * 1000):
                    return None, False
            sock.setblocking(False)
            chunk = sock.recv(_LINGER_READ)
        except (BlockingIOError, ssl.SSLWantReadError):
            return None, False
        except (OSError, ValueError):
            return None, True
        if not chunk:
            return None, True
        conn.data += chunk
        scanner = MessageScanner(self.limits.thrift_max_message_bytes)
        try:
            end = scanner.feed(conn.data)
        except MessageRefused:
            return None, False  # the front end refuses it, with the reply that says why
        if end is None:
            return None, False
        wanted = end + scanner.decoded_estimate
        if not self.budget.try_reserve(wanted):
            return None, False
        conn.charged = wanted
        if end == len(conn.data):
            request, conn.data = conn.data, bytearray()
        else:
            request, conn.data = conn.data[:end], conn.data[end:]
        self._own(conn)
        return request, False

    def _process(self, conn: Connection, reader: _RequestReader) -> bool:
        """Decode, run and answer one call; True when the connection is over (the client left, or failed).

        The call's handler work is charged to the memory budget (``CallMemory``) and given back here; the
        reply is written without blocking, its unsent rest left to the front end (``output``)."""
        wait = self.limits.thrift_memory_wait_seconds
        memory = CallMemory.begin(self.budget, wait)
        try:
            conn.sock.setblocking(False)
            self.resume_connection(conn.handler_state)
            iprot = TCyBinaryProtocol(TCyBufferedTransport(reader))
            oprot = _ReplyProtocol(_ReplyWriter(conn, self._held_max, _timeout(self.limits)))
            self.processor.process(iprot, oprot, decoded=reader.close)
        except (TTransportException, OSError, BudgetExceeded) as exc:
            log.info("connection from %s ended during a call: %s", conn.address, exc)
            return True
        except Exception:
            log.exception("connection from %s failed", conn.address)
            return True
        finally:
            memory.end()
        return False

    # -- stopping ----------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop accepting: new connections are refused at once; the front end's loop ends and closes the socket."""
        self.stopping.set()
        if self.frontend is not None:
            self.frontend.stop()

    def drain(self, seconds: float) -> tuple[int, int]:
        """After ``close`` (the front end's loop has ended): end idle connections, wait up to ``seconds`` for
        calls in flight. Returns (calls that finished while waiting, calls still running when the time was up).
        """
        frontend = self.frontend
        if frontend is None:
            return 0, 0
        deadline = time.monotonic() + seconds
        frontend.close_idle()
        waited = sum(1 for c in list(frontend.connections) if c.state in (BUSY, WRITING))
        while (left := deadline - time.monotonic()) > 0 and any(
            c.state in (BUSY, WRITING) for c in list(frontend.connections)
        ):
            with frontend.state:
                frontend.state.wait(min(left, 0.05))
            frontend.close_idle()  # a call that ended hands its connection back: closed once its reply is sent
        running = sum(1 for c in frontend.connections if c.state in (BUSY, WRITING))
        frontend.close_unsent()
        self.workers.stop()
        return waited - running, running


def _timeout(limits: ResourceBounds) -> float | None:
    return limits.thrift_client_timeout_seconds or None


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
        admins = frozenset(store.config.admin_users)
        self.server = ThriftServer(
            processor,
            host,
            port,
            self.limits,
            self.security,
            begin_connection=self.handler.begin_connection,
            resume_connection=self.handler.resume_connection,
            is_admin=lambda peer: peer.user in admins,
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
                    max_connections=self.limits.thrift_max_connections,
                    cache=self.cache,
                )
            )

    @property
    def port(self) -> int:
        listener = self.server.listener
        return listener.getsockname()[1] if listener is not None else 0

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

    def compaction_housekeeping(self, interval_seconds: float) -> None:
        """Hive's compactor threads in the metastore: one pass of ``run_cycle`` (copy engine: no Spark in
        this process) every ``compaction_check_interval_seconds``. Several servers on one database may run
        it: workers claim queue rows under a row lock."""
        from hmsrepl.acid.compaction_cycle import run_cycle

        while not self._stop.wait(interval_seconds):
            try:
                report = run_cycle(self.store)
            except Exception:  # like the housekeeping above: a failed pass is retried at the next one
                log.exception("compaction housekeeping failed; retrying in %s s", interval_seconds)
                continue
            if report.queued or report.compacted or report.cleaned:
                log.info(
                    "compaction housekeeping: %d queued, %d compacted (%d failed), %d cleaned",
                    sum(1 for c in report.queued if c.compaction_id is not None),
                    len(report.compacted),
                    len(report.failed),
                    sum(1 for c in report.cleaned if c.cleaned),
                )

    def serve_forever(self, housekeeping_interval: float = 60.0) -> None:
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.start()  # first: a port in use fails before anything else starts
        threading.Thread(target=self.housekeeping, args=(housekeeping_interval,), daemon=True).start()
        compaction_interval = self.store.config.compaction_check_interval_seconds
        if compaction_interval > 0:
            threading.Thread(
                target=self.compaction_housekeeping, args=(compaction_interval,), daemon=True
            ).start()
        if self.cache is not None:
            self.cache.start()
        self.server.bind()
        log.info(
            "metastore listening on %s:%s (%s; %d workers, max %d connections (%d per address, %d reserved for "
            "admins), messages up to %d bytes, memory budget %d bytes)",
            self.server.host,
            self.port,
            self.security.describe(),
            self.limits.thrift_max_workers,
            self.limits.thrift_max_connections,
            self.limits.thrift_max_connections_per_peer,
            self.limits.thrift_admin_reserved_connections,
            self.limits.thrift_max_message_bytes,
            self.limits.thrift_memory_budget_bytes,
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
    "REPLY_PAGE",
    "MetastoreServer",
    "ThriftServer",
    "install_signal_handlers",
]
