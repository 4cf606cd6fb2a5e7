"""PySpark applications of the replication pipeline (dump, load with a distributed copy, cmroot cleanup)."""
