"""docker-compose.yaml, checked without a Docker engine: structure, wiring and the settings the code reads.

No Docker engine runs on the project's machines, so the production shape is validated from the other side:
every service it starts exists and runs a command our tools accept, start-up order is sound, every
mounted or copied path exists here, every database named in a URL is created by the PostgreSQL init
script, every ``HMSREPL_*`` variable the Spark applications read is set where they run (and every one set
means something), every ``AIRFLOW__*`` setting is one Airflow knows, and Airflow itself resolves the
connections the DAGs name from the ``AIRFLOW_CONN_*`` variables.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from hmsrepl.cli import main as hmsrepl_cli
from hmsrepl.config import MetastoreConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
IMAGE_ROOT = "/opt/hmsrepl"  # where the Dockerfile puts the repository in the image
#: Settings of one metastore; the pipeline's tasks address two by side (HMSREPL_SOURCE_*/TARGET_*), and a
#: side-less value would override the side (``cm_cleanup --side target`` would clean ``HMSREPL_CMROOT``).
SIDELESS = {"HMSREPL_DB_URL", "HMSREPL_WAREHOUSE", "HMSREPL_CMROOT"}
#: What the replication operator hands the applications per run (``hmsrepl_airflow.app_settings``): the
#: metastore each connection reached, never a setting of the file.
PER_RUN = {"HMSREPL_SOURCE_IDENTITY", "HMSREPL_TARGET_IDENTITY"}
AIRFLOW_SERVICES = ("airflow-init", "airflow-scheduler", "airflow-api-server", "airflow-dag-processor")
METASTORES = {"metastore-source": "metastore-source-schema", "metastore-target": "metastore-target-schema"}
#: The service where Airflow's LocalExecutor runs tasks, i.e. where spark-submit and the Spark driver run.
TASK_RUNNER = "airflow-scheduler"

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: Any) -> Any:
    """Compose's variable substitution with an empty .env: ``${X:-default}`` gives the default."""
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group("name", "op", "arg")
        if op and op.endswith("?"):
            raise AssertionError(f"${{{name}}} must be set: {arg}")
        return arg if op in (":-", "-") else ""

    return _VAR.sub(one, value).replace("$$", "$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    with COMPOSE.open() as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # ["KEY=value", ...]
        env = dict(item.split("=", 1) for item in env)
    return {key: str(interpolate(value)) for key, value in env.items()}


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command")
    assert isinstance(cmd, list), f"command should be an exec-form list: {cmd!r}"
    return [interpolate(part) for part in cmd]


def test_every_part_of_the_production_shape_is_a_service(services):
    expected = {
        "postgres",
        "spark-master",
        "spark-worker",
        *METASTORES,
        *METASTORES.values(),
        *AIRFLOW_SERVICES,
    }
    assert expected <= set(services), f"missing services: {sorted(expected - set(services))}"
    assert services["postgres"]["image"].startswith("postgres:")


def test_one_image_built_from_the_repository(services):
    """Spark executors must run the driver's Python and hmsrepl: every non-database service shares one build."""
    builds = {name: svc.get("build") for name, svc in services.items() if name != "postgres"}
    assert all(builds.values()), (
        f"services without the hmsrepl build: {[n for n, b in builds.items() if not b]}"
    )
    (build,) = {json.dumps(b, sort_keys=True) for b in builds.values()}
    build = json.loads(build)
    dockerfile = ROOT / build["context"] / build["dockerfile"]
    assert dockerfile.is_file(), f"{dockerfile} is missing"
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            *sources, _target = line.split()[1:]
            for source in sources:
                assert (ROOT / build["context"] / source).exists(), (
                    f"Dockerfile copies {source}: not in the repo"
                )
    assert "requirements.txt" in dockerfile.read_text()


def test_start_up_order_is_sound(services):
    """depends_on names real services, without cycles; waits are on checks that exist."""
    graph: dict[str, set[str]] = {}
    for name, svc in services.items():
        depends = svc.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on should name a condition per service"
        graph[name] = set(depends)
        for other, spec in depends.items():
            assert other in services, f"{name} depends on unknown service {other}"
            assert other != name, f"{name} depends on itself"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[other], (
                    f"{name} waits for {other} to be healthy: no healthcheck"
                )
            elif condition == "service_completed_successfully":
                assert str(services[other].get("restart", "no")) == "no", f"{other} is one-shot: restart 'no'"
            else:
                assert condition == "service_started", f"{name}: unknown condition {condition}"

    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"depends_on cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for other in graph[name]:
                visit(other, (*path, name))
            done.add(name)

    for name in graph:
        visit(name, ())

    # What each long-running part must wait for.
    for metastore, schema in METASTORES.items():
        assert services[metastore]["depends_on"][schema]["condition"] == "service_completed_successfully"
        assert services[schema]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES[1:]:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    runner_waits = set(services[TASK_RUNNER]["depends_on"])
    assert {"metastore-source", "metastore-target", "spark-master"} <= runner_waits
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"
    for name, svc in services.items():
        if str(svc.get("restart", "no")) != "no":
            assert "healthcheck" in svc or name in ("airflow-dag-processor",), f"{name}: no healthcheck"


def test_mounted_paths_exist_and_volumes_are_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for mount in svc.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts {source}: not in the repository"
            else:
                assert source in declared, f"{name} uses volume {source}: not declared under volumes"


def published_port(port: Any) -> tuple[str, str]:
    """(host address, host port) of a short-syntax ``ports`` entry; an address left out means all interfaces."""
    parts = str(interpolate(port)).rsplit(":", 2)
    if len(parts) == 3:
        return parts[0], parts[1]
    return "0.0.0.0", parts[0]


def test_host_ports_are_distinct(services):
    published = [
        published_port(port)[1]
        for svc in services.values()
        for port in svc.get("ports") or []
        if ":" in str(port)
    ]
    assert len(published) == len(set(published)), f"host ports used twice: {published}"


def test_metastore_ports_are_published_on_loopback_only(services):
    """The Thrift port has no authentication in this file: the host must not expose it to its network."""
    for name in METASTORES:
        ports = services[name].get("ports") or []
        assert ports, f"{name} publishes no port"
        for port in ports:
            address, _ = published_port(port)
            assert address == "127.0.0.1", (
                f"{name} publishes {interpolate(port)} on {address}, not on loopback"
            )


def test_every_database_in_a_url_is_created_by_the_init_script(services):
    mounts = [m for m in services["postgres"]["volumes"] if m.endswith("/docker-entrypoint-initdb.d:ro")]
    assert mounts, "postgres has no init scripts mounted"
    init_dir = ROOT / mounts[0].split(":", 1)[0]
    created = set(
        re.findall(r"CREATE DATABASE (\w+)", " ".join(p.read_text() for p in init_dir.glob("*.sql")))
    )
    pg_env = environment(services["postgres"])
    created.add(pg_env["POSTGRES_DB"])
    urls = {
        value
        for svc in services.values()
        for key, value in environment(svc).items()
        if key.endswith(("DB_URL", "SQL_ALCHEMY_CONN", "SQL_ALCHEMY_CONN_ASYNC"))
    }
    assert len(urls) >= 4
    for url in urls:
        parsed = make_url(url)
        assert parsed.host == "postgres", f"{url}: not the compose PostgreSQL"
        assert parsed.username == pg_env["POSTGRES_USER"] and parsed.password == pg_env["POSTGRES_PASSWORD"]
        assert parsed.database in created, f"{url}: database {parsed.database} is never created"


def test_metastores_serve_their_own_database_and_roots(services, monkeypatch):
    for name, schema in METASTORES.items():
        side = name.removeprefix("metastore-")
        serve_env, schema_env = environment(services[name]), environment(services[schema])
        for key in ("HMSREPL_DB_URL", "HMSREPL_WAREHOUSE", "HMSREPL_CMROOT"):
            assert serve_env[key] == schema_env[key], f"{name} and {schema} disagree on {key}"
        assert make_url(serve_env["HMSREPL_DB_URL"]).database == f"metastore_{side}"
        assert serve_env["HMSREPL_WAREHOUSE"].startswith(f"/data/{side}/")
        # the replication side settings of the Airflow tasks point at the same metastore
        task_env = environment(services[TASK_RUNNER])
        for key in ("DB_URL", "WAREHOUSE", "CMROOT"):
            assert task_env[f"HMSREPL_{side.upper()}_{key}"] == serve_env[f"HMSREPL_{key}"]
        for key, value in serve_env.items():  # read the way the service reads them: from its environment
            monkeypatch.setenv(key, value)
        config = MetastoreConfig()
        assert config.db_url == serve_env["HMSREPL_DB_URL"]
        assert "hive" in config.admin_users, (
            "the Airflow hook reads events as 'hive': it must be an admin user"
        )


def test_hmsrepl_commands_are_accepted_by_the_cli(services):
    for name, svc in services.items():
        cmd = command(svc) if svc.get("command") else []
        if cmd[:1] == ["hmsrepl"]:
            result = CliRunner().invoke(hmsrepl_cli, [*cmd[1:], "--help"])
            assert result.exit_code == 0, f"{name}: {' '.join(cmd)}: {result.output}"


def test_other_commands_exist_in_the_image(services):
    """Executables come from the venv (same requirements as the image) or from the copied repository."""
    venv_bin = Path(sys.executable).parent
    for name, svc in services.items():
        if name == "postgres" or not svc.get("command"):
            continue
        program = command(svc)[0]
        if program.startswith(IMAGE_ROOT + "/"):
            script = ROOT / program.removeprefix(IMAGE_ROOT + "/")
            assert script.is_file() and os.access(script, os.X_OK), (
                f"{name}: {script} missing or not executable"
            )
        else:
            assert (venv_bin / program).exists() or shutil.which(program), f"{name}: {program} not installed"


def _settings_read_by_spark_apps() -> set[str]:
    if str(ROOT) not in sys.path:  # spark_apps/ is a package at the checkout's top level
        sys.path.insert(0, str(ROOT))
    names: set[str] = set()
    for path in sorted((ROOT / "spark_apps").glob("*.py")):
        app = getattr(importlib.import_module(f"spark_apps.{path.stem}"), "main", None)
        names |= {p.envvar for p in getattr(app, "params", []) if isinstance(p.envvar, str)}
    return names


def test_every_setting_the_spark_apps_read_is_set_where_tasks_run(services):
    """spark-submit inherits the task's environment: the apps' HMSREPL_* options must find values there."""
    read = _settings_read_by_spark_apps()
    assert {"HMSREPL_SOURCE_DB_URL", "HMSREPL_TARGET_DB_URL", "HMSREPL_CMROOT"} <= read
    task_env = environment(services[TASK_RUNNER])
    missing = sorted(read - SIDELESS - PER_RUN - set(task_env))
    assert not missing, f"{TASK_RUNNER} does not set {missing}, which the Spark applications read"
    for name in ("airflow-scheduler", "spark-worker"):
        overriding = sorted(SIDELESS & set(environment(services[name])))
        assert not overriding, f"{name} sets {overriding}: they would override the tasks' --side settings"
    worker_env = environment(services["spark-worker"])
    for key in ("HMSREPL_SOURCE_WAREHOUSE", "HMSREPL_TARGET_WAREHOUSE", "HMSREPL_DUMP_ROOT"):
        assert worker_env[key] == task_env[key], f"executors and driver disagree on {key}"


def test_every_hmsrepl_setting_in_the_file_means_something(services):
    """A misspelt HMSREPL_* variable would be silently ignored: each one set must be read somewhere."""
    known = {f"HMSREPL_{field.upper()}" for field in MetastoreConfig.model_fields}
    known |= _settings_read_by_spark_apps()
    known |= {
        f"HMSREPL_{side}_{key}" for side in ("SOURCE", "TARGET") for key in ("DB_URL", "WAREHOUSE", "CMROOT")
    }
    known |= set(re.findall(r"HMSREPL_[A-Z0-9_]+", (ROOT / "include/hmsrepl/spark_session.py").read_text()))
    for path in [*(ROOT / "dags").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]:
        known |= set(re.findall(r"HMSREPL_[A-Z0-9_]+", path.read_text()))
    for name, svc in services.items():
        unknown = sorted(k for k in environment(svc) if k.startswith("HMSREPL_") and k not in known)
        assert not unknown, f"{name} sets {unknown}: nothing reads them"


def _airflow_config_options() -> dict[str, set[str]]:
    spec = importlib.util.find_spec("airflow")
    assert spec and spec.submodule_search_locations, "Airflow is not installed (requirements.txt)"
    path = Path(next(iter(spec.submodule_search_locations))) / "config_templates" / "config.yml"
    with path.open() as f:
        sections = yaml.safe_load(f)
    return {section: set(body.get("options", {})) for section, body in sections.items()}


def test_airflow_settings_are_ones_airflow_knows(services):
    options = _airflow_config_options()
    for name in AIRFLOW_SERVICES:
        env = environment(services[name])
        for key in env:
            if key.startswith("AIRFLOW__"):
                section, option = key.removeprefix("AIRFLOW__").lower().split("__", 1)
                assert option in options.get(section, set()), f"{name}: {key} is not an Airflow setting"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).get_backend_name() == "postgresql"
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == f"{IMAGE_ROOT}/dags"
        assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == f"{IMAGE_ROOT}/plugins"
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
        mounts = {m.split(":")[1]: m.split(":")[0] for m in services[name]["volumes"]}
        for folder in ("dags", "plugins", "spark_apps"):
            assert mounts[f"{IMAGE_ROOT}/{folder}"] == f"./{folder}"
    # the components share what they sign tokens with
    shared = (
        "AIRFLOW__API_AUTH__JWT_SECRET",
        "AIRFLOW__API__SECRET_KEY",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    )
    for key in shared:
        assert len({environment(services[n])[key] for n in AIRFLOW_SERVICES}) == 1, f"{key} differs"


def test_airflow_resolves_the_connections_the_dags_use(services, tmp_path):
    """Airflow itself parses the commands, loads the DAGs and builds each connection from AIRFLOW_CONN_*."""
    env = environment(services[TASK_RUNNER])
    env.update(
        AIRFLOW_HOME=str(tmp_path),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(ROOT / "plugins"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path}/airflow.db",
    )
    env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC")
    commands = [command(services[n]) for n in AIRFLOW_SERVICES[1:]]
    request = json.dumps({"env": env, "commands": commands})
    done = subprocess.run(
        [sys.executable, "-m", "tests.compose_probe"],
        input=request,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(answer["commands"].values()) == {"ok"}, answer["commands"]
    assert not answer["import_errors"], answer["import_errors"]
    assert answer["spark_master"] == "spark://spark-master:7077"
    for conn_id, conn in answer["connections"].items():
        assert "error" not in conn, (
            f"connection {conn_id!r}: set AIRFLOW_CONN_{conn_id.upper()}: {conn['error']}"
        )
        if conn_id == "spark_default":
            continue
        assert conn["host"] in services, f"{conn_id} points at {conn['host']}, not a service of the file"
        listening = command(services[conn["host"]])
        assert str(conn["port"]) in listening, f"{conn_id}: {conn['host']} does not listen on {conn['port']}"
    if any((ROOT / "dags").glob("*.py")):  # the DAGs, and the two metastores their tasks read
        assert {"hmsrepl_bootstrap", "hmsrepl_incremental", "hmsrepl_cm_cleanup"} <= set(answer["dag_ids"])
        assert {"hmsrepl_source_metastore", "hmsrepl_target_metastore"} <= set(answer["connections"])


def _set_env(service: str, key: str, value: str | None) -> Callable[[dict[str, Any]], None]:
    def change(services: dict[str, Any]) -> None:
        env = services[service].setdefault("environment", {})
        if value is None:
            env.pop(key)
        else:
            env[key] = value

    return change


def _depend(service: str, on: str) -> Callable[[dict[str, Any]], None]:
    def change(services: dict[str, Any]) -> None:
        services[service].setdefault("depends_on", {})[on] = {"condition": "service_started"}

    return change


def _drop(service: str, key: str) -> Callable[[dict[str, Any]], None]:
    return lambda services: services[service].pop(key)


def _mount(service: str, mount: str) -> Callable[[dict[str, Any]], None]:
    return lambda services: services[service]["volumes"].append(mount)


def _publish(service: str, port: str) -> Callable[[dict[str, Any]], None]:
    def change(services: dict[str, Any]) -> None:
        services[service]["ports"] = [port]

    return change


@pytest.mark.parametrize(
    ("breakage", "check", "message"),
    [
        (
            _set_env(TASK_RUNNER, "HMSREPL_DUMP_ROOT", None),
            test_every_setting_the_spark_apps_read_is_set_where_tasks_run,
            "does not set",
        ),
        (
            _set_env(TASK_RUNNER, "HMSREPL_CMROOT", "/data/x"),
            test_every_setting_the_spark_apps_read_is_set_where_tasks_run,
            "override",
        ),
        (
            _set_env("metastore-source", "HMSREPL_WAREHOSE", "/data/x"),
            test_every_hmsrepl_setting_in_the_file_means_something,
            "nothing reads",
        ),
        (
            _set_env("airflow-scheduler", "AIRFLOW__CORE__EXECUTER", "LocalExecutor"),
            test_airflow_settings_are_ones_airflow_knows,
            "not an Airflow setting",
        ),
        (
            _set_env(
                "metastore-target",
                "HMSREPL_DB_URL",
                "postgresql+psycopg://hmsrepl:hmsrepl@postgres:5432/metastore_tgt",
            ),
            test_every_database_in_a_url_is_created_by_the_init_script,
            "never created",
        ),
        (_depend("postgres", "airflow-scheduler"), test_start_up_order_is_sound, "cycle"),
        (
            _publish("metastore-source", "9083:9083"),
            test_metastore_ports_are_published_on_loopback_only,
            "not on",
        ),
        (_drop("spark-master", "healthcheck"), test_start_up_order_is_sound, "no healthcheck"),
        (
            _mount("airflow-scheduler", "./dagz:/opt/hmsrepl/dagz:ro"),
            test_mounted_paths_exist_and_volumes_are_declared,
            "not in the repository",
        ),
    ],
    ids=[
        "setting-unset",
        "sideless-override",
        "misspelt-hmsrepl",
        "misspelt-airflow",
        "db-not-created",
        "cycle",
        "metastore-on-all-interfaces",
        "no-healthcheck",
        "missing-mount",
    ],
)
def test_the_checks_catch_a_broken_file(compose, monkeypatch, breakage, check, message):
    """Each check above fails on a file broken the way it guards against (so a green run means something)."""
    broken = copy.deepcopy(compose)
    breakage(broken["services"])
    arguments = {"compose": broken, "services": broken["services"], "monkeypatch": monkeypatch}
    wanted = inspect.signature(check).parameters
    with pytest.raises(AssertionError, match=message):
        check(**{name: value for name, value in arguments.items() if name in wanted})
