"""``python -m MODULE`` for tests (the CLI and the metastore server above all), in children forked from a
process that has imported the project.

A fresh interpreter spends 1.2-1.5 CPU s importing SQLAlchemy, pydantic, click and the project's modules
before a command starts; a short command's own work is a fraction of that, and the suite starts hundreds of
them (a refused load, a status, a metastore server for one test). So each test process starts one server
here (``python -m tests.python_forks``) that imports the CLI and the modules its commands import on demand,
then forks a child per command. The child becomes what a new process would be: the command's environment
(whole, not merged), working directory, ``/dev/null`` for input and files for its output; it runs the module
as ``python -m`` does (as ``__main__``), and ends as an interpreter ends (exit handlers, then the collection
that closes files and database connections). ``start_module`` gives a handle like ``subprocess.Popen``'s
(``poll``, ``wait``, signals) for servers; ``run_module`` and ``run_cli`` run to the end, like
``subprocess.run``.

What a fork cannot give is a different interpreter set-up: a command whose ``PYTHONPATH`` is not the server's
runs as a fresh interpreter instead. The project reads its settings when a command runs, never at import, so
a forked child sees its own; ``tests/unit/test_python_forks.py`` runs commands both ways and compares. Tests
of start-up itself (the CLI's configuration, the server's start-up policy) keep starting real interpreters.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import queue
import resource
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PYTHONPATH = f"{REPO / 'include'}:{REPO}"

# Imported by the server before it forks: the CLI and what its commands import when they run.
PRELOAD = (
    "hmsrepl.cli",
    "hmsrepl.replication.commands",
    "hmsrepl.replication.engine",
    "hmsrepl.replication.dump",
    "hmsrepl.replication.load",
    "hmsrepl.replication.metrics",
    "hmsrepl.replication.verify",
    "hmsrepl.replication.failover",
    "hmsrepl.replication.source_roots",
    "hmsrepl.replication.retention",
    "hmsrepl.replication.replica_scope",
    "hmsrepl.replication.leftovers",
    "hmsrepl.thrift.server",
    "hmsrepl.thrift.auth",
    "hmsrepl.monitoring.settings",
)


class ForkedProcess:
    """A forked child as ``subprocess.Popen`` shows a process: its pid, ``poll``, ``wait``, signals."""

    def __init__(self, args: list[str], pid: int, exited: threading.Event, server: _Server) -> None:
        self.args, self.pid = args, pid
        self._exited, self._server = exited, server
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._exited.is_set():
            self.returncode = self._server.reaped(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        code = self.poll()
        assert code is not None
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # its end not reported yet, so the pid is still this child's
            with contextlib.suppress(ProcessLookupError):  # reaped, its status on the way
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_module(
    module: str,
    args: list[str],
    env: dict[str, str],
    *,
    output: Path,
    errors: Path | None = None,
    cwd: str | Path | None = None,
    nofile: int | None = None,
) -> ForkedProcess | subprocess.Popen[bytes]:
    """Start ``python -m MODULE ARGS`` with exactly ``env``, its standard output into ``output`` and its errors
    into ``errors`` (or ``output`` too); ``nofile`` limits its open files (``RLIMIT_NOFILE``)."""
    command = [sys.executable, "-m", module, *args]
    if env.get("PYTHONPATH") != PYTHONPATH:
        return _popen(command, env, output, errors, cwd, nofile)
    request = {
        "module": module,
        "args": args,
        "env": env,
        "cwd": str(cwd or os.getcwd()),
        "stdout": str(output),
        "stderr": str(errors) if errors else None,
        "nofile": nofile,
    }
    return _server().start(command, request)


def run_module(
    module: str, args: list[str], env: dict[str, str], timeout: float, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` with exactly ``env`` as its environment, run to its end; its output captured as
    text, as ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)`` would give it."""
    if env.get("PYTHONPATH") != PYTHONPATH:
        return run_fresh(module, args, env, timeout, cwd)
    with tempfile.TemporaryDirectory(prefix="forked-run-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        child = start_module(module, args, env, output=out, errors=err, cwd=cwd)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise subprocess.TimeoutExpired(child.args, timeout, _text(out), _text(err)) from None
        return subprocess.CompletedProcess(child.args, code, _text(out), _text(err))


def run_cli(
    args: list[str], env: dict[str, str], timeout: float, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m hmsrepl.cli ARGS``, as ``run_module`` runs a module."""
    return run_module("hmsrepl.cli", args, env, timeout, cwd)


def run_fresh(
    module: str, args: list[str], env: dict[str, str], timeout: float, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The same as ``run_module``, in a fresh interpreter: for tests of start-up, and to compare."""
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _popen(
    command: list[str], env: dict[str, str], output: Path, errors: Path | None, cwd: Any, nofile: int | None
) -> subprocess.Popen[bytes]:
    """The same command as a fresh interpreter."""

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with open(output, "wb") as out, open(errors or os.devnull, "wb") as err:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if errors else subprocess.STDOUT,
            preexec_fn=limit if nofile is not None else None,
        )


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


class _Server:
    """The client's side of one forking server: requests over its stdin; its answers (a child's pid as it
    starts, its status as it ends) read by a thread of their own, since children end in any order."""

    def __init__(self) -> None:
        self._sending = threading.Lock()  # one request and its "started" answer at a time
        self._events = threading.Lock()  # guards _exited: a child may end before its starter reads its pid
        self._started: queue.Queue[int] = queue.Queue()
        self._exited: dict[int, threading.Event] = {}
        self._codes: dict[int, int] = {}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.python_forks"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
            cwd=REPO,
        )
        threading.Thread(target=self._read, name="python-forks", daemon=True).start()
        atexit.register(self.close)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def start(self, command: list[str], request: dict[str, Any]) -> ForkedProcess:
        with self._sending:
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
            pid = self._started.get(timeout=60)
        if pid < 0:
            raise RuntimeError(f"the fork server could not start {command} (its log is on stderr)")
        with self._events:
            exited = self._exited.setdefault(pid, threading.Event())
        return ForkedProcess(command, pid, exited, self)

    def reaped(self, pid: int) -> int:
        """The status of an ended child, forgotten here (its pid may be a new child's next)."""
        with self._events:
            del self._exited[pid]
            return self._codes.pop(pid)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            answer = json.loads(line)
            if "started" in answer:
                self._started.put(answer["started"])
            else:
                pid = answer["exited"]
                with self._events:
                    self._codes[pid] = answer["code"]
                    self._exited.setdefault(pid, threading.Event()).set()
        self._started.put(-1)

    def close(self) -> None:
        if self.alive():
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()


_servers: dict[int, _Server] = {}


def _server() -> _Server:
    """This process's server, started on first use (a forked test process starts its own)."""
    server = _servers.get(os.getpid())
    if server is None or not server.alive():
        server = _servers[os.getpid()] = _Server()
    return server


# -- the server ----------------------------------------------------------------------------------------------
def serve() -> None:
    """Import the project, then fork a child per request line; answer with each child's pid as it starts and
    its status as it ends (``SIGCHLD`` wakes the loop through a pipe)."""
    requests, replies = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)
    os.dup2(2, 1)  # a stray print of an import must not corrupt the replies
    for name in PRELOAD:
        importlib.import_module(name)
    # The migration scripts, read once here rather than in each child that creates a metastore's schema.
    importlib.import_module("hmsrepl.metastore.new_schema").migration_scripts()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    pending = b""
    running: set[int] = set()
    while True:
        ready = select.select([requests, wake_r], [], [])[0]
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
            _reap(running, replies)
        if requests in ready:
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                return  # the test process is gone: children still running end on their own
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (requests, replies, wake_r, wake_w):
                        os.close(fd)
                    _child(json.loads(line), quiet)
                running.add(pid)
                _answer(replies, {"started": pid})


def _reap(running: set[int], replies: int) -> None:
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            running.discard(pid)
            _answer(replies, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _answer(replies: int, answer: dict[str, int]) -> None:
    os.write(replies, json.dumps(answer).encode() + b"\n")


def _child(request: dict[str, Any], quiet: int) -> None:
    """Become the command's process and run it; it ends as an interpreter does (``SystemExit`` out of the
    server's loop: exit handlers, then the collection that closes files and database connections)."""
    os.dup2(quiet, 0)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = (
        os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if request["stderr"] else out
    )
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in {quiet, out, err}:  # the child holds 0, 1 and 2 alone, as a fresh interpreter does
        os.close(fd)
    if request["nofile"] is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (request["nofile"], request["nofile"]))
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    raise SystemExit(_main(request["module"], request["args"]))


def _main(module: str, args: list[str]) -> int:
    """Run ``module`` as ``python -m`` does (as ``__main__``, a preloaded copy set aside as an interpreter
    would not have it); its exit status as the interpreter would report it (an error that escapes is printed
    with its traceback, status 1)."""
    sys.argv = ["-m", *args]
    sys.modules.pop(module, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    serve()
