#!/usr/bin/env bash
# Entry point of every hmsrepl container: create the local roots the HMSREPL_* settings name, then run
# the service's command. The metastores, the Spark driver (Airflow's LocalExecutor tasks) and the Spark
# workers all share the /data volume; whichever starts first creates the directories, so no service
# fails on a missing warehouse, cmroot or dump root. s3:// roots are left alone (buckets exist already).
set -euo pipefail

for name in HMSREPL_WAREHOUSE HMSREPL_CMROOT HMSREPL_DUMP_ROOT \
            HMSREPL_SOURCE_WAREHOUSE HMSREPL_SOURCE_CMROOT HMSREPL_TARGET_WAREHOUSE HMSREPL_TARGET_CMROOT; do
  root="${!name:-}"
  case "$root" in
    "" | *://*) ;;  # unset, or a URI (s3://...): nothing to create here
    file:*) mkdir -p "${root#file:}" ;;
    *) mkdir -p "$root" ;;
  esac
done

exec "$@"
