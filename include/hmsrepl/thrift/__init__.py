"""The Hive Metastore Thrift protocol: IDL, struct conversions, request handler and threaded server."""
