"""The loaded IDL module: Thrift struct classes and the service, parsed once from our own IDL file."""

from __future__ import annotations

from pathlib import Path

import thriftpy2

IDL_PATH = Path(__file__).with_name("hive_metastore.thrift")

# A fixed module name makes the structs importable (and picklable) as ``hive_metastore_thrift.X``.
hms = thriftpy2.load(str(IDL_PATH), module_name="hive_metastore_thrift")
Service = hms.ThriftHiveMetastore
