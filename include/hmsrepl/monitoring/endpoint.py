"""The HTTP endpoint Prometheus scrapes (``/metrics``), started and stopped with the metastore server."""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from hmsrepl.exceptions import HmsReplError

log = logging.getLogger(__name__)


class MetricsEndpointError(HmsReplError):
    """The metrics endpoint cannot listen where it was told to."""


class MetricsEndpoint:
    """``prometheus_client``'s HTTP server for one registry, on a thread of its own."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._httpd: Any = None

    def start(self) -> int:
        """Listen and serve; returns the port. A port in use is a one-line error naming the setting."""
        try:
            self._httpd, _thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as exc:
            raise MetricsEndpointError(
                f"metrics endpoint cannot listen on {self.host}:{self.port} ({exc.strerror or exc}); "
                "choose a free port with HMSREPL_METRICS_PORT (0 turns the endpoint off)"
            ) from exc
        self.port = self._httpd.server_port
        log.info("metrics on http://%s:%s/metrics", self.host, self.port)
        return self.port

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
