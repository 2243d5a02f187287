"""The CarbonData SQL verbs and the store DDL, read by regular expressions (sqlglot does not
read ``SHOW SEGMENTS``, ``CLEAN FILES``, ``STORED AS carbondata``, ``SEGMENT.ID IN``).

Each verb runs the code of the CLI command of the same meaning (docs/sql.md).
"""

from __future__ import annotations

import re

from carbonstore.errors import UserError

__all__ = ["CLEAN_OPTIONS", "VERBS", "clean_options", "match_verb", "segment_ids", "table_properties",
           "unquote_name"]

# a name part: backticked (any text, `` for a backtick) or a bare identifier (any letters)
_PART = r"(?:`(?:[^`]|``)+`|[^\W\d]\w*)"
_NAME = rf"(?P<name>{_PART}(?:\s*\.\s*{_PART})?)"
_STORED = (r"(?:STORED\s+(?:AS|BY)\s+'?(?:carbondata|carbonstore)'?"
           r"|USING\s+(?:carbondata|carbonstore)(?:\s+OPTIONS\s*\((?P<options>[^)]*)\))?)")
_VERBS: list[tuple[str, re.Pattern[str]]] = [
    ("show_segments", re.compile(rf"SHOW\s+SEGMENTS\s+(?:FOR|ON)\s+TABLE\s+{_NAME}"
                                 r"(?:\s+LIMIT\s+(?P<limit>\d+))?", re.I | re.S)),
    ("compact", re.compile(rf"ALTER\s+TABLE\s+{_NAME}\s+COMPACT\s+'(?P<kind>\w+)'"
                           r"(?:\s+WHERE\s+SEGMENT\.ID\s+IN\s*\((?P<ids>[^)]*)\))?", re.I | re.S)),
    # Delta's OPTIMIZE t [WHERE ...] ZORDER BY (a, b); HILBERT BY for the Hilbert curve
    ("optimize", re.compile(rf"OPTIMIZE\s+{_NAME}(?:\s+WHERE\s+(?P<where>.*?))?"
                            r"\s+(?P<curve>ZORDER|HILBERT)\s+BY\s*\((?P<by>[^)]*)\)", re.I | re.S)),
    ("clean", re.compile(rf"CLEAN\s+FILES\s+FOR\s+TABLE\s+{_NAME}"
                         r"(?:\s+OPTIONS\s*\((?P<options>.*)\))?", re.I | re.S)),
    ("delete_ids", re.compile(rf"DELETE\s+FROM\s+TABLE\s+{_NAME}\s+WHERE\s+SEGMENT\.ID\s+IN\s*"
                              r"\((?P<ids>[^)]*)\)", re.I | re.S)),
    ("delete_before", re.compile(rf"DELETE\s+FROM\s+TABLE\s+{_NAME}\s+WHERE\s+SEGMENT\."
                                 r"STARTTIME\s+BEFORE\s+'(?P<before>[^']*)'", re.I | re.S)),
    ("create", re.compile(rf"CREATE\s+TABLE\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?{_NAME}\s*"
                          rf"\((?P<schema>.*)\)\s*{_STORED}"
                          r"(?:\s+PARTITIONED\s+BY\s*\((?P<partition_by>.*?)\))?"
                          r"(?:\s+CLUSTERED\s+BY\s*\((?P<bucket_columns>[^)]*)\)\s*INTO\s+"
                          r"(?P<bucket_number>\d+)\s+BUCKETS)?"
                          r"(?:\s+TBLPROPERTIES\s*\((?P<props>.*)\))?", re.I | re.S)),
    ("show_partitions", re.compile(rf"SHOW\s+PARTITIONS\s+{_NAME}", re.I | re.S)),
    ("drop", re.compile(rf"DROP\s+TABLE\s+(?P<ie>IF\s+EXISTS\s+)?{_NAME}", re.I | re.S)),
]
_PAIR = re.compile(r"'((?:[^'\\]|\\.)*)'\s*=\s*'((?:[^'\\]|\\.)*)'")
#: every verb :func:`match_verb` reads, in the order it tries them
VERBS = tuple(name for name, _ in _VERBS)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.S)


def unquote_name(name: str) -> str:
    """``db.t``, `` `db`.`my t` `` -> the name without its quotes (```` reads as one)."""
    parts = re.findall(r"`((?:[^`]|``)+)`|([^.`\s]+)", name)
    return ".".join(q.replace("``", "`") if q else p for q, p in parts)


def match_verb(statement: str) -> tuple[str, dict[str, str | None]] | None:
    """(verb, its parts) when ``statement`` is one of the CarbonData SQL verbs, else None."""
    text = statement.strip().rstrip(";").strip()
    for verb, pattern in _VERBS:
        m = pattern.fullmatch(text)
        if m:
            parts = m.groupdict()
            parts["name"] = unquote_name(parts.get("name") or "")
            return verb, parts
    return None


CLEAN_OPTIONS = ("force", "dryrun", "dry_run", "stale_inprogress")


def clean_options(text: str | None) -> dict[str, bool]:
    """CLEAN FILES' OPTIONS('force'='true', ...): every pair quoted, known keys, true/false
    values; anything else is refused rather than ignored (a dropped 'dryrun' removes files)."""
    if text is None:
        return {}
    pairs = _PAIR.findall(text)
    rest = _PAIR.sub("", text).replace(",", "").strip()
    if rest or (text.strip() and not pairs):
        raise UserError(f"CLEAN FILES: cannot read OPTIONS({text.strip()}); write "
                        f"OPTIONS('key'='value', ...) with keys {', '.join(CLEAN_OPTIONS)}")
    out: dict[str, bool] = {}
    for key, value in pairs:
        k, v = key.strip().lower(), value.strip().lower()
        if k not in CLEAN_OPTIONS:
            raise UserError(f"CLEAN FILES: unknown option '{key}'; use {', '.join(CLEAN_OPTIONS)}")
        if v not in ("true", "false"):
            raise UserError(f"CLEAN FILES: option '{k}' takes 'true' or 'false', got '{value}'")
        out[k] = v == "true"
    return out


def table_properties(parts: dict[str, str | None]) -> dict[str, str]:
    """The properties of a CREATE TABLE verb: TBLPROPERTIES, then PARTITIONED BY and
    CLUSTERED BY (docs/partitioning.md). ``USING carbonstore OPTIONS (...)`` takes the same
    keys as TBLPROPERTIES except ``store`` / ``table`` / ``path``, which Spark's data source
    reads and the statement's own store and name decide here."""
    props = {_unescape(k).lower(): _unescape(v) for k, v in _PAIR.findall(parts.get("props") or "")}
    options = parts.get("options")
    if options:
        for k, v in _PAIR.findall(options):
            if k.lower() not in ("store", "table", "path"):
                props.setdefault(_unescape(k).lower(), _unescape(v))
    for key in ("partition_by", "bucket_columns", "bucket_number"):
        if parts.get(key):
            props[key] = str(parts[key]).replace("`", "")
    return props


def segment_ids(text: str | None) -> list[str]:
    ids = [x.strip().strip("'\"") for x in (text or "").split(",") if x.strip()]
    if not ids:
        raise UserError("SEGMENT.ID IN (...): Segment ids should not be empty")
    return ids
