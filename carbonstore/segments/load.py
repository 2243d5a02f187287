"""Load planning: option parsing and validation, and the settings shipped to load tasks.

Everything here runs on the driver before any data is read, so user mistakes (an unknown
option, REDIRECT without a path, a bad SORT_SCOPE) are refused before a segment exists.
The Spark part of the load is :func:`carbonstore.spark.load_job.load`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from carbonstore.errors import BadRecordError, UserError
from carbonstore.segments.badrecords import BadRecordAction, parse_action
from carbonstore.segments.writer import ColumnSpec, WriteSettings
from carbonstore.store.partitioning import PartitionSpec

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = [
    "CSV_OPTIONS",
    "FORMATS",
    "LOAD_OPTIONS",
    "InputFormat",
    "LoadOptions",
    "SortScope",
    "parse_load_options",
    "write_settings",
]

InputFormat = Literal["csv", "parquet", "json", "orc"]
FORMATS: tuple[InputFormat, ...] = ("csv", "parquet", "json", "orc")
SortScope = Literal["no_sort", "local_sort", "global_sort"]
SORT_SCOPES: tuple[SortScope, ...] = ("no_sort", "local_sort", "global_sort")

# Load option (lower case) -> Spark CSV reader option. Spark's own names are accepted in
# any case (``nanValue``, ``sep``, ``quote``, ...), with Spark's defaults.
CSV_OPTIONS: dict[str, str] = {
    "header": "header",
    "delimiter": "sep",
    "quotechar": "quote",
    "escapechar": "escape",
    "nullvalue": "nullValue",
    "nanvalue": "nanValue",
    "positiveinf": "positiveInf",
    "negativeinf": "negativeInf",
    "emptyvalue": "emptyValue",
    "dateformat": "dateFormat",
    "timestampformat": "timestampFormat",
    "timestampntzformat": "timestampNTZFormat",
    "comment": "comment",
    "multiline": "multiLine",
    "encoding": "encoding",
    "linesep": "lineSep",
    "ignoreleadingwhitespace": "ignoreLeadingWhiteSpace",
    "ignoretrailingwhitespace": "ignoreTrailingWhiteSpace",
    "chartoescapequoteescaping": "charToEscapeQuoteEscaping",
    "unescapedquotehandling": "unescapedQuoteHandling",
    "maxcolumns": "maxColumns",
    "maxcharspercolumn": "maxCharsPerColumn",
    "locale": "locale",
}
# Spark CSV reader options that are flags (true / false).
_FLAGS = ("header", "multiLine", "ignoreLeadingWhiteSpace", "ignoreTrailingWhiteSpace")
LOAD_OPTIONS = frozenset(
    {*CSV_OPTIONS, "bad_records_action", "bad_record_path", "sort_scope", "sort_columns",
     "overwrite_partitions", "allow_empty"}
)
_ALIASES = {"bad_records_path": "bad_record_path", "sep": "delimiter", "quote": "quotechar",
            "escape": "escapechar", "charset": "encoding"}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOptions:
    """A load's validated options (keys were case-insensitive)."""

    action: BadRecordAction = "FAIL"
    bad_record_path: str | None = None
    sort_scope: SortScope = "no_sort"
    sort_columns: tuple[str, ...] = ()
    csv: dict[str, str] = field(default_factory=dict)
    #: dynamic partition overwrite: replace the partitions the input touches (partitioning.md)
    overwrite_partitions: bool = False
    #: commit an empty segment when the input holds no rows (else the load is refused)
    allow_empty: bool = False

    @property
    def header(self) -> bool:
        return self.csv.get("header", "true").lower() == "true"

    @property
    def delimiter(self) -> str:
        return self.csv.get("sep", ",")

    def to_options(self) -> dict[str, str]:
        """Back to load-option form (for passing through the data source)."""
        out = {k: v for k, v in self.csv.items()}
        rev = {v: k for k, v in CSV_OPTIONS.items()}
        out = {rev[k]: v for k, v in out.items()}
        out["bad_records_action"] = self.action
        out["sort_scope"] = self.sort_scope
        if self.sort_columns:
            out["sort_columns"] = ",".join(self.sort_columns)
        if self.bad_record_path:
            out["bad_record_path"] = self.bad_record_path
        if self.overwrite_partitions:
            out["overwrite_partitions"] = "true"
        if self.allow_empty:
            out["allow_empty"] = "true"
        return out


def parse_load_options(table: Table, options: Mapping[str, str] | None) -> LoadOptions:
    """Validate load options against the table and its conf.

    Raises:
        UserError: unknown option or bad value.
        BadRecordError: REDIRECT without a bad-record path.
    """
    opts: dict[str, str] = {}
    for key, value in (options or {}).items():
        k = key.strip().lower()
        k = _ALIASES.get(k, k)
        if k not in LOAD_OPTIONS:
            raise UserError(
                f"unknown load option {key!r}; known options: {', '.join(sorted(LOAD_OPTIONS))}"
            )
        opts[k] = str(value)
    conf = table.conf
    action = parse_action(opts.get("bad_records_action") or conf.get("carbon.bad.records.action"))
    path = opts.get("bad_record_path") or conf.get("carbon.badrecords.location") or None
    if action == "REDIRECT" and not path:
        raise BadRecordError(
            "BAD_RECORDS_ACTION=REDIRECT needs a folder for the bad rows: pass the option "
            "BAD_RECORD_PATH=<folder> or set carbon.badrecords.location"
        )
    scope = (opts.get("sort_scope") or table.schema.sort_scope).strip().lower()
    if scope not in SORT_SCOPES:
        raise UserError(f"SORT_SCOPE must be one of {', '.join(SORT_SCOPES)}, got {scope!r}")
    sort_cols = tuple(
        table.schema.column(c.strip()).name
        for c in (opts.get("sort_columns") or ",".join(table.schema.sort_columns)).split(",")
        if c.strip()
    )
    if scope != "no_sort" and not sort_cols:
        scope = "no_sort"  # nothing to sort on
    csv = {CSV_OPTIONS[k]: v for k, v in opts.items() if k in CSV_OPTIONS}
    for flag in _FLAGS:
        if flag in csv and csv[flag].strip().lower() not in ("true", "false"):
            raise UserError(f"option {flag.lower()} must be true or false, got {csv[flag]!r}")
        if flag in csv:
            csv[flag] = csv[flag].strip().lower()
    overwrite_partitions = opts.get("overwrite_partitions", "false").strip().lower()
    if overwrite_partitions not in ("true", "false"):
        raise UserError(f"option overwrite_partitions must be true or false, got {overwrite_partitions!r}")
    if overwrite_partitions == "true" and not table.schema.properties.get("partition_by"):
        raise UserError(f"table {table.name} is not partitioned: overwrite_partitions needs a "
                        "table created with --partition-by (or a full overwrite)")
    allow_empty = opts.get("allow_empty", "false").strip().lower()
    if allow_empty not in ("true", "false"):
        raise UserError(f"option allow_empty must be true or false, got {allow_empty!r}")
    return LoadOptions(
        allow_empty=allow_empty == "true",
        overwrite_partitions=overwrite_partitions == "true",
        action=action,
        bad_record_path=path,
        sort_scope=scope,  # type: ignore[arg-type]
        sort_columns=sort_cols,
        csv=csv,
    )


def write_settings(table: Table, segment_id: str, options: LoadOptions) -> WriteSettings:
    """Resolve the executor settings of one load from the table, its conf and options."""
    conf = table.conf
    bad_dir = None
    if options.action == "REDIRECT" and options.bad_record_path:
        bad_dir = "/".join(
            [options.bad_record_path.rstrip("/"), table.name.database, table.name.table, segment_id]
        )
    mb = 1 << 20
    return WriteSettings(
        store_location=table.store.location,
        segment_id=segment_id,
        segment_dir=table.paths.segment_dir(segment_id),
        columns=tuple(ColumnSpec.from_column(c) for c in table.schema.columns),
        page_rows=conf.get_int("carbon.page.rows"),
        blocklet_bytes=int(conf.get_float("carbon.blocklet.size.in.mb") * mb),
        block_bytes=int(conf.get_float("carbon.table.block.size.in.mb") * mb),
        bloom_columns=tuple(table.schema.column(c).name for c in table.schema.bloom_columns),
        bloom_fpp=conf.get_float("carbon.bloom.fpp"),
        sort_columns=options.sort_columns if options.sort_scope != "no_sort" else (),
        action=options.action,
        bad_record_dir=bad_dir,
        dictionary_columns=tuple(table.schema.dictionary_columns),
        table_name=str(table.name),
        statistics=conf.get_bool("carbon.statistics.enabled"),
        partitioning=table_partitioning(table),
        overwrite_partitions=options.overwrite_partitions,
    )


def table_partitioning(table: Table) -> PartitionSpec | None:
    """The partition and bucket spec new data of ``table`` is written with (None: none)."""
    spec = PartitionSpec.from_properties(table.schema.properties, table.schema)
    return None if spec.is_empty else spec
