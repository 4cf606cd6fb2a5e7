"""Prometheus as an operator runs it: a real Prometheus scrapes a real ``metastore serve`` process, and
promtool checks and unit-tests the shipped alert rules and the dashboard's queries."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hmsclient.genthrift.hive_metastore.ttypes import NoSuchObjectException

import hmsrepl.monitoring
from tests.backends import temporary_database
from tests.servers import Hive2Client, free_port, metastore_server, stop_process

MONITORING = Path(hmsrepl.monitoring.__file__).parent
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="Prometheus is not installed (Debian package 'prometheus': apt-get install -y prometheus)",
)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def _query(port: int, expr: str) -> list[dict]:
    body = json.loads(
        _get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    )
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A Prometheus on loopback scraping job 'hmsrepl-metastore' every second; yields (its port, the
    metrics port it scrapes)."""
    metrics_port, port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {MONITORING / 'alerts.yml'}\n"
        "scrape_configs:\n  - job_name: hmsrepl-metastore\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                _get(f"http://127.0.0.1:{port}/-/ready")
                break
            except OSError:
                assert time.monotonic() < deadline, "prometheus did not become ready in 60 s"
                time.sleep(0.2)
        yield port, metrics_port
    finally:
        stop_process(proc)
        log.close()


def _wait_for(port: int, expr: str, want: float, seconds: float = 60) -> list[dict]:
    """Query until every series of ``expr`` is at least ``want`` (and there is one)."""
    deadline = time.monotonic() + seconds
    while True:
        result = _query(port, expr)
        if result and all(float(r["value"][1]) >= want for r in result):
            return result
        assert time.monotonic() < deadline, f"{expr}: {result} after {seconds} s"
        time.sleep(0.5)


@needs_prometheus
def test_prometheus_scrapes_requests_connections_and_log_head(prometheus, tmp_path: Path) -> None:
    prom_port, metrics_port = prometheus
    with (
        temporary_database("sqlite", str(tmp_path)) as url,
        metastore_server(tmp_path, url, HMSREPL_METRICS_PORT=str(metrics_port)) as server,
    ):
        exposed = _get(f"http://127.0.0.1:{metrics_port}/metrics").decode()
        assert f"metrics on http://127.0.0.1:{metrics_port}/metrics" in server.log_path.read_text()
        assert "\nhmsrepl_thrift_connections_open " in exposed
        assert "\nhmsrepl_thrift_connections_max " in exposed
        assert "hmsrepl_metastore_database_up 1.0" in exposed
        client = Hive2Client(server.port)
        try:
            client.set_ugi("hive", [])
            for _ in range(3):
                assert "default" in client.get_all_databases()
            with pytest.raises(NoSuchObjectException):
                client.get_database("no_such_db")
            # a database created: one more event in the notification log
            head_before = int(
                float(_wait_for(prom_port, "hmsrepl_notification_log_head_event_id", 0)[0]["value"][1])
            )
            client.create_database(_database("metrics_db", server.warehouse))

            ok = _wait_for(
                prom_port, 'hmsrepl_thrift_requests_total{method="get_all_databases",outcome="ok"}', 3
            )
            assert [r["metric"]["job"] for r in ok] == ["hmsrepl-metastore"]
            _wait_for(
                prom_port,
                'hmsrepl_thrift_requests_total{method="get_database",outcome="NoSuchObjectException"}',
                1,
            )
            assert b"not supported by this metastore" in _call_unknown_method(
                server.port, "frobnicate_tables"
            )
            _wait_for(
                prom_port, 'hmsrepl_thrift_requests_total{method="unknown",outcome="unknown_method"}', 1
            )
            assert not _query(prom_port, 'hmsrepl_thrift_requests_total{method="frobnicate_tables"}')
            _wait_for(prom_port, "hmsrepl_thrift_connections_open", 1)  # this client, still connected
            _wait_for(
                prom_port, 'hmsrepl_thrift_request_duration_seconds_count{method="get_all_databases"}', 3
            )
            _wait_for(prom_port, "hmsrepl_notification_log_head_event_id", head_before + 1)
            assert _wait_for(prom_port, 'up{job="hmsrepl-metastore"}', 1)
            pending = _query(prom_port, "hmsrepl_file_intents_pending")
            assert [float(r["value"][1]) for r in pending] == [0.0]
        finally:
            client.close()
        _wait_for(prom_port, "hmsrepl_thrift_connections_open == 0", 0)  # the client left

    # The server stopped: the scrape fails, and the shipped "down" alert goes pending.
    _wait_for(prom_port, 'up{job="hmsrepl-metastore"} == 0', 0)
    _wait_for(prom_port, 'ALERTS{alertname="HmsreplMetastoreDown",alertstate="pending"}', 1)


def _call_unknown_method(port: int, name: str) -> bytes:
    """Call ``name`` (no arguments) in the strict binary protocol and return the raw reply."""
    encoded = name.encode()
    call = struct.pack("!Ii", 0x80010001, len(encoded)) + encoded + struct.pack("!i", 1) + b"\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(call)
        return sock.recv(65536)


def _database(name: str, warehouse: str) -> object:
    from hmsclient.genthrift.hive_metastore.ttypes import Database

    return Database(name=name, description=None, locationUri=f"{warehouse}/{name}.db", parameters={})


def test_metrics_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    busy = socket.create_server(("127.0.0.1", 0))
    busy_port = busy.getsockname()[1]
    try:
        with temporary_database("sqlite", str(tmp_path)) as url:
            subprocess.run(
                [sys.executable, "-m", "hmsrepl.cli", "--db-url", url, "schema", "upgrade"],
                check=True,
                capture_output=True,
            )
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "hmsrepl.cli",
                    "--db-url",
                    url,
                    "metastore",
                    "serve",
                    "--port",
                    str(free_port()),
                ],
                env={**os.environ, "HMSREPL_METRICS_PORT": str(busy_port)},
                capture_output=True,
                text=True,
                timeout=60,
            )
    finally:
        busy.close()
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"metrics endpoint cannot listen on 127.0.0.1:{busy_port}" in result.stderr
    assert "HMSREPL_METRICS_PORT" in result.stderr


@needs_prometheus
def test_shipped_rules_pass_promtool_check_and_unit_test() -> None:
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(MONITORING / "alerts.yml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 8 rules found" in checked.stdout
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=MONITORING, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@needs_prometheus
def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Every panel query parses (promtool checks them as recording rules), and names only metrics we export."""
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [
        t["expr"].replace("$__rate_interval", "5m") for p in dashboard["panels"] for t in p.get("targets", [])
    ]
    assert len(exprs) >= 15
    rules = tmp_path / "dashboard_rules.yml"
    rules.write_text(
        json.dumps(
            {
                "groups": [
                    {
                        "name": "dashboard",
                        "rules": [{"record": f"panel:q{i}", "expr": e} for i, e in enumerate(exprs)],
                    }
                ]
            }
        )
    )
    checked = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = _get(f"http://127.0.0.1:{port}/metrics").decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_cache_hits_and_misses_are_exposed_when_the_cache_is_on(tmp_path: Path) -> None:
    metrics_port = free_port()
    with (
        temporary_database("sqlite", str(tmp_path)) as url,
        metastore_server(
            tmp_path, url, HMSREPL_METRICS_PORT=str(metrics_port), HMSREPL_CACHE_ENABLED="true"
        ) as server,
    ):
        client = Hive2Client(server.port)
        try:
            client.set_ugi("hive", [])
            before = _scrape(metrics_port)
            assert before[("hmsrepl_cache_hits_total", ())] == 0
            deadline = time.monotonic() + 30
            while True:  # the cache prewarms in the background: reads go to the database meanwhile
                client.get_database("default")
                found = _scrape(metrics_port)
                if found[("hmsrepl_cache_hits_total", ())] >= 1:
                    break
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
            assert found[("hmsrepl_cache_ready", ())] == 1
            assert ("hmsrepl_cache_lag_events", ()) in found
            calls = found[("hmsrepl_thrift_requests_total", (("method", "get_database"), ("outcome", "ok")))]
            misses = sum(v for (name, _), v in found.items() if name == "hmsrepl_cache_misses_total")
            assert found[("hmsrepl_cache_hits_total", ())] + misses <= calls
        finally:
            client.close()


def test_metastore_without_metrics_port_listens_for_thrift_only(tmp_path: Path) -> None:
    with temporary_database("sqlite", str(tmp_path)) as url, metastore_server(tmp_path, url) as server:
        log = server.log_path.read_text()
    assert "metrics on" not in log


@pytest.mark.parametrize(
    ("value", "reason"),
    [("abc", "Input should be a valid integer"), ("70000", "less than or equal to 65535")],
)
def test_a_bad_metrics_port_setting_is_one_line_and_changes_nothing(
    tmp_path: Path, value: str, reason: str
) -> None:
    db = tmp_path / "metastore.db"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hmsrepl.cli",
            "--db-url",
            f"sqlite:///{db}",
            "metastore",
            "serve",
            "--port",
            "0",
        ],
        env={**os.environ, "HMSREPL_METRICS_PORT": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: invalid HMSREPL_METRICS_PORT '{value}': ")
    assert reason in result.stderr and "fix or unset it" in result.stderr
    assert not db.exists()  # nothing was opened or created


def _non_loopback_address() -> str | None:
    """An address of this machine other than loopback (None: it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent, the kernel only picks a route
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_metrics_listen_on_loopback_only_by_default(tmp_path: Path) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to try the metrics port on")
    metrics_port = free_port()
    with (
        temporary_database("sqlite", str(tmp_path)) as url,
        metastore_server(tmp_path, url, HMSREPL_METRICS_PORT=str(metrics_port)),
    ):
        assert _get(f"http://127.0.0.1:{metrics_port}/metrics")
        with pytest.raises(OSError):
            socket.create_connection((address, metrics_port), timeout=2).close()
