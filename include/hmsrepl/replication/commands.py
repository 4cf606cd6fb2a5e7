"""The REPL commands, parsed by a grammar (lark):

    REPL DUMP <policy> [REPLACE <policy>] [FROM <evid> [TO <evid>] [LIMIT <n>]] [WITH ('k'='v', ...)]
    REPL LOAD [<dbname>] FROM '<dir>' [WITH ('k'='v', ...)]
    REPL STATUS <dbname>

Keywords are case-insensitive; a trailing ';' is allowed. Errors point at the column that did not parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedEOF, UnexpectedInput
from lark.exceptions import VisitError

from hmsrepl.exceptions import HmsReplError
from hmsrepl.replication.policy import ReplicationPolicy

GRAMMAR = r"""
start: _REPL (dump | load | status) ";"?
dump: _DUMP policy replace? range? with_clause?
replace: _REPLACE policy
range: _FROM INT to_id? limit?
to_id: _TO INT
limit: _LIMIT INT
load: _LOAD NAME? _FROM STRING with_clause?
status: _STATUS NAME
policy: NAME ("." pattern_list ("." pattern_list)?)?
pattern_list: "[" (STRING ("," STRING)*)? "]"
with_clause: _WITH "(" pair ("," pair)* ")"
pair: STRING "=" STRING

_REPL.2: /repl\b/i
_DUMP.2: /dump\b/i
_LOAD.2: /load\b/i
_STATUS.2: /status\b/i
_REPLACE.2: /replace\b/i
_FROM.2: /from\b/i
_TO.2: /to\b/i
_LIMIT.2: /limit\b/i
_WITH.2: /with\b/i
NAME: /[A-Za-z_][A-Za-z0-9_]*/
INT: /[0-9]+/
STRING: /'(\\.|[^'\\])*'/ | /"(\\.|[^"\\])*"/
%import common.WS
%ignore WS
"""

_PARSER = Lark(GRAMMAR, parser="lalr")


class CommandError(HmsReplError):
    """A REPL command that cannot be parsed or is inconsistent."""


@dataclass(frozen=True)
class DumpCommand:
    policy: ReplicationPolicy
    replaced_policy: ReplicationPolicy | None = None
    from_event_id: int | None = None  # None: bootstrap
    to_event_id: int | None = None
    limit: int | None = None
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def is_bootstrap(self) -> bool:
        return self.from_event_id is None


@dataclass(frozen=True)
class LoadCommand:
    dump_dir: str
    target_db: str | None = None
    settings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StatusCommand:
    db_name: str


Command = DumpCommand | LoadCommand | StatusCommand


def _unquote(token: Token | str) -> str:
    body = str(token)[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


class _Build(Transformer):
    def start(self, items: list[Any]) -> Command:
        return items[0]

    def pattern_list(self, items: list[Token]) -> tuple[str, ...]:
        return tuple(_unquote(t) for t in items)

    def policy(self, items: list[Any]) -> ReplicationPolicy:
        name = str(items[0])
        include = items[1] if len(items) > 1 else None
        if include is not None and len(include) == 1 and include[0] in (".*", ".*?"):
            include = None if len(items) < 3 else include
        exclude = items[2] if len(items) > 2 else ()
        try:
            return ReplicationPolicy(name, include, exclude)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    def replace(self, items: list[Any]) -> tuple[str, ReplicationPolicy]:
        return ("replace", items[0])

    def to_id(self, items: list[Token]) -> tuple[str, int]:
        return ("to", int(items[0]))

    def limit(self, items: list[Token]) -> tuple[str, int]:
        return ("limit", int(items[0]))

    def range(self, items: list[Any]) -> tuple[str, dict[str, int]]:
        return ("range", {"from": int(items[0]), **dict(items[1:])})

    def pair(self, items: list[Token]) -> tuple[str, str]:
        return _unquote(items[0]), _unquote(items[1])

    def with_clause(self, items: list[tuple[str, str]]) -> tuple[str, dict[str, str]]:
        return ("with", dict(items))

    def dump(self, items: list[Any]) -> DumpCommand:
        policy, rest = items[0], dict(items[1:])
        span = rest.get("range", {})
        return DumpCommand(
            policy=policy,
            replaced_policy=rest.get("replace"),
            from_event_id=span.get("from"),
            to_event_id=span.get("to"),
            limit=span.get("limit"),
            settings=rest.get("with", {}),
        )

    def load(self, items: list[Any]) -> LoadCommand:
        name = next((str(t) for t in items if isinstance(t, Token) and t.type == "NAME"), None)
        directory = next(_unquote(t) for t in items if isinstance(t, Token) and t.type == "STRING")
        settings = next((v for k, v in (i for i in items if isinstance(i, tuple))), {})
        return LoadCommand(directory, name.lower() if name else None, settings)

    def status(self, items: list[Token]) -> StatusCommand:
        return StatusCommand(str(items[0]).lower())


def parse_command(text: str) -> Command:
    try:
        tree = _PARSER.parse(text.strip())
    except UnexpectedInput as exc:
        ended = isinstance(exc, UnexpectedEOF) or getattr(getattr(exc, "token", None), "type", "") == "$END"
        where = "it ends early" if ended else f"at column {exc.column}"
        raise CommandError(
            f"cannot parse REPL command ({where}): {text.strip()!r}; expected "
            "REPL DUMP <policy> [REPLACE <policy>] [FROM n [TO m] [LIMIT k]] [WITH (...)], "
            "REPL LOAD [db] FROM '<dir>' [WITH (...)] or REPL STATUS <db>"
        ) from exc
    try:
        command = _Build().transform(tree)
    except VisitError as exc:  # an error raised while building (bad regex): report it, not lark's wrapper
        if isinstance(exc.orig_exc, CommandError):
            raise exc.orig_exc from None
        raise
    if isinstance(command, DumpCommand):
        check_dump_command(command)
    return command


def parse_policy(text: str) -> ReplicationPolicy:
    """A policy from its textual form (``ReplicationPolicy.to_text()``, as dumps record it)."""
    command = parse_command(f"REPL DUMP {text}")
    assert isinstance(command, DumpCommand)
    return command.policy


def check_dump_command(command: DumpCommand) -> None:
    """Refuse inconsistent dumps; run on parsed commands and again by the dump engine (Python callers)."""
    if command.limit is not None and command.limit <= 0:
        raise CommandError(f"LIMIT must be positive, got {command.limit}")
    if (
        command.to_event_id is not None
        and command.from_event_id is not None
        and command.to_event_id < command.from_event_id
    ):
        raise CommandError(f"TO {command.to_event_id} is before FROM {command.from_event_id}")
    if command.replaced_policy is not None:
        if command.from_event_id is None:
            raise CommandError(
                "REPLACE needs FROM <evid>: it changes the policy of an incremental dump; a bootstrap dump "
                "simply uses the new policy"
            )
        if command.replaced_policy.db_name != command.policy.db_name:
            raise CommandError(
                f"REPLACE policy is for database '{command.replaced_policy.db_name}', but the new policy is for "
                f"'{command.policy.db_name}'; a policy change cannot move replication to another database"
            )
