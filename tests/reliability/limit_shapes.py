"""The shapes of the documented input limits (docs/reliability.md#limits), as hypothesis
strategies and a list of far-beyond cases, for the CLI fuzz (test_cli_fuzz.py,
test_limit_fuzz.py): each limit at, around and far beyond its number, in every syntax that
nests, chains or holds a literal."""

from __future__ import annotations

from hypothesis import strategies as st

from carbonstore.limits import MAX_COLUMNS, MAX_EXPRESSION_DEPTH, MAX_NUMBER_LITERAL, MAX_TYPE_DEPTH


def around(limit: int, far: int) -> st.SearchStrategy[int]:
    """Sizes at the limit, just past it, far past it (where unchecked code once failed)."""
    return st.one_of(st.sampled_from([limit - 1, limit, limit + 1, far]),
                     st.integers(limit, far), st.integers(1, far))


def nested(n: int, kind: str, leaf: str) -> str:
    opens = {"paren": ("(", ")"), "not": ("NOT ", ""), "minus": ("- ", ""),
             "neg": ("-(", ")"), "abs": ("abs(", ")"), "case": ("CASE WHEN true THEN ", " END"),
             "coalesce": ("coalesce(", ", 1)"), "cast": ("CAST(", " AS STRING)")}
    head, tail = opens[kind]
    return head * n + leaf + tail * n


NESTING_KINDS = ["paren", "not", "minus", "neg", "abs", "case", "coalesce", "cast"]
DEEP = st.builds(nested, around(MAX_EXPRESSION_DEPTH, 3000), st.sampled_from(NESTING_KINDS),
                 st.sampled_from(["order_id", "1", "price", "'x'", "order_id = 1"]))
CHAINS = st.builds(lambda n, op, leaf: f" {op} ".join([leaf] * n),
                   around(MAX_EXPRESSION_DEPTH, 3000),
                   st.sampled_from(["+", "-", "*", "||", "OR", "AND", ","]),
                   st.sampled_from(["order_id", "price", "1", "order_id = 1", "name"]))
DIGITS = st.builds(lambda n, d: d * n, around(MAX_NUMBER_LITERAL, 6_000),
                   st.sampled_from(["9", "1", "0"]))
LITERALS = st.one_of(
    DIGITS, DIGITS.map(lambda d: f"'{d}'"), DIGITS.map(lambda d: f"-{d}"),
    DIGITS.map(lambda d: f"'-{d}'"), DIGITS.map(lambda d: f"{d}.5"), DIGITS.map(lambda d: f"1e{d}"),
    DIGITS.map(lambda d: f"'{d}e-{d}'"),
    st.builds(lambda d, t: f"CAST('{d}' AS {t})", DIGITS,
              st.sampled_from(["BIGINT", "INT", "DOUBLE", "FLOAT", "DECIMAL(10,2)", "DECIMAL",
                               "DECIMAL(38,0)", "DATE", "TIMESTAMP", "STRING"])),
    st.sampled_from(["1e99999", "-1e99999", "CAST('1e99999' AS DECIMAL(10,0))", "0e9999999",
                     "9" * 4301, "'" + "9" * 4301 + "'", "CAST('nan' AS DECIMAL)",
                     "TIMESTAMP '99999-01-01'", "DATE '0000-00-00'"]),
)
CONTROL = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x1f), min_size=1,
                  max_size=4)
WHERE_SHAPES = st.one_of(
    DEEP, CHAINS,
    st.builds(lambda c, v: f"{c} = {v}", st.sampled_from(["order_id", "price", "name"]), LITERALS),
    st.builds(lambda v: f"order_id IN ({v}, 1)", LITERALS),
    st.builds(lambda a, c, b: f"{a}{c}{b}", st.sampled_from(["order_id = 1", "name = 'x", "n"]),
              CONTROL, st.sampled_from(["", " OR order_id = 2", "'"])),
)
SETS = st.builds(lambda c, e: f"{c} = {e}", st.sampled_from(["price", "order_id", "name"]),
                 st.one_of(DEEP, CHAINS, LITERALS))
SCHEMA_SHAPES = st.one_of(
    st.builds(lambda n, k: "x " + {"struct": "struct<a:", "array": "array<",
                                   "map": "map<int,"}[k] * n + "int" + ">" * n,
              around(MAX_TYPE_DEPTH, 1000), st.sampled_from(["struct", "array", "map"])),
    st.builds(lambda n: ", ".join(f"c{i} int" for i in range(n)),
              st.sampled_from([1, MAX_COLUMNS - 1, MAX_COLUMNS, MAX_COLUMNS + 1, 12_000])),
    st.builds(lambda n: "s struct<" + ", ".join(f"f{i}: int" for i in range(n)) + ">",
              st.sampled_from([MAX_COLUMNS, MAX_COLUMNS + 1])),
    st.builds(lambda n: f"`{'x' * n}` int", st.sampled_from([128, 129, 5000])),
    st.builds(lambda n: f"s struct<{'f' * n}: int>", st.sampled_from([128, 129, 5000])),
    st.builds(lambda c: f"a{c} int", CONTROL),
)
_SEGMENT = st.sampled_from(["x", "..", ".", "", "%2e%2e", "a b", "\u00e9", "x\x00", "x\x01"])
ODD_URIS = st.one_of(
    st.builds(
        lambda scheme, bucket, segs, endpoint, extra: (
            f"{scheme}://{bucket}/{'/'.join(segs)}" + (f"?endpoint={endpoint}" if endpoint else "")
            + extra),
        st.sampled_from(["s3", "S3", "file", "hdfs", "viewfs", "gopher", "http", "nosuch", ""]),
        st.sampled_from(["b", "", "b@h", "b:1", "u:p@b", "b\x00", "B_1", "b" * 300]),
        st.lists(_SEGMENT, max_size=4),
        st.sampled_from(["", "http://127.0.0.1:1", "file:///etc", "ftp://h", "http://h/p",
                         "http://u:p@h", "http://h:99999", "http://h:0", "http://[::1",
                         "javascript:x", "h:9000", "https://h?x=1", "http://h#f", "%00"]),
        st.sampled_from(["", "#f", "&region=x y", "&colour=1", "&endpoint=http://h", "\n"])),
    st.builds(lambda n: "/" + "a" * n, st.sampled_from([4_000, 4_095, 4_096, 5_000])),
    st.builds(lambda a, c: f"/tmp/{a}{c}x", st.sampled_from(["", "d/"]), CONTROL),
)


def far_cases() -> list[list[str]]:
    """Every syntax that nests, chains or holds a literal, far beyond its limit, in every
    command that reads it (the random draws above rarely go this far)."""
    cases: list[list[str]] = []
    for kind in NESTING_KINDS:
        cond, value = nested(3000, kind, "order_id = 1"), nested(3000, kind, "price")
        cases += [["prune", "t", "--where", cond], ["delete", "t", "--where", cond],
                  ["update", "t", "--set", f"price = {value}"],
                  ["sql", f"SELECT {value} FROM default.t"]]
    for op in ("+", "*", "||", "OR", "AND"):
        chain = f" {op} ".join(["price"] * 3000)
        cases += [["prune", "t", "--where", f"{chain} = 1"],
                  ["delete", "t", "--where", f"{chain} = 1"],
                  ["update", "t", "--set", f"price = {chain}"],
                  ["sql", f"SELECT {chain} FROM default.t"]]
    for literal in ("9" * 6000, f"'{'9' * 6000}'", f"'-{'1' * 6000}'", f"{'9' * 6000}.5",
                    f"CAST('{'9' * 6000}' AS DECIMAL(10,2))", f"CAST('{'9' * 6000}' AS BIGINT)",
                    "CAST('1e99999' AS DECIMAL)"):
        cases += [["prune", "t", "--where", f"order_id = {literal}"],
                  ["delete", "t", "--where", f"order_id IN ({literal}, 1)"],
                  ["update", "t", "--set", f"order_id = {literal}"]]
    for head in ("struct<a:", "array<", "map<int,"):
        deep = "x " + head * 1000 + "int" + ">" * 1000
        cases += [["create", "deep", "--schema", deep], ["alter", "t", "add-column", deep]]
    return cases
