"""Start-up policy: an unauthenticated Thrift port listens on loopback only unless the operator opts in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.thrift.auth import SecuritySettingError, is_loopback
from hmsrepl.thrift.process import free_port
from hmsrepl.thrift.server import MetastoreServer
from tests.servers import REPO

SERVE = [sys.executable, "-m", "hmsrepl.cli", "metastore", "serve"]


def _serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``hmsrepl metastore serve`` that must exit by itself (a refusal) within 60 s."""
    return subprocess.run(
        [sys.executable, "-m", "hmsrepl.cli", "metastore", "serve", *args],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO / "include"),
            "HMSREPL_DB_URL": f"sqlite:///{tmp_path}/metastore.db",
            **env,
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_no_auth_on_a_non_loopback_address_refuses_to_start(tmp_path: Path, host: str) -> None:
    result = _serve(tmp_path, "--host", host, "--port", str(free_port()))
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert "refusing to serve" in line and "without authentication" in line
    assert "HMSREPL_THRIFT_AUTH=kerberos" in line and "--insecure" in line
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "metastore.db").exists(), "nothing is opened or created before the refusal"


def test_insecure_opt_in_serves_on_all_interfaces(tmp_path: Path) -> None:
    port = free_port()
    for opt_in in (["--insecure"], []):
        env = {} if opt_in else {"HMSREPL_THRIFT_INSECURE": "true"}
        proc = subprocess.Popen(
            [*SERVE, "--host", "0.0.0.0", "--port", str(port), *opt_in],
            env={
                **os.environ,
                "PYTHONPATH": str(REPO / "include"),
                "HMSREPL_DB_URL": f"sqlite:///{tmp_path}/metastore.db",
                **env,
            },
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            lines = [""]
            while "metastore serving" not in lines[-1]:
                lines.append(proc.stdout.readline())  # type: ignore[union-attr]
                assert lines[-1] or proc.poll() is None, "the server exited instead of serving"
            assert f"thrift://0.0.0.0:{port}" in lines[-1]
            assert any("WITHOUT authentication" in line for line in lines), "the opt-in is said out loud"
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_the_default_is_loopback_and_the_server_class_enforces_the_policy(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("::")
    store = Metastore.open(
        MetastoreConfig(db_url=f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "w"))
    )
    try:
        with pytest.raises(SecuritySettingError, match=r"refusing to serve thrift://0\.0\.0\.0"):
            MetastoreServer(store, "0.0.0.0", 0)
        server = MetastoreServer(store, port=0)  # the default host
        listener = server.server.bind()
        assert listener.getsockname()[0] == "127.0.0.1"
        listener.close()
    finally:
        store.close()
