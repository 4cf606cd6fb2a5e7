"""Airflow side of hmsrepl: a hook over the metastore notification API and the operators the DAGs use.

Importable from Airflow's plugins folder (``AIRFLOW__CORE__PLUGINS_FOLDER``); the core package ``hmsrepl``
must be installed (or on ``PYTHONPATH``) where tasks run.
"""
