"""A compaction on the source does not make a replica copy the table again; the replica compacts on its own.

The compaction's txn allocates no write id and names no files, so the incremental load replays an empty txn
and copies nothing; the deltas its earlier events named were recycled to cmroot by the source's cleaner and
are still found there. Rows are compared as the sorted lines of the visible files on each side.
"""

from __future__ import annotations

import os

from hmsrepl.acid import visible_files
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.metastore import Metastore
from hmsrepl.storage.base import filesystem_for
from tests.integration.test_acid_replication import (  # noqa: F401 - fixtures
    bootstrap,
    engine,
    source,
    step,
    target,
    write,
)


def lines(store: Metastore, db: str) -> list[bytes]:
    out: list[bytes] = []
    for uri in visible_files(store, db, "orders"):
        out.extend(filesystem_for(uri).open_read(uri).read().splitlines())
    return sorted(out)


def entries(store: Metastore, db: str) -> list[str]:
    return sorted(os.listdir(store.catalog.get_table(db, "orders").sd.location))


def test_source_compaction_copies_nothing_and_the_replica_compacts_on_its_own(engine, source, target) -> None:  # noqa: F811
    for n in range(6):
        write(source, "orders", f"early {n}".encode())
    bootstrap(engine)
    for n in range(6):
        write(source, "orders", f"late {n}".encode())
    report = run_cycle(source, force=True, cleaner_delay_seconds=0)
    assert [o.state for o in report.compacted] == ["ready for cleaning"]
    assert [c.cleaned for c in report.cleaned] == [True]  # the late deltas are in cmroot only now

    step(engine, None)

    assert lines(target, "sales_dr") == lines(source, "sales")
    assert not any(name.startswith("base_") for name in entries(target, "sales_dr"))  # nothing of the base
    assert len([n for n in entries(target, "sales_dr") if n.startswith("delta_")]) == 12
    replica = run_cycle(target, force=True, cleaner_delay_seconds=0)
    assert [o.state for o in replica.compacted] == ["ready for cleaning"]
    [base] = entries(target, "sales_dr")
    assert base.startswith("base_0000012_v")
    assert lines(target, "sales_dr") == lines(source, "sales")
    write(source, "orders", b"after both compactions")
    step(engine, None)
    assert lines(target, "sales_dr") == lines(source, "sales")


def test_bootstrap_after_a_compaction_gives_the_replica_the_same_rows(engine, source, target) -> None:  # noqa: F811
    for n in range(5):
        write(source, "orders", f"row {n}".encode())
    run_cycle(source, force=True, cleaner_delay_seconds=0)
    bootstrap(engine)
    assert lines(target, "sales_dr") == lines(source, "sales")
    write(source, "orders", b"after")
    step(engine, None)
    assert lines(target, "sales_dr") == lines(source, "sales")
