"""One run of catalog, transaction and statistics calls covering every event type, and what a revision's
reader says of each message it logs.

``tests/unit/data/messages_7245dbf.json`` is this run's log as revision 7245dbf wrote it (before payloads
were typed), with that revision's reading of each message; ``tests/unit/test_payload_codec.py`` checks that
today's code writes the same documents for the same calls and reads the stored ones the same way. To make
the file again with a revision's code: ``PYTHONPATH=<checkout>/include:. python -m tests.payload_history
OUT``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.model import (
    Database,
    FieldSchema,
    Function,
    Partition,
    ResourceUri,
    StorageDescriptor,
    Table,
)
from hmsrepl.metastore.statistics import ColumnStat

MASKED_TIMES = ("create_time", "last_access_time", "last_analyzed")


def facts(message: Any) -> dict[str, Any]:
    """What a reader asks of a message, in JSON terms (the same questions for every revision)."""
    out = {
        "table_names": sorted(message.table_names),
        "partition_names": list(message.partition_names()),
        "files": message.files(),
        "rename_target": message.rename_target,
        "renames": message.renames,
        "objects": [
            {"location": o.location, "partition": o.partition_name, "change": o.change.to_json()}
            for o in message.objects()
        ],
    }
    if hasattr(message, "txn_tables"):
        out["txn_tables"] = list(message.txn_tables())
    return out


def write_history(store: Metastore) -> int:
    """Make the calls; returns the event id before the first of them."""
    first = store.events.current_event_id()
    cat = store.catalog
    cat.create_database(Database(name="sales", description="orders", parameters={"owner": "ops"}))
    cat.alter_database(
        "sales", Database(name="sales", description="orders and returns", parameters={"k": "é"})
    )
    cols = [FieldSchema(name="id", type="bigint", comment="key"), FieldSchema(name="amount", type="double")]
    plain = cat.create_table(Table(db_name="sales", table_name="plain", sd=StorageDescriptor(cols=cols)))
    loc = str(plain.sd.location)
    Path(loc).mkdir(parents=True, exist_ok=True)
    (Path(loc) / "a.csv").write_text("1,2\n")
    cat.insert("sales", "plain", new_files=[f"{loc}/a.csv"])
    (Path(loc) / "b.csv").write_text("3,4\n")
    cat.insert("sales", "plain", new_files=[f"{loc}/b.csv"])
    cat.alter_table("sales", "plain", plain.model_copy(update={"parameters": {"comment": "x"}}))
    cat.truncate_table("sales", "plain")
    cat.alter_table("sales", "plain", plain.model_copy(update={"table_name": "plain2"}))
    keys = [FieldSchema(name="dt", type="string"), FieldSchema(name="region", type="string")]
    cat.create_table(
        Table(db_name="sales", table_name="parted", sd=StorageDescriptor(cols=cols), partition_keys=keys)
    )
    added = cat.add_partitions(
        "sales",
        "parted",
        [
            Partition(db_name="sales", table_name="parted", values=[day, "eu west:1"])
            for day in ("2024-01-01", "2024-01-02")
        ],
    )
    ploc = str(added[0].sd.location)
    Path(ploc).mkdir(parents=True, exist_ok=True)
    (Path(ploc) / "p.csv").write_text("5,6\n")
    cat.insert("sales", "parted", ["2024-01-01", "eu west:1"], new_files=[f"{ploc}/p.csv"])
    cat.alter_partitions("sales", "parted", [added[0].model_copy(update={"parameters": {"a": "b"}})])
    cat.drop_partitions("sales", "parted", [["2024-01-02", "eu west:1"]])
    stat = ColumnStat("amount", "double", "doubleStats", {"lowValue": 0.5, "highValue": 1e300, "numNulls": 0})
    store.stats.update("sales", "parted", [stat])
    store.stats.delete("sales", "parted", "amount")
    jar = ResourceUri(uri="hdfs:///f.jar")
    cat.create_function(
        Function(function_name="f", db_name="sales", class_name="com.example.F", resource_uris=[jar])
    )
    cat.drop_function("sales", "f")
    acid = cat.create_table(
        Table(
            db_name="sales",
            table_name="acid",
            sd=StorageDescriptor(cols=cols),
            parameters={"transactional": "true"},
        )
    )
    delta = Path(str(acid.sd.location), "delta_0000001_0000001_0000")
    delta.mkdir(parents=True, exist_ok=True)
    (delta / "bucket_00000").write_text("x")
    (txn,) = store.txns.open_txns(1, user="etl", host="h1")
    (pair,) = store.txns.allocate_table_write_ids([txn], "sales", "acid")
    store.txns.add_write_notification(txn, pair.write_id, "sales", "acid", None, [f"{delta}/bucket_00000"])
    store.txns.commit_txn(txn)
    (doomed,) = store.txns.open_txns(1)
    store.txns.allocate_table_write_ids([doomed], "sales", "acid")
    store.txns.abort_txns([doomed])
    cat.drop_table("sales", "parted")
    cat.drop_database("sales", cascade=True)
    return first


def logged(store: Metastore, first: int) -> list[dict[str, Any]]:
    """Each event after ``first``: its row's names, stored document and this revision's reading of it."""
    return [
        {
            "event_type": e.event_type,
            "db": e.db_name,
            "table": e.table_name,
            "message": e.body(),
            "facts": facts(parse_event(e)),
        }
        for e in store.events.next_events(first)
    ]


def masked(events: list[dict[str, Any]], root: Path) -> Any:
    """The events with the run's directory and clock readings replaced, so two runs compare equal."""

    def mask(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: 0 if k in MASKED_TIMES else mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value.replace(str(root), "<root>") if isinstance(value, str) else value

    return mask(events)


def run(root: Path) -> list[dict[str, Any]]:
    store = Metastore.open(
        MetastoreConfig(db_url=f"sqlite:///{root}/m.db", warehouse=str(root / "wh"), cmroot=str(root / "cm"))
    )
    try:
        return masked(logged(store, write_history(store)), root)
    finally:
        store.close()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(sys.argv[1]).write_text(json.dumps(run(Path(tmp)), indent=1, sort_keys=True) + "\n")
