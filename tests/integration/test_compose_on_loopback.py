"""docker-compose.yaml's metastore and Airflow-init services, run as their containers would, on loopback.

There is no Docker engine here, so this test takes the file's own commands, environments and scripts and
runs them as processes against the real PostgreSQL server: the init script's databases (prefixed, so the
test owns them), the entrypoint that creates the data roots, ``hmsrepl schema upgrade`` and ``hmsrepl
metastore serve`` per side, ``airflow-init.sh`` (Airflow's migration on PostgreSQL through psycopg 3, sync
and async, and the UI user), then the DAGs' metastore hook reading both servers through the file's
``AIRFLOW_CONN_*`` definitions. Only host names, ports and /data paths are rewritten.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hmsrepl.thrift.process import free_port, stop_process
from tests.backends import POSTGRES_ADMIN_URL

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "include" / "docker" / "entrypoint.sh"
VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.postgres


def load_services() -> dict[str, Any]:
    from tests.unit.test_docker_compose import COMPOSE

    with COMPOSE.open() as f:
        return yaml.safe_load(f)["services"]


class Loopback:
    """Rewrites the file's container addresses to this machine: PostgreSQL, metastore ports, /data paths."""

    def __init__(self, tmp_path: Path, prefix: str, ports: dict[str, int]) -> None:
        self.admin_url = make_url(POSTGRES_ADMIN_URL)
        self.prefix, self.ports, self.tmp_path = prefix, ports, tmp_path

    def database(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def value(self, key: str, value: str) -> str:
        if value.startswith("postgresql+"):
            url = make_url(value)
            local = self.admin_url.set(drivername=url.drivername, database=self.database(url.database or ""))
            return local.render_as_string(hide_password=False)
        if key.startswith("AIRFLOW_CONN_"):
            conn = json.loads(value)
            if conn.get("host") in self.ports:
                conn["port"], conn["host"] = self.ports[conn["host"]], "127.0.0.1"
            return json.dumps(conn)
        for container, here in (
            ("/data/", self.tmp_path / "data"),
            ("/opt/airflow/", self.tmp_path),
            ("/opt/hmsrepl/", ROOT),
        ):
            value = value.replace(container, f"{here}/")
        return value

    def environment(self, service: dict[str, Any]) -> dict[str, str]:
        from tests.unit.test_docker_compose import environment

        env = {k: self.value(k, v) for k, v in environment(service).items()}
        image = {
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
            "AIRFLOW_HOME": str(self.tmp_path / "airflow"),
        }
        return {**os.environ, **image, **env}  # the image's ENV, then the service's

    def command(self, service: dict[str, Any], port: int | None = None) -> list[str]:
        from tests.unit.test_docker_compose import command

        argv = command(service)
        if port is not None:
            argv[argv.index("--port") + 1] = str(port)
            argv[argv.index("--host") + 1] = "127.0.0.1"
        if argv[0].startswith("/opt/hmsrepl/"):
            argv[0] = str(ROOT / argv[0].removeprefix("/opt/hmsrepl/"))
        return [str(ENTRYPOINT), *argv]


@contextmanager
def init_databases(loopback: Loopback, services: dict[str, Any]) -> Iterator[list[str]]:
    """What the postgres image does with the mounted init scripts, under this test's prefix; dropped after."""
    mount = next(m for m in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in m)
    script = " ".join(p.read_text() for p in sorted((ROOT / mount.split(":")[0]).glob("*.sql")))
    names = re.findall(r"CREATE DATABASE (\w+);", script)
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'CREATE DATABASE "{loopback.database(name)}"'))
        yield names
    finally:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{loopback.database(name)}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def serving(argv: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"{' '.join(argv)} exited: {log.read_text()[-2000:]}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"nothing listens on {port}: {log.read_text()[-2000:]}"
                time.sleep(0.2)  # waiting for the server's port to open
        yield
    finally:
        stop_process(proc)


def run(argv: list[str], env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


HOOK_PROBE = """
import json, sys
from hmsrepl_airflow.hooks import MetastoreNotificationHook
print(json.dumps({c: MetastoreNotificationHook(c).current_event_id() for c in sys.argv[1:]}))
"""


def test_compose_services_run_on_loopback(tmp_path):
    services = load_services()
    metastores = ("metastore-source", "metastore-target")
    loopback = Loopback(tmp_path, f"hmsrepl_c_{uuid.uuid4().hex[:8]}", {m: free_port() for m in metastores})

    with init_databases(loopback, services) as created, ExitStack() as stack:
        assert {"metastore_source", "metastore_target", "airflow"} <= set(created)
        for name in metastores:
            schema = services[f"{name}-schema"]
            env = loopback.environment(schema)
            run(loopback.command(schema), env)
            assert Path(env["HMSREPL_WAREHOUSE"]).is_dir(), "the entrypoint creates the warehouse root"
            serve = services[name]
            port = loopback.ports[name]
            stack.enter_context(
                serving(
                    loopback.command(serve, port), loopback.environment(serve), port, tmp_path / f"{name}.log"
                )
            )

        init = services["airflow-init"]
        env = loopback.environment(init)
        out = run(loopback.command(init), env, timeout=600)
        assert "database migrated" in out
        passwords = json.loads(Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]).read_text())
        assert passwords == {env["AIRFLOW_ADMIN_USER"]: env["AIRFLOW_ADMIN_PASSWORD"]}
        admin = create_engine(make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]))
        with admin.connect() as conn:  # Airflow's schema is there, in the database the file names
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
        admin.dispose()

        # The DAGs' hook, configured only by the scheduler's AIRFLOW_CONN_* variables, reads both metastores.
        scheduler_env = loopback.environment(services["airflow-scheduler"])
        scheduler_env.update(
            PYTHONPATH=str(ROOT / "plugins"),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
        )
        ids = json.loads(
            run(
                [sys.executable, "-c", HOOK_PROBE, "hmsrepl_source_metastore", "hmsrepl_target_metastore"],
                scheduler_env,
            )
            .strip()
            .splitlines()[-1]
        )
        # `schema upgrade` creates the default database: one event on each side.
        assert ids == {"hmsrepl_source_metastore": 1, "hmsrepl_target_metastore": 1}
