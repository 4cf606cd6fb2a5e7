"""Airflow 3 on loopback for tests and checks: api-server, scheduler and dag-processor in a fresh home.

Used by the UI check (``tests/ui/check_airflow_ui.py``) and by the tests that need a real scheduler (mapped
tasks, retries, Asset-triggered DAGs), which ``dag.test()`` does not exercise. Everything started is stopped
by ``LocalAirflow.stop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

VENV_BIN = Path(sys.executable).parent
COMPONENTS = ("dag-processor", "scheduler", "api-server")


class UiCheckError(Exception):
    """What a check found missing; printed as one line."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, probe: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    """Poll ``probe`` until it returns something truthy; a condition with a deadline, not a fixed sleep."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if result := probe():
                return result
        except (requests.RequestException, UiCheckError) as exc:
            last_error = exc
        time.sleep(interval)
    raise UiCheckError(
        f"timed out after {timeout:.0f} s waiting for {what}" + (f" ({last_error})" if last_error else "")
    )


@dataclass
class LocalAirflow:
    """Airflow 3 on loopback in its own AIRFLOW_HOME; every process it starts is stopped by ``stop``."""

    home: Path
    logs: Path
    dags_folder: Path
    plugins_folder: Path
    extra_env: dict[str, str]
    port: int = field(default_factory=free_port)
    scheduler_health_port: int = field(default_factory=free_port)
    user: str = "admin"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    #: One pair of signing secrets shared by every component (task tokens cross components).
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit of the venv
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.plugins_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": self.jwt_secret,
            "AIRFLOW__API__SECRET_KEY": self.secret_key,
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.logs / "tasks"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.user}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # The health endpoints docker-compose.yaml's healthchecks probe, checked here too.
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "true",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(self.scheduler_health_port),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **self.extra_env,
        }

    def prepare(self) -> None:
        """Migrate the metadata database and set the UI user's password (what airflow-init does in compose)."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({self.user: self.password}))
        self.run_once(["airflow", "db", "migrate"], "db-migrate")

    def run_once(self, argv: list[str], name: str, timeout: float = 600) -> None:
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [str(VENV_BIN / argv[0]), *argv[1:]],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        if done.returncode != 0:
            raise UiCheckError(f"'{' '.join(argv)}' failed (exit {done.returncode}); see {log}")

    def start(self, components: tuple[str, ...] = COMPONENTS) -> None:
        env = self.env
        for component in components:
            log = (self.logs / f"{component}.log").open("wb")
            self.processes[component] = subprocess.Popen(
                [str(VENV_BIN / "airflow"), component],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopping it stops its workers too
            )
            log.close()

    def check_alive(self) -> None:
        for component, process in self.processes.items():
            if process.poll() is not None:
                raise UiCheckError(
                    f"airflow {component} exited with {process.returncode}; see {self.logs / component}.log"
                )

    def stop(self) -> None:
        """SIGTERM each component's process group, SIGKILL what is left after 30 s."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            # the group may hold task runners and spark-submit JVMs that outlived their parent
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()


class AirflowApi:
    """The REST calls the check needs, as the UI user."""

    def __init__(self, airflow: LocalAirflow) -> None:
        self.airflow = airflow
        self.session = requests.Session()

    def healthy(self) -> bool:
        """The unauthenticated health endpoints (what docker-compose.yaml's healthchecks call) answer 200."""
        self.airflow.check_alive()
        api = requests.get(f"{self.airflow.url}/api/v2/monitor/health", timeout=5)
        if "scheduler" not in self.airflow.processes:  # started without one (the connection-form check)
            return api.status_code == 200
        scheduler = requests.get(f"http://127.0.0.1:{self.airflow.scheduler_health_port}/health", timeout=5)
        return api.status_code == 200 and scheduler.status_code == 200

    def login(self) -> bool:
        self.airflow.check_alive()
        reply = self.session.post(
            f"{self.airflow.url}/auth/token",
            json={"username": self.airflow.user, "password": self.airflow.password},
            timeout=10,
        )
        reply.raise_for_status()
        self.session.headers["Authorization"] = f"Bearer {reply.json()['access_token']}"
        return True

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        self.airflow.check_alive()
        reply = self.session.request(method, f"{self.airflow.url}/api/v2{path}", timeout=30, **kwargs)
        if reply.status_code >= 400:
            raise UiCheckError(f"{method} {path}: HTTP {reply.status_code}: {reply.text[:300]}")
        return reply.json()

    def dag_ids(self) -> set[str]:
        return {dag["dag_id"] for dag in self.call("GET", "/dags", params={"limit": 100})["dags"]}

    def import_errors(self) -> list[str]:
        errors = self.call("GET", "/importErrors")["import_errors"]
        return [f"{e['filename']}: {e['stack_trace'].strip().splitlines()[-1]}" for e in errors]

    def run_to_completion(self, dag_id: str, timeout: float) -> dict[str, Any]:
        """Unpause and trigger ``dag_id``, wait for the run to end; the run must have succeeded."""
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": False})
        run = self.call("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "note": "ui-check"})
        run_id = run["dag_run_id"]

        def finished() -> dict[str, Any] | None:
            current = self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            return current if current["state"] in ("success", "failed") else None

        final = wait_for(f"run {run_id} of {dag_id} to finish", finished, timeout, interval=2)
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": True})  # no scheduled runs from here on
        tasks = self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        final["task_ids"] = sorted(t["task_id"] for t in tasks)
        if final["state"] != "success":
            states = ", ".join(f"{t['task_id']}={t['state']}" for t in tasks)
            raise UiCheckError(
                f"run {run_id} of {dag_id} ended {final['state']} ({states}); task logs under "
                f"{self.airflow.logs / 'tasks'}"
            )
        return final

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Unpause ``dag_id`` and trigger a run now; returns the run id."""
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": False})
        body = {"logical_date": None, "conf": conf or {}, "note": "test"}
        return str(self.call("POST", f"/dags/{dag_id}/dagRuns", json=body)["dag_run_id"])

    def wait_run(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        """The run once it has ended (success or failed)."""

        def finished() -> dict[str, Any] | None:
            current = self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            return current if current["state"] in ("success", "failed") else None

        return wait_for(f"run {run_id} of {dag_id} to finish", finished, timeout, interval=2)  # type: ignore[no-any-return]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.call("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"])
