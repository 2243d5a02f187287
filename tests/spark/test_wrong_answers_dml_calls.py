"""The argument counts DML expressions accept (segments/dml_calls.py ``SPARK_ARITY``,
``NOT_SPARK_FUNCTIONS``) are Spark's: every function sqlglot reads as a verified node, called with 0
to 4 arguments, is refused by us exactly when Spark refuses the call (WRONG_NUM_ARGS, or no
such function). sqlglot alone drops extra arguments (``substr(c, 1, 2, 3)``) and fills
missing ones (``if(c, a)``)."""

from __future__ import annotations

from typing import Any

import pytest

from carbonstore.errors import UserError
from carbonstore.segments.dml_calls import NOT_SPARK_FUNCTIONS, SPARK_ARITY
from carbonstore.segments.merge import to_duckdb

_ARITY_ERRORS = ("WRONG_NUM_ARGS", "accepts only one argument", "UNRESOLVED_ROUTINE",
                 "NUM_ARGS", "requires at least", "requires at most")


def _spark_takes(spark: Any, call: str) -> bool:
    try:
        spark.sql(f"SELECT {call} AS v FROM VALUES (true, 1, 'a') AS t(b, n, c)")
    except Exception as err:  # noqa: BLE001 - Spark's analysis refuses the call
        return not any(k in str(err) for k in _ARITY_ERRORS)
    return True


def _our_refusal(call: str) -> str | None:
    try:
        to_duckdb(call, "UPDATE SET v")
    except UserError as err:
        assert "\n" not in str(err)
        return str(err)
    return None


def _names(sample: bool) -> list[str]:
    """Every function name; ``sample``: one name of each argument count of SPARK_ARITY and
    every third name Spark does not have (the same names on each run)."""
    names = sorted(set(SPARK_ARITY) | NOT_SPARK_FUNCTIONS)
    if not sample:
        return names
    first: dict[tuple[int, int | None], str] = {}
    for name in sorted(SPARK_ARITY):
        first.setdefault(SPARK_ARITY[name], name)
    return sorted(set(first.values()) | {"substr", "if", "decimal"} | set(sorted(NOT_SPARK_FUNCTIONS)[::3]))


def _check_counts(spark: Any, names: list[str]) -> None:
    """Spark refuses the call: so do we (for any reason); Spark takes it: our count check
    does not refuse it (another check may: an unverified construct)."""
    args = ["b", "n", "c", "n"]
    wrong = []
    for name in names:
        for k in range(5):
            call = f"{name}({', '.join(args[:k])})"
            refusal = _our_refusal(call)
            if refusal is not None and not ("in Spark, not" in refusal or "not a Spark function" in refusal):
                continue  # refused for another reason: right whatever Spark does
            if not _spark_takes(spark, call):
                if refusal is None:
                    wrong.append((call, "Spark refuses it, we take it"))
            elif refusal is not None:
                wrong.append((call, "Spark takes it", refusal))
    assert not wrong


def test_argument_counts_are_sparks(spark: Any) -> None:
    _check_counts(spark, _names(sample=True))


@pytest.mark.long
def test_argument_counts_of_every_function_are_sparks(spark: Any) -> None:
    _check_counts(spark, _names(sample=False))
