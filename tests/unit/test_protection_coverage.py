"""Every served method of Hive 4's service is accounted for by the protection rule's table
(``thrift.protection_coverage``).

The methods come from Hive 4's service as pyiceberg publishes it (``tests.hive4_reference``) and from our own
IDL file, so a write that starts being served (it leaves the refusal table), that Hive adds, or that our IDL
declares fails here until the table says how the rule covers it; a planted method in a copy of our IDL shows
that the check finds it. A refused method changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import thriftpy2

from hmsrepl.thrift import protection_coverage as table
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import IDL_PATH, Service
from hmsrepl.thrift.refusals import REFUSED
from tests import hive4_reference

READ_NAMES = re.compile(
    r"^(get|show_|check_|partition_name_to_|list_roles$|list_privileges$|fetch_partition_names_req$)"
)


def idl_methods(path: Path, module_name: str) -> list[str]:
    """The methods of ``ThriftHiveMetastore`` as the Thrift parser reads them from ``path``."""
    module = thriftpy2.load(str(path), module_name=module_name)
    return sorted(module.ThriftHiveMetastore.thrift_services)


def test_every_served_method_sits_in_exactly_one_table() -> None:
    reference = hive4_reference.methods()
    methods = sorted(set(reference) | set(idl_methods(IDL_PATH, "coverage_idl_thrift")))
    served = [m for m in methods if m not in REFUSED]
    assert len(served) > 100
    assert len(methods) - len(served) > 100  # the reference's writes we refuse are in the walk too
    assert [m for m in served if not MetastoreHandler.serves(m)] == []
    assert table.uncovered(methods) == []


def test_a_refused_write_that_starts_being_served_is_reported_uncovered(monkeypatch) -> None:
    assert "exchange_partition" in REFUSED
    monkeypatch.delitem(REFUSED, "exchange_partition")
    assert table.uncovered(hive4_reference.methods()) == ["exchange_partition"]


def test_the_tables_name_only_methods_of_the_idl_that_the_handler_serves() -> None:
    methods = set(Service.thrift_services)
    listed = [
        *table.EVENT_WRITES,
        *table.LOCK_WRITES,
        *table.QUEUED_WRITES,
        *table.NO_DATABASE_STATE,
        *table.READS,
    ]
    assert sorted(set(listed) - methods) == []  # no stale entry
    assert [m for m in listed if not MetastoreHandler.serves(m)] == []


def test_reads_are_named_as_reads_and_writes_are_not() -> None:
    """A write filed under READS by mistake would escape the rule: reads must look like reads."""
    assert sorted(m for m in table.READS if not READ_NAMES.match(m)) == []
    writes = [*table.EVENT_WRITES, *table.LOCK_WRITES, *table.QUEUED_WRITES, *table.NO_DATABASE_STATE]
    assert [m for m in writes if READ_NAMES.match(m)] == []


def test_a_planted_write_in_the_idl_is_reported_uncovered(tmp_path: Path) -> None:
    text = IDL_PATH.read_text(encoding="utf-8")
    service = "service ThriftHiveMetastore {\n"
    assert service in text
    planted = tmp_path / "hive_metastore.thrift"
    planted.write_text(
        text.replace(
            service, service + "  void drop_everything(1: string db_name) throws (1: MetaException o1),\n"
        ),
        encoding="utf-8",
    )
    methods = idl_methods(planted, "planted_idl_thrift")
    assert "drop_everything" in methods
    assert table.uncovered(methods) == ["drop_everything"]


def test_compaction_requests_are_writes_judged_when_made_and_show_compact_is_a_read() -> None:
    assert table.coverage("compact") == ["QUEUED_WRITES"]
    assert table.coverage("compact2") == ["QUEUED_WRITES"]
    assert table.coverage("show_compact") == ["READS"]


def test_a_method_in_two_tables_is_reported(monkeypatch) -> None:
    monkeypatch.setattr(table, "READS", table.READS | {"create_table"})
    assert table.uncovered(["create_table", "get_table"]) == ["create_table"]
