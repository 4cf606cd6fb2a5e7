"""The REPL commands, parsed by a grammar (lark):

    REPL DUMP <policy> [REPLACE <policy>] [FROM <evid> [TO <evid>] [LIMIT <n>]] [WITH ('k'='v', ...)]
    REPL LOAD [<dbname>] FROM '<dir>' [WITH ('k'='v', ...)]
    REPL STATUS <dbname>

A policy is a database name and up to two table filters, include then exclude, each either Hive 4's form, one
quoted regex (``sales.'t1|t2'``, ``sales.'(t1*)|t2'.'t100'``), or a list of quoted regexes
(``sales.['t1', 't2'].['t3']``; a table matches a list when it matches one of its regexes; ``sales.[]``
replicates functions only). Unquoted table filters (``sales.t1``, ``sales.[t1|t2]``) and empty regexes are
refused with Hive's message for them (error 20021), naming the quoted form to write instead.

Keywords are case-insensitive; a trailing ';' is allowed. Errors point at the column that did not parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedEOF, UnexpectedInput
from lark.exceptions import VisitError

from hmsrepl.exceptions import HmsReplError
from hmsrepl.replication.policy import ReplicationPolicy, quote_pattern

GRAMMAR = r"""
start: _REPL (dump | load | status) ";"?
dump: _DUMP policy replace? range? with_clause?
replace: _REPLACE policy
range: _FROM INT to_id? limit?
to_id: _TO INT
limit: _LIMIT INT
load: _LOAD NAME? _FROM STRING with_clause?
status: _STATUS NAME
policy: NAME ("." _filter ("." _filter)?)?
_filter: pattern_list | regex | unquoted
pattern_list: "[" (STRING ("," STRING)*)? "]"
regex: STRING
unquoted: NAME | "[" BARE ("," BARE)* "]"
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
BARE: /[^'"\s,\]][^'",]*?(?=\s*(,|\](\s|\.|;|$)))/
%import common.WS
%ignore WS
"""

_PARSER = Lark(GRAMMAR, parser="lalr", start=["start", "policy"])


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


#: Hive's message for a table filter that is not a quoted regex (ErrorMsg.REPL_INVALID_DB_OR_TABLE_PATTERN).
HIVE_PATTERN_ERROR = (
    "Invalid pattern for the DB or table name in the replication policy. "
    "It should be a valid regex enclosed within single or double quotes (Hive error 20021)"
)


@dataclass(frozen=True)
class TableFilter:
    """One table filter of a policy as written: its regexes, its text, and whether it was quoted."""

    patterns: tuple[str, ...]
    shown: str
    quoted: bool = True

    @property
    def suggested(self) -> str:
        """How to write it: as written when quoted, else Hive's form, one quoted regex."""
        return self.shown if self.quoted else quote_pattern("|".join(self.patterns))


def check_filters(db_name: str, filters: list[TableFilter]) -> None:
    """Refuse, as Hive does, unquoted filters and empty regexes; the message names the policy to write."""
    written = ".".join([db_name, *(f.shown for f in filters)])
    if not all(f.quoted for f in filters):
        fix = ".".join([db_name, *(f.suggested for f in filters)])
        raise CommandError(f"policy '{written}': {HIVE_PATTERN_ERROR}; write {fix}")
    if any("" in f.patterns for f in filters):
        raise CommandError(
            f"policy '{written}': {HIVE_PATTERN_ERROR}; an empty regex matches no table: write "
            f"{db_name} for every table or {db_name}.[] for its functions only"
        )


def _unquote(token: Token | str) -> str:
    body = str(token)[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


class _Build(Transformer[Token, Any]):
    def start(self, items: list[Command]) -> Command:
        return items[0]

    def pattern_list(self, items: list[Token]) -> TableFilter:
        return TableFilter(tuple(_unquote(t) for t in items), f"[{', '.join(str(t) for t in items)}]")

    def regex(self, items: list[Token]) -> TableFilter:
        return TableFilter((_unquote(items[0]),), str(items[0]))

    def unquoted(self, items: list[Token]) -> TableFilter:
        words = [str(t).strip() for t in items]
        shown = words[0] if items[0].type == "NAME" else f"[{', '.join(words)}]"
        return TableFilter(tuple(words), shown, quoted=False)

    def policy(self, items: list[Any]) -> ReplicationPolicy:
        name, filters = str(items[0]), items[1:]
        check_filters(name, filters)
        include = filters[0].patterns if filters else None
        if include in ((".*",), (".*?",)):  # every table: one policy, whichever way it is written
            include = None
        exclude = filters[1].patterns if len(filters) > 1 else ()
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
        settings: dict[str, str] = next((v for k, v in (i for i in items if isinstance(i, tuple))), {})
        return LoadCommand(directory, name.lower() if name else None, settings)

    def status(self, items: list[Token]) -> StatusCommand:
        return StatusCommand(str(items[0]).lower())


POLICY_FORMS = "<db>, <db>.'<include regex>'[.'<exclude regex>'] or <db>.['<regex>', ...][.['<regex>', ...]]"
COMMAND_FORMS = (
    "REPL DUMP <policy> [REPLACE <policy>] [FROM n [TO m] [LIMIT k]] [WITH (...)], "
    "REPL LOAD [db] FROM '<dir>' [WITH (...)] or REPL STATUS <db>"
)


def _parse(text: str, start: str, what: str, expected: str) -> Any:
    """The built object of ``text`` from grammar rule ``start``; errors say where, and what was expected."""
    try:
        tree = _PARSER.parse(text.strip(), start=start)
    except UnexpectedInput as exc:
        ended = isinstance(exc, UnexpectedEOF) or getattr(getattr(exc, "token", None), "type", "") == "$END"
        where = "it ends early" if ended else f"at column {exc.column}"
        raise CommandError(f"cannot parse {what} ({where}): {text.strip()!r}; expected {expected}") from exc
    try:
        return _Build().transform(tree)
    except VisitError as exc:  # an error raised while building (bad regex): report it, not lark's wrapper
        if isinstance(exc.orig_exc, CommandError):
            raise exc.orig_exc from None
        raise


def parse_command(text: str) -> Command:
    command: Command = _parse(text, "start", "REPL command", COMMAND_FORMS)
    if isinstance(command, DumpCommand):
        check_dump_command(command)
    return command


def parse_policy(text: str) -> ReplicationPolicy:
    """A policy from its textual form: Hive's (``db.'inc'.'exc'``), the list form, or ``to_text()``'s."""
    policy = _parse(text, "policy", "replication policy", POLICY_FORMS)
    assert isinstance(policy, ReplicationPolicy)
    return policy


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
