"""Finds where one Thrift binary-protocol message ends, as its bytes arrive, without decoding it.

Hive's clients (Spark's included) send unframed messages over a buffered transport: nothing says how long a
request is. The event-driven front end (``thrift.frontend``) must still know when a request is complete before
it hands it to a worker, so a slow or silent client never holds one. ``MessageScanner`` walks the encoding
(fields, lists, maps, strings) and keeps its place between reads, so each byte is looked at once however the
request is cut, and a 99 MB string is skipped without being looked at.

While it walks, it checks what a request declares against what it may still carry (a string of 1.9 GB in a
100 MB request is refused before one of its bytes arrives), bounds nesting, and estimates the memory the
decoded request will take (``decoded_estimate``), which the server's memory budget charges as bytes arrive:
never for a declared size alone.
"""

from __future__ import annotations

import struct

STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = (
    0,
    2,
    3,
    4,
    6,
    8,
    10,
    11,
    12,
    13,
    14,
    15,
)
_FIXED = {BOOL: 1, BYTE: 1, DOUBLE: 8, I16: 2, I32: 4, I64: 8}
#: Smallest encoding of one element of each type (a string's length prefix, a struct's STOP).
_MIN_SIZE = {**_FIXED, STRING: 4, STRUCT: 1, MAP: 6, SET: 5, LIST: 5}
#: Rough CPython sizes of decoded values, so the budget charges what decoding will allocate.
_OBJECT_BYTES = {STRING: 64, STRUCT: 200, MAP: 240, SET: 220, LIST: 64}
_PRIMITIVE_BYTES = 32
_POINTER = 8
MAX_DEPTH = 64
_VERSION_MASK = 0xFFFF0000
_VERSION_1 = 0x80010000
_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")


class MessageRefused(Exception):
    """The request breaks a limit or is not a Thrift binary message; ``message`` says which (for the client)."""


class MessageScanner:
    """Walks one message at a time; ``feed`` it the connection's buffer, it says where the message ends.

    The buffer is the caller's: bytes before ``position`` are walked, and the caller may drop them only
    after the message is complete (the worker decodes from the start).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.reset()

    def reset(self) -> None:
        """Ready for the next message."""
        self.position = 0
        self.name = ""
        self.seqid = 0
        self.decoded_estimate = 0
        self._header_done = False
        #: Bytes of a string (or fixed-size list) still to skip.
        self._skip = 0
        #: Frames still open: [kind, ...]; kind "s" a struct, "l" (element type, left), "m" (ktype, vtype, left).
        self._stack: list[list[int | str]] = []
        #: The type of a value whose encoding starts at ``position`` (None: a frame decides what comes next).
        self._pending: int | None = None

    @property
    def started(self) -> bool:
        """Whether the message header (name and sequence id) has been read."""
        return self._header_done

    def feed(self, buf: bytes | bytearray | memoryview, length: int | None = None) -> int | None:
        """Walk what ``buf`` holds; the message's length once complete, else None (wait for more bytes)."""
        end = len(buf) if length is None else length
        if not self._header_done:
            if not self._header(buf, end):
                return None
            self._stack.append(["s"])
        done = self._walk(buf, end)
        if self.position > self.max_bytes:
            raise MessageRefused(_too_large(self.max_bytes))
        return done

    def _header(self, buf: bytes | bytearray | memoryview, end: int) -> bool:
        if end < 4:
            return False
        (first,) = _I32.unpack_from(buf, 0)
        if first < 0:  # strict: version | type, name, seqid
            if first & _VERSION_MASK != _VERSION_1:
                raise MessageRefused("request refused: not a Thrift binary-protocol message (bad version)")
            if end < 8:
                return False
            (size,) = _I32.unpack_from(buf, 4)
            self._check_length(size, 8)
            if end < 12 + size:
                return False
            name = bytes(buf[8 : 8 + size])
            (self.seqid,) = _I32.unpack_from(buf, 8 + size)
            self.position = 12 + size
        else:  # old non-strict: name length, name, type byte, seqid
            size = first
            self._check_length(size, 4)
            if end < 9 + size:
                return False
            name = bytes(buf[4 : 4 + size])
            (self.seqid,) = _I32.unpack_from(buf, 5 + size)
            self.position = 9 + size
        self.name = name.decode("utf-8", "replace")[:256]
        self._header_done = True
        return True

    def _check_length(self, size: int, at: int) -> None:
        if size < 0:
            raise MessageRefused(f"request refused: negative length {size} (not a Thrift binary message)")
        if size > self.max_bytes - at:
            if size <= self.max_bytes // 2:  # an ordinary value at the end of a request that is too large
                raise MessageRefused(_too_large(self.max_bytes))
            raise MessageRefused(
                f"request refused: a value of {size} bytes exceeds the message size limit of "
                f"{self.max_bytes} bytes (HMSREPL_THRIFT_MAX_MESSAGE_BYTES); send smaller requests"
            )

    def _walk(self, buf: bytes | bytearray | memoryview, end: int) -> int | None:
        pos = self.position
        stack = self._stack
        try:
            while True:
                if self._skip:
                    step = min(self._skip, end - pos)
                    pos += step
                    self._skip -= step
                    if self._skip:
                        return None
                if self._pending is not None:
                    ttype = self._pending
                    consumed = self._value(ttype, buf, pos, end)
                    if consumed < 0:
                        return None
                    pos += consumed
                    self._pending = None
                    continue
                if not stack:
                    self.position = pos
                    return pos
                top = stack[-1]
                kind = top[0]
                if kind == "s":
                    if pos >= end:
                        return None
                    ftype = buf[pos]
                    if ftype == STOP:
                        pos += 1
                        stack.pop()
                        continue
                    if pos + 3 > end:
                        return None
                    pos += 3
                    self._expect(ftype, pos)
                elif kind == "l":
                    etype, left = int(top[1]), int(top[2])
                    if left == 0:
                        stack.pop()
                        continue
                    fixed = _FIXED.get(etype)
                    if fixed:  # skip the whole run of fixed-size elements at once
                        stack.pop()
                        self._skip = fixed * left
                        continue
                    if etype == STRING:  # names and values: the common large list, walked in a tight loop
                        pos, left = self._strings(buf, pos, end, left)
                        top[2] = left
                        if left == 0 or self._skip:
                            continue
                        if pos + 4 > end:
                            return None
                    top[2] = left - 1
                    self._expect(etype, pos)
                else:  # a map: key, value, key, value...
                    ktype, vtype, left = int(top[1]), int(top[2]), int(top[3])
                    if left == 0:
                        stack.pop()
                        continue
                    if top[4]:
                        top[4] = 0
                        top[3] = left - 1
                        self._expect(vtype, pos)
                    else:
                        top[4] = 1
                        self._expect(ktype, pos)
        finally:
            self.position = pos

    def _strings(self, buf: bytes | bytearray | memoryview, pos: int, end: int, left: int) -> tuple[int, int]:
        """Walk the string elements of a list that are here; the last one may be cut (then skipped later)."""
        unpack = _I32.unpack_from
        estimate = 0
        while left and pos + 4 <= end:
            (size,) = unpack(buf, pos)
            if size < 0 or size > self.max_bytes - pos - 4:
                self._check_length(size, pos + 4)
            pos += 4
            left -= 1
            estimate += _OBJECT_BYTES[STRING] + 2 * size
            if pos + size > end:
                self._skip = size
                break
            pos += size
        self.decoded_estimate += estimate
        return pos, left

    def _expect(self, ttype: int, pos: int) -> None:
        if ttype in _FIXED:
            self._skip = _FIXED[ttype]
            self.decoded_estimate += _PRIMITIVE_BYTES
            return
        if ttype not in _OBJECT_BYTES:
            raise MessageRefused(f"request refused: unknown Thrift type {ttype} at byte {pos}")
        self._pending = ttype

    def _value(self, ttype: int, buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        """Bytes of the header of a value of ``ttype`` at ``pos``, opening its frame; -1 when incomplete."""
        stack = self._stack
        self.decoded_estimate += _OBJECT_BYTES[ttype]
        if ttype == STRUCT:
            self._push(["s"], pos)
            return 0
        if ttype == STRING:
            if pos + 4 > end:
                self.decoded_estimate -= _OBJECT_BYTES[ttype]
                return -1
            (size,) = _I32.unpack_from(buf, pos)
            self._check_length(size, pos + 4)
            self._skip = size
            self.decoded_estimate += 2 * size  # the bytes read, then the str decoded from them
            return 4
        if ttype in (LIST, SET):
            if pos + 5 > end:
                self.decoded_estimate -= _OBJECT_BYTES[ttype]
                return -1
            etype = buf[pos]
            (count,) = _I32.unpack_from(buf, pos + 1)
            self._check_count(count, _MIN_SIZE.get(etype, 1), pos + 5)
            self.decoded_estimate += _POINTER * count
            self._push(["l", etype, count], pos)
            return 5
        if pos + 6 > end:  # MAP
            self.decoded_estimate -= _OBJECT_BYTES[ttype]
            return -1
        ktype, vtype = buf[pos], buf[pos + 1]
        (count,) = _I32.unpack_from(buf, pos + 2)
        self._check_count(count, _MIN_SIZE.get(ktype, 1) + _MIN_SIZE.get(vtype, 1), pos + 6)
        self.decoded_estimate += 2 * _POINTER * count
        stack.append(["m", ktype, vtype, count, 0])
        self._check_depth(pos)
        return 6

    def _check_count(self, count: int, element: int, at: int) -> None:
        if count < 0:
            raise MessageRefused(f"request refused: negative element count {count}")
        if count * element > self.max_bytes - at:
            raise MessageRefused(
                f"request refused: {count} elements cannot fit in the message size limit of {self.max_bytes} "
                "bytes (HMSREPL_THRIFT_MAX_MESSAGE_BYTES); send smaller requests"
            )

    def _push(self, frame: list[int | str], pos: int) -> None:
        self._stack.append(frame)
        self._check_depth(pos)

    def _check_depth(self, pos: int) -> None:
        if len(self._stack) > MAX_DEPTH:
            raise MessageRefused(f"request refused: nested deeper than {MAX_DEPTH} levels at byte {pos}")


def _too_large(limit: int) -> str:
    return (
        f"request refused: larger than the message size limit of {limit} bytes "
        "(HMSREPL_THRIFT_MAX_MESSAGE_BYTES); send smaller requests"
    )


__all__ = ["MAX_DEPTH", "MessageRefused", "MessageScanner"]
