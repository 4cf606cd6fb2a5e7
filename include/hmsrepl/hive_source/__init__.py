"""A stock Hive Metastore as a replication source: its notification log, read over Thrift, replayed here.

``source`` is the replication source (catalog reads, notification log, txn snapshot) over a stock HMS;
``messages`` translates each message Hive's ``JSONMessageFactory`` writes into this product's event bodies;
``tjson`` decodes the Thrift-JSON object snapshots those messages embed. The dump and load pipeline is the
same as for an hmsrepl source (``replication.source.ReplicationSource`` is the interface both implement).
"""
