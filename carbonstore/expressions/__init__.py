"""Expressions: nodes and builders (expr), binding to a schema (bind), the SQL WHERE parser
(parser), visitors (visitors).

The names below are the package's API; ``from carbonstore.expressions import col, bind``.
"""

from carbonstore.expressions.bind import bind, session_zone
from carbonstore.expressions.expr import (
    MAX_DEPTH,
    MAX_NESTING,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Comparison,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
    Term,
    and_,
    col,
    flatten,
    nodes,
    not_,
    or_,
    push_not,
    references,
)
from carbonstore.expressions.parser import and_terms, parse_where, sql_error_message

__all__ = [
    "MAX_DEPTH", "MAX_NESTING", "AlwaysFalse", "AlwaysTrue", "And", "BoundRef", "Comparison", "Eq",
    "Expr", "Gt", "GtEq", "In", "IsNaN", "IsNotNull", "IsNull", "Lt", "LtEq", "Not", "NotEq", "NotIn",
    "NotNaN", "NotStartsWith", "Or", "StartsWith", "Term", "and_", "and_terms", "bind", "col",
    "flatten", "nodes", "not_", "or_", "parse_where", "push_not", "references", "session_zone",
    "sql_error_message",
]
