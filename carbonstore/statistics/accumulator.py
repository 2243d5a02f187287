"""Computing column statistics over Arrow batches: :class:`StatsAccumulator`.

A writer task keeps one accumulator, feeds it every batch it writes and sends
``to_bytes()`` to the driver in its commit message; the driver ``merge``s the tasks'
accumulators and ``finish``es them into :class:`SegmentStatistics`. Exact numbers (nulls,
NaNs, trues/falses, low/high, lengths) come from pyarrow.compute kernels; distinct counts
from DataSketches HLL.

The HLL sketch takes one value per Python call, so few values may reach it: keys are
hashed exactly as DataSketches hashes them, by compiled kernels
(:mod:`carbonstore.statistics.hll_native`) or, without numba, by numpy, and once the sketch is
in HLL mode only the keys that raise one of its registers are handed over (see
``_Column._update_sketch``). A probe of each batch decides whether reducing it with
``pyarrow.compute.unique`` first pays for itself. Values are handed
over as Python ints (integral, date, timestamp and decimal columns: their 64-bit integer
value, decimals folded to 64 bits), floats (float/double) or str (string), so the same
value always gives the same hash in every task and segment.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from datasketches import hll_sketch, hll_union, tgt_hll_type

from carbonstore.errors import CorruptMetadataError, UserError
from carbonstore.statistics.hll import (
    EMPTY_STRING_KEY,
    WARMUP_KEYS,
    hll_update,
    native_kernels,
    raise_registers,
)
from carbonstore.statistics.model import (
    CLASS_OF_KIND,
    DEFAULT_LG_K,
    SKETCH_TYPE,
    ColumnStatistics,
    Kind,
    SegmentStatistics,
    StatisticsScope,
    decode_value,
    dv_count,
    encode_value,
    kind_of,
)
from carbonstore.store.tablestatus import now_ms

__all__ = ["StatsAccumulator", "spark_type_of_arrow"]

log = logging.getLogger(__name__)

# A sketch warms up as HLL_8, whose updatable image is a 40-byte preamble and one byte per
# register, so its state can be taken over in HLL mode and given back (``current_sketch``).
_WORK_TYPE = tgt_hll_type.HLL_8
_HLL8_PREAMBLE = 40


def _hll8_header(lg_k: int) -> bytes:
    """preInts 10, serVer 1, family 7 (HLL), lgK, lgArr 0, flags 0, curMin 0, mode HLL/HLL_8."""
    return bytes([10, 1, 7, lg_k, 0, 0, 0, 2 | (2 << 2)])


_WARMUP_PREFIX = 65536  # keys of a long batch that warm a new sketch up to HLL mode
_PROBE_KEYS = 8192  # keys of a batch sampled to decide whether to deduplicate it
_DENSE_SHARE = 0.9  # distinct share of a probe above which ``unique`` never pays
_SPARSE_SHARE = 0.25  # ... below which it pays in HLL mode too (a small hash table)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def spark_type_of_arrow(t: pa.DataType) -> str:
    """The table type name that stores as ``t`` (inverse of the writer's mapping)."""
    simple = {
        pa.bool_(): "boolean",
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "int",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.date32(): "date",
        pa.string(): "string",
        pa.large_string(): "string",
        pa.string_view(): "string",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
        pa.binary_view(): "binary",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    raise UserError(f"no column statistics for Arrow type {t}")


def _columns_of(schema: Any) -> list[tuple[str, str]]:
    """(lower-case name, Spark type string) of a pa.Schema, TableSchema or column list."""
    if isinstance(schema, pa.Schema):
        return [(f.name.lower(), spark_type_of_arrow(f.type)) for f in schema]
    cols = getattr(schema, "columns", schema)
    out = []
    for c in cols:
        if isinstance(c, tuple):  # (name, type string)
            out.append((str(c[0]).lower(), str(c[1])))
            continue
        t = c.data_type if hasattr(c, "data_type") else c.type
        out.append((c.name.lower(), str(t)))
    return out


@dataclass(slots=True)
class _Column:
    """Running statistics of one column (mutable, private)."""

    name: str
    type: str
    kind: Kind
    lg_k: int
    rows: int = 0
    nulls: int = 0
    trues: int = 0
    falses: int = 0
    nans: int = 0
    low: Any = None
    high: Any = None
    max_len: int | None = 0
    sum_len: int | None = 0
    # Values whose bounds Python cannot hold (a timestamp or date outside years 1-9999):
    # no low/high for the whole segment, whatever other tasks saw (never a narrower range).
    unbounded: bool = False
    # The distinct-count sketch: an HLL_8 sketch warming up (list/set modes), or once merged
    # or read back (``plain``) any sketch, fed value by value.
    sketch: hll_sketch | None = None
    plain: bool = False
    hll_mode: bool = False
    # In HLL mode: the registers. With the compiled kernels they and ``hip`` ([hipAccum,
    # kxq0, kxq1]) are the sketch (``sketch`` is left behind); with numpy they mirror it.
    registers: np.ndarray | None = None
    hip: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("boolean", "binary"):
            self.sketch = hll_sketch(self.lg_k, _WORK_TYPE)

    # ---- update ---------------------------------------------------------------------------
    def update(self, arr: pa.Array) -> None:
        n = len(arr)
        if n == 0:
            return
        self.rows += n
        if self.kind == "string" and pa.types.is_integer(arr.type):
            self._update_surrogates(arr)
            return
        self.nulls += arr.null_count
        if arr.null_count == n:
            return
        kind = self.kind
        if kind == "boolean":
            trues = pc.sum(arr).as_py() or 0
            self.trues += trues
            self.falses += n - arr.null_count - trues
            return
        if kind in ("string", "binary"):
            self._update_lengths(arr)
            if kind == "string":
                if pa.types.is_string_view(arr.type) or pa.types.is_large_string(arr.type):
                    arr = arr.cast(pa.string())
                self._update_sketch(arr)
            return
        if kind == "double":
            nan = pc.is_nan(arr)
            self.nans += pc.sum(nan).as_py() or 0
        mm = pc.min_max(arr)
        try:
            low, high = mm["min"].as_py(), mm["max"].as_py()
            if kind == "timestamp":
                low, high = _utc(low), _utc(high)
        except (ValueError, OverflowError):  # beyond datetime's years 1-9999
            self.unbounded = True
            low = high = None
        if kind == "double" and low is not None and low != low:  # only NaN here
            low = high = None
        self._bounds(low, high)
        self._update_sketch(_sketch_keys(arr, kind))

    def _bounds(self, low: Any, high: Any) -> None:
        if self.unbounded:
            self.low = self.high = None
            return
        if low is not None and (self.low is None or low < self.low):
            self.low = low
        if high is not None and (self.high is None or high > self.high):
            self.high = high

    def _update_lengths(self, arr: pa.Array) -> None:
        if self.max_len is None or self.sum_len is None:
            return
        if self.kind == "string":
            if pa.types.is_string_view(arr.type):
                arr = arr.cast(pa.string())
            # Characters, as Spark counts them; for ASCII text that is the byte length,
            # which needs no decoding (one SIMD max over the data tells).
            lengths = pc.binary_length(arr) if _is_ascii(arr) else pc.utf8_length(arr)
        else:
            lengths = pc.binary_length(arr if not pa.types.is_binary_view(arr.type)
                                       else arr.cast(pa.binary()))
        mx = pc.max(lengths).as_py()
        if mx is not None:
            self.max_len = max(self.max_len, int(mx))
            self.sum_len += int(pc.sum(lengths).as_py() or 0)

    def _update_surrogates(self, arr: pa.Array) -> None:
        """A global-dictionary string column written as surrogates (1 = null)."""
        is_null = pc.or_kleene(pc.is_null(arr), pc.equal(arr, 1))
        self.nulls += pc.sum(pc.fill_null(is_null, True)).as_py() or 0
        self.max_len = self.sum_len = None
        self._update_sketch(pc.filter(arr, pc.invert(pc.fill_null(is_null, True))).cast(pa.int64()))

    def _update_sketch(self, keys: pa.Array) -> None:
        """Add the batch's keys to the sketch with as few Python calls as give the same sketch.

        While the sketch is in its list/set modes every distinct key counts, so keys are
        first reduced to the distinct ones (``pyarrow.compute.unique``) unless a probe finds
        them nearly all distinct, and handed over one by one. Once it is in HLL mode
        (``_enter_hll_mode``) its state is its registers, HIP estimator and KxQ sums: the
        compiled kernels then update those for every key, as DataSketches would, and no key
        is handed over. Without them, a key whose rank does not exceed its slot's register
        changes nothing (not even the HIP estimator), so only keys that raise a register
        are handed over. A long first batch warms the sketch up on a prefix.
        """
        if self.sketch is None:
            return
        if keys.null_count:
            keys = keys.drop_null()
        if len(keys) == 0:
            return
        if self.plain:
            self._feed(self._distinct(keys))
            return
        if not self.hll_mode and len(keys) > _WARMUP_PREFIX:
            self._add_keys(keys.slice(0, _WARMUP_PREFIX))
            keys = keys.slice(_WARMUP_PREFIX)
        self._add_keys(keys)

    def _distinct(self, keys: pa.Array) -> pa.Array:
        """``keys`` reduced to its distinct values when that pays for itself.

        A probe of the first keys estimates the distinct share. Before HLL mode every
        distinct key reaches the sketch, so ``unique`` pays unless nearly all are
        distinct; in HLL mode hashing every key is cheaper than ``unique`` unless few are.
        """
        if self.hip is not None:
            return keys  # the compiled register pass costs less than any table of values
        probe = keys.slice(0, _PROBE_KEYS)
        share = pc.count_distinct(probe).as_py() / len(probe)
        limit = _SPARSE_SHARE if self.hll_mode else _DENSE_SHARE
        return pc.unique(keys) if share <= limit else keys

    def _add_keys(self, keys: pa.Array) -> None:
        keys = self._distinct(keys)
        n, start = len(keys), 0
        while not self.hll_mode and start < n:
            chunk = keys.slice(start, WARMUP_KEYS)
            self._feed(chunk)
            start += len(chunk)
            if "Current Mode   : HLL" in self.sketch.to_string():  # type: ignore[union-attr]
                self._enter_hll_mode()
        if start >= n:
            return
        rest = keys.slice(start)
        if self.plain:
            self._feed(rest)
        elif self.hip is not None:
            hll_update(rest, self.registers, self.hip)  # type: ignore[arg-type]
        else:
            self._feed(rest.filter(pa.array(raise_registers(rest, self.registers))))  # type: ignore[arg-type]

    def _enter_hll_mode(self) -> None:
        """Take the registers (and, for the compiled kernels, the estimator state) from the
        sketch just promoted to HLL mode."""
        self.hll_mode = True
        image = bytes(self.sketch.serialize_updatable())  # type: ignore[union-attr]
        k = 1 << self.lg_k
        if image[:8] != _hll8_header(self.lg_k) or len(image) != _HLL8_PREAMBLE + k:
            # Another DataSketches layout: keep feeding the sketch itself (slower, same result).
            log.warning("unexpected HLL_8 sketch layout %s; statistics take the slow path",
                        image[:8].hex())
            self.plain = True
            return
        self.registers = np.frombuffer(image, np.uint8, count=k, offset=_HLL8_PREAMBLE).copy()
        if native_kernels() is not None:
            self.hip = np.array(struct.unpack_from("<3d", image, 8))

    def current_sketch(self) -> hll_sketch | None:
        """The sketch of every key so far, as stored (``SKETCH_TYPE``)."""
        if self.sketch is None:
            return None
        sketch = self.sketch
        if self.hip is not None and self.registers is not None:
            zeros = int(np.count_nonzero(self.registers == 0))  # HLL_8's numAtCurMin
            sketch = hll_sketch.deserialize(
                _hll8_header(self.lg_k) + struct.pack("<3d2i", *self.hip.tolist(), zeros, 0)
                + self.registers.tobytes())
        union = hll_union(self.lg_k)  # one sketch into an empty union keeps its estimator
        union.update(sketch)
        return union.get_result(SKETCH_TYPE)

    def _feed(self, keys: pa.Array) -> None:
        if self.sketch is None or len(keys) == 0:
            return
        update = self.sketch.update
        if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
            values = keys.to_pylist()
            if "" in values:
                values = [v if v else EMPTY_STRING_KEY for v in values]
        else:
            values = keys.to_numpy(zero_copy_only=False).tolist()
        for _ in map(update, values):
            pass

    # ---- merge / state ----------------------------------------------------------------------
    def merge(self, other: _Column) -> None:
        if (other.kind, other.name) != (self.kind, self.name):
            raise UserError(f"cannot merge statistics of {other.name} ({other.kind}) into "
                            f"{self.name} ({self.kind})")
        self.rows += other.rows
        self.nulls += other.nulls
        self.trues += other.trues
        self.falses += other.falses
        self.nans += other.nans
        self.unbounded |= other.unbounded
        self._bounds(other.low, other.high)
        if self.max_len is None or other.max_len is None or self.sum_len is None \
                or other.sum_len is None:
            self.max_len = self.sum_len = None
        else:
            self.max_len = max(self.max_len, other.max_len)
            self.sum_len += other.sum_len
        mine, theirs = self.current_sketch(), other.current_sketch()
        if mine is not None and theirs is not None:
            union = hll_union(self.lg_k)
            union.update(mine)
            union.update(theirs)
            self.sketch = union.get_result(SKETCH_TYPE)
        self._plain()

    def _plain(self) -> None:
        """Later updates feed ``sketch`` value by value (after a merge or a read)."""
        self.plain, self.hll_mode, self.registers, self.hip = True, False, None, None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "type": self.type, "kind": self.kind, "rows": self.rows,
            "nulls": self.nulls, "trues": self.trues, "falses": self.falses, "nans": self.nans,
            "low": encode_value(self.kind, self.low, "low_value"),
            "high": encode_value(self.kind, self.high, "high_value"),
            "maxLen": self.max_len, "sumLen": self.sum_len, "unbounded": self.unbounded,
            "sketch": None if (sketch := self.current_sketch()) is None
            else base64.b64encode(sketch.serialize_compact()).decode(),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], lg_k: int) -> _Column:
        col = cls(name=obj["name"], type=obj["type"], kind=obj["kind"], lg_k=lg_k)
        col.rows, col.nulls = obj["rows"], obj["nulls"]
        col.trues, col.falses, col.nans = obj["trues"], obj["falses"], obj["nans"]
        col.low = decode_value(col.kind, obj["low"], "low_value")
        col.high = decode_value(col.kind, obj["high"], "high_value")
        col.max_len, col.sum_len = obj["maxLen"], obj["sumLen"]
        col.unbounded = bool(obj.get("unbounded", False))
        if obj["sketch"] is not None:
            col.sketch = hll_sketch.deserialize(base64.b64decode(obj["sketch"]))
        col._plain()
        return col

    def finish(self, scope: StatisticsScope, last_analyzed: int) -> ColumnStatistics:
        non_null = self.rows - self.nulls
        values: dict[str, Any] = {
            "column": self.name, "type": self.type, "scope": scope,
            "last_analyzed": last_analyzed, "num_nulls": self.nulls,
        }
        kind = self.kind
        if kind == "boolean":
            values.update(num_trues=self.trues, num_falses=self.falses)
        elif kind in ("string", "binary"):
            known = self.max_len is not None and self.sum_len is not None
            values["max_col_len"] = self.max_len if known else None
            values["avg_col_len"] = (
                None if not known else (self.sum_len or 0) / non_null if non_null else 0.0
            )
        else:
            values.update(low_value=self.low, high_value=self.high)
        if kind == "double":
            values["num_nans"] = self.nans
        if (sketch := self.current_sketch()) is not None:
            values["num_dvs"] = dv_count(sketch.get_estimate(), non_null)
        return CLASS_OF_KIND[kind](**values)


def _is_ascii(arr: pa.Array) -> bool:
    """Whether the value bytes of a string/large_string array are all below 0x80."""
    data = arr.buffers()[2]
    if data is None or len(arr) == 0:
        return True
    off_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offs = np.frombuffer(arr.buffers()[1], dtype=off_type)
    first, last = int(offs[arr.offset]), int(offs[arr.offset + len(arr)])
    if last <= first:
        return True
    return bool(np.frombuffer(data, dtype=np.uint8)[first:last].max() < 0x80)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _sketch_keys(arr: pa.Array, kind: str) -> pa.Array:
    """The values the HLL sketch hashes: int64 for integral/date/timestamp/decimal, float64."""
    if kind == "double":
        return arr.cast(pa.float64()) if arr.type != pa.float64() else arr
    if kind == "date":
        return arr.cast(pa.int32()).cast(pa.int64())
    if kind == "timestamp":
        if arr.type.unit != "us":
            arr = arr.cast(pa.timestamp("us", tz=arr.type.tz))
        return arr.cast(pa.int64())
    if kind == "decimal":
        return _decimal_keys(arr)
    return arr.cast(pa.int64()) if arr.type != pa.int64() else arr


def _decimal_keys(arr: pa.Array) -> pa.Array:
    """Fold each 128-bit unscaled value into 64 bits (lo XOR hi * golden ratio)."""
    arr = arr.drop_null()
    if not pa.types.is_decimal128(arr.type):
        arr = arr.cast(pa.decimal128(38, arr.type.scale))
    words = np.frombuffer(arr.buffers()[1], dtype=np.uint64)
    words = words[2 * arr.offset: 2 * (arr.offset + len(arr))].reshape(-1, 2)
    with np.errstate(over="ignore"):
        folded = words[:, 0] ^ (words[:, 1] * _MIX)
    return pa.array(folded.view(np.int64))


class StatsAccumulator:
    """Mergeable running statistics of a set of columns over Arrow batches.

    Args:
        schema: the table's columns: a ``pyarrow.Schema`` (types as the writer stores them),
            a ``TableSchema``, or a list of ``Column``/``ColumnSpec``/``(name, type)``.
        columns: restrict to these columns (default: all).
        lg_k: HLL lg(k) for distinct counts.
    """

    def __init__(
        self, schema: Any, *, columns: Sequence[str] | None = None, lg_k: int = DEFAULT_LG_K
    ) -> None:
        # nested columns (array/map/struct) have no Hive column statistics
        all_cols = [(n, t) for n, t in _columns_of(schema) if "<" not in str(t)]
        if columns is not None:
            want = [c.lower() for c in columns]
            known = {n for n, _ in all_cols}
            unknown = [c for c in want if c not in known]
            if unknown:
                raise UserError(f"unknown column(s) for statistics: {', '.join(unknown)}")
            all_cols = [(n, t) for n, t in all_cols if n in want]
        self.lg_k = lg_k
        self.rows = 0
        self._cols = {n: _Column(name=n, type=t, kind=kind_of(t), lg_k=lg_k) for n, t in all_cols}

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add one batch (columns matched by name, case-insensitive; missing ones are null)."""
        n = batch.num_rows
        if n == 0:
            return
        self.rows += n
        by_lower = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        for name, col in self._cols.items():
            i = by_lower.get(name)
            if i is None:
                col.rows += n
                col.nulls += n
                continue
            data = batch.column(i)
            chunks = data.chunks if isinstance(data, pa.ChunkedArray) else [data]
            for chunk in chunks:
                col.update(chunk)

    def merge(self, other: StatsAccumulator) -> StatsAccumulator:
        """Add ``other``'s rows (another task's part of the same segment); returns self."""
        if set(other._cols) != set(self._cols):
            raise UserError("cannot merge statistics of different column sets")
        self.rows += other.rows
        for name, col in self._cols.items():
            col.merge(other._cols[name])
        return self

    def to_bytes(self) -> bytes:
        """Small, self-contained state (sketches included) for a commit message."""
        return orjson.dumps({
            "lgK": self.lg_k, "rows": self.rows,
            "columns": [c.to_json() for c in self._cols.values()],
        })

    @classmethod
    def from_bytes(cls, data: bytes | str) -> StatsAccumulator:
        try:
            obj = orjson.loads(data)
            acc = cls.__new__(cls)
            acc.lg_k = int(obj["lgK"])
            acc.rows = int(obj["rows"])
            acc._cols = {}
            for c in obj["columns"]:
                acc._cols[c["name"]] = _Column.from_json(c, acc.lg_k)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise CorruptMetadataError(f"invalid statistics accumulator state: {err}") from err
        return acc

    @classmethod
    def merge_all(cls, states: Iterable[bytes | str | None], schema: Any, *,
                  columns: Sequence[str] | None = None) -> StatsAccumulator:
        """Merge serialized task states (None entries are skipped)."""
        acc = cls(schema, columns=columns)
        for data in states:
            if data:
                acc.merge(cls.from_bytes(data))
        return acc

    def finish(
        self,
        scope: StatisticsScope,
        *,
        source: str = "analyze",
        last_analyzed: int | None = None,
    ) -> SegmentStatistics:
        """The segment statistics of everything added so far."""
        if scope.segment_id is None:
            raise UserError("an accumulator finishes into one segment's statistics")
        when = now_ms() if last_analyzed is None else last_analyzed
        sketches = {
            n: bytes(sketch.serialize_compact())
            for n, c in self._cols.items() if (sketch := c.current_sketch()) is not None
        }
        return SegmentStatistics(
            table=scope.table,
            segment_id=scope.segment_id,
            row_count=self.rows,
            columns=tuple(c.finish(scope, when) for c in self._cols.values()),
            sketches=sketches,
            source=source,
        )


