"""Core work distributed over Spark executors: verified file copies, listing and checksumming, cmroot cleanup.

These are the parts of replication that grow with the data (files and bytes), not with the metadata. They
are plain functions over a SparkSession so the Spark applications in ``spark_apps/`` stay thin shells, and
every per-file step they run on executors is the same core function the single-process engine uses
(``filecopy.run_copy_task``, ``file_capture.describe_files``, ``storage.base.copy_file``), so both paths
copy, verify and publish alike.

Import from the modules (``hmsrepl.spark.copy``, ``hmsrepl.spark.listing``): this package imports nothing,
so that an executor unpickling a copy function loads only the light storage modules (~0.1 s), not the
metastore (SQLAlchemy, pydantic: ~1 s per Python worker).

Executors resolve storage by URI scheme in their own processes: a store added in the driver with
``storage.register_filesystem`` is not known there.
"""
