"""Large partition replies are read from the database and written a page at a time: the bytes a client gets are
those of the reply built whole, while the memory one call holds (structs, and what it charges to the server's
memory budget) stays about one page, and a page the budget cannot take is refused with the method's
MetaException naming the limit."""

from __future__ import annotations

import gc
import hashlib
import random
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select
from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.partition_pages import PAGE_ROWS, PartitionPages, page_cost
from hmsrepl.metastore.schema import partitions
from hmsrepl.thrift import convert
from hmsrepl.thrift.api import partition_reads as handler_module
from hmsrepl.thrift.api import partitions as partition_writes
from hmsrepl.thrift.budget import CallMemory, MemoryBudget
from hmsrepl.thrift.handler import ErrorMappingDispatcher, MetastoreHandler
from hmsrepl.thrift.idl import Service
from hmsrepl.thrift.server import _Processor, _ReplyProtocol
from tests.helpers import make_partition, make_table
from tests.security.serving import encoded_reply

#: Partitions per page in these tests (the server's is ``PAGE_ROWS``): many pages from a small table.
PAGE = 100
#: Thirteen pages; three chunks of names (``catalog.BATCH``) for ``get_partitions_by_names``.
PARTITIONS = 1300


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PAGE < PAGE_ROWS
    monkeypatch.setattr(handler_module, "PAGE_ROWS", PAGE)


class _Sink:
    """A reply writer keeping the bytes (``keep``) or only their hash and length."""

    def __init__(self, keep: bool) -> None:
        self.data = bytearray() if keep else None
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.size += len(data)
        self.digest.update(data)
        if self.data is not None:
            self.data += data

    def send_page(self, data: bytes) -> None:
        self.write(data)

    def flush(self) -> None:
        pass

    def is_open(self) -> bool:
        return True

    def close(self) -> None:
        pass


def _request(method: str, **args: Any) -> bytes:
    buffer = TCyMemoryBuffer()
    protocol = TCyBinaryProtocol(buffer)
    protocol.write_message_begin(method, TMessageType.CALL, 7)
    getattr(Service, f"{method}_args")(**args).write(protocol)
    protocol.write_message_end()
    protocol.trans.flush()
    return bytes(buffer.getvalue())


def _served(store: Metastore, method: str, keep: bool = True, **args: Any) -> _Sink:
    """What the server's processor writes for one call of ``method``."""
    processor = _Processor(Service, ErrorMappingDispatcher(MetastoreHandler(store)))
    sink = _Sink(keep)
    processor.process(TCyBinaryProtocol(TCyMemoryBuffer(_request(method, **args))), _ReplyProtocol(sink))  # type: ignore[arg-type]
    return sink


def _whole_reply(method: str, partitions: list[Any]) -> bytes:
    """The reply as built before pages: the list of structs, encoded whole by thriftpy2."""
    return encoded_reply(method, 7, [convert.partition_to_thrift(p) for p in partitions])


def _names(count: int) -> list[str]:
    return [f"p={index:05d}" for index in range(count)]


def _fill(store: Metastore) -> Metastore:
    """Table ``big.t`` with ``PARTITIONS`` partitions, each with a few hundred bytes of parameters."""
    store.catalog.create_database(Database(name="big"))
    table = store.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
    parts = [
        make_partition(table, f"{index:05d}").model_copy(update={"parameters": {"note": "x" * 300}})
        for index in range(PARTITIONS)
    ]
    for start in range(0, len(parts), 1000):
        store.catalog.add_partitions("big", "t", parts[start : start + 1000])
    return store


@pytest.fixture
def big(metastore: Metastore) -> Metastore:
    """``big.t`` on each backend."""
    return _fill(metastore)


@pytest.fixture
def big_sqlite(sqlite_metastore: Metastore) -> Metastore:
    """``big.t`` on SQLite, where memory is measured."""
    return _fill(sqlite_metastore)


def test_paged_replies_are_byte_identical_to_whole_ones(big: Metastore) -> None:
    catalog = big.catalog
    handler = MetastoreHandler(big)
    assert isinstance(handler.get_partitions("big", "t", -1), PartitionPages), "the reply is read in pages"
    names = _names(PARTITIONS + 5)[::-1]  # some missing, not in order: chunks keep the order of the names
    random.Random(3).shuffle(names)
    cases: list[tuple[str, dict[str, Any], Callable[[], list[Any]]]] = [
        ("get_partitions", {"max_parts": -1}, lambda: catalog.get_partitions("big", "t")),
        ("get_partitions", {"max_parts": 1250}, lambda: catalog.get_partitions("big", "t", 1250)),
        (
            "get_partitions_ps",
            {"part_vals": [""], "max_parts": -1},
            lambda: catalog.get_partitions_ps("big", "t", [""]),
        ),
        (
            "get_partitions_by_filter",
            {"filter": 'p > "00150"', "max_parts": -1},
            lambda: catalog.get_partitions_by_filter("big", "t", 'p > "00150"'),
        ),
        (
            "get_partitions_by_names",
            {"names": names},
            lambda: catalog.get_partitions_by_names("big", "t", names),
        ),
    ]
    for method, args, whole in cases:
        sink = _served(big, method, db_name="big", tbl_name="t", **args)
        expected = _whole_reply(method, list(whole()))
        assert bytes(sink.data or b"") == expected, method
    assert len(catalog.get_partitions_by_names("big", "t", names)) == PARTITIONS


def test_a_paged_reply_holds_about_one_page(big_sqlite: Metastore) -> None:
    """Measured in this process: Python allocations (tracemalloc) and the bytes charged to a memory budget."""
    big = big_sqlite

    def peak(work: Callable[[], object]) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            work()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def serve_one() -> _Sink:
        return _served(big, "get_partitions", keep=False, db_name="big", tbl_name="t", max_parts=-1)

    serve_one()  # statements compiled and cached before measuring
    whole = peak(lambda: big.catalog.get_partitions("big", "t", decode=convert.PartitionDocs()))
    budget = MemoryBudget(1 << 30)
    memory = CallMemory.begin(budget, 1.0)
    try:
        paged = peak(serve_one)
    finally:
        memory.end()
    whole_reply = _whole_reply("get_partitions", big.catalog.get_partitions("big", "t"))
    served = serve_one()
    assert served.digest.digest() == hashlib.sha256(whole_reply).digest()
    print(f"{PARTITIONS} partitions: peak {whole / 1e6:.1f} MB built whole, {paged / 1e6:.1f} MB in pages")
    assert paged < whole / 3, (paged, whole)
    with big.catalog.events.reader() as conn:
        rows = conn.execute(select(partitions.c.doc)).all()
    assert 0 < budget.peak < page_cost(rows) * 2 * PAGE / PARTITIONS, "about one page at a time was charged"
    assert budget.used == 0, "every page's charge was given back"


def test_a_page_the_budget_cannot_take_is_refused_with_a_metaexception(big_sqlite: Metastore) -> None:
    big = big_sqlite
    budget = MemoryBudget(64 * 1024)
    memory = CallMemory.begin(budget, 0.1)
    try:
        sink = _served(big, "get_partitions", db_name="big", tbl_name="t", max_parts=-1)
    finally:
        memory.end()
    protocol = TCyBinaryProtocol(TCyMemoryBuffer(bytes(sink.data or b"")))
    protocol.read_message_begin()
    result = Service.get_partitions_result()
    result.read(protocol)
    assert result.success is None
    assert "memory budget of 65536 bytes (HMSREPL_THRIFT_MEMORY_BUDGET_BYTES)" in result.o2.message
    assert "retry later" in result.o2.message
    assert budget.used == 0


class _CrowdedSink(_Sink):
    """A reply writer during whose first page other calls take the whole budget."""

    def __init__(self, budget: MemoryBudget) -> None:
        super().__init__(keep=True)
        self.budget = budget
        self.crowd = 0

    def send_page(self, data: bytes) -> None:
        if not self.crowd:
            self.crowd = self.budget.limit - self.budget.used
            assert self.budget.try_reserve(self.crowd)
        super().send_page(data)


def test_a_reply_begun_is_finished_when_others_take_the_budget(sqlite_metastore: Metastore) -> None:
    """Once its first bytes are written a reply can no longer be refused with a MetaException: its later pages,
    here larger than the first, are had even past the limit (refusing them would break the connection, the
    client getting neither the list nor an error), and their charge is given back at the end."""
    store = sqlite_metastore
    store.catalog.create_database(Database(name="big"))
    table = store.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
    store.catalog.add_partitions(
        "big",
        "t",
        [
            make_partition(table, f"{index:05d}").model_copy(
                update={"parameters": {"note": "x" * (100 if index < PAGE else 5000)}}
            )
            for index in range(3 * PAGE)
        ],
    )
    budget = MemoryBudget(64 * 1024 * 1024)
    sink = _CrowdedSink(budget)
    processor = _Processor(Service, ErrorMappingDispatcher(MetastoreHandler(store)))
    request = _request("get_partitions", db_name="big", tbl_name="t", max_parts=-1)
    memory = CallMemory.begin(budget, 0.05)
    try:
        processor.process(TCyBinaryProtocol(TCyMemoryBuffer(request)), _ReplyProtocol(sink))  # type: ignore[arg-type]
    finally:
        memory.end()
    assert sink.crowd, "the budget was taken while the reply was written"
    assert budget.peak > budget.limit, "the larger pages were charged past the limit"
    assert bytes(sink.data or b"") == _whole_reply("get_partitions", store.catalog.get_partitions("big", "t"))
    assert budget.used == sink.crowd, "the reply's pages were given back"


def test_partition_names_by_partial_spec_are_read_as_names(sqlite_metastore: Metastore) -> None:
    """``get_partition_names_ps`` reads the stored names (no partition decoded): the same, escaped, names."""
    catalog = sqlite_metastore.catalog
    catalog.create_database(Database(name="names"))
    table = catalog.create_table(make_table("names", "t", partition_keys=("a", "b")))
    values = [("x y", "1"), ("x:y", "1"), ("ü=%", "2"), ("z", "1")]
    catalog.add_partitions("names", "t", [make_partition(table, *pair) for pair in values])
    handler = MetastoreHandler(sqlite_metastore)
    for spec, limit in [(["", "1"], -1), (["x:y"], -1), ([], 2), (["", ""], -1)]:
        expected = [
            make_partition_name(table.partition_key_names, p.values)
            for p in catalog.get_partitions_ps("names", "t", spec, limit)
        ]
        assert handler.get_partition_names_ps("names", "t", spec, limit) == expected, spec
    assert handler.get_partition_names_ps("names", "t", ["", "1"], -1) == [
        "a=x y/b=1",
        "a=x%3Ay/b=1",
        "a=z/b=1",
    ]


def test_partitions_a_request_would_build_beyond_the_budget_are_refused_unchanged(
    sqlite_metastore: Metastore,
) -> None:
    """The models of a request's partitions are charged before they are built: an ``add_partitions`` whose
    models do not fit is refused with its MetaException naming the limit, and nothing is added."""
    catalog = sqlite_metastore.catalog
    catalog.create_database(Database(name="w"))
    table = catalog.create_table(make_table("w", "t", partition_keys=("p",)))
    structs = [convert.partition_to_thrift(make_partition(table, str(index))) for index in range(100)]
    before = catalog.events.current_event_id()
    budget = MemoryBudget(100 * partition_writes.PARTITION_MODEL_BYTES - 1)
    memory = CallMemory.begin(budget, 0.1)
    try:
        sink = _served(sqlite_metastore, "add_partitions", new_parts=structs)
    finally:
        memory.end()
    protocol = TCyBinaryProtocol(TCyMemoryBuffer(bytes(sink.data or b"")))
    protocol.read_message_begin()
    result = Service.add_partitions_result()
    result.read(protocol)
    assert result.success is None
    assert result.o3 is not None and "HMSREPL_THRIFT_MEMORY_BUDGET_BYTES" in result.o3.message
    assert catalog.get_partition_names("w", "t") == []
    assert catalog.events.current_event_id() == before
    assert budget.used == 0
