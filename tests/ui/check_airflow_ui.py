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

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make the tests package importable
    sys.path.insert(0, str(ROOT))

from tests.airflow_local import VENV_BIN, AirflowApi, LocalAirflow, UiCheckError, wait_for  # noqa: E402

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
SUCCESS = re.compile(r"^\s*success\s*$", re.IGNORECASE)


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
