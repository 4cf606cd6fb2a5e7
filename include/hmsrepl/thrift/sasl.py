"""Thrift's SASL transport framing, as Hive's metastore and its clients speak it (TSaslTransport).

Negotiation messages are one status byte (START, OK, BAD, ERROR, COMPLETE), a 4-byte big-endian length and
the payload. The client opens with START carrying the mechanism name, then OK with its initial response;
each side answers with OK (more to come) or COMPLETE, and BAD/ERROR abort with a message. Once both sides
are complete, every Thrift message travels in frames of a 4-byte length and the payload; with the QOP
``auth`` (Hive's default) the payload is the plain Thrift bytes, with ``auth-int`` / ``auth-conf`` each
frame's payload is wrapped (signed / encrypted) by the mechanism.

The mechanism itself (GSSAPI, in ``hmsrepl.thrift.auth``) only turns responses into challenges: this module
knows nothing of Kerberos, so the framing is tested and reused by the server and by our own client.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any, Protocol

from thriftpy2.transport import TTransportException

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
#: Negotiation payloads are Kerberos tokens (a few KB, more with large PACs); anything bigger is not one.
MAX_NEGOTIATION_PAYLOAD = 1024 * 1024
#: A data frame carries one Thrift message or part of one; Hive's default message limit is 100 MB.
MAX_FRAME = 100 * 1024 * 1024
_HEADER = struct.Struct(">BI")
_LENGTH = struct.Struct(">I")


class SaslError(Exception):
    """Negotiation failed; the message says why (and was sent to the peer when it was the peer's fault)."""


class ServerMechanism(Protocol):
    """The server side of one SASL mechanism for one connection."""

    name: str

    @property
    def complete(self) -> bool: ...

    def evaluate(self, response: bytes) -> bytes | None:
        """The challenge answering ``response``; raises ``SaslError`` when the peer must be refused."""
        ...


def read_exact(trans: Any, size: int) -> bytes:
    """``size`` bytes from a transport whose ``read`` may return fewer (a socket)."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = trans.read(remaining)
        if not chunk:
            raise TTransportException(TTransportException.END_OF_FILE, "connection closed mid-message")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def send_message(trans: Any, status: int, payload: bytes = b"") -> None:
    trans.write(_HEADER.pack(status, len(payload)) + payload)
    trans.flush()


def receive_message(trans: Any) -> tuple[int, bytes]:
    """One negotiation message; a header that is not one (e.g. a plain Thrift call) is refused unread."""
    status, length = _HEADER.unpack(read_exact(trans, _HEADER.size))
    if status not in _STATUS_NAMES:
        raise SaslError(f"not a SASL negotiation message (status byte {status}): is the client using SASL?")
    if length > MAX_NEGOTIATION_PAYLOAD:
        raise SaslError(
            f"SASL negotiation message of {length} bytes is larger than {MAX_NEGOTIATION_PAYLOAD}"
        )
    return status, read_exact(trans, length)


def _refuse(trans: Any, status: int, message: str) -> SaslError:
    """Tell the peer why (best effort: it may already be gone) and return the error to raise."""
    with contextlib.suppress(OSError, TTransportException):
        send_message(trans, status, message.encode())
    return SaslError(message)


class SaslRefusal(SaslError):
    """The peer must be refused: ``status`` (BAD or ERROR) and the message are what it is sent."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_message(buf: bytes | bytearray) -> tuple[int, bytes, int] | None:
    """The first negotiation message in ``buf`` as (status, payload, bytes used), or None when incomplete.

    A header that is not one (e.g. a plain Thrift call) is refused before its payload is read."""
    if len(buf) < _HEADER.size:
        return None
    status, length = _HEADER.unpack_from(buf, 0)
    if status not in _STATUS_NAMES:
        raise SaslRefusal(
            ERROR, f"not a SASL negotiation message (status byte {status}): is the client using SASL?"
        )
    if length > MAX_NEGOTIATION_PAYLOAD:
        raise SaslRefusal(
            ERROR, f"SASL negotiation message of {length} bytes is larger than {MAX_NEGOTIATION_PAYLOAD}"
        )
    end = _HEADER.size + length
    if len(buf) < end:
        return None
    return status, bytes(buf[_HEADER.size : end]), end


def encode_message(status: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(status, len(payload)) + payload


class ServerNegotiation:
    """The server side of one connection's negotiation, one received message at a time (no I/O), so an
    event-driven server can read messages as they arrive and a blocking one can loop.

    ``mechanisms`` maps a mechanism name to a factory of fresh ``ServerMechanism`` objects.
    """

    def __init__(self, mechanisms: dict[str, Any]) -> None:
        self._mechanisms = mechanisms
        self.mechanism: ServerMechanism | None = None

    @property
    def complete(self) -> bool:
        return self.mechanism is not None and self.mechanism.complete

    def step(self, status: int, payload: bytes) -> tuple[int, bytes] | None:
        """The answer to one message (None: nothing yet, after START); ``SaslRefusal`` when the peer must be
        refused, ``SaslError`` when the client aborted."""
        if self.mechanism is None:
            if status != START:
                raise SaslRefusal(ERROR, f"expected a SASL START message, got {_STATUS_NAMES[status]}")
            name = payload.decode("utf-8", "replace")
            if name not in self._mechanisms:
                raise SaslRefusal(
                    BAD,
                    f"unsupported SASL mechanism {name!r}; this metastore offers {sorted(self._mechanisms)}",
                )
            self.mechanism = self._mechanisms[name]()
            return None
        if status in (BAD, ERROR):
            raise SaslError(f"client aborted the SASL negotiation: {payload.decode('utf-8', 'replace')}")
        if status not in (OK, COMPLETE):
            raise SaslRefusal(ERROR, f"expected a SASL OK or COMPLETE message, got {_STATUS_NAMES[status]}")
        try:
            challenge = self.mechanism.evaluate(payload)
        except SaslRefusal:
            raise
        except SaslError as exc:
            raise SaslRefusal(BAD, str(exc)) from None
        return (COMPLETE if self.mechanism.complete else OK), challenge or b""


def negotiate_server(trans: Any, mechanisms: dict[str, Any]) -> ServerMechanism:
    """Run the server side of the negotiation on a blocking ``trans``; returns the completed mechanism."""
    negotiation = ServerNegotiation(mechanisms)
    while not negotiation.complete:
        try:
            status, payload = receive_message(trans)
            answer = negotiation.step(status, payload)
        except SaslRefusal as exc:
            raise _refuse(trans, exc.status, str(exc)) from None
        except SaslError as exc:
            if "not a SASL negotiation message" in str(exc) or "larger than" in str(exc):
                raise _refuse(trans, ERROR, str(exc)) from None
            raise
        if answer is not None:
            send_message(trans, *answer)
    assert negotiation.mechanism is not None
    return negotiation.mechanism


class ClientMechanism(Protocol):
    """The client side of one SASL mechanism for one connection."""

    name: str

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> tuple[bytes, bool]:
        """The response to ``challenge`` and whether the client is complete after sending it."""
        ...


def negotiate_client(trans: Any, mechanism: ClientMechanism) -> None:
    """Run the client side of the negotiation on ``trans``: START, OK with the initial response, then
    answer every OK challenge until the server says COMPLETE."""
    send_message(trans, START, mechanism.name.encode())
    send_message(trans, OK, mechanism.initial_response())
    while True:
        status, payload = receive_message(trans)
        if status in (BAD, ERROR):
            raise SaslError(
                f"the metastore refused the SASL negotiation: {payload.decode('utf-8', 'replace')}"
            )
        if status == COMPLETE:
            return
        if status != OK:
            raise _refuse(
                trans, ERROR, f"expected a SASL OK or COMPLETE message, got {_STATUS_NAMES[status]}"
            )
        response, done = mechanism.evaluate(payload)
        send_message(trans, COMPLETE if done else OK, response)


class TSaslTransport:
    """Thrift bytes in length-prefixed frames over an already negotiated connection.

    Reads return what is left of the current frame (at most what was asked), the way a socket does, so a
    buffered transport can sit on top; writes are collected and sent as one frame per flush.
    """

    def __init__(self, trans: Any, max_frame: int = MAX_FRAME, codec: tuple[Any, Any] | None = None) -> None:
        self.trans = trans
        self.max_frame = max_frame
        #: (wrap, unwrap) of the negotiated security layer (auth-int, auth-conf); None for QOP auth.
        self._wrap, self._unwrap = codec or (None, None)
        self._rbuf = memoryview(b"")
        self._wbuf: list[bytes] = []

    def is_open(self) -> bool:
        return self.trans.is_open()

    def open(self) -> None:
        if not self.trans.is_open():
            self.trans.open()

    def close(self) -> None:
        self.trans.close()

    def read(self, sz: int) -> bytes:
        if not self._rbuf:
            (length,) = _LENGTH.unpack(read_exact(self.trans, _LENGTH.size))
            if length > self.max_frame:
                raise TTransportException(
                    TTransportException.SIZE_LIMIT,
                    f"SASL frame of {length} bytes is larger than the limit of {self.max_frame}",
                )
            frame = read_exact(self.trans, length)
            if self._unwrap is not None:
                try:
                    frame = self._unwrap(frame)
                except Exception as exc:  # a tampered or foreign frame: this connection is over
                    raise TTransportException(
                        TTransportException.UNKNOWN, f"SASL frame failed its integrity check: {exc}"
                    ) from None
            self._rbuf = memoryview(frame)
        data, self._rbuf = self._rbuf[:sz], self._rbuf[sz:]
        return bytes(data)

    def write(self, data: bytes) -> None:
        self._wbuf.append(data)

    def flush(self) -> None:
        data = b"".join(self._wbuf)
        self._wbuf = []
        if self._wrap is not None:
            data = self._wrap(data)
        self.trans.write(_LENGTH.pack(len(data)) + data)
        self.trans.flush()


__all__ = [
    "BAD",
    "COMPLETE",
    "ERROR",
    "OK",
    "START",
    "ClientMechanism",
    "SaslError",
    "SaslRefusal",
    "ServerMechanism",
    "ServerNegotiation",
    "TSaslTransport",
    "encode_message",
    "negotiate_client",
    "negotiate_server",
    "parse_message",
]
