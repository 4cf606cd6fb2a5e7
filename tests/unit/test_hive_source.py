"""Hive's notification messages into our event bodies, and the stock source's reading of Hive's log.

The messages are the ones a real Hive Metastore 2.3.10 wrote (``data/hive23_notification_log.json``,
captured from pyspark's jars with the test listener that stores ``JSONMessageFactory`` messages), and those
real 3.1.3 (json-0.2) and 4.2.0 (gzip(json-2.0)) metastores wrote through hcatalog's own
``DbNotificationListener`` for the same changes (``data/hive31_…`` and ``data/hive42_…``, recorded with
``python -m tests.peers.hive_log_capture``); the source's Thrift calls are answered by a fake reader, so these
tests need no JVM.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hmsrepl.exceptions import EventsCleanedUpError
from hmsrepl.hive_import.reader import StockMetastoreError, StockMetastoreReader
from hmsrepl.hive_source import tjson
from hmsrepl.hive_source.messages import (
    BATCH_ALTER_SETTING,
    FACTORY_SETTING,
    BatchAlterError,
    HiveEvent,
    UnknownMessageFormatError,
    as_stored,
    decode,
    translate,
)
from hmsrepl.hive_source.source import LISTENER_SETTING, NotificationsDisabledError, StockHiveSource
from hmsrepl.hive_source.txn_state import set_bits
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.model import Database, Partition, Table, TableType
from hmsrepl.replication import acid_replay
from hmsrepl.thrift.idl import hms

DATA = Path(__file__).parent / "data"
LOG = json.loads((DATA / "hive23_notification_log.json").read_text())
#: Each release's log of the same changes (and ALTER_DATABASE, which the 2.3.10 stand-in does not log).
RELEASE_LOGS = {
    "2.3.10": LOG,
    "3.1.3": json.loads((DATA / "hive31_notification_log.json").read_text()),
    "4.2.0": json.loads((DATA / "hive42_notification_log.json").read_text()),
}
#: The logged table as it is now (INSERT messages of Hive 2.3 name it only).
TABLE = Table(
    db_name="sales",
    table_name="t",
    sd={"location": "/wh/sales.db/t"},
    partition_keys=[{"name": "dt", "type": "string"}],
)


def _event(doc: dict[str, Any], **changes: Any) -> HiveEvent:
    return HiveEvent.from_thrift(SimpleNamespace(**{**doc, **changes}))


def _by_type(kind: str) -> HiveEvent:
    return next(_event(doc) for doc in LOG if doc["eventType"] == kind)


class FakeLookups:
    """Listings named after their location, and current objects from a dict."""

    def __init__(self, tables: dict[str, Table] | None = None) -> None:
        self.tables = tables or {}
        self.listed: list[str | None] = []

    def listing(self, location: str | None) -> list[str]:
        self.listed.append(location)
        return [f"{location}/now.txt#crc32c-00000000-3"] if location else []

    def database(self, db_name: str) -> Database | None:
        return Database(name=db_name, location_uri=f"/wh/{db_name}.db")

    def table(self, db_name: str, table_name: str) -> Table | None:
        return self.tables.get(table_name)

    def partition(self, db_name: str, table_name: str, values: list[str]) -> Partition | None:
        table = self.tables.get(table_name)
        if table is None:
            return None
        location = f"{table.sd.location}/dt={values[0]}"
        return Partition(values=values, db_name=db_name, table_name=table_name, sd={"location": location})


def _body(kind: str, lookups: FakeLookups | None = None) -> dict[str, Any]:
    event = translate(_by_type(kind), lookups or FakeLookups())
    assert event is not None and event.event_type == kind
    return event.body()


def test_tjson_decodes_hive_table_into_the_idl_struct() -> None:
    doc = json.loads(_by_type("CREATE_TABLE").message)
    table = tjson.loads(hms.Table, doc["tableObjJson"])
    assert (table.dbName, table.tableName, table.tableType) == ("sales", "t", "MANAGED_TABLE")
    assert [(c.name, c.type) for c in table.sd.cols] == [("v", "string")]
    assert [k.name for k in table.partitionKeys] == ["dt"]
    assert table.sd.serdeInfo.serializationLib.endswith("LazySimpleSerDe")
    assert table.parameters["owner_team"] == "sales"


def test_tjson_map_keyed_by_lists_becomes_tuples() -> None:
    skewed = '{"3":{"map":["lst","str",1,{"[\\"str\\",2,\\"a\\",\\"b\\"]":"/x"}]}}'
    info = tjson.loads(hms.SkewedInfo, skewed)
    assert info.skewedColValueLocationMaps == {("a", "b"): "/x"}


def test_every_logged_type_translates_into_a_body_our_typed_messages_read() -> None:
    lookups = FakeLookups({"t": TABLE})
    kinds = []
    for doc in LOG:
        event = translate(_event(doc), lookups)
        assert event is not None, doc["eventType"]
        parse_event(event)  # the event model reads it (raises on a missing key)
        kinds.append(event.event_type)
    assert kinds == [doc["eventType"] for doc in LOG]


def test_add_partition_carries_snapshots_and_listings_read_now() -> None:
    lookups = FakeLookups()
    body = _body("ADD_PARTITION", lookups)
    [part] = body["partitions"]
    assert part["values"] == ["d1"] and part["sd"]["location"].endswith("/t/dt=d1")
    assert body["files"] == [[f"{part['sd']['location']}/now.txt#crc32c-00000000-3"]]
    assert body["table"]["table_name"] == "t"


def test_drop_partition_values_follow_the_partition_keys() -> None:
    body = _body("DROP_PARTITION")
    assert [p["values"] for p in body["partitions"]] == [["d1"]]
    # Two keys, the message's map in the other order: values still follow the table's keys.
    doc = json.loads(_by_type("DROP_PARTITION").message)
    one_key = '"8":{"lst":["rec",1,{"1":{"str":"dt"},"2":{"str":"string"}}]}'
    two_keys = '"8":{"lst":["rec",2,{"1":{"str":"dt"},"2":{"str":"string"}},{"1":{"str":"hr"},"2":{"str":"string"}}]}'
    assert one_key in doc["tableObjJson"]
    doc["tableObjJson"] = doc["tableObjJson"].replace(one_key, two_keys)
    doc["partitions"] = [{"hr": "07", "dt": "d1"}]
    event = translate(_event(LOG[6], message=json.dumps(doc)), FakeLookups())
    assert event is not None and [p["values"] for p in event.body()["partitions"]] == [["d1", "07"]]


def test_alter_of_a_partitioned_table_carries_no_listing() -> None:
    lookups = FakeLookups()
    body = _body("ALTER_TABLE", lookups)
    assert body["files"] == [] and body["is_truncate"] is False and lookups.listed == []
    assert body["after"]["parameters"]["a"] == "b"


def test_alter_partition_carries_its_listing_and_an_empty_one_is_a_truncate() -> None:
    body = _body("ALTER_PARTITION")
    assert body["files"] and body["is_truncate"] is False

    class Empty(FakeLookups):
        def listing(self, location: str | None) -> list[str]:
            return []

    assert _body("ALTER_PARTITION", Empty())["is_truncate"] is True


def test_insert_reads_its_objects_now_and_is_left_out_when_they_are_gone() -> None:
    body = _body("INSERT", FakeLookups({"t": TABLE}))
    assert body["partition"]["values"] == ["d1"]
    assert body["files"] == ["/wh/sales.db/t/dt=d1/now.txt#crc32c-00000000-3"]
    assert translate(_by_type("INSERT"), FakeLookups()) is None


def test_drop_table_and_function_need_only_names() -> None:
    assert _body("DROP_TABLE")["table"]["table_name"] == "t"
    assert _body("DROP_FUNCTION")["function"]["function_name"] == "f"
    assert _body("CREATE_FUNCTION")["function"]["class_name"] == "x.Y"


def test_types_without_counterpart_are_left_out() -> None:
    event = _by_type("DROP_TABLE")
    assert translate(_event(LOG[-1], eventType="CREATE_INDEX"), FakeLookups()) is None
    assert translate(event, FakeLookups()) is not None


def test_gzip_messages_read_as_plain_ones() -> None:
    plain = _by_type("CREATE_FUNCTION")
    packed = base64.b64encode(gzip.compress(plain.message.encode())).decode()
    gz = _event(LOG[7], message=packed, messageFormat="gzip(json-2.0)")
    assert decode(gz) == decode(plain)


def test_an_unknown_message_format_names_the_factory_setting() -> None:
    with pytest.raises(UnknownMessageFormatError, match=FACTORY_SETTING):
        decode(_event(LOG[0], messageFormat="avro-1"))
    with pytest.raises(UnknownMessageFormatError, match="not valid"):
        decode(_event(LOG[0], message="{not json"))


@pytest.mark.parametrize("version", ["3.1.3", "4.2.0"])
def test_every_type_a_real_listener_logs_translates_into_a_body_our_typed_messages_read(version: str) -> None:
    log = RELEASE_LOGS[version]
    assert {doc["messageFormat"] for doc in log} == {"json-0.2" if version == "3.1.3" else "gzip(json-2.0)"}
    lookups = FakeLookups({"t": TABLE})
    kinds = []
    for doc in log:
        event = translate(_event(doc), lookups)
        assert event is not None, doc["eventType"]
        parse_event(event)
        kinds.append(event.event_type)
    # The capture also holds an alter_partitions of one partition after the ALTER_PARTITION.
    expected = [doc["eventType"] for doc in LOG]
    assert kinds == [*expected[:5], "ALTER_PARTITION", *expected[5:], "ALTER_DATABASE"]


def _hive4(kind: str) -> dict[str, Any]:
    return next(doc for doc in RELEASE_LOGS["4.2.0"] if doc["eventType"] == kind)


def test_hive4_alter_partitions_of_one_partition_is_an_alter_partition() -> None:
    event = translate(_event(_hive4("ALTER_PARTITIONS")), FakeLookups())
    assert event is not None and event.event_type == EventType.ALTER_PARTITION
    body = event.body()
    assert body["after"]["values"] == ["d1"] and body["after"]["parameters"]["reviewed"] == "yes"
    assert body["files"] and body["is_truncate"] is False
    parse_event(event)


def test_hive4_alter_partitions_of_several_partitions_is_refused_naming_the_setting() -> None:
    doc = _hive4("ALTER_PARTITIONS")
    message = decode(_event(doc))
    message["partitionListJson"] = message["partitionListJson"] * 2
    packed = base64.b64encode(gzip.compress(json.dumps(message).encode())).decode()
    with pytest.raises(BatchAlterError, match=f"{BATCH_ALTER_SETTING}=false") as refused:
        translate(_event(doc, message=packed), FakeLookups())
    assert f"event {doc['eventId']} (ALTER_PARTITIONS)" in str(refused.value) and "2 partitions" in str(
        refused.value
    )


@pytest.mark.parametrize("answer", ["true", "TRUE "])
def test_a_hive4_logging_alter_partitions_as_one_event_is_refused_before_the_first_read(answer: str) -> None:
    """Hive 4.2 answers ``true`` for the setting when it is unset (its default); Hive 2.3 and 3.1 answer the
    default the caller gives (they do not know it)."""
    source = _source(LOG, {**LISTENING, BATCH_ALTER_SETTING: answer})
    with pytest.raises(BatchAlterError, match=f"{BATCH_ALTER_SETTING}=true, Hive 4's default") as refused:
        source.get_current_notification_event_id()
    assert "set it to false" in str(refused.value)
    assert "get_next_notification" not in source.reader.calls  # type: ignore[attr-defined]
    for accepted in ("false", ""):
        assert (
            _source(LOG, {**LISTENING, BATCH_ALTER_SETTING: accepted}).get_current_notification_event_id() > 0
        )


def test_a_filter_on_alter_partition_reads_hive4_alter_partitions() -> None:
    log = [doc for doc in RELEASE_LOGS["4.2.0"] if doc["eventType"] != "ALTER_PARTITIONS"][:3]
    batch = {**_hive4("ALTER_PARTITIONS"), "eventId": 4}
    source = _source([*log, batch], warehouse="/")
    events = source.events.next_events(0, event_types=["ALTER_PARTITION"])
    assert [(e.event_id, e.event_type) for e in events] == [(4, "ALTER_PARTITION")]


@pytest.mark.parametrize("version", ["3.1.3", "4.2.0"])
def test_hive3_and_4_messages_carry_the_objects_hive_2_left_out(version: str) -> None:
    """INSERT names its table and partition, DROP_TABLE its table: nothing is read from the source for them."""
    log = {doc["eventType"]: _event(doc) for doc in RELEASE_LOGS[version]}
    lookups = FakeLookups()  # knows no table: every object must come from the message
    insert = translate(log["INSERT"], lookups)
    assert insert is not None and insert.body()["partition"]["values"] == ["d1"]
    assert insert.body()["table"]["table_name"] == "t"
    dropped = translate(log["DROP_TABLE"], lookups)
    assert dropped is not None and dropped.body()["table"]["partition_keys"][0]["name"] == "dt"
    altered = translate(log["ALTER_DATABASE"], lookups)
    assert altered is not None and altered.body()["after"]["parameters"]["team"] == "sales"


def test_hive4_alter_that_drops_the_external_flag_replicates_a_managed_table() -> None:
    """Hive 4 creates a client's plain managed table as external (``EXTERNAL=TRUE``); an alter that sends the
    parameters without it makes Hive store it managed, while the message still says EXTERNAL_TABLE."""
    log = {doc["eventType"]: doc for doc in RELEASE_LOGS["4.2.0"]}
    created = translate(_event(log["CREATE_TABLE"]), FakeLookups())
    altered = translate(_event(log["ALTER_TABLE"]), FakeLookups())
    assert created is not None and altered is not None
    assert created.body()["table"]["table_type"] == "EXTERNAL_TABLE"
    assert decode(_event(log["ALTER_TABLE"]))["tableObjAfterJson"].count('"EXTERNAL_TABLE"') == 1
    assert altered.body()["before"]["table_type"] == "EXTERNAL_TABLE"
    assert altered.body()["after"]["table_type"] == "MANAGED_TABLE"
    assert "EXTERNAL" not in altered.body()["after"]["parameters"]


def test_as_stored_follows_the_external_parameter_both_ways() -> None:
    flagged = Table(db_name="d", table_name="t", parameters={"EXTERNAL": "true"})
    assert as_stored(flagged).table_type == TableType.EXTERNAL_TABLE
    unflagged = Table(db_name="d", table_name="t", table_type=TableType.EXTERNAL_TABLE)
    assert as_stored(unflagged).table_type == TableType.MANAGED_TABLE
    view = Table(db_name="d", table_name="v", table_type=TableType.VIRTUAL_VIEW)
    assert as_stored(view) is view and as_stored(TABLE) is TABLE


def test_the_reader_asks_for_tables_with_get_table_req_which_hive_4_2_still_answers() -> None:
    class Hive42Client:
        """Answers ``get_table_req`` only, as Hive 4.2 does (it removed ``get_table``)."""

        def __init__(self) -> None:
            self.requests: list[Any] = []

        def get_table_req(self, request: Any) -> Any:
            self.requests.append(request)
            raw = hms.Table(tableName=request.tblName, dbName=request.dbName, tableType="MANAGED_TABLE")
            return hms.GetTableResult(table=raw)

    reader = StockMetastoreReader("thrift://hms:9083")
    reader._client = client = Hive42Client()
    table = reader.table("sales", "t")
    assert (table.db_name, table.table_name) == ("sales", "t")
    assert [(r.dbName, r.tblName) for r in client.requests] == [("sales", "t")]


# -- the source over a fake Thrift reader ----------------------------------------------------------------
class FakeReader:
    def __init__(self, events: list[dict[str, Any]], settings: dict[str, str]) -> None:
        self.events, self.settings = events, settings
        self.calls: list[str] = []

    def call(self, what: str, method: str, *args: Any) -> Any:
        self.calls.append(method)
        if method == "get_config_value":
            return self.settings.get(args[0], args[1])
        if method == "get_current_notificationEventId":
            return SimpleNamespace(eventId=self.events[-1]["eventId"] if self.events else 0)
        if method == "get_next_notification":
            request = args[0]
            after = [e for e in self.events if e["eventId"] > request.lastEvent][: request.maxEvents]
            return SimpleNamespace(events=[SimpleNamespace(**e) for e in after])
        raise AssertionError(method)

    def database(self, name: str) -> Database:
        return Database(name=name)

    def table(self, db_name: str, table_name: str) -> Table:
        return TABLE

    def partition_names(self, db_name: str, table_name: str) -> list[str]:
        return []

    def partitions(self, db_name: str, table_name: str, names: list[str]) -> list[list[Partition]]:
        if not names:
            return []
        values = [name.split("=", 1)[1] for name in names]
        location = f"/wh/sales.db/t/dt={values[0]}"
        return [[Partition(values=values, db_name=db_name, table_name=table_name, sd={"location": location})]]

    def close(self) -> None:
        pass


LISTENING = {LISTENER_SETTING: "org.apache.hive.hcatalog.listener.DbNotificationListener"}


#: Where the Hive that wrote ``LOG`` kept its warehouse: its events name locations there, so the operator's
#: roots of the source hold it (besides ``/wh``, where ``FakeReader``'s tables are).
LOG_WAREHOUSE = "/tmp/h6hms/cap/warehouse"


def _source(
    events: list[dict[str, Any]], settings: dict[str, str] | None = None, warehouse: str = "/wh"
) -> StockHiveSource:
    reader: Any = FakeReader(events, LISTENING if settings is None else settings)
    return StockHiveSource(
        "thrift://hms:9083", warehouse=warehouse, cmroot="/cm", external_roots=[LOG_WAREHOUSE], reader=reader
    )


def test_a_metastore_without_notification_listener_is_refused_naming_the_setting() -> None:
    source = _source(LOG, settings={})
    with pytest.raises(NotificationsDisabledError, match=LISTENER_SETTING) as info:
        source.get_current_notification_event_id()
    assert "\n" not in str(info.value)
    assert _source(LOG).get_current_notification_event_id() == len(LOG)


def test_a_metastore_that_hides_its_settings_is_read_as_it_is() -> None:
    class ConfigValSecurityException(Exception):
        pass

    class Hiding(FakeReader):
        def call(self, what: str, method: str, *args: Any) -> Any:
            if method == "get_config_value":
                raise StockMetastoreError(what) from ConfigValSecurityException()
            return super().call(what, method, *args)

    hiding: Any = Hiding(LOG, {})
    source = StockHiveSource("thrift://hms:9083", warehouse="/wh", cmroot="/cm", reader=hiding)
    assert source.get_current_notification_event_id() == len(LOG)
    assert (source.config.warehouse, source.config.cmroot) == ("/wh", "/cm")  # the configured roots stand


def test_events_cleaned_up_by_hive_are_reported_not_skipped() -> None:
    source = _source(LOG[4:])
    with pytest.raises(EventsCleanedUpError):
        source.events.next_events(2, 10)
    assert [e.event_id for e in source.events.next_events(4, 2)] == [5, 6]


def test_next_events_filters_by_database_type_and_bound() -> None:
    other = {**LOG[0], "eventId": 11, "dbName": "other"}
    source = _source([*LOG, other])
    events = source.events.next_events(0, None, db_name="sales", to_event_id=7)
    assert [e.event_id for e in events] == [1, 2, 3, 4, 5, 6, 7]
    assert [e.event_id for e in source.events.next_events(7, None, db_name="other")] == [11]
    typed = source.events.next_events(0, 1, event_types=[EventType.DROP_TABLE])
    assert [e.event_type for e in typed] == ["DROP_TABLE"]
    assert source.events.next_events(0, 10, event_types=acid_replay.TXN_EVENTS) == []  # this log has none


def test_each_event_is_translated_once_per_source() -> None:
    source = _source(LOG)
    first = source.events.next_events(0, None)
    again = source.events.next_events(0, None)
    assert [a is b for a, b in zip(first, again, strict=True)] == [True] * len(first)


def test_listings_hash_only_files_not_seen_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append re-lists its partition but reads only the new file for its checksum."""
    from hmsrepl.hive_source import source as source_module
    from hmsrepl.metastore.change_manager import ChangeManager

    described: list[str] = []
    real = source_module.describe_files

    def counting(location: str | None, cm: ChangeManager, files: Any = None) -> list[str]:
        described.extend(status.uri.rsplit("/", 1)[-1] for status in files or [])
        return real(location, cm, files)

    monkeypatch.setattr(source_module, "describe_files", counting)
    part = tmp_path / "t" / "dt=d1"
    part.mkdir(parents=True)
    (part / "a.txt").write_text("1\n")
    lookups = _source(LOG, warehouse=str(tmp_path)).events.lookups
    first = lookups.listing(str(part))
    (part / "b.txt").write_text("22\n")
    second = lookups.listing(str(part))
    assert described == ["a.txt", "b.txt"]
    assert second[0] == first[0] and len(second) == 2 and "-3" in second[1].split("#")[1]
    (part / "a.txt").write_text("333\n")  # rewritten: another size, read again
    third = lookups.listing(str(part))
    assert described[-1] == "a.txt" and third[0] != first[0]


def _txn_doc(event_id: int, kind: str, message: dict[str, Any], db: str = "null") -> dict[str, Any]:
    """An event as Hive 3.1.3's DbNotificationListener logs it (txn events under the database "null")."""
    return {
        "eventId": event_id,
        "eventTime": 1,
        "eventType": kind,
        "dbName": db,
        "tableName": " ",
        "message": json.dumps({"server": "", "servicePrincipal": "", "timestamp": 1, **message}),
        "messageFormat": "json-0.2",
    }


#: Hive 3.1.3's log of two txns opened together: 7 writes table t (write id 3) and commits, 8 aborts.
TXN_LOG = [
    _txn_doc(1, "OPEN_TXN", {"txnIds": None, "fromTxnId": 7, "toTxnId": 8}),
    _txn_doc(
        2,
        "ALLOC_WRITE_ID_EVENT",
        {"dbName": "sales", "tableName": "t", "txnIdList": [7], "writeIdList": [3]},
        "sales",
    ),
    _txn_doc(3, "COMMIT_TXN", {"txnid": 7}),
    _txn_doc(4, "ABORT_TXN", {"txnid": 8}),
]


@pytest.mark.parametrize("after", [0, 2])
def test_hive3_txn_events_translate_into_ours_with_the_write_ids_each_txn_allocated(after: int) -> None:
    """From the log's start, or from after the txns opened (their allocations are then read back)."""
    source = _source(TXN_LOG)
    txn = source.events.next_events(after, None, event_types=acid_replay.TXN_EVENTS)
    own = source.events.next_events(after, None, db_name="sales")
    for event in (*txn, *own):
        parse_event(event)  # the event model reads it
    assert [(e.event_type, e.db_name) for e in txn] == [
        ("OPEN_TXN", None),
        ("COMMIT_TXN", None),
        ("ABORT_TXN", None),
    ][1 if after else 0 :]
    commit = txn[-2].body()
    assert (commit["txn_id"], commit["write_ids"]) == (7, [{"db": "sales", "table": "t", "write_id": 3}])
    assert txn[-1].body() == {"txn_id": 8, "write_ids": []}
    if not after:
        assert txn[0].body() == {"txn_ids": [7, 8]}
        assert [(e.event_type, e.table_name) for e in own] == [("ALLOC_WRITE_ID", "t")]
        assert own[0].body()["txn_to_write_ids"] == [{"txn_id": 7, "write_id": 3}]


def test_a_commit_whose_open_txn_hive_cleaned_is_refused_in_one_line() -> None:
    source = _source(TXN_LOG[1:])
    with pytest.raises(EventsCleanedUpError):
        source.events.next_events(1, None, event_types=acid_replay.TXN_EVENTS)


def test_java_bitsets_tell_aborted_from_open() -> None:
    assert set_bits(bytes([0b101, 0b1]), 10) == [True, False, True, *[False] * 5, True, False]
    assert set_bits(b"", 2) == [False, False]


class TxnReader(FakeReader):
    """A Hive 3 (or, with ``write_ids=False``, Hive 2) metastore holding txn 7 open with write id 3 of
    ``sales.t`` and write ids 1 (committed) and 2 (aborted) before it."""

    def __init__(self, events: list[dict[str, Any]], *, write_ids: bool = True) -> None:
        super().__init__(events, LISTENING)
        self.write_ids = write_ids

    def table_names(self, db_name: str) -> list[str]:
        return ["t"]

    def table(self, db_name: str, table_name: str) -> Table:
        return TABLE.model_copy(update={"parameters": {"transactional": "true"}})

    def call(self, what: str, method: str, *args: Any) -> Any:
        if method == "get_valid_write_ids" and not self.write_ids:
            self.calls.append(method)
            from thriftpy2.thrift import TApplicationException

            unknown = TApplicationException(TApplicationException.UNKNOWN_METHOD, "Invalid method name")
            raise StockMetastoreError(f"the metastore failed to return {what}") from unknown
        if method == "get_open_txns":
            self.calls.append(method)
            return SimpleNamespace(txn_high_water_mark=8, open_txns=[6, 7], abortedBits=bytes([0b1]))
        if method == "get_valid_write_ids":
            self.calls.append(method)
            tables = [
                SimpleNamespace(writeIdHighWaterMark=3, invalidWriteIds=[2, 3], abortedBits=bytes([0b1]))
                for _ in args[0].fullTableNames
            ]
            return SimpleNamespace(tblValidWriteIds=tables)
        return super().call(what, method, *args)


def _txn_source(reader: Any) -> StockHiveSource:
    return StockHiveSource("thrift://hms:9083", warehouse="/wh", cmroot="/cm", reader=reader)


def test_a_bootstrap_snapshot_holds_the_open_txns_and_each_open_write_ids_owner() -> None:
    log = [
        _txn_doc(1, "OPEN_TXN", {"txnIds": None, "fromTxnId": 7, "toTxnId": 7}),
        _txn_doc(
            2,
            "ALLOC_WRITE_ID_EVENT",
            {"dbName": "sales", "tableName": "t", "txnIdList": [7], "writeIdList": [3]},
            "sales",
        ),
    ]
    snapshot = _txn_source(TxnReader(log)).txns.replication_snapshot("sales")
    assert (snapshot.event_id, snapshot.open_txns) == (2, (7,))
    assert (snapshot.valid_txns.open_txns, snapshot.valid_txns.aborted_txns) == ({7}, {6})
    write_ids, owners = snapshot.tables["t"]
    assert (write_ids.high_watermark, write_ids.open_write_ids, write_ids.aborted_write_ids) == (3, {3}, {2})
    assert owners == {3: 7}


def test_hive2_opens_no_txns_and_refuses_its_transactional_tables_in_one_line() -> None:
    reader = TxnReader(LOG, write_ids=False)
    source = _txn_source(reader)
    snapshot = source.txns.replication_snapshot("sales")
    assert (snapshot.open_txns, snapshot.tables) == ((), {})
    assert "get_open_txns" not in reader.calls
    with pytest.raises(StockMetastoreError, match="Hive 2") as info:
        source.txns.get_valid_write_ids(["sales.t"])
    assert "\n" not in str(info.value)
