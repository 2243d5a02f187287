"""``run_statement`` parses a statement once: the index answer (``match_aggregates``) reads
the tree without changing it, and planning the tree gives what planning the text gives.
Pure sqlglot and the store: no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.spark.metadata_answers import match_aggregates
from carbonstore.spark.statements import parse_statement, plan_statement
from tests.spark.test_metadata_answers import ANSWERED, READ, SCHEMA

JOINS = [
    "SELECT t.id, u.s FROM db.t t, db.u u WHERE t.id = u.id AND t.id > 5 AND u.s = 'a'",
    "SELECT count(*) FROM db.t WHERE id IN (SELECT id FROM db.u WHERE x > 1)",
    "WITH c AS (SELECT id FROM db.t WHERE d >= DATE '2024-02-01') SELECT * FROM c JOIN db.u "
    "ON c.id = u.id LEFT JOIN db.t t2 ON t2.id = u.id WHERE t2.s IS NULL",
    "SELECT 'f' AS k, count(*) FROM db.t WHERE id = 5 UNION ALL SELECT 'a', count(*) FROM db.t",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(str(Path(tmp_path_factory.mktemp("trees")) / "store"))
    s.create_table("db.t", SCHEMA)
    s.create_table("db.u", SCHEMA)
    s.create_table("db.empty", SCHEMA)
    return s


@pytest.mark.parametrize("statement", ANSWERED + READ + JOINS)
def test_one_parse_serves_both(store: Store, statement: str) -> None:
    tree = parse_statement(statement)
    before = tree.sql(dialect="spark")
    assert match_aggregates(tree) == match_aggregates(statement)
    assert tree.sql(dialect="spark") == before  # read, not changed
    from_text = plan_statement(statement, store)
    from_tree = plan_statement(tree, store)
    assert from_tree.sql == from_text.sql
    assert [(o.view, str(o.table.name), o.where) for o in from_tree.occurrences] == \
        [(o.view, str(o.table.name), o.where) for o in from_text.occurrences]
