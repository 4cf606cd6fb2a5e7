"""A real ``hmsrepl metastore serve`` process for attack tests (forked, ``tests.python_forks``), with its pid
(RSS, CPU, signals) and limits.

Unlike ``tests.servers`` this also lets a test lower the process's open-file limit and keep the process
object, so it can send SIGTERM itself and read the exit code.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import thriftpy2
from thriftpy2.rpc import make_client

from hmsrepl.thrift.idl import IDL_PATH
from tests import python_forks
from tests.servers import serving_process

hms = thriftpy2.load(str(IDL_PATH), module_name="hms_security_client_thrift")


@dataclass
class ServerProcess:
    proc: python_forks.ForkedProcess | subprocess.Popen[bytes]
    port: int
    db_url: str
    root: Path
    log_path: Path

    def client(self, timeout_ms: int = 30_000) -> Any:
        return make_client(hms.ThriftHiveMetastore, "127.0.0.1", self.port, timeout=timeout_ms)

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def serve(root: Path, db_url: str, *, nofile: int | None = None, **env: str) -> Iterator[ServerProcess]:
    """Start the server with ``HMSREPL_*`` settings ``env``; stop (and reap) it afterwards."""
    settings = {
        **os.environ,
        "PYTHONPATH": python_forks.PYTHONPATH,
        "HMSREPL_DB_URL": db_url,
        "HMSREPL_WAREHOUSE": str(root / "warehouse"),
        "HMSREPL_CMROOT": str(root / "cmroot"),
        **env,
    }
    with serving_process(root, settings, nofile=nofile) as (proc, port, log_path):
        yield ServerProcess(proc, port, db_url, root, log_path)


# -- raw binary-protocol frames, to send what no well-behaved client would --------------------------------
def call_header(method: str, seqid: int = 1) -> bytes:
    name = method.encode()
    return struct.pack("!iI", -2147418111, len(name)) + name + struct.pack("!i", seqid)  # VERSION_1 | CALL


def string_field(field_id: int, value: bytes) -> bytes:
    return struct.pack("!bhi", 11, field_id, len(value)) + value


def string_field_header(field_id: int, declared_length: int) -> bytes:
    return struct.pack("!bhi", 11, field_id, declared_length)


def string_list_header(field_id: int, declared_count: int) -> bytes:
    return struct.pack("!bhbi", 15, field_id, 11, declared_count)


def encoded_reply(method: str, seqid: int, success: Any) -> bytes:
    """The reply to ``method`` returning ``success``, as thriftpy2 encodes it whole (what clients expect)."""
    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.thrift import TMessageType
    from thriftpy2.transport import TCyMemoryBuffer

    from hmsrepl.thrift.idl import Service

    buffer = TCyMemoryBuffer()
    protocol = TCyBinaryProtocol(buffer)
    protocol.write_message_begin(method, TMessageType.REPLY, seqid)
    getattr(Service, f"{method}_result")(success=success).write(protocol)
    protocol.write_message_end()
    protocol.trans.flush()
    return bytes(buffer.getvalue())


def read_exactly(sock: socket.socket, size: int, timeout: float = 30.0) -> bytes:
    """``size`` bytes from ``sock`` (fewer when it closes or ``timeout`` passes first)."""
    sock.settimeout(timeout)
    data = bytearray()
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while len(data) < size and (chunk := sock.recv(min(size - len(data), 1 << 20))):
            data += chunk
    return bytes(data)


def read_reply(sock: socket.socket, timeout: float = 30.0) -> bytes:
    """Everything the server sends until it closes the connection (or ``timeout``)."""
    sock.settimeout(timeout)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (TimeoutError, ConnectionResetError):
        pass
    return b"".join(chunks)
