# Everything a fresh machine needs, installed by the project itself.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB_SERVERS := tests/db_servers.sh
# Two workers, one test file each at a time (files share servers and fixtures), the longest files first
# (tests/file_order.py; --no-loadscope-reorder keeps that order, which xdist would sort by test count). The
# suite is bound by the 2 cores: with three workers it took 31 min 57 s against 29 min 19 s with two
# (2026-12-01); its tests' JVMs compile with the quick compiler alone (tests/conftest.py), which took it to
# 28 min 2 s. PYTEST_ARGS= runs one process.
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder
# The tests run under eatmydata (LD_PRELOAD: fsync, fdatasync, syncfs and O_SYNC become no-ops), the servers
# and JVMs they start included: why, and what it measured, in docs/setup.md. NO_SYNC= runs them syncing.
NO_SYNC ?= eatmydata

.PHONY: help setup build-packages peers-and-servers krb5-packages db-packages peer-jars peer-downloads check-java demo test lint format docs bench db-up db-down clean ui-check test-airflow \
	ui-browser ui-connection-check

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

# uv installs the requirements into the venv: on a machine with no wheel cache, pip took 325 s (pyspark,
# gssapi and mysqlclient build from source), uv 125 s (docs/setup.md). --system-certs: the platform's
# certificate store, as pip and urllib use, not uv's bundled one.
UV := $(BIN)/uv pip install -q --system-certs --python $(BIN)/python
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml | build-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check uv==0.13.9
	$(UV) -r requirements-dev.txt
	$(UV) --no-deps -e .
	touch $(STAMP)

# What the venv builds against is installed first, in one apt transaction; then the JVM peers download (system
# Python) and the servers' packages install while the venv does: 46 s against 125 s for a fresh machine (no
# caches), which waited 325 s for pip and 158-204 s for Maven before (docs/setup.md).
setup: build-packages check-java  ## .venv with every requirement, the test servers and peers
	$(MAKE) --no-print-directory -j2 $(STAMP) peers-and-servers
	$(BIN)/python -m tests.peers.fetch_all built

peers-and-servers:  ## the JVM peers' downloads, then the test servers' packages (one lane beside the venv's)
	$(MAKE) --no-print-directory peer-downloads
	$(MAKE) --no-print-directory db-packages

# JVM peers from Maven Central, pinned, locked (tests/peers/locks/) and SHA-1 checked, cached under var/peers:
# hadoop-aws and the AWS SDK modules for Spark's s3a:// (pyspark ships neither), Spark's Hive 3.1.3 metastore
# client, Trino, the HDFS minicluster, Hive 3.1/4.2 metastores; fetched side by side (tests/peers/fetch_all.py).
peer-jars: $(STAMP)  ## fetch the JVM peers (jars, the Trino server, the HDFS minicluster, Hive 3.1/4.2 metastores) into var/peers; the Spark Hadoop-API copier's jar into var/jars
	$(BIN)/python -m tests.peers.fetch_all

peer-downloads:  ## the JVM peers alone, with the system's Python (no venv needed)
	$(PYTHON) -m tests.peers.fetch_all downloads

db-packages:  ## Debian's PostgreSQL and MariaDB servers, for the tests' throwaway servers (as root, when missing)
	@$(DB_SERVERS) install

# The gssapi package has no Linux wheels: it builds with gcc against libkrb5-dev (and Python's headers).
KRB5_DEBS := krb5-kdc krb5-admin-server krb5-user libkrb5-dev gcc python3-dev
# Nor has mysqlclient, the MariaDB driver (mysql+mysqldb://): it builds with gcc (KRB5_DEBS) against
# MariaDB's Connector/C, found through pkg-config.
DRIVER_DEBS := libmariadb-dev pkg-config

# $(call install-debs,PACKAGES[,TARGET]): install those of the Debian PACKAGES that are missing (as root);
# a user who is not root is told to run make TARGET (default: setup) as root.
define install-debs
@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
if [ -n "$$missing" ]; then \
  [ "$$(id -u)" = 0 ] || { echo "missing Debian packages: $$missing (run make $(or $(2),setup) as root)"; exit 1; }; \
  apt-get update -qq -o Acquire::Retries=3 && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Acquire::Retries=3 $$missing; \
fi
endef

build-packages:  ## what the venv's packages build with (KRB5_DEBS, DRIVER_DEBS) and eatmydata, in one apt transaction
	$(call install-debs,$(KRB5_DEBS) $(DRIVER_DEBS) eatmydata)

krb5-packages:  ## MIT Kerberos: the KDC the security tests run, and what the gssapi package builds with
	$(call install-debs,$(KRB5_DEBS))

check-java:  ## Spark needs Java 17 or newer
	@command -v java >/dev/null || { echo "Java is missing: install a JRE 17+ (Debian: apt-get install openjdk-17-jre-headless)"; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  [ "$${v:-0}" -ge 17 ] || { echo "Java $$v found; Spark 4 needs Java 17+"; exit 1; }

demo: krb5-packages $(STAMP) check-java  ## run the main job end to end on the embedded defaults (SQLite, local dirs, local Spark)
	PATH="$(CURDIR)/$(BIN):$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(BIN)/hmsrepl demo

lint: $(STAMP)  ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: setup lint  ## the whole test suite, on throwaway PostgreSQL and MariaDB servers unless HMSREPL_TEST_*_URL name others
	PATH="$(CURDIR)/$(BIN):$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(NO_SYNC) $(DB_SERVERS) run -- $(BIN)/python -m pytest $(PYTEST_ARGS)

test-airflow: setup  ## the Airflow layer alone: DAG integrity, hook, bootstrap/incremental/cm_cleanup runs (dag.test)
	PATH="$(CURDIR)/$(BIN):$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(NO_SYNC) $(BIN)/python -m pytest tests/airflow $(PYTEST_ARGS)

docs: $(STAMP)  ## build the docs site into var/site, failing on any broken link or anchor
	PYTHONPATH=include $(BIN)/mkdocs build --strict -d var/site

bench: setup  ## benchmarks that print measured figures
	$(BIN)/python bench/bench_notification_log.py

UI_STAMP := $(VENV)/.installed-ui

$(UI_STAMP): requirements-ui.txt $(STAMP)
	$(UV) -r requirements-ui.txt
	touch $(UI_STAMP)

UI_DEBS := chromium chromium-driver

ui-browser:  ## Debian's Chromium and chromedriver for the UI checks (not part of make test: ~300 MB)
	$(call install-debs,$(UI_DEBS),ui-browser)

ui-check: setup $(UI_STAMP) ui-browser  ## Airflow UI in headless Chromium: connection form and Test, DAGs, a run (screenshots in var/ui/)
	PATH="$(CURDIR)/$(BIN):$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(BIN)/python tests/ui/check_airflow_ui.py

ui-connection-check: setup $(UI_STAMP) ui-browser  ## only the metastore connection form and its Test button (api-server alone)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tests/ui/check_airflow_ui.py --connection-form-only

db-up:  ## start the throwaway PostgreSQL and MariaDB (prints the HMSREPL_TEST_*_URL exports for a shell)
	@$(DB_SERVERS) up

db-down:  ## stop them
	@$(DB_SERVERS) down

clean:
	rm -rf var spark-warehouse metastore_db derby.log
