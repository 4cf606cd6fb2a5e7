"""Copy progress from executors to the driver's log: counts sent as they change, logged periodically."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from hmsrepl.spark.progress import CopyProgress, ProgressAddress, ProgressSender, human_bytes
from tests.servers import free_port


def test_the_driver_logs_the_executors_counts_while_the_copy_runs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.progress")
    now = [0.0]
    with CopyProgress("copy", 6, 6 * 1024 * 1024, "127.0.0.1", interval=0.05, senders=2) as progress:
        assert progress.address is not None
        # Two "tasks" on their own connections; a clock that always allows a send, so each file is sent.
        senders = [ProgressSender(progress.address, clock=lambda: now.__setitem__(0, now[0] + 2) or now[0])]
        senders.append(ProgressSender(progress.address, clock=senders[0].clock))
        seen: list[tuple[int, int, int]] = []
        for step in range(3):
            for sender in senders:
                sender.add(1, 1024 * 1024, failed=0 if step < 2 or sender is senders[0] else 1)
            deadline = time.monotonic() + 5
            while progress.totals.read()[0] < 2 * (step + 1) and time.monotonic() < deadline:
                time.sleep(0.01)
            # The reporter logs every interval: wait for its line with these counts (a loaded machine may
            # leave its thread unscheduled for longer than an interval).
            expected = f"copy: {2 * (step + 1)} of 6 files"
            while time.monotonic() < deadline and not any(
                r.getMessage().startswith(expected)
                for r in caplog.records
                if r.name == "hmsrepl.spark.progress"
            ):
                time.sleep(0.01)
            seen.append(progress.totals.read())
        for sender in senders:
            sender.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "hmsrepl.spark.progress"]
    assert seen[0][0] == 2 and seen[-1] == (6, 6 * 1024 * 1024, 1)
    # Periodic lines while it ran, counts growing, then the final one.
    assert "copy: 2 of 6 files, 2.0 MiB of 6.0 MiB copied (33%)" in lines[0]
    assert any(line.startswith("copy: 4 of 6 files") for line in lines)
    assert lines[-1].startswith("copy: done, 6 of 6 files, 6.0 MiB of 6.0 MiB copied (100%), 1 failed")
    assert len(lines) >= 3


def test_a_sender_without_a_driver_keeps_quiet() -> None:
    sender = ProgressSender(ProgressAddress("127.0.0.1", free_port()))
    sender.add(1, 10)
    sender.close()
    ProgressSender(None).add(1, 10)


def test_counts_are_sent_at_most_once_a_second_and_flushed_at_the_end() -> None:
    received: list[bytes] = []
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                received.append(data)

    thread = threading.Thread(target=accept)
    thread.start()
    clock = [100.0]
    sender = ProgressSender(ProgressAddress("127.0.0.1", port), clock=lambda: clock[0])
    for _ in range(5):
        sender.add(1, 100)  # within the same second: held back
    clock[0] += 1.5
    sender.add(1, 100)  # a second later: sent with what was held
    sender.add(1, 100)
    sender.close()
    thread.join(5)
    server.close()
    assert b"".join(received).decode().split("\n")[:-1] == ["6 600 0", "1 100 0"]


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (5, 2048, 3 * 1024**3)] == ["5 B", "2.0 KiB", "3.0 GiB"]


def test_the_final_line_waits_for_the_tasks_last_counts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.progress")
    with CopyProgress("copy", 2, 100, "127.0.0.1", interval=60, senders=2) as progress:
        for _ in range(2):  # each task's only report goes out as it ends, just before the copy returns
            sender = ProgressSender(progress.address)
            sender.add(1, 50)
            sender.close()
    assert (
        caplog.records[-1].getMessage().startswith("copy: done, 2 of 2 files, 100 B of 100 B copied (100%)")
    )
