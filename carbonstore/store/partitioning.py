"""Partition specs, transforms, partition folder names and the bucket hash.

A *partition spec* is a list of fields, each a transform of one source column::

    region, day(ts), bucket(16, id), truncate(3, name)

Transforms (named like Iceberg's): ``identity`` (the bare column), ``year``/``month``/
``day``/``hour`` of a date or timestamp column, ``bucket(N, c)`` (Spark's Murmur3 hash of the
value, pmod N) and ``truncate(W, c)`` (integers: ``v - (v mod W)``; strings: the first W
characters). A *bucket spec* (``bucket_number`` + ``bucket_columns``) puts every row in one of
N bucket files by the same hash over all bucket columns (Spark's ``bucketBy``).

A data file of a partitioned segment lives in ``<segment>/<name>=<value>/.../`` with one
folder per field in spec order; a bucketed file's name ends in ``_b<bucket, 5 digits>``.
The relative path in the segment index therefore records every file's partition values and
bucket id. Folder names are Hive-style escaped (see :func:`escape`), so any value, including
``/``, ``..``, control characters and any Unicode, round-trips; a null value is
``__HIVE_DEFAULT_PARTITION__``. Unlike Hive, the source columns stay in the data files:
folder names serve pruning and humans, every read path reads the files as they are.

The transform values, their folder text and the bounds they imply on the source column use
the comparable representation of bound expressions (expressions/expr.py): days since epoch
for dates, microseconds since epoch (UTC) for timestamps, UTF-8 bytes for strings.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from carbonstore.errors import CorruptMetadataError, SchemaError, UserError
from carbonstore.store.ordering import prefix_successor
from carbonstore.store.partition_names import NULL_PARTITION, escape, unescape
from carbonstore.store.records import Frozen

if TYPE_CHECKING:  # the spec is plain Python; numpy and pyarrow are loaded by the transforms
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "bucket_ids",
    "live_deleted_rows",
    "BUCKET_SUFFIX_RE",
    "NULL_PARTITION",
    "PARTITIONING_KEY",
    "REMOVED_KEY",
    "REMOVED_ROWS_KEY",
    "PartitionField",
    "PartitionKey",
    "PartitionSpec",
    "entry_spec",
    "escape",
    "parse_partition_path",
    "removed_partitions",
    "removed_rows",
    "unescape",
]

TIME_TRANSFORMS = ("year", "month", "day", "hour")
TRANSFORMS = ("identity", *TIME_TRANSFORMS, "bucket", "truncate")
BUCKET_SUFFIX_RE = re.compile(r"_b(\d{5})\.parquet$")
#: a folder name longer than this many bytes is refused (file systems allow 255)
MAX_COMPONENT_BYTES = 255

_US_PER_HOUR = 3_600_000_000
_US_PER_DAY = 86_400_000_000
_EPOCH = dt.date(1970, 1, 1)

# ---- specs ----------------------------------------------------------------------------------
class PartitionField(Frozen):
    """One field: ``transform(source)``; ``param`` is N of bucket or W of truncate. The
    values of this module are ``Frozen`` (store/records.py), not slotted dataclasses: a
    plan imports them."""

    __slots__ = ("source", "transform", "param", "source_id")
    __match_args__ = __slots__
    source: str
    transform: str
    param: int
    source_id: str

    def __init__(self, source: str, transform: str = "identity", param: int = 0,
                 source_id: str = "") -> None:
        _set = object.__setattr__
        _set(self, "source", source)
        _set(self, "transform", transform)
        _set(self, "param", param)
        _set(self, "source_id", source_id)

    @property
    def name(self) -> str:
        """The folder name of the field (Iceberg's naming)."""
        if self.transform == "identity":
            return self.source
        if self.transform == "truncate":
            return f"{self.source}_trunc"
        return f"{self.source}_{self.transform}"

    def __str__(self) -> str:
        if self.transform == "identity":
            return self.source
        if self.transform in ("bucket", "truncate"):
            return f"{self.transform}({self.param}, {self.source})"
        return f"{self.transform}({self.source})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "transform": self.transform}
        if self.param:
            out["param"] = self.param
        if self.source_id:
            out["sourceId"] = self.source_id
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PartitionField:
        transform = obj.get("transform", "identity")
        if transform not in TRANSFORMS or not isinstance(obj.get("source"), str):
            raise ValueError(f"invalid partition field {obj!r}")
        return cls(source=obj["source"], transform=transform, param=int(obj.get("param", 0)),
                   source_id=str(obj.get("sourceId", "")))


_FIELD_RE = re.compile(
    r"^\s*(?:(?P<fn>[A-Za-z]+)\s*\(\s*(?:(?P<n>-?\d+)\s*,\s*)?(?P<inner>[^()]+?)\s*\)"
    r"|(?P<bare>[^()]+?))\s*$"
)
_FN_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour",
               "date": "day", "identity": "identity", "trunc": "truncate"}


class PartitionSpec(Frozen):
    """Partition fields plus the table bucketing (``bucket_number`` files by ``bucket_columns``)."""

    __slots__ = ("fields", "bucket_number", "bucket_columns", "bucket_column_ids")
    __match_args__ = __slots__
    fields: tuple[PartitionField, ...]
    bucket_number: int
    bucket_columns: tuple[str, ...]
    bucket_column_ids: tuple[str, ...]

    def __init__(self, fields: tuple[PartitionField, ...] = (), bucket_number: int = 0,
                 bucket_columns: tuple[str, ...] = (),
                 bucket_column_ids: tuple[str, ...] = ()) -> None:
        _set = object.__setattr__
        _set(self, "fields", fields)
        _set(self, "bucket_number", bucket_number)
        _set(self, "bucket_columns", bucket_columns)
        _set(self, "bucket_column_ids", bucket_column_ids)

    @property
    def is_empty(self) -> bool:
        return not self.fields and not self.bucket_number

    @property
    def partition_text(self) -> str:
        return ", ".join(str(f) for f in self.fields)

    def to_json(self) -> dict[str, Any]:
        """The ``partitioning`` value of a tablestatus entry."""
        out: dict[str, Any] = {}
        if self.fields:
            out["fields"] = [f.to_json() for f in self.fields]
        if self.bucket_number:
            out["buckets"] = self.bucket_number
            out["bucketColumns"] = list(self.bucket_columns)
            if any(self.bucket_column_ids):
                out["bucketColumnIds"] = list(self.bucket_column_ids)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> PartitionSpec:
        """Decode an entry's ``partitioning``; raises ValueError on damage."""
        if obj is None:
            return cls()
        if not isinstance(obj, dict):
            raise ValueError(f"invalid partitioning {obj!r}")
        fields = tuple(PartitionField.from_json(f) for f in obj.get("fields", ()))
        buckets = int(obj.get("buckets", 0))
        cols = tuple(str(c) for c in obj.get("bucketColumns", ()))
        ids = tuple(str(c) for c in obj.get("bucketColumnIds", ()))
        if buckets < 0 or (buckets and not cols):
            raise ValueError(f"invalid bucketing {obj!r}")
        return cls(fields=fields, bucket_number=buckets, bucket_columns=cols, bucket_column_ids=ids)

    @classmethod
    def from_properties(cls, props: dict[str, str], schema: Any) -> PartitionSpec:
        """The spec a table's properties define (``partition_by``, ``bucket_number``,
        ``bucket_columns``), bound to ``schema`` (a TableSchema)."""
        fields = parse_fields(props.get("partition_by", ""), schema)
        number = props.get("bucket_number", "").strip()
        cols_text = props.get("bucket_columns", "").strip()
        if bool(number) != bool(cols_text):
            raise SchemaError("bucket_number and bucket_columns go together: set both or neither")
        buckets = 0
        cols: tuple[str, ...] = ()
        ids: tuple[str, ...] = ()
        if number:
            try:
                buckets = int(number)
            except ValueError:
                raise SchemaError(f"bucket_number must be an integer, got {number!r}") from None
            if not 1 <= buckets <= 100_000:
                raise SchemaError(f"bucket_number must be between 1 and 100000, got {buckets}")
            names = [c.strip().lower() for c in cols_text.split(",") if c.strip()]
            if len(set(names)) != len(names):
                raise SchemaError("bucket_columns names a column twice")
            for n in names:
                _check_hashable(schema.column(n), "bucket_columns")
            cols = tuple(schema.column(n).name for n in names)
            ids = tuple(schema.column(n).column_id for n in names)
        dict_cols = set(schema.dictionary_columns)
        for name in [*(f.source for f in fields), *cols]:
            if name in dict_cols:
                raise SchemaError(
                    f"column {name!r} is a dictionary column (its files hold surrogates): it "
                    "cannot be a partition or bucket column"
                )
        return cls(fields=fields, bucket_number=buckets, bucket_columns=cols, bucket_column_ids=ids)

    def key_count(self) -> int:
        return len(self.fields)


def _check_hashable(column: Any, what: str) -> None:
    t = column.type
    if t.is_floating or t.name not in (
        "boolean", "byte", "short", "int", "long", "decimal", "string", "binary", "date",
        "timestamp",
    ):
        raise SchemaError(f"{what} cannot use {t} column {column.name!r}; "
                          "use an integer, decimal, string, binary, date or timestamp column")


def parse_fields(text: str, schema: Any) -> tuple[PartitionField, ...]:
    """Parse ``"region, day(ts), bucket(16, id)"`` against a schema.

    Raises:
        SchemaError: unknown column or transform, a transform that does not fit the column
            type, or a field named twice.
    """
    fields: list[PartitionField] = []
    if not text.strip():
        return ()
    for raw in _split_commas(text):
        m = _FIELD_RE.match(raw)
        if m is None or not raw.strip():
            raise SchemaError(f"cannot read partition field {raw.strip()!r}; write a column, "
                              "year(c), month(c), day(c), hour(c), bucket(N, c) or truncate(W, c)")
        if m.group("bare") is not None:
            fn, param, name = "identity", 0, m.group("bare")
        else:
            fn = m.group("fn").lower()
            fn = _FN_ALIASES.get(fn, fn)
            param = int(m.group("n")) if m.group("n") is not None else 0
            name = m.group("inner")
        name = name.strip().strip("`").lower()
        if fn not in TRANSFORMS:
            raise SchemaError(f"unknown partition transform {fn!r}; use one of "
                              + ", ".join(TRANSFORMS))
        col = schema.column(name)
        t = col.type
        if fn in ("bucket", "truncate"):
            if m.group("n") is None or param < 1:
                raise SchemaError(f"{fn} needs a positive width: {fn}(N, {name})")
            if fn == "bucket":
                _check_hashable(col, "bucket()")
            elif not (t.is_integral or t.name == "string"):
                raise SchemaError(f"truncate() needs an integer or string column, {name!r} is {t}")
        elif m.group("n") is not None:
            raise SchemaError(f"{fn}() takes one column, got {raw.strip()!r}")
        elif fn in TIME_TRANSFORMS:
            if t.name not in ("date", "timestamp") or (fn == "hour" and t.name == "date"):
                raise SchemaError(f"{fn}() needs a {'timestamp' if fn == 'hour' else 'date or timestamp'}"
                                  f" column, {name!r} is {t}")
        elif t.is_floating or t.name == "binary":
            raise SchemaError(f"cannot partition by {t} column {name!r}; partition by a "
                              "transform such as bucket(N, c), or by another column")
        f = PartitionField(source=col.name, transform=fn, param=param, source_id=col.column_id)
        if any(g.name == f.name for g in fields):
            raise SchemaError(f"partition field {f.name!r} appears twice")
        fields.append(f)
    return tuple(fields)


def _split_commas(text: str) -> list[str]:
    """Split on commas outside parentheses and backticks."""
    parts: list[str] = []
    depth, quoted = 0, False
    cur: list[str] = []
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
        if ch == "," and depth == 0 and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def literal_array(value: Any, type_name: str, precision: int = 0, scale: int = 0) -> pa.Array:
    """A one-element Arrow array of a bound literal (expr.py's comparable representation)."""
    import pyarrow as pa  # noqa: F811 - see the imports
    if type_name == "string":
        return pa.array([value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value],
                        pa.string())
    if type_name == "binary":
        return pa.array([value], pa.binary())
    if type_name == "boolean":
        return pa.array([bool(value)], pa.bool_())
    if type_name == "date":
        return pa.array([int(value)], pa.int32()).view(pa.date32())
    if type_name == "timestamp":
        return pa.array([int(value)], pa.int64()).view(pa.timestamp("us", tz="UTC"))
    if type_name == "decimal":
        return pa.array([Decimal(int(value)).scaleb(-scale)], pa.decimal128(precision, scale))
    arrow = {"byte": pa.int8(), "short": pa.int16(), "int": pa.int32(), "long": pa.int64()}[type_name]
    return pa.array([int(value)], arrow)


# ---- transforms: values, folder text, bounds -----------------------------------------------
def bucket_ids(columns: Sequence[pa.Array], number: int) -> npt.NDArray[np.int64]:
    """The bucket of each row (murmur3.py, loaded here: it is numpy and pyarrow)."""
    from carbonstore.store import murmur3

    return murmur3.bucket_ids(columns, number)


def _as_int64(arr: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    import numpy as np  # noqa: F811 - see the imports
    import pyarrow as pa  # noqa: F811
    import pyarrow.compute as pc  # lazily: a metadata command that only opens a table never computes
    t = arr.type
    if pa.types.is_date32(t):
        ints = arr.view(pa.int32()).cast(pa.int64())
    elif pa.types.is_timestamp(t):
        if t.unit != "us":
            arr = arr.cast(pa.timestamp("us", tz=t.tz))
        ints = arr.view(pa.int64())
    else:
        ints = arr.cast(pa.int64())
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(pc.fill_null(ints, 0).to_numpy(zero_copy_only=False), dtype=np.int64), valid


def field_values(f: PartitionField, arr: pa.Array, type_name: str) -> list[Any]:
    """Transform values of one column for field ``f`` (None for null), in folder text form."""
    import numpy as np  # noqa: F811 - see the imports
    import pyarrow.compute as pc  # lazily: a metadata command that only opens a table never computes
    tr = f.transform
    if tr == "identity":
        return [None if v is None else _identity_text(v, type_name) for v in arr.to_pylist()]
    if tr == "bucket":
        ids = bucket_ids([arr], f.param)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return [str(b) if ok else None for b, ok in zip(ids.tolist(), valid.tolist(), strict=True)]
    if tr == "truncate":
        if type_name == "string":
            return pc.utf8_slice_codeunits(arr, 0, f.param).to_pylist()
        vals, valid = _as_int64(arr)
        w = np.int64(f.param)
        out = vals - np.mod(vals, w)
        return [str(v) if ok else None for v, ok in zip(out.tolist(), valid.tolist(), strict=True)]
    vals, valid = _as_int64(arr)
    if type_name == "timestamp":
        hours = np.floor_divide(vals, _US_PER_HOUR)
        days = np.floor_divide(vals, _US_PER_DAY)
    else:
        hours = vals * 24
        days = vals
    d64 = days.astype("datetime64[D]")
    if tr == "year":
        text = np.datetime_as_string(d64.astype("datetime64[Y]"), unit="Y")
    elif tr == "month":
        text = np.datetime_as_string(d64.astype("datetime64[M]"), unit="M")
    elif tr == "day":
        text = np.datetime_as_string(d64, unit="D")
    else:
        h64 = hours.astype("datetime64[h]")
        text = np.char.replace(np.datetime_as_string(h64, unit="h"), "T", "-")
    return [str(t) if ok else None for t, ok in zip(text.tolist(), valid.tolist(), strict=True)]


def _identity_text(v: Any, type_name: str) -> str:
    if type_name == "boolean":
        return "true" if v else "false"
    if type_name == "date":
        return v.isoformat()
    if type_name == "timestamp":
        return v.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
    if type_name == "decimal":
        return format(v, "f")
    return str(v)


class PartitionKey(Frozen):
    """The values of one file's partition folder under a spec (folder text, None = null)."""

    __slots__ = ("values", "bucket")
    __match_args__ = __slots__
    values: tuple[str | None, ...]
    bucket: int | None

    def __init__(self, values: tuple[str | None, ...], bucket: int | None = None) -> None:
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "bucket", bucket)


def partition_dir(fields: Sequence[PartitionField], values: Sequence[str | None]) -> str:
    """``name=value/...`` of one partition (escaped; raises UserError for a name too long)."""
    parts = []
    for f, v in zip(fields, values, strict=True):
        part = f"{escape(f.name)}={NULL_PARTITION if v is None else escape(v)}"
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            raise UserError(
                f"partition folder for {f} is longer than {MAX_COMPONENT_BYTES} bytes "
                f"({part[:60]}...); partition by truncate(W, {f.source}) or bucket(N, {f.source})"
            )
        parts.append(part)
    return "/".join(parts)


@functools.lru_cache(maxsize=1 << 16)  # every plan of a table parses the same paths again
def parse_partition_path(
    fields: Sequence[PartitionField], rel_path: str, *, buckets: int = 0
) -> PartitionKey | None:
    """The partition key of a data file's path relative to its segment; None when the path
    does not follow the spec (such a file is never pruned by partition)."""
    parts = rel_path.split("/")
    dirs, name = parts[:-1], parts[-1]
    if len(dirs) != len(fields):
        return None
    values: list[str | None] = []
    for f, d in zip(fields, dirs, strict=True):
        head, sep, value = d.partition("=")
        if not sep or unescape(head) != f.name:
            return None
        values.append(None if value == NULL_PARTITION else unescape(value))
    bucket = None
    if buckets:
        m = BUCKET_SUFFIX_RE.search(name)
        if m is None or int(m.group(1)) >= buckets:
            return None
        bucket = int(m.group(1))
    return PartitionKey(tuple(values), bucket)


def partition_of(rel_path: str) -> str:
    """The partition folder part of a relative data file path ('' when unpartitioned)."""
    head, _, _ = rel_path.rpartition("/")
    return head


@functools.lru_cache(maxsize=1 << 16)
def field_bounds(
    f: PartitionField, text: str, type_name: str, scale: int = 0
) -> tuple[Any, Any, bool] | None:
    """Inclusive bounds ``(lo, hi, hi_strict)`` on the source column (comparable
    representation) of the rows in partition ``text`` of field ``f``; None: no bounds."""
    try:
        tr = f.transform
        if tr == "bucket":
            return None
        if tr == "identity":
            v = _identity_value(text, type_name, scale)
            return v, v, False
        if tr == "truncate":
            if type_name == "string":
                prefix = text.encode("utf-8", "surrogatepass")
                if len(text) < f.param:  # shorter than W: the value itself
                    return prefix, prefix, False
                succ = prefix_successor(prefix)
                return (prefix, succ, True) if succ is not None else None
            lo = int(text)
            return lo, lo + f.param - 1, False
        lo_us, hi_us = _time_range(tr, text)
        if type_name == "timestamp":
            return lo_us, hi_us - 1, False
        return lo_us // _US_PER_DAY, -((-hi_us) // _US_PER_DAY) - 1, False
    except (ValueError, OverflowError, ArithmeticError):
        return None


def _time_range(tr: str, text: str) -> tuple[int, int]:
    """[start, end) in microseconds since epoch of a year/month/day/hour value."""
    import numpy as np  # noqa: F811 - see the imports
    lo: Any
    hi: Any
    if tr == "year":
        y = int(text)
        lo = np.datetime64(f"{y:04d}" if 0 <= y <= 9999 else str(y), "Y")
        hi = lo + np.timedelta64(1, "Y")
    elif tr == "month":
        lo = np.datetime64(text, "M")
        hi = lo + np.timedelta64(1, "M")
    elif tr == "day":
        lo = np.datetime64(text, "D")
        hi = lo + np.timedelta64(1, "D")
    else:
        date_part, _, hour = text.rpartition("-")
        lo = np.datetime64(f"{date_part}T{int(hour):02d}", "h")
        hi = lo + np.timedelta64(1, "h")
    return (int(lo.astype("datetime64[us]").astype(np.int64)),
            int(hi.astype("datetime64[us]").astype(np.int64)))


def _identity_value(text: str, type_name: str, scale: int) -> Any:
    if type_name == "string":
        return text.encode("utf-8", "surrogatepass")
    if type_name == "boolean":
        if text not in ("true", "false"):
            raise ValueError(text)
        return text == "true"
    if type_name == "date":
        return (dt.date.fromisoformat(text) - _EPOCH).days
    if type_name == "timestamp":
        t = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
        delta = t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if type_name == "decimal":
        return int(Decimal(text).scaleb(scale))
    return int(text)


# ---- tablestatus entry keys -----------------------------------------------------------------
PARTITIONING_KEY = "partitioning"
REMOVED_KEY = "removedPartitions"


def entry_spec(entry: Any) -> PartitionSpec:
    """The spec a segment was written with (empty for unpartitioned segments)."""
    raw = entry.extra.get(PARTITIONING_KEY)
    if raw is None:
        return PartitionSpec()
    try:
        return PartitionSpec.from_json(raw)
    except (ValueError, TypeError) as err:
        raise CorruptMetadataError(
            f"segment {entry.load_name}: its tablestatus entry has a damaged partitioning: {err}"
        ) from err


def removed_partitions(entry: Any) -> frozenset[str]:
    """Partition folders of the segment a later dynamic overwrite replaced."""
    raw = entry.extra.get(REMOVED_KEY)
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise CorruptMetadataError(
            f"segment {entry.load_name}: its tablestatus entry has a damaged {REMOVED_KEY}"
        )
    return frozenset(raw)



REMOVED_ROWS_KEY = "removedRows"


def live_deleted_rows(entry: Any) -> int:
    """Rows deleted (DELETE / UPDATE / MERGE) from the segment's files outside the partitions
    a dynamic overwrite replaced: those are counted once, as replaced rows."""
    gone = removed_partitions(entry)
    return sum(d.deleted_rows for d in entry.delete_deltas
               if not gone or partition_of(d.data_file) not in gone)


def removed_rows(entry: Any) -> int:
    """Rows of the segment's partitions that a dynamic overwrite replaced."""
    value = entry.extra.get(REMOVED_ROWS_KEY, 0)
    if type(value) is not int or value < 0:
        raise CorruptMetadataError(
            f"segment {entry.load_name}: its tablestatus entry has a damaged {REMOVED_ROWS_KEY}"
        )
    return value


def distinct_dirs(paths: Iterable[str]) -> list[str]:
    """The distinct partition folders of relative data file paths, sorted."""
    return sorted({partition_of(p) for p in paths})
