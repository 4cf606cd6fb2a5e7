"""One entry point for REPL commands, whether they come from the CLI, Python or a DAG task."""

from __future__ import annotations

from dataclasses import dataclass

from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import Command, DumpCommand, LoadCommand, StatusCommand, parse_command
from hmsrepl.replication.dump import DumpEngine, DumpResult
from hmsrepl.replication.load import LoadEngine, LoadResult, repl_status


class MissingMetastoreError(ValueError):
    """A command needs the source (DUMP) or target (LOAD, STATUS) metastore and it was not configured."""


@dataclass
class ReplicationEngine:
    dump_root: str
    source: Metastore | None = None
    target: Metastore | None = None

    def execute(self, command: str | Command) -> DumpResult | LoadResult | int | None:
        parsed = parse_command(command) if isinstance(command, str) else command
        if isinstance(parsed, DumpCommand):
            if self.source is None:
                raise MissingMetastoreError("REPL DUMP needs the source metastore (--source-db-url)")
            return DumpEngine(self.source, self.dump_root).dump(parsed)
        if self.target is None:
            raise MissingMetastoreError(
                f"{type(parsed).__name__} needs the target metastore (--target-db-url)"
            )
        if isinstance(parsed, LoadCommand):
            return LoadEngine(self.target).load(parsed)
        assert isinstance(parsed, StatusCommand)
        return repl_status(self.target, parsed.db_name)
