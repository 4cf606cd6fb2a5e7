#!/usr/bin/env bash
# One-shot Airflow set-up, run by the airflow-init service before scheduler, api-server and dag-processor:
# migrate the metadata database (safe to repeat) and register the UI user with the password the operator
# chose (AIRFLOW_ADMIN_PASSWORD), so no generated password has to be fished out of a log.
set -euo pipefail

: "${AIRFLOW_ADMIN_USER:?set AIRFLOW_ADMIN_USER (the Airflow UI user to create)}"
: "${AIRFLOW_ADMIN_PASSWORD:?set AIRFLOW_ADMIN_PASSWORD (e.g. in .env next to docker-compose.yaml)}"
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?the shared passwords file of the simple auth manager}"

airflow db migrate

# The simple auth manager keeps {"user": "password"} in this file and generates passwords only for users
# missing from it (airflow/api_fastapi/auth/managers/simple/simple_auth_manager.py, init()).
python - <<'PY'
import json, os
path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
os.makedirs(os.path.dirname(path), exist_ok=True)
passwords = {}
if os.path.exists(path) and os.path.getsize(path):
    with open(path) as f:
        passwords = json.load(f)
passwords[os.environ["AIRFLOW_ADMIN_USER"]] = os.environ["AIRFLOW_ADMIN_PASSWORD"]
with open(path, "w") as f:
    json.dump(passwords, f)
os.chmod(path, 0o600)
PY
echo "airflow-init: database migrated; UI user '${AIRFLOW_ADMIN_USER}' set"
