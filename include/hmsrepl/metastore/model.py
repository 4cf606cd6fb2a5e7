"""Catalog objects, shaped like the Hive Metastore's Thrift structs so the Thrift layer maps them 1:1.

They are also the JSON snapshots carried in notification events and dump ``_metadata`` files, so a replay
sees each object exactly as it was when the event happened.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hmsrepl.metastore.constraints import TableConstraints


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class FieldSchema(_Model):
    name: str
    type: str
    comment: str | None = None

    @field_validator("name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


def _unset(value: object) -> bool:
    """Left out of stored documents: an object that never had the field keeps the document it always had."""
    return value is None


class SerDeInfo(_Model):
    name: str | None = None
    serialization_lib: str | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    # Hive 4's additions (SerDeInfo fields 4-7), kept as the client sent them.
    description: str | None = Field(default=None, exclude_if=_unset)
    serializer_class: str | None = Field(default=None, exclude_if=_unset)
    deserializer_class: str | None = Field(default=None, exclude_if=_unset)
    serde_type: int | None = Field(
        default=None, exclude_if=_unset, description="Hive's SerdeType: 1 HIVE, 2 SCHEMA_REGISTRY"
    )


class Order(_Model):
    col: str
    order: int = 1


class StorageDescriptor(_Model):
    cols: list[FieldSchema] = Field(default_factory=list)
    location: str | None = None
    input_format: str | None = None
    output_format: str | None = None
    compressed: bool = False
    num_buckets: int = -1
    serde_info: SerDeInfo | None = None
    bucket_cols: list[str] = Field(default_factory=list)
    sort_cols: list[Order] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    stored_as_sub_directories: bool = False


class PrincipalType(StrEnum):
    USER = "USER"
    ROLE = "ROLE"
    GROUP = "GROUP"


class Database(_Model):
    name: str
    description: str | None = None
    location_uri: str | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    owner_name: str | None = None
    owner_type: PrincipalType | None = PrincipalType.USER
    managed_location_uri: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Hive 4's managed location: where managed tables go by default (None: below location_uri).",
    )

    def table_root(self, managed: bool) -> str | None:
        """The directory a new table of this database goes below by default: Hive 4 puts managed tables in the
        database's managed location when it has one, everything else in its location."""
        return self.managed_location_uri if managed and self.managed_location_uri else self.location_uri

    @field_validator("name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class TableType(StrEnum):
    MANAGED_TABLE = "MANAGED_TABLE"
    EXTERNAL_TABLE = "EXTERNAL_TABLE"
    VIRTUAL_VIEW = "VIRTUAL_VIEW"
    MATERIALIZED_VIEW = "MATERIALIZED_VIEW"


class Table(_Model):
    db_name: str
    table_name: str
    owner: str | None = None
    create_time: int = 0
    last_access_time: int = 0
    retention: int = 0
    sd: StorageDescriptor = Field(default_factory=StorageDescriptor)
    partition_keys: list[FieldSchema] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    view_original_text: str | None = None
    view_expanded_text: str | None = None
    table_type: TableType = TableType.MANAGED_TABLE
    temporary: bool = False
    id: int | None = Field(default=None, description="Assigned by the metastore; changes on drop+recreate.")
    write_id: int = Field(default=0, description="Write id of the last transactional change, 0 if none.")
    constraints: TableConstraints | None = Field(
        default=None,
        exclude_if=_unset,
        description="None: never had any (see metastore.constraints); left out of documents.",
    )

    @field_validator("db_name", "table_name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @property
    def qualified_name(self) -> str:
        return f"{self.db_name}.{self.table_name}"

    @property
    def is_managed(self) -> bool:
        return (
            self.table_type == TableType.MANAGED_TABLE
            and self.parameters.get("EXTERNAL", "").upper() != "TRUE"
        )

    @property
    def is_transactional(self) -> bool:
        return self.parameters.get("transactional", "").strip().lower() == "true"

    @property
    def is_insert_only(self) -> bool:
        properties = self.parameters.get("transactional_properties", "").strip().lower()
        return self.is_transactional and properties == "insert_only"

    @property
    def partition_key_names(self) -> list[str]:
        return [key.name for key in self.partition_keys]


class Partition(_Model):
    values: list[str]
    db_name: str
    table_name: str
    create_time: int = 0
    last_access_time: int = 0
    sd: StorageDescriptor = Field(default_factory=StorageDescriptor)
    parameters: dict[str, str] = Field(default_factory=dict)
    write_id: int = 0

    @field_validator("db_name", "table_name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class ResourceUri(_Model):
    resource_type: str = "JAR"
    uri: str


class Function(_Model):
    function_name: str
    db_name: str
    class_name: str
    owner_name: str | None = None
    owner_type: PrincipalType | None = PrincipalType.USER
    create_time: int = 0
    function_type: int = 1
    resource_uris: list[ResourceUri] = Field(default_factory=list)

    @field_validator("function_name", "db_name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()
