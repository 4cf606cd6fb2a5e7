"""Statements a bootstrap load sends per table, by kind: where a small table's load time goes on a server.

    python bench/bench_bootstrap_statements.py [--sizes 20x10,1x2000] [--backend sqlite,postgres,mysql]

For each size (TABLES x PARTITIONS, metadata only, default locations) it dumps a source database, then
counts what REPL LOAD sends to the target database (an SQLAlchemy ``before_cursor_execute`` listener,
``metastore.statement_counts``), grouped by the statement's kind and the catalog table it names, and prints
statements per table and per partition with the load's seconds. Run it on two checkouts (``PYTHONPATH``
picks the code) to compare them: the counts depend on the code, not on the machine.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from sqlalchemy import event

try:  # the checkout on PYTHONPATH when one is given (to compare two), else this one
    import hmsrepl  # noqa: F401
except ImportError:  # pragma: no cover - run from a bare checkout
    REPO = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.statement_table import chosen_backends

DB = "boot"
METADATA_ONLY = "WITH ('hive.repl.dump.metadata.only'='true')"
_KIND = re.compile(
    r"^\s*(SELECT|INSERT INTO|UPDATE|DELETE FROM|BEGIN|COMMIT|SAVEPOINT|RELEASE)\b\s*(\S*)", re.I
)
_FROM = re.compile(r"\bFROM\s+(\w+)", re.I)


def kind_of(statement: str) -> str:
    """``SELECT tbls`` / ``INSERT INTO partitions``: the verb and the first catalog table named."""
    found = _KIND.match(statement)
    if found is None:
        return statement.split(None, 1)[0].upper() if statement.strip() else "?"
    verb = found.group(1).upper()
    if verb == "SELECT":
        source = _FROM.search(statement)
        return f"SELECT {source.group(1) if source else '-'}"
    target = found.group(2).strip('`"(')
    return f"{verb} {target}".strip()


def measure(backend: str, tables: int, partitions: int) -> tuple[Counter[str], float]:
    from hmsrepl.metastore import Metastore
    from hmsrepl.metastore.model import Database
    from hmsrepl.replication.engine import ReplicationEngine
    from tests.backends import temporary_database
    from tests.conftest import make_config
    from tests.helpers import make_partition, make_table

    with tempfile.TemporaryDirectory(prefix="bench-boot-stmts-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        source = Metastore.open(
            make_config(stack.enter_context(temporary_database(backend, tmp)), root / "s")
        )
        target = Metastore.open(
            make_config(stack.enter_context(temporary_database(backend, tmp)), root / "t")
        )
        stack.callback(source.close)
        stack.callback(target.close)
        source.catalog.create_database(Database(name=DB))
        for number in range(tables):
            table = source.catalog.create_table(make_table(DB, f"t{number:05d}", partition_keys=("p",)))
            for first in range(0, partitions, 1000):
                chunk = [
                    make_partition(table, f"{p:07d}") for p in range(first, min(partitions, first + 1000))
                ]
                source.catalog.add_partitions(DB, table.table_name, chunk)
        engine = ReplicationEngine(str(root / "dumps"), source, target)
        dumped = engine.execute(f"REPL DUMP {DB} {METADATA_ONLY}")
        counts: Counter[str] = Counter()

        def seen(
            _conn: object, _cursor: object, statement: str, params: object, _ctx: object, many: bool
        ) -> None:
            counts[kind_of(statement)] += 1

        event.listen(target.engine, "before_cursor_execute", seen)
        started = time.perf_counter()
        engine.execute(f"REPL LOAD {DB} FROM '{dumped.dump_dir}'")
        seconds = time.perf_counter() - started
        event.remove(target.engine, "before_cursor_execute", seen)
        return counts, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20x10,1x2000", help="TABLESxPARTITIONS, comma-separated")
    parser.add_argument("--backend", default="sqlite", help="sqlite, postgres, mysql, a list or all")
    parser.add_argument("--top", type=int, default=12, help="statement kinds shown per size")
    args = parser.parse_args()
    import hmsrepl

    print(f"code: {Path(hmsrepl.__file__).resolve().parents[2]}")
    for text in args.sizes.split(","):
        tables, _, parts = text.lower().partition("x")
        n_tables, n_parts = int(tables), int(parts)
        for backend in chosen_backends(args.backend):
            counts, seconds = measure(backend, n_tables, n_parts)
            total = sum(counts.values())
            objects = n_tables * max(n_parts, 1)
            print(
                f"\n{backend} {n_tables}x{n_parts}: load {seconds:.2f} s, {total} statements, "
                f"{total / n_tables:.1f} per table, {total / objects:.3f} per partition"
            )
            for kind, count in counts.most_common(args.top):
                print(f"  {count:>7}  {count / n_tables:>8.2f}/table  {kind}")


if __name__ == "__main__":
    main()
