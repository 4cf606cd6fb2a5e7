"""Partition reads over Thrift, answered from the metadata cache where it may, with their wire encodings kept."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TType
from thriftpy2.utils import serialize

from hmsrepl.bounds import resource_bounds
from hmsrepl.exceptions import InvalidObjectError, LimitExceededError
from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.model import Partition
from hmsrepl.metastore.partition_pages import PAGE_ROWS, PartitionPages
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area, _write_ids
from hmsrepl.thrift.budget import CallMemory
from hmsrepl.thrift.idl import hms

# The server's own protocol (binary), so kept encodings can be sent as they are.
_ENCODER = TCyBinaryProtocolFactory()


class Wire:
    """A partition's Thrift struct and its binary-protocol encoding, kept together with a cached partition."""

    __slots__ = ("encoded", "struct")

    def __init__(self, model: Partition) -> None:
        self.struct = convert.partition_to_thrift(model)
        self.encoded = serialize(self.struct, _ENCODER)


class EncodedStructs(list[Any]):
    """A list of structs whose encodings are known, so the server writes them without encoding again.

    Encoding 1,000 partitions costs the server ~8 ms, more than finding them in the cache; on a cache hit
    each partition's encoding was kept from the first time it was sent. Still a plain list of structs for
    in-process callers.
    """

    def __init__(self, wires: Sequence[Wire]) -> None:
        super().__init__(wire.struct for wire in wires)
        self.encoded = [wire.encoded for wire in wires]

    def result_bytes(self) -> bytes:
        """The binary encoding of a ``*_result`` struct whose field 0 (success) is this list."""
        header = struct.pack("!bhbi", TType.LIST, 0, TType.STRUCT, len(self.encoded))
        return b"".join([header, *self.encoded, b"\x00"])  # the trailing STOP closes the result struct


def _table_id(value: int | None) -> Any:
    return value if value is not None and value > 0 else None


def _partition_structs() -> dict[str, Any]:
    """How a partition list read answers the handler: structs (wire encodings kept on a cache hit), built
    straight from the stored documents on the database path (a fresh decoder per reply), in pages of
    ``PAGE_ROWS`` read as the reply is written (``partition_pages``), each page's decoding charged to the
    call's memory budget before it is done."""
    return {
        "to": convert.partition_to_thrift,
        "keep": Wire,
        "decode": convert.PartitionDocs(),
        "page_rows": PAGE_ROWS,
        "charges": CallMemory.current(),
    }


def _partitions_out(found: Sequence[Any]) -> Sequence[Any]:
    """Cache hits come as Wire objects (encoded once); database reads as structs, encoded as usual, or as
    pages (``PartitionPages``) the server writes one at a time."""
    if isinstance(found, PartitionPages):
        return found
    if found and isinstance(found[0], Wire):
        return EncodedStructs(found)
    return found


def _limit(max_parts: int | None) -> int:
    return -1 if max_parts is None or max_parts < 0 else max_parts


def _capped(
    db_name: str,
    tbl_name: str,
    max_parts: int | None,
    fetch: Callable[[int], Sequence[Any]],
    count: Callable[[], int] | None = None,
) -> Sequence[Any]:
    """Partitions read with ``fetch(limit)``, refused when there are more than the per-call cap.

    Like Hive's ``hive.metastore.limit.partition.request``: a call asking for at most the cap (``max_parts``)
    is served, so clients page through large tables; one asking for more fails only if more exist. Reading
    one past the cap tells which, without loading the whole table first.
    """
    cap = resource_bounds().max_partitions_per_call
    limit = _limit(max_parts)
    if cap < 0 or 0 <= limit <= cap:
        return fetch(limit)
    found = fetch(cap + 1)
    if len(found) <= cap:
        return found
    scanned = f"={count()}" if count is not None else f">{cap}"
    raise LimitExceededError(
        f"Number of partitions scanned ({scanned}) on table '{db_name}.{tbl_name}' exceeds limit (={cap}); "
        "ask for fewer with max_parts, narrow the request, or raise HMSREPL_MAX_PARTITIONS_PER_CALL"
    )


def _parse_name(part_name: str) -> list[tuple[str, str]]:
    try:
        return parse_partition_name(part_name)
    except ValueError as exc:
        raise InvalidObjectError(str(exc)) from exc


def partition_values(part_name: str) -> list[str]:
    """The values of a partition name (``a=1/b=2`` -> ``["1", "2"]``), refused as an invalid object."""
    return [value for _, value in _parse_name(part_name)]


class PartitionReadApi(Area):
    """Reads of partitions, with or without a reader's ValidWriteIdList."""

    def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Any:
        found = self.reads.partition(
            db_name, tbl_name, part_vals or [], to=convert.partition_to_thrift, keep=Wire
        )
        return found.struct if isinstance(found, Wire) else found

    def get_partition_with_auth(
        self, db_name: str, tbl_name: str, part_vals: list[str], user_name: str, group_names: Any
    ) -> Any:
        return self.get_partition(db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Any:
        return self.get_partition(db_name, tbl_name, self.partition_name_to_vals(part_name))

    def get_partitions(self, db_name: str, tbl_name: str, max_parts: int) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions(db_name, tbl_name, limit, **_partition_structs()),
                lambda: len(self.reads.partition_names(db_name, tbl_name, -1)),
            )
        )

    def get_partitions_with_auth(
        self, db_name: str, tbl_name: str, max_parts: int, user_name: str, group_names: Any
    ) -> Sequence[Any]:
        return self.get_partitions(db_name, tbl_name, max_parts)

    def get_partition_names(
        self,
        db_name: str,
        tbl_name: str,
        max_parts: int,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[str]:
        return self.reads.partition_names(db_name, tbl_name, _limit(max_parts), write_ids, table_id)

    def get_partitions_ps(
        self,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        max_parts: int,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions_ps(
                    db_name, tbl_name, part_vals or [], limit, write_ids, table_id, **_partition_structs()
                ),
                lambda: len(self.reads.partition_names_ps(db_name, tbl_name, part_vals or [], -1)),
            )
        )

    def get_partitions_ps_with_auth(
        self,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        max_parts: int,
        user_name: str,
        group_names: Any,
    ) -> Sequence[Any]:
        return self.get_partitions_ps(db_name, tbl_name, part_vals, max_parts)

    def get_partition_names_ps(
        self,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        max_parts: int,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[str]:
        return self.reads.partition_names_ps(
            db_name, tbl_name, part_vals or [], _limit(max_parts), write_ids, table_id
        )

    def get_partitions_by_filter(
        self, db_name: str, tbl_name: str, filter: str, max_parts: int
    ) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions_by_filter(
                    db_name, tbl_name, filter or "", limit, **_partition_structs()
                ),
            )
        )

    def get_partitions_by_names(self, db_name: str, tbl_name: str, names: list[str]) -> Sequence[Any]:
        return _partitions_out(
            self.reads.partitions_by_names(db_name, tbl_name, names or [], **_partition_structs())
        )

    # Hive 3/4 send the reader's list and the table id in request structs that this Hive 2.3-shaped IDL does
    # not have for partitions (PartitionsRequest 5/6, GetPartitionsByNamesRequest 8/10, GetPartitionRequest
    # 5/6); until they are served over Thrift, in-process callers read partitions consistently with these.
    def get_partitions_with_write_ids(
        self, db_name: str, tbl_name: str, valid_write_id_list: str, table_id: int, max_parts: int = -1
    ) -> Sequence[Any]:
        write_ids = _write_ids(valid_write_id_list)
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions(
                    db_name, tbl_name, limit, write_ids, table_id, **_partition_structs()
                ),
                lambda: len(self.reads.partition_names(db_name, tbl_name, -1)),
            )
        )

    def get_partitions_by_names_with_write_ids(
        self, db_name: str, tbl_name: str, names: list[str], valid_write_id_list: str, table_id: int
    ) -> Sequence[Any]:
        write_ids = _write_ids(valid_write_id_list)
        return _partitions_out(
            self.reads.partitions_by_names(
                db_name, tbl_name, names, write_ids, table_id, **_partition_structs()
            )
        )

    def get_partition_with_write_ids(
        self, db_name: str, tbl_name: str, part_vals: list[str], valid_write_id_list: str, table_id: int
    ) -> Any:
        write_ids = _write_ids(valid_write_id_list)
        found = self.reads.partition(
            db_name, tbl_name, part_vals, write_ids, table_id, to=convert.partition_to_thrift, keep=Wire
        )
        return found.struct if isinstance(found, Wire) else found

    # Hive 3/4 request forms: the write-id list and table id let the cache answer (Hive's -1 = no id).
    def get_partitions_req(self, req: Any) -> Any:
        parts = self.get_partitions_with_write_ids(
            req.dbName, req.tblName, req.validWriteIdList, _table_id(req.id), req.maxParts
        )
        return hms.PartitionsResponse(partitions=list(parts))

    def get_partitions_by_names_req(self, req: Any) -> Any:
        parts = self.get_partitions_by_names_with_write_ids(
            req.db_name, req.tbl_name, list(req.names or []), req.validWriteIdList, _table_id(req.id)
        )
        return hms.GetPartitionsByNamesResult(partitions=list(parts))

    def get_partition_req(self, req: Any) -> Any:
        part = self.get_partition_with_write_ids(
            req.dbName, req.tblName, list(req.partVals or []), req.validWriteIdList, _table_id(req.id)
        )
        return hms.GetPartitionResponse(partition=part)

    def partition_name_to_spec(self, part_name: str) -> dict[str, str]:
        return dict(_parse_name(part_name))

    def partition_name_to_vals(self, part_name: str) -> list[str]:
        return partition_values(part_name)
