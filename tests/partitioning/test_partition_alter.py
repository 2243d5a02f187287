"""Partitioned tables and ALTER TABLE: the spec is a schema version, its columns stay put."""

from __future__ import annotations

import pytest

from carbonstore import Store
from carbonstore.errors import SchemaError
from carbonstore.store.alter import SUB_ACTIONS, alter_table


def _alter(table, action: str, *args: str):  # type: ignore[no-untyped-def]
    alter_table(table, SUB_ACTIONS[action][1](list(args)), operation=f"{action} {' '.join(args)}")
    return table.store.table(str(table.name))


@pytest.fixture
def table(store: Store):  # type: ignore[no-untyped-def]
    return store.create_table("db.p", "id int not null, region string, v double",
                              properties={"partition_by": "region", "bucket_number": "4",
                                          "bucket_columns": "id"})


@pytest.mark.parametrize("action,args", [
    ("drop-column", ["region"]), ("rename-column", ["region", "area"]),
    ("rename-column", ["id", "key"]), ("widen", ["id", "long"]), ("drop-column", ["id"]),
])
def test_partition_and_bucket_columns_are_not_altered(table, action, args) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError, match="partition or bucket column"):
        _alter(table, action, *args)


def test_spec_change_after_an_alter_is_a_schema_version(table) -> None:  # type: ignore[no-untyped-def]
    t = _alter(table, "add-column", "note string")
    before = t.status.read().version
    t = t.set_partition_spec("", buckets=0)
    assert "partition_by" not in t.schema.properties
    assert "bucket_number" not in t.schema.properties
    assert "note" in t.schema.column_names  # the ALTER before it is kept
    reopened = t.store.table("db.p")
    assert "partition_by" not in reopened.schema.properties
    old = reopened.as_of(before)
    assert old.schema.properties["partition_by"] == "region"  # time travel: the old spec
