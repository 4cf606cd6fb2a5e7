"""The threaded Thrift metastore server (binary protocol, buffered transport; TLS and SASL GSSAPI optional).

Each client connection gets its own thread and keeps it while open (Spark holds a second connection open),
so the accept loop never blocks on a slow client. The C-accelerated binary protocol of thriftpy2 keeps
large partition lists cheap to encode. A housekeeping thread aborts timed-out transactions, completes file
work left pending by a crash (``metastore.intents``) and applies event and cmroot retention. With ``cache_enabled``, a metadata cache answers reads; its updater thread starts
with the server (prewarming in the background, while reads go to the database) and stops with it.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import threading
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.server import TThreadedServer
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor
from thriftpy2.transport import TCyBufferedTransportFactory, TServerSocket, TSocket, TTransportException

from hmsrepl.cache import MetadataCache
from hmsrepl.metastore import Metastore
from hmsrepl.thrift.auth import AuthenticationError, ThriftSecurity, check_bind
from hmsrepl.thrift.handler import EncodedStructs, ErrorMappingDispatcher, MetastoreHandler
from hmsrepl.thrift.idl import Service

log = logging.getLogger(__name__)


class _Processor(TProcessor):
    """Answers unknown methods with a message naming the method (thriftpy2 sends none), and sends results
    whose encoding is already known (partitions served from the metadata cache) without encoding them again.
    """

    def process_in(self, iprot: Any) -> Any:
        api, seqid, result, call = super().process_in(iprot)
        if isinstance(result, TApplicationException) and result.type == TApplicationException.UNKNOWN_METHOD:
            result = TApplicationException(
                TApplicationException.UNKNOWN_METHOD,
                f"method '{api}' is not supported by this metastore (hmsrepl)",
            )
        return api, seqid, result, call

    def send_result(self, oprot: Any, api: str, result: Any, seqid: int) -> None:
        success = getattr(result, "success", None)
        if not isinstance(success, EncodedStructs):
            return super().send_result(oprot, api, result, seqid)
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


class _Server(TThreadedServer):
    """thriftpy2's threaded server, with one hook: ``open_connection`` turns the accepted socket into the
    transport the processor uses (TLS, SASL) and names the peer, in the connection's own thread."""

    def __init__(self, *args: Any, open_connection: Any, begin_connection: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_connection = open_connection
        self.begin_connection = begin_connection

    def handle(self, client: Any) -> None:
        try:
            trans, peer = self.open_connection(client)
        except AuthenticationError as exc:
            log.warning("refused a connection: %s", exc)
            client.close()
            return
        except Exception:  # a connection must never take its thread down with a traceback
            log.exception("refused a connection: unexpected error while opening it")
            client.close()
            return
        if peer.authenticated:
            log.info("connection from %s authenticated as %s (QOP %s)", peer.host, peer.principal, peer.qop)
        self.begin_connection(peer)
        trans = self.itrans_factory.get_transport(trans)
        protocol = self.iprot_factory.get_protocol(trans)
        try:
            while True:
                self.processor.process(protocol, protocol)
        except TTransportException:
            pass
        except Exception as x:
            log.exception(x)
        trans.close()


class MetastoreServer:
    def __init__(
        self,
        store: Metastore,
        host: str = "127.0.0.1",
        port: int = 9083,
        *,
        cache: MetadataCache | None = None,
    ) -> None:
        check_bind(store.config, host, port)
        self.security = ThriftSecurity(store.config)
        self.store = store
        if cache is None and store.config.cache_enabled:
            cache = MetadataCache.from_config(store)
        self.cache = cache
        self.handler = MetastoreHandler(store, cache, security=self.security)
        self.socket = _NoDelayServerSocket(host=host, port=port, client_timeout=None)
        self.server = _Server(
            _Processor(Service, ErrorMappingDispatcher(self.handler)),
            self.socket,
            iprot_factory=TCyBinaryProtocolFactory(),
            itrans_factory=TCyBufferedTransportFactory(),
            daemon=True,
            open_connection=self.security.open_connection,
            begin_connection=self.handler.begin_connection,
        )
        self._stop = threading.Event()

    @property
    def port(self) -> int:
        return self.socket.sock.getsockname()[1] if self.socket.sock else 0

    def housekeeping(self, interval_seconds: float) -> None:
        while not self._stop.wait(interval_seconds):
            try:
                self.store.txns.abort_timed_out()
                self.store.locks.release_timed_out()
                self.store.cleanup_events()
                self.store.complete_file_intents()
                self.store.cleanup_cmroot()
            except Exception:  # housekeeping must outlive a database hiccup
                log.exception("metastore housekeeping failed; retrying in %s s", interval_seconds)

    def serve_forever(self, housekeeping_interval: float = 60.0) -> None:
        threading.Thread(target=self.housekeeping, args=(housekeeping_interval,), daemon=True).start()
        if self.cache is not None:
            self.cache.start()
        log.info(
            "metastore listening on %s:%s (%s)", self.socket.host, self.socket.port, self.security.describe()
        )
        try:
            # A 1,000-partition reply creates ~30,000 objects: with default thresholds the cyclic collector
            # runs ~90 times per call and rescans the start-up heap. Freeze what exists, collect less often.
            gc.collect()
            gc.freeze()
            gc.set_threshold(50_000, 20, 100)
            self.server.serve()
        finally:
            self._stop.set()
            if self.cache is not None:
                self.cache.stop()
            self.store.close()

    def stop(self) -> None:
        self._stop.set()
        if self.cache is not None:
            self.cache.stop()
        self.server.close()
        self.socket.close()


def install_signal_handlers() -> None:
    """SIGTERM ends the accept loop like Ctrl-C does, so the process exits promptly and cleanly."""

    def _terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)


__all__ = ["MetastoreServer", "install_signal_handlers"]
