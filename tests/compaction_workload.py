"""A randomised workload of table and partition changes, shared by the compaction property test and bench.

Operations are small tuples of integers resolved against the source's current state, so every generated
sequence is valid whatever came before: creates and drops of tables (partitioned or not), renames (within
the policy, and out of and into it through the excluded name ``x0``), added, altered and dropped
partitions, inserts and overwrites, table alters. Names come from small pools so that names are reused
(create after drop, rename onto a freed name) and objects see several changes in one window.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_partition, make_table, write_file

TABLES = ("t0", "t1", "t2", "t3")
EXCLUDED = "x0"  # outside the policy below: renames to and from it cross the policy's filter
PARTS = ("a", "b", "c")
KINDS = (
    "create",
    "drop",
    "rename",
    "add",
    "alter_part",
    "drop_part",
    "insert",
    "overwrite",
    "alter_table",
)
Op = tuple[int, int, int, int]


def policy_text(db: str) -> str:
    return f"{db}.['t[0-9]+']"


def ops_strategy(max_size: int = 25) -> st.SearchStrategy[list[Op]]:
    small = st.integers(0, 7)
    return st.lists(st.tuples(st.integers(0, len(KINDS) - 1), small, small, small), max_size=max_size)


def random_ops(rng: random.Random, count: int, weights: Sequence[float] | None = None) -> list[Op]:
    """``count`` operations; ``weights`` (one per KINDS entry) skew the mix, uniform by default."""
    kinds = rng.choices(range(len(KINDS)), weights=weights, k=count)
    return [(kind, rng.randrange(64), rng.randrange(64), rng.randrange(8)) for kind in kinds]


def create_database(store: Metastore, db: str) -> None:
    store.catalog.create_database(Database(name=db))


def apply_ops(
    store: Metastore,
    db: str,
    ops: Sequence[Op],
    tag: str = "",
    payload: int = 0,
    tables: Sequence[str] = TABLES,
    parts: Sequence[str] = PARTS,
    on_event: Callable[[], None] | None = None,
) -> None:
    """Apply each operation, resolved against what exists now (an impossible one does nothing).

    Data files hold a short text, padded to ``payload`` bytes; benchmarks also widen the name pools.
    ``on_event`` is called after each logged change, before the next file is written: the source's files
    then are its state at that event (tests record it).
    """
    catalog = store.catalog
    logged = on_event or (lambda: None)

    def content(text: str) -> bytes:
        return text.encode().ljust(payload, b".")

    for step, (kind_index, a, b, c) in enumerate(ops):
        kind = KINDS[kind_index]
        existing = catalog.get_tables(db)
        names = [n for n in (*tables, EXCLUDED) if n in existing]
        free = [n for n in (*tables, EXCLUDED) if n not in existing]
        stamp = f"{tag}{step}"
        if kind == "create":
            if free:
                name = free[a % len(free)]
                partitioned = b % 2 == 0
                table = catalog.create_table(
                    make_table(db, name, partition_keys=("p",) if partitioned else ())
                )
                logged()
                if not partitioned and c % 2:
                    write_file(table.sd.location, f"f{stamp}", content(f"create {stamp}"))
                    catalog.insert(db, name)
                    logged()
            continue
        if not names:
            continue
        name = names[a % len(names)]
        table = catalog.get_table(db, name)
        held = catalog.get_partitions(db, name) if table.partition_keys else []
        if kind == "drop":
            catalog.drop_table(db, name)
        elif kind == "rename" and free:
            new_name = free[b % len(free)]
            catalog.alter_table(db, name, table.model_copy(update={"table_name": new_name}))
        elif kind == "alter_table":
            params = {**table.parameters, "k": stamp}
            catalog.alter_table(db, name, table.model_copy(update={"parameters": params}))
        elif kind == "add" and table.partition_keys:
            present = {p.values[0] for p in held}
            missing = [v for v in parts if v not in present]
            if missing:
                added = [make_partition(table, v) for v in missing[: 1 + b % len(missing)]]
                created = catalog.add_partitions(db, name, added)
                logged()
                if c % 2:  # files written after the add: recorded by an insert per partition
                    for part in created:
                        write_file(part.sd.location, f"f{stamp}", content(f"add {stamp}"))
                        catalog.insert(db, name, part.values)
                        logged()
                continue
        elif kind == "alter_part" and held:
            part = held[b % len(held)]
            catalog.alter_partitions(
                db, name, [part.model_copy(update={"parameters": {**part.parameters, "k": stamp}})]
            )
        elif kind == "drop_part" and held:
            chosen = held[b % len(held) :][: 1 + c % 2]
            catalog.drop_partitions(db, name, [p.values for p in chosen])
        elif kind in ("insert", "overwrite"):
            if table.partition_keys:
                if not held:
                    continue
                part = held[b % len(held)]
                location, values = part.sd.location, part.values
            else:
                location, values = table.sd.location, None
            new = [write_file(location, f"f{stamp}", content(f"{kind} {stamp} {c}"))]
            if kind == "insert" and c % 3 == 2:  # a Spark append of two tasks: both files appear at once
                new.append(write_file(location, f"f{stamp}-1", content(f"{kind} {stamp} {c} 1")))
            catalog.insert(db, name, values, new_files=new, replace=kind == "overwrite")
        else:
            continue  # nothing logged
        logged()
