"""A method of Hive 4's service that this metastore refuses, called over the wire, answers as a Hive metastore
answers a method it does not have (``TApplicationException`` ``UNKNOWN_METHOD``, which Hive's, Trino's and
Spark's clients read as "fall back to the classic call"), with the method's name and the reason, and the
connection goes on serving.

Our IDL does not declare these methods: the calls are made with Hive 4's own generated client (pyiceberg's
bindings, Apache Thrift over a buffered socket), so the server has to skip arguments it cannot decode.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hive_metastore import ThriftHiveMetastore as HiveService
from hive_metastore import ttypes as ht
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

from hmsrepl.thrift.idl import Service
from tests.servers import RunningMetastore


@pytest.fixture
def client(session_metastore: RunningMetastore) -> Iterator[HiveService.Client]:
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", session_metastore.port))
    transport.open()
    try:
        yield HiveService.Client(TBinaryProtocol.TBinaryProtocol(transport))
    finally:
        transport.close()


@pytest.mark.parametrize(
    ("method", "args", "reason"),
    [
        ("create_role", (ht.Role(roleName="r", ownerName="hive"),), "roles and privileges"),
        ("get_resource_plan", (ht.WMGetResourcePlanRequest(resourcePlanName="p"),), "workload management"),
        ("getStatus", (), "fb303 status"),
        (
            "get_partitions_by_expr",
            (ht.PartitionsByExprRequest(dbName="default", tblName="t", expr=b"\xff"),),
            "serialized Hive expressions",
        ),
    ],
)
def test_a_refused_method_answers_hives_unknown_method_error_with_the_reason(
    client: HiveService.Client, method: str, args: tuple[object, ...], reason: str
) -> None:
    assert method not in Service.thrift_services  # our IDL does not declare it
    client.set_ugi("hive", [])
    with pytest.raises(TApplicationException) as info:
        getattr(client, method)(*args)
    assert info.value.type == TApplicationException.UNKNOWN_METHOD
    assert str(info.value.message).startswith(
        f"method '{method}' is not supported by this metastore (hmsrepl): "
    )
    assert reason in info.value.message
    assert "default" in client.get_all_databases()  # the connection goes on serving
