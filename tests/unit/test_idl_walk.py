"""Every method of Hive 4's metastore service is either served or refused by name, never neither nor both.

The reference is Hive 4's service as pyiceberg publishes it (``tests.hive4_reference``: Apache Thrift's
generated ``Iface`` with fb303's), read at test time, so a method Hive adds when pyiceberg updates its
bindings fails here until it is served (an API area of the handler, declared in our IDL) or refused with a
reason (``thrift.refusals``). Planted cases show the walk finds a method in neither table and one in both.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from thriftpy2.thrift import TApplicationException

from hmsrepl.thrift import refusals
from hmsrepl.thrift.handler import DISPATCH
from hmsrepl.thrift.idl import Service
from tests import hive4_reference

REFERENCE = hive4_reference.methods()


def findings(methods: Iterable[str], served: Collection[str], refused: Collection[str]) -> list[str]:
    """Each method of the reference that is in neither table or in both: one line per finding."""
    found = []
    for method in sorted(methods):
        where = (method in served) + (method in refused)
        if where != 1:
            found.append(
                f"{method}: {'neither served nor refused' if not where else 'both served and refused'}"
            )
    return found


def test_the_reference_is_hive_4s_service_with_fb303s() -> None:
    assert len(REFERENCE) >= 283  # pyiceberg 0.12.0: 270 of ThriftHiveMetastore, 13 of FacebookService
    assert {"get_table_req", "get_partitions_by_expr", "getStatus", "shutdown"} <= set(REFERENCE)


def test_every_method_of_hive_4s_service_is_served_or_refused() -> None:
    assert findings(REFERENCE, DISPATCH, refusals.REFUSED) == []


def test_the_refusal_table_names_only_methods_of_the_reference_each_with_a_reason() -> None:
    assert sorted(set(refusals.REFUSED) - set(REFERENCE)) == []
    assert all(reason.strip() for reason in refusals.REFUSED.values())


def test_our_idl_declares_every_served_method_of_the_reference_and_no_refused_one() -> None:
    """A served method our IDL lacks would be answered as unknown; a refused one it declares would not be."""
    declared = set(Service.thrift_services)
    assert [m for m in REFERENCE if m in DISPATCH and m not in declared] == []
    assert sorted(declared & set(refusals.REFUSED)) == []
    assert [m for m in sorted(declared) if m not in DISPATCH] == []


def test_the_walk_finds_a_planted_method_in_neither_table_and_one_in_both() -> None:
    served = set(DISPATCH) - {"get_table"}
    assert findings(REFERENCE, served, refusals.REFUSED) == ["get_table: neither served nor refused"]
    refused = {**refusals.REFUSED, "get_database": "planted"}
    assert findings(REFERENCE, DISPATCH, refused) == ["get_database: both served and refused"]
    assert findings([*REFERENCE, "drop_everything"], DISPATCH, refusals.REFUSED) == [
        "drop_everything: neither served nor refused"
    ]


def test_a_refusal_is_hives_unknown_method_error_with_the_reason() -> None:
    error = refusals.refusal("create_role")
    assert error.type == TApplicationException.UNKNOWN_METHOD
    assert error.message == (
        "method 'create_role' is not supported by this metastore (hmsrepl): "
        "roles and privileges are not managed by this metastore: it runs as Hive does without SQL-standard "
        "authorization (roles admin and public only, no grants); its access rules are its own "
        "(HMSREPL_ADMIN_USERS, Kerberos, replica protection)"
    )
    assert refusals.refusal("no_such_call").message.endswith("(hmsrepl): not served")
