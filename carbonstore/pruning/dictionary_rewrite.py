"""The dictionary rewrite: a bound filter made to prune on dictionary-encoded columns.

The data files of a dictionary column hold INT32 surrogates, not values (docs/dictionary.md);
:func:`dictionary_safe` turns ``=`` / ``IN`` leaves on such columns into leaves on their
surrogates and widens every other leaf on them to AlwaysTrue.
"""

from __future__ import annotations

from typing import Any

from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Eq,
    Expr,
    GtEq,
    In,
    LtEq,
    Or,
    nodes,
)
from carbonstore.store.schema import Column, parse_type
from carbonstore.store.table import Table

__all__ = ["IN_SURROGATES", "dictionary_safe"]


_DICT_COLUMNS: dict[int, tuple[Any, frozenset[str]]] = {}


def _dictionary_columns(schema: Any) -> frozenset[str]:
    """The schema's dictionary columns, remembered per schema object (immutable; its
    property parses the table properties on every call, once per plan)."""
    hit = _DICT_COLUMNS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    got = frozenset(schema.dictionary_columns)
    if len(_DICT_COLUMNS) >= 256:  # a few schemas are live at a time: start over
        _DICT_COLUMNS.clear()
    _DICT_COLUMNS[id(schema)] = (schema, got)  # holding the schema keeps its id unique
    return got


def dictionary_safe(expr: Expr, table: Table, *, bounds: Any = None) -> Expr:
    """Make a bound filter prune correctly on tables with dictionary columns.

    Their data files hold INT32 surrogates, not values. An ``=`` or ``IN`` leaf on such a
    column becomes the same leaf on the surrogates of its values
    (carbonstore.dictionary.filters), which then prunes by min/max, pages and bloom like any
    int column; a value the dictionary does not hold matches no row (AlwaysFalse). Every
    other leaf on a dictionary column becomes AlwaysTrue (a bound expression has no NOT, so
    widening a leaf only keeps more). Call it after reading the tablestatus the plan uses:
    a load adds its values to the dictionary before its segment commits, so the dictionary
    read then holds every value of every segment planned. ``bounds`` (the planned segments'
    SegmentBounds) lets each dictionary used be checked to hold every surrogate the
    segments hold (DictionaryError otherwise: a missing dictionary is not an empty one).
    """
    dict_cols = _dictionary_columns(table.schema)
    if not dict_cols or not any(isinstance(t := getattr(e, "term", None), BoundRef) and t.name in dict_cols
                                for e in nodes(expr)):
        return expr  # (the dictionary modules are not even imported)
    from carbonstore.dictionary import filters as dict_filters
    from carbonstore.dictionary.column import check_covers, load_dictionary, max_surrogate

    def dictionary(ref: BoundRef) -> Any:
        d = load_dictionary(table, ref.name)
        check_covers(d, max_surrogate(bounds, ref.column.column_id), what="the planned segments")
        return d

    def surrogates(ref: BoundRef) -> BoundRef:
        c = ref.column
        return BoundRef(Column(name=c.name, type=parse_type("int"), nullable=c.nullable,
                               column_id=c.column_id))

    def leaf(e: Expr, ref: BoundRef) -> Expr:
        if isinstance(e, Eq):
            s = dict_filters.eq(dictionary(ref), e.literal)
            return AlwaysFalse() if s is None else Eq(surrogates(ref), int(s))
        if isinstance(e, In):
            found = dict_filters.in_(dictionary(ref), e.literals)
            if not len(found):
                return AlwaysFalse()
            if len(found) > IN_SURROGATES:  # as an interval: min/max prunes, bloom does not
                return And(GtEq(surrogates(ref), int(found[0])),
                           LtEq(surrogates(ref), int(found[-1])))
            return In(surrogates(ref), tuple(int(x) for x in found))
        return AlwaysTrue()

    def walk(e: Expr) -> Expr:
        if isinstance(e, (And, Or)):
            return type(e)(walk(e.left), walk(e.right))
        term = getattr(e, "term", None)
        if isinstance(term, BoundRef) and term.name in dict_cols:
            return leaf(e, term)
        return e

    return walk(expr)


IN_SURROGATES = 64  # an IN on a dictionary column lists at most this many surrogates
