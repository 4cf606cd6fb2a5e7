"""Record the notification log a real stock metastore writes for one of each change, for the unit tests.

    python -m tests.peers.hive_log_capture 3.1.3 tests/unit/data/hive31_notification_log.json
    python -m tests.peers.hive_log_capture 4.2.0 tests/unit/data/hive42_notification_log.json

Starts the release (``tests.peers.hive_metastore``), makes through its Thrift API the changes of
``data/hive23_notification_log.json`` (database ``sales``, table ``t`` partitioned by ``dt``: create, add
partition, insert, alter partition, alter table, drop partition, create and drop a function, drop table),
with an ``alter_partitions`` of one partition after the alter partition (Hive 4 logs it as ALTER_PARTITIONS:
its default, which the capture keeps), then alters the database, and writes the events as ``get_next_notification`` returned them, one JSON object
each. The unit tests then read these messages (json-0.2 from 3.1, gzip(json-2.0) from 4.2) without a JVM.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from hmsrepl.hive_source.messages import BATCH_ALTER_SETTING
from hmsrepl.thrift.idl import hms
from tests.integration.test_hive_source import Writer
from tests.peers import hive_metastore

FIELDS = ("eventId", "eventTime", "eventType", "dbName", "tableName", "message", "messageFormat")


def changes(writer: Writer) -> None:
    """One of each change the 2.3.10 capture holds, in the same order, then ALTER_DATABASE."""
    writer.create_database()
    writer.create_table("t", partitioned=True)
    writer.add_partition("t", "d1", {"part-0.txt": "a\n"})
    writer.append("t", "d1", "part-1.txt", "b\n")
    writer.alter_partition("t", "d1", quality="checked")
    [partition] = writer.client.get_partitions_by_names("sales", "t", ["dt=d1"])
    partition.parameters = {**partition.parameters, "reviewed": "yes"}
    writer.client.alter_partitions("sales", "t", [partition])  # Hive 4: one ALTER_PARTITIONS event
    writer.alter_table("t", parameters={"owner_team": "crm"})
    writer.client.drop_partition("sales", "t", ["d1"], True)
    function = hms.Function(
        functionName="shout",
        dbName="sales",
        className="org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper",
        ownerName="etl",
        ownerType=1,
        createTime=0,
        functionType=1,
        resourceUris=[],
    )
    writer.client.create_function(function)
    writer.client.drop_function("sales", "shout")
    writer.client.drop_table("sales", "t", True)
    database = writer.client.get_database("sales")
    database.parameters = {**(database.parameters or {}), "team": "sales"}
    writer.client.alter_database("sales", database)


def capture(version: str) -> list[dict[str, Any]]:
    release = hive_metastore.RELEASES[version]
    hive_default = {BATCH_ALTER_SETTING: "true"}
    with (
        tempfile.TemporaryDirectory() as root,
        hive_metastore.running(release, Path(root), hive_default) as hive,
    ):
        writer = Writer(hive, "sales", version)
        try:
            changes(writer)
            response = writer.client.get_next_notification(
                hms.NotificationEventRequest(lastEvent=0, maxEvents=1000)
            )
        finally:
            writer.close()
    return [{name: getattr(e, name) for name in FIELDS} for e in response.events if e.dbName == "sales"]


def main(argv: list[str]) -> int:
    version, out = argv
    events = capture(version)
    Path(out).write_text(json.dumps(events, indent=1) + "\n")
    print(f"{len(events)} events: {' '.join(e['eventType'] for e in events)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
