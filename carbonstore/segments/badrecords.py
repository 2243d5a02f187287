"""Bad records: the actions, splitting a batch into kept and bad rows, redirect files.

A bad record is a row with a value that does not parse as its column type, a null in a
NOT NULL column, or (CSV) the wrong number of fields. What happens to it is the load's
``BAD_RECORDS_ACTION``:

- ``FAIL`` (default): the load fails, nothing becomes visible; the error says how many.
- ``FORCE``: unparseable values are stored as null; a row that would need a null in a
  NOT NULL column cannot be forced and is dropped.
- ``REDIRECT``: bad rows are dropped and written, raw, under
  ``BAD_RECORD_PATH/<db>/<table>/<segment>/``.
- ``IGNORE``: bad rows are dropped.

The Spark side marks rows it could not parse with a boolean column ``__carbon_bad`` and
keeps their raw text in ``__carbon_raw``; NOT NULL violations are found here, per batch.
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from carbonstore.errors import BadRecordError
from carbonstore.store.fs import StoreFS

__all__ = [
    "ACTIONS",
    "BAD_COLUMN",
    "RAW_COLUMN",
    "BadRecordAction",
    "BadRecordSink",
    "SplitBatch",
    "parse_action",
    "split_batch",
]

BadRecordAction = Literal["FAIL", "FORCE", "REDIRECT", "IGNORE"]
ACTIONS: tuple[BadRecordAction, ...] = ("FAIL", "FORCE", "REDIRECT", "IGNORE")
BAD_COLUMN = "__carbon_bad"
RAW_COLUMN = "__carbon_raw"
HIDDEN_COLUMNS = frozenset({BAD_COLUMN, RAW_COLUMN})
MAX_SAMPLES = 3


def parse_action(value: str) -> BadRecordAction:
    """Validate a BAD_RECORDS_ACTION value (any case)."""
    v = value.strip().upper()
    if v not in ACTIONS:
        raise BadRecordError(
            f"BAD_RECORDS_ACTION must be one of {', '.join(ACTIONS)}, got {value!r}"
        )
    return v  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class SplitBatch:
    """A batch after bad-record handling: rows to write, and what was bad."""

    kept: pa.RecordBatch
    bad_count: int
    bad_raw: list[str]


def _raw_lines(batch: pa.RecordBatch, mask: pa.Array) -> list[str]:
    """Raw text of the bad rows: Spark's raw line when known, else the row as CSV."""
    rows = batch.filter(mask)
    names = [n for n in rows.schema.names if n not in HIDDEN_COLUMNS]
    raw: list[str | None]
    if RAW_COLUMN in rows.schema.names:
        raw = rows.column(RAW_COLUMN).to_pylist()
    else:
        raw = [None] * rows.num_rows
    missing = [i for i, r in enumerate(raw) if r is None]
    if missing:
        sub = rows.select(names).take(pa.array(missing, pa.int64()))
        buf = io.BytesIO()
        pacsv.write_csv(sub, buf, pacsv.WriteOptions(include_header=False))
        lines = buf.getvalue().decode("utf-8").splitlines()
        for i, line in zip(missing, lines, strict=False):
            raw[i] = line
    return [r if r is not None else "" for r in raw]


def split_batch(
    batch: pa.RecordBatch,
    *,
    not_null: tuple[str, ...],
    action: BadRecordAction,
    want_raw: bool,
) -> SplitBatch:
    """Separate the rows to keep from the bad ones according to ``action``.

    Args:
        batch: input rows, possibly with the hidden ``__carbon_bad``/``__carbon_raw`` columns
            (``__carbon_raw`` alone: a row with a raw line is bad).
        not_null: names of the NOT NULL columns.
        action: the load's BAD_RECORDS_ACTION.
        want_raw: return the raw text of bad rows (REDIRECT, and samples for FAIL).

    Returns:
        The kept rows without hidden columns, the bad-row count and (when asked) raw rows.
    """
    parse_bad: pa.Array | None = None
    names = batch.schema.names
    if BAD_COLUMN in names:
        col = batch.column(BAD_COLUMN)
        if pc.any(col).as_py():
            parse_bad = pc.fill_null(col, False)
    elif RAW_COLUMN in names:  # Spark's corrupt-record column alone: a raw line marks a bad row
        raw_col = batch.column(RAW_COLUMN)
        if raw_col.null_count < len(raw_col):
            parse_bad = pc.is_valid(raw_col)
    null_bad: pa.Array | None = None
    for name in not_null:
        c = batch.column(name)
        if c.null_count:
            m = pc.is_null(c)
            null_bad = m if null_bad is None else pc.or_(null_bad, m)
    data_names = [n for n in batch.schema.names if n not in HIDDEN_COLUMNS]
    if parse_bad is None and null_bad is None:
        return SplitBatch(batch.select(data_names), 0, [])
    masks = [m for m in (parse_bad, null_bad) if m is not None]
    bad = masks[0] if len(masks) == 1 else pc.or_(masks[0], masks[1])
    n_bad = pc.sum(pc.cast(bad, pa.int64())).as_py() or 0
    raw = _raw_lines(batch, bad) if want_raw else []
    drop = null_bad if action == "FORCE" else bad
    if drop is None:
        kept = batch
    else:
        kept = batch.filter(pc.invert(drop))
    return SplitBatch(kept.select(data_names), int(n_bad), raw)


class BadRecordSink:
    """Writes one task's raw bad rows to a file under the redirect folder (lazily)."""

    def __init__(self, fs: StoreFS, folder: str | None, task_id: str) -> None:
        self.fs, self.folder, self.task_id = fs, folder, task_id
        self.path: str | None = None
        self._out: pa.NativeFile | None = None
        self.samples: list[str] = []

    def add(self, lines: list[str]) -> None:
        room = MAX_SAMPLES - len(self.samples)
        if room > 0:
            self.samples.extend(line[:200] for line in lines[:room])
        if self.folder is None or not lines:
            return
        if self._out is None:
            self.fs.makedirs(self.folder)
            self.path = f"{self.folder}/part-{self.task_id}-{uuid.uuid4().hex[:12]}.csv"
            self._out = self.fs.open_output_stream(self.path)
        self._out.write(("\n".join(lines) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
