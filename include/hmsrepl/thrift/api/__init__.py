"""The Hive Metastore Thrift API by area: one class per area, dispatched by method name (``thrift.handler``)."""
