"""A connection's unsent reply bytes are counted in the server's memory budget but never refused: they exist
already, and refusing part of a reply begun would cut the client off with neither the answer nor an error."""

from __future__ import annotations

import socket

from hmsrepl.thrift.budget import MemoryBudget
from hmsrepl.thrift.output import OutputBuffer


def test_unsent_bytes_are_queued_past_a_full_budget_and_given_back_once_sent() -> None:
    budget = MemoryBudget(1024 * 1024)
    assert budget.try_reserve(budget.limit), "other calls hold the whole budget"
    server, client = socket.socketpair()
    try:
        server.setblocking(False)
        out = OutputBuffer(budget)
        reply = (
            bytes(range(256)) * 16 * 1024
        )  # 4 MB: more than the socket takes while the client is not reading
        out.write(server, reply)
        assert 0 < out.size < len(reply)
        assert budget.used == budget.limit + out.size
        received = bytearray()
        while len(received) < len(reply):
            out.send(server)
            received += client.recv(1 << 20)
        assert bytes(received) == reply
        assert out.size == 0 and budget.used == budget.limit, "the sent bytes were given back"
    finally:
        server.close()
        client.close()
