-- Run once by the postgres image on an empty data directory (/docker-entrypoint-initdb.d).
-- One server, three databases: the source metastore, the target (replica) metastore and Airflow's.
-- Keep these names in step with the URLs in docker-compose.yaml (tests/unit/test_docker_compose.py checks).
CREATE DATABASE metastore_source;
CREATE DATABASE metastore_target;
CREATE DATABASE airflow;
