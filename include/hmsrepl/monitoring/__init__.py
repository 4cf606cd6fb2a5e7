"""Prometheus metrics of the metastore server and of replication runs, plus the shipped dashboard and alerts.

Why two routes: the metastore server is long-lived, so Prometheus scrapes it over HTTP
(``HMSREPL_METRICS_PORT``); replication runs are short-lived processes, so each run writes a ``.prom`` file
for node_exporter's textfile collector (``HMSREPL_METRICS_TEXTFILE_DIR``). ``grafana-dashboard.json`` and
``alerts.yml`` in this package are the dashboard and the alert rules built on these metrics.
"""
