"""The statement planner's old home: it lives in :mod:`carbonstore.sql.plan` (pure sqlglot)."""

from __future__ import annotations

from carbonstore.sql.plan import (
    IndexWhere,
    Occurrence,
    PlannedStatement,
    conjuncts,
    index_where,
    parse_statement,
    plan_statement,
    pushable_where,
    split_where,
)

__all__ = ["IndexWhere", "Occurrence", "PlannedStatement", "conjuncts", "index_where",
           "parse_statement", "plan_statement", "pushable_where", "split_where"]
