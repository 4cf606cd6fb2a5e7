"""The Airflow UI check: the metastore connection form, the repository's DAGs and a finished run, seen in
headless Chromium.

    python tests/ui/check_airflow_ui.py            # what `make ui-check` runs; screenshots in var/ui/
    python tests/ui/check_airflow_ui.py --connection-form-only   # api-server alone, about a minute

It starts Airflow 3 on loopback (api-server, scheduler, dag-processor; LocalExecutor on SQLite, a fresh
AIRFLOW_HOME, a free port) with this checkout's dags/ and plugins/, waits for the health endpoints
docker-compose.yaml's healthchecks use, then until the DAGs are parsed,
triggers one real DAG (``hmsrepl_cm_cleanup`` by default: a SparkSubmitOperator task on local Spark over
an embedded metastore) and waits for the run to finish. Then Chromium logs in through the login page, checks
that the DAG list shows every expected DAG and that the run's page shows it succeeded, and saves
``dags.png`` and ``run.png``. Before that, against a metastore server it starts: Admin > Connections > Add
Connection offers the type ``hmsrepl`` with its relabelled and custom fields
(``connection_form.png``), and the saved connection's Test button reports success with the metastore's
answer (``connection_test.png``) and, for a connection to a port nothing listens on, failure naming the
connection (``connection_test_failed.png``). Everything it started is stopped on the way out. Exit 0 when all of that
holds; otherwise 1 with one line saying what is missing and where the logs are.

Why a browser and not the REST API alone: the UI is what operators look at for failures and retries; the
API can be healthy while the UI bundle or the login flow is broken.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make the tests package importable
    sys.path.insert(0, str(ROOT))

from tests.airflow_local import (  # noqa: E402
    COMPONENTS,
    VENV_BIN,
    AirflowApi,
    LocalAirflow,
    UiCheckError,
    free_port,
    wait_for,
)
from tests.servers import metastore_server  # noqa: E402

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
#: The metastore connection type's name in the form (``hmsrepl.airflow_provider``) and fields it must show.
CONNECTION_HOOK_NAME = "Hive Metastore (hmsrepl)"
SCREENSHOTS = (
    "connection_form.png",
    "connection_test.png",
    "connection_test_failed.png",
    "dags.png",
    "run.png",
)
STANDARD_FIELDS = ("Metastore host", "Thrift port", "User (set_ugi", "Kerberos password")
#: Extra fields by key and label: their inputs are named ``element_<key>`` (the form does not tie them to
#: their labels).
EXTRA_FIELDS = {
    "auth": "Authentication",
    "principal": "Kerberos principal",
    "keytab": "Keytab",
    "service_principal": "Metastore principal",
    "qop": "SASL QOP",
    "tls_ca": "TLS CA file",
    "db_url": "Database URL",
    "db_password": "Database password",
    "warehouse": "Warehouse",
    "cmroot": "cmroot",
    "external_roots": "External roots",
}


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


@contextlib.contextmanager
def logged_in_page(airflow: LocalAirflow, out: Path) -> Iterator[Any]:
    """A headless Chromium page logged in through the login form, as a user would."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise UiCheckError(
            f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (make ui-browser does)"
        )
    profile = Path(tempfile.mkdtemp(prefix="ui-check-chromium-"))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(profile),
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1440, "height": 1000},
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
                yield page
            finally:
                browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def check_dags_and_run(
    page: Any, airflow: LocalAirflow, expected: list[str], run: dict[str, Any], out: Path
) -> None:
    """The DAG list shows every expected DAG and the run's page shows it and its tasks succeeded."""
    dags_png, run_png = out / "dags.png", out / "run.png"
    page.goto(f"{airflow.url}/dags")
    for dag_id in expected:
        expect_visible(
            page, page.get_by_text(dag_id, exact=True), f"the DAG list does not show {dag_id}", dags_png
        )
    page.screenshot(path=str(dags_png), full_page=True)

    run_id = run["dag_run_id"]
    page.goto(f"{airflow.url}/dags/{run['dag_id']}/runs/{run_id}")
    expect_visible(
        page, page.get_by_text(run_id, exact=True), f"the run page does not name {run_id}", run_png
    )
    expect_visible(
        page, page.get_by_text(SUCCESS), f"the run page does not show {run_id} as success", run_png
    )
    for task_id in run["task_ids"]:  # each task's row in the task-instance table, with its state
        name = page.get_by_test_id("table-cell-task_display_name").get_by_text(task_id, exact=True)
        row = page.get_by_role("row").filter(has=name)
        row = row.filter(has=page.get_by_test_id("table-cell-state").get_by_text(SUCCESS))
        expect_visible(page, row, f"the run page does not show task {task_id} as success", run_png)
    page.screenshot(path=str(run_png), full_page=True)


def add_connection(
    page: Any, airflow: LocalAirflow, conn_id: str, port: int, shot: Path | None = None
) -> None:
    """Add Admin > Connections > Add Connection of type ``CONNECTION_HOOK_NAME`` through its form.

    With ``shot``, check the form shows the type's relabelled and custom fields and screenshot it with the
    extra fields open.
    """
    page.goto(f"{airflow.url}/connections")
    page.get_by_role("button", name="Add Connection").click()
    page.locator("input[name='connection_id']").fill(conn_id)
    kind = page.get_by_label("Connection Type")
    kind.click()
    kind.press_sequentially("hmsrepl")
    where = shot or airflow.logs / "connection-form.png"
    option = page.get_by_role("option", name=CONNECTION_HOOK_NAME)
    expect_visible(page, option, f"the connection types do not offer {CONNECTION_HOOK_NAME!r}", where)
    option.click()
    if shot is not None:
        _expect_fields(page, STANDARD_FIELDS, shot)
    page.get_by_label("Metastore host").fill("127.0.0.1")
    page.get_by_label("Thrift port").fill(str(port))
    page.get_by_label("User (set_ugi").fill("hive")
    if shot is not None:
        page.get_by_role("button", name="Extra Fields", exact=True).click()  # a closed accordion
        for key, label in EXTRA_FIELDS.items():
            field = page.locator("[data-part='root']").filter(
                has=page.locator(f"input[name='element_{key}']")
            )
            expect_visible(page, field.filter(has_text=label), f"the form has no extra field {label!r}", shot)
        page.set_viewport_size({"width": 1440, "height": 2400})  # the dialog scrolls inside: show all of it
        page.screenshot(path=str(shot), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 1000})
    page.get_by_role("button", name="Save").click()
    row = page.get_by_role("row").filter(has=page.get_by_text(conn_id, exact=True))
    expect_visible(page, row, f"the connection list does not show {conn_id} after Save", where)


def _expect_fields(page: Any, labels: tuple[str, ...], shot: Path) -> None:
    for label in labels:
        expect_visible(page, page.get_by_label(label), f"the form has no field {label!r}", shot)


def test_button(page: Any, conn_id: str, outcome: str, detail: str | re.Pattern[str], shot: Path) -> None:
    """Click the row's Test button; the notice must say ``outcome`` with ``detail``."""
    row = page.get_by_role("row").filter(has=page.get_by_text(conn_id, exact=True))
    row.get_by_role("button", name="Test Connection").click()
    notice = page.get_by_role("status").filter(has_text=outcome).filter(has_text=detail)
    expect_visible(page, notice, f"Test of {conn_id} did not show {outcome!r} with {detail!r}", shot)
    page.screenshot(path=str(shot), full_page=True)


def check_connection_form(page: Any, airflow: LocalAirflow, metastore_port: int, out: Path) -> None:
    """The metastore connection type in the add-connection form, and its Test button against a live and a
    dead metastore."""
    add_connection(page, airflow, "hmsrepl_ui_check", metastore_port, out / "connection_form.png")
    test_button(
        page,
        "hmsrepl_ui_check",
        "Test Connection Successful",
        f"127.0.0.1:{metastore_port} answers as hive",
        out / "connection_test.png",
    )
    dead = free_port()
    add_connection(page, airflow, "hmsrepl_ui_dead", dead)
    test_button(
        page,
        "hmsrepl_ui_dead",
        "Test Connection Failed",
        # Airflow tests a copy of the connection under a random id, so the message names that id.
        re.compile(rf"cannot reach the metastore of connection '\w+' at thrift://127\.0\.0\.1:{dead}"),
        out / "connection_test_failed.png",
    )


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
@click.option(
    "--connection-form-only",
    is_flag=True,
    help="Only the connection form and its Test button (api-server alone; no DAG run).",
)
def main(
    out: Path,
    dags_folder: Path,
    plugins_folder: Path,
    expected: tuple[str, ...],
    run_dag: str,
    timeout: float,
    connection_form_only: bool,
) -> None:
    """Check the Airflow UI in headless Chromium; exit 1 with what is missing."""
    out.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS:
        (out / old).unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ui-check-"))
    started = time.monotonic()
    airflow: LocalAirflow | None = None
    try:
        with contextlib.ExitStack() as stack:
            (work / "metastore").mkdir()
            metastore = stack.enter_context(
                metastore_server(work / "metastore", f"sqlite:///{work}/metastore/metastore.db")
            )
            # Airflow 3 disables the Test button unless told; the test runs in the api-server.
            extra_env = {**embedded_setup(work / "data"), "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
            airflow = LocalAirflow(work / "airflow", out / "logs", dags_folder, plugins_folder, extra_env)
            airflow.prepare()
            airflow.start(("api-server",) if connection_form_only else COMPONENTS)
            api = AirflowApi(airflow)
            wait_for(f"the api-server on {airflow.url}", api.healthy, timeout)
            api.login()
            click.echo(f"airflow up on {airflow.url} ({time.monotonic() - started:.0f} s)")
            run = (
                None
                if connection_form_only
                else parse_and_run(api, list(expected), run_dag, timeout, started)
            )
            with logged_in_page(airflow, out) as page:
                check_connection_form(page, airflow, metastore.port, out)
                click.echo(f"connection form and Test button checked ({time.monotonic() - started:.0f} s)")
                if run is not None:
                    check_dags_and_run(page, airflow, list(expected), run, out)
    except UiCheckError as exc:
        click.echo(f"ui-check FAILED: {exc}", err=True)
        sys.exit(1)
    finally:
        if airflow is not None:
            airflow.stop()
        shutil.rmtree(work, ignore_errors=True)
    shots = ", ".join(str(out / name) for name in SCREENSHOTS if (out / name).exists())
    what = "the metastore connection form and its Test button (live and dead metastore)"
    if run is not None:
        what = f"{', '.join(expected)}, run {run['dag_run_id']} of {run_dag} as success, and " + what
    click.echo(
        f"ui-check passed in {time.monotonic() - started:.0f} s: the UI shows {what}; screenshots {shots}"
    )


def parse_and_run(
    api: AirflowApi, expected: list[str], run_dag: str, timeout: float, started: float
) -> dict[str, Any]:
    """Wait until the DAGs are parsed, then run ``run_dag`` to success."""

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
    click.echo(f"run {run['dag_run_id']} of {run_dag}: {run['state']} ({time.monotonic() - started:.0f} s)")
    return run


if __name__ == "__main__":
    main()
