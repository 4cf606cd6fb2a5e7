"""The Airflow UI check: the repository's DAGs and a finished run, seen in headless Chromium.

    python tests/ui/check_airflow_ui.py            # what `make ui-check` runs; screenshots in var/ui/

It starts Airflow 3 on loopback (api-server, scheduler, dag-processor; LocalExecutor on SQLite, a fresh
AIRFLOW_HOME, a free port) with this checkout's dags/ and plugins/, waits for the health endpoints
docker-compose.yaml's healthchecks use, then until the DAGs are parsed,
triggers one real DAG (``hmsrepl_cm_cleanup`` by default: a SparkSubmitOperator task on local Spark over
an embedded metastore) and waits for the run to finish. Then Chromium logs in through the login page, checks
that the DAG list shows every expected DAG and that the run's page shows it succeeded, and saves
``dags.png`` and ``run.png``. Everything it started is stopped on the way out. Exit 0 when all of that
holds; otherwise 1 with one line saying what is missing and where the logs are.

Why a browser and not the REST API alone: the UI is what operators look at for failures and retries; the
API can be healthy while the UI bundle or the login flow is broken.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import requests

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DEFAULT_DAGS = ("hmsrepl_bootstrap", "hmsrepl_incremental", "hmsrepl_cm_cleanup")
CHROMIUM = "/usr/bin/chromium"
#: The closed network here refuses Chromium's background connections; these flags stop it making them.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COMPONENTS = ("dag-processor", "scheduler", "api-server")
SUCCESS = re.compile(r"^\s*success\s*$", re.IGNORECASE)


class UiCheckError(Exception):
    """What the check found missing; printed as one line, exit code 1."""


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

    def start(self) -> None:
        env = self.env
        for component in COMPONENTS:
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


def expect_visible(page: Any, locator: Any, what: str, shot: Path) -> None:
    """Wait until one visible element matches ``locator``; else screenshot and fail naming ``what``."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        locator.filter(visible=True).first.wait_for(state="visible")
    except PlaywrightError as exc:
        page.screenshot(path=str(shot), full_page=True)
        shot.with_suffix(".html").write_text(page.content())  # the DOM as the browser had it, for diagnosis
        reason = str(exc).strip().splitlines()[0]
        raise UiCheckError(f"{what} ({reason}); see {shot}") from exc


def check_in_chromium(airflow: LocalAirflow, expected: list[str], run: dict[str, Any], out: Path) -> None:
    """Log in as a user would, look at the DAG list and the run's page, save screenshots."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise UiCheckError(
            f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (make ui-check does)"
        )
    profile = Path(tempfile.mkdtemp(prefix="ui-check-chromium-"))
    dags_png, run_png = out / "dags.png", out / "run.png"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(profile),
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1440, "height": 900},
            )
            try:
                page = browser.new_page()
                page.set_default_timeout(60_000)
                # Not logged in: the app must send us to the auth manager's login form.
                page.goto(f"{airflow.url}/dags")
                login = page.locator("input[name='username']")
                expect_visible(page, login, "no login form at /dags for a new browser", out / "login.png")
                login.fill(airflow.user)
                page.locator("input[name='password']").fill(airflow.password)
                page.locator("button[type='submit']").click()
                page.wait_for_url(lambda url: "/auth/" not in url)

                page.goto(f"{airflow.url}/dags")
                for dag_id in expected:
                    expect_visible(
                        page,
                        page.get_by_text(dag_id, exact=True),
                        f"the DAG list does not show {dag_id}",
                        dags_png,
                    )
                page.screenshot(path=str(dags_png), full_page=True)

                run_id = run["dag_run_id"]
                page.goto(f"{airflow.url}/dags/{run['dag_id']}/runs/{run_id}")
                expect_visible(
                    page,
                    page.get_by_text(run_id, exact=True),
                    f"the run page does not name {run_id}",
                    run_png,
                )
                expect_visible(
                    page,
                    page.get_by_text(SUCCESS),
                    f"the run page does not show {run_id} as success",
                    run_png,
                )
                for task_id in run["task_ids"]:  # each task's row in the task-instance table, with its state
                    name = page.get_by_test_id("table-cell-task_display_name").get_by_text(
                        task_id, exact=True
                    )
                    row = page.get_by_role("row").filter(has=name)
                    row = row.filter(has=page.get_by_test_id("table-cell-state").get_by_text(SUCCESS))
                    expect_visible(
                        page, row, f"the run page does not show task {task_id} as success", run_png
                    )
                page.screenshot(path=str(run_png), full_page=True)
            finally:
                browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def embedded_setup(base: Path) -> dict[str, str]:
    """A tiny embedded source and target (SQLite metastores, local roots) for the DAGs' HMSREPL_* settings."""
    env: dict[str, str] = {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"})
    }
    for side in ("source", "target"):
        root = base / side
        for name in ("warehouse", "cmroot"):
            (root / name).mkdir(parents=True, exist_ok=True)
            env[f"HMSREPL_{side.upper()}_{name.upper()}"] = str(root / name)
        env[f"HMSREPL_{side.upper()}_DB_URL"] = f"sqlite:///{root}/metastore.db"
        subprocess.run(
            [
                str(VENV_BIN / "hmsrepl"),
                "--db-url",
                env[f"HMSREPL_{side.upper()}_DB_URL"],
                "schema",
                "upgrade",
            ],
            check=True,
            capture_output=True,
        )
    env["HMSREPL_DUMP_ROOT"] = str(base / "repl")
    return env


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=ROOT / "var" / "ui", show_default=True)
@click.option("--dags-folder", type=click.Path(path_type=Path, exists=True), default=ROOT / "dags")
@click.option("--plugins-folder", type=click.Path(path_type=Path, exists=True), default=ROOT / "plugins")
@click.option(
    "--expect",
    "expected",
    multiple=True,
    default=DEFAULT_DAGS,
    show_default=True,
    help="DAG ids the list must show.",
)
@click.option(
    "--run", "run_dag", default="hmsrepl_cm_cleanup", show_default=True, help="The DAG to run to completion."
)
@click.option(
    "--timeout", type=float, default=600, show_default=True, help="Seconds for start-up, parsing and the run."
)
def main(
    out: Path,
    dags_folder: Path,
    plugins_folder: Path,
    expected: tuple[str, ...],
    run_dag: str,
    timeout: float,
) -> None:
    """Check the Airflow UI in headless Chromium; exit 1 with what is missing."""
    out.mkdir(parents=True, exist_ok=True)
    for old in ("dags.png", "run.png"):
        (out / old).unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ui-check-"))
    started = time.monotonic()
    airflow: LocalAirflow | None = None
    try:
        extra_env = embedded_setup(work / "data")
        airflow = LocalAirflow(work / "airflow", out / "logs", dags_folder, plugins_folder, extra_env)
        airflow.prepare()
        airflow.start()
        api = AirflowApi(airflow)
        wait_for(f"the api-server on {airflow.url}", api.healthy, timeout)
        api.login()
        click.echo(f"airflow up on {airflow.url} ({time.monotonic() - started:.0f} s)")

        def all_parsed() -> bool:
            missing = set(expected) - api.dag_ids()
            if missing and (errors := api.import_errors()):
                raise UiCheckError(f"DAG import errors: {'; '.join(errors)}")
            return not missing

        try:
            wait_for(f"DAGs {', '.join(expected)} to be parsed", all_parsed, timeout, interval=2)
        except UiCheckError as exc:
            found = ", ".join(sorted(api.dag_ids())) or "none"
            raise UiCheckError(f"{exc}; DAGs found: {found}") from exc
        click.echo(f"DAGs parsed: {', '.join(expected)} ({time.monotonic() - started:.0f} s)")
        run = api.run_to_completion(run_dag, timeout)
        click.echo(
            f"run {run['dag_run_id']} of {run_dag}: {run['state']} ({time.monotonic() - started:.0f} s)"
        )
        check_in_chromium(airflow, list(expected), run, out)
    except UiCheckError as exc:
        click.echo(f"ui-check FAILED: {exc}", err=True)
        sys.exit(1)
    finally:
        if airflow is not None:
            airflow.stop()
        shutil.rmtree(work, ignore_errors=True)
    click.echo(
        f"ui-check passed in {time.monotonic() - started:.0f} s: the UI lists {', '.join(expected)} and shows run "
        f"{run['dag_run_id']} of {run_dag} as success; screenshots {out / 'dags.png'}, {out / 'run.png'}"
    )


if __name__ == "__main__":
    main()
