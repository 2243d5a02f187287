"""The load job: read the input with Spark, mark bad records, sort, write one segment.

Python API::

    from carbonstore.spark.load_job import load
    entry = load(store.table("db.sales"), "/in/sales/*.csv", options={"header": "true"})

Command line (embedded local Spark): ``carbonstore load db.sales --input /in/*.csv``.
Cluster: ``spark-submit <path of carbonstore/cli/submit.py> load db.sales --input ...``
(the arguments of ``carbonstore load``; see docs/load.md and docs/cluster.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

from pyspark.errors import AnalysisException
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the usual pyspark alias
from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

from carbonstore.dictionary import PREBUILT_OPTION, parse_prebuilt_option, prepare_dictionaries
from carbonstore.errors import BadRecordError, CarbonStoreError, SchemaError, UserError
from carbonstore.progress import LoadUpdate
from carbonstore.segments.badrecords import BAD_COLUMN, RAW_COLUMN
from carbonstore.segments.commit import LoadTransaction, marked_dead_error
from carbonstore.segments.load import FORMATS, LoadOptions, parse_load_options, write_settings
from carbonstore.segments.load_inputs import (
    check_inputs,
    file_fields,
    header_columns,
    local_bytes,
)
from carbonstore.spark.bad_rows import first_sample, locate_bad_row
from carbonstore.spark.csv_load import CsvPlan, plan_csv_tasks, run_csv_tasks
from carbonstore.spark.load_progress import stage_watch
from carbonstore.spark.s3_input import is_s3_input, parquet_frame
from carbonstore.spark.s3_input import refuse as s3_refuse
from carbonstore.spark.session import get_spark
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import FAILURE, LoadEntry

__all__ = ["arranged", "load", "prepare_source", "read_source"]

LoadMode = Literal["append", "overwrite"]


def _spark_type(type_name: str) -> object:
    return _parse_datatype_string(type_name)


def _csv_source(
    spark: SparkSession, table: Table, paths: list[str], opts: LoadOptions
) -> DataFrame:
    """CSV with the table's types parsed by Spark; unparseable rows keep their raw line."""
    reader_opts = {k: v for k, v in opts.csv.items()}
    reader_opts.setdefault("header", "true")
    cols = {c.name: c for c in table.schema.columns}
    if opts.header:
        file_cols = header_columns(paths, reader_opts)
        if file_cols is None:  # compressed, multi-line or remote glob: let Spark read it
            file_cols = spark.read.options(**reader_opts).csv(paths).columns
        if not file_cols and opts.allow_empty:
            file_cols = list(cols)  # an empty input (asked for): no header to map
    else:
        file_cols = list(cols)
    names = file_fields(table, file_cols)
    present = {n for n in names if n in cols}
    fields: list[StructField] = []
    for name in names:
        c = cols.get(name)
        if c is None:
            fields.append(StructField(name, StringType()))
            continue
        t = "string" if c.type.name == "binary" else str(c.type)
        fields.append(StructField(c.name, _spark_type(t)))  # type: ignore[arg-type]
    fields.append(StructField(RAW_COLUMN, StringType()))
    df = (
        spark.read.schema(StructType(fields))
        .options(**reader_opts)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", RAW_COLUMN)
        .csv(paths)
    )
    select: list[SparkColumn] = []
    plain = len(present) == len(fields) - 1  # every file column is a table column
    for c in table.schema.columns:
        if c.name not in present:
            select.append(F.lit(None).cast(str(c.type)).alias(c.name))
            plain = False
        elif c.type.name == "binary":
            select.append(F.col(c.name).cast("binary").alias(c.name))
            plain = False
        else:
            select.append(F.col(c.name))
    if plain:
        # The scan's rows go to the writer as they are (a projection would copy every
        # row); the writer matches columns by name and takes a non-null raw line as bad.
        return df
    raw = F.col(RAW_COLUMN)
    return df.select(*select, raw.isNotNull().alias(BAD_COLUMN), raw)


def _typed_json_source(
    spark: SparkSession, table: Table, paths: list[str], opts: LoadOptions
) -> DataFrame:
    fields = [
        StructField(c.name, _spark_type(str(c.type)))  # type: ignore[arg-type]
        for c in table.schema.columns
    ]
    fields.append(StructField(RAW_COLUMN, StringType()))
    df = (
        spark.read.schema(StructType(fields))
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", RAW_COLUMN)
        .options(**{k: v for k, v in opts.csv.items() if k in ("multiLine", "encoding",
                                                                 "dateFormat", "timestampFormat")})
        .json(paths)
    )
    raw = F.col(RAW_COLUMN)
    return df.select(*table.schema.column_names, raw.isNotNull().alias(BAD_COLUMN), raw)


def prepare_source(df: DataFrame, table: Table) -> DataFrame:
    """Map a DataFrame's columns to the table by name and cast with try_cast semantics.

    A value that is not null before the cast and null after it marks its row bad.
    """
    by_lower = {f.name.lower(): f for f in df.schema.fields}
    select: list[SparkColumn] = []
    bad_terms: list[SparkColumn] = []
    for c in table.schema.columns:
        f = by_lower.get(c.name)
        if f is None:
            if not c.nullable:
                raise SchemaError(f"the input has no column {c.name!r}, which is NOT NULL")
            select.append(F.lit(None).cast(str(c.type)).alias(c.name))
            continue
        src = F.col(f"`{f.name}`")
        if f.dataType.simpleString() == _spark_type(str(c.type)).simpleString():  # type: ignore[attr-defined]
            select.append(src.alias(c.name))
            continue
        cast = F.expr(f"try_cast(`{f.name}` AS {c.type})")
        select.append(cast.alias(c.name))
        bad_terms.append(src.isNotNull() & cast.isNull())
    if not bad_terms:
        return df.select(*select)
    bad = bad_terms[0]
    for term in bad_terms[1:]:
        bad = bad | term
    raw = F.when(bad, F.to_json(F.struct(*[F.col(f"`{n}`") for n in df.columns])))
    return df.select(*select, bad.alias(BAD_COLUMN), raw.alias(RAW_COLUMN))


def read_source(
    spark: SparkSession,
    table: Table,
    paths: str | Sequence[str],
    fmt: str,
    opts: LoadOptions,
) -> DataFrame:
    """The input files as a DataFrame of table columns plus the bad-record columns."""
    plist = [paths] if isinstance(paths, str) else list(paths)
    if fmt == "csv":
        return _csv_source(spark, table, plist, opts)
    if fmt == "json":
        return _typed_json_source(spark, table, plist, opts)
    if fmt in ("parquet", "orc"):
        return prepare_source(spark.read.format(fmt).load(plist), table)
    raise UserError(f"unknown input format {fmt!r}; use one of {', '.join(FORMATS)}")


def _sorted(df: DataFrame, opts: LoadOptions) -> DataFrame:
    cols = list(opts.sort_columns)
    if opts.sort_scope == "local_sort":
        return df.sortWithinPartitions(*cols)
    if opts.sort_scope == "global_sort":
        return df.repartitionByRange(*cols).sortWithinPartitions(*cols)
    return df


def _bucketed(df: DataFrame, table: Table, opts: LoadOptions) -> DataFrame | None:
    """One task per bucket of a bucketed table: Spark's hash partitioning is the bucket
    hash (pmod(murmur3(cols), N)), so each load writes at most N bucket files."""
    number = table.schema.properties.get("bucket_number")
    if not number:
        return None
    cols = table.schema.list_property("bucket_columns")
    out = df.repartition(int(number), *cols)
    if opts.sort_scope != "no_sort" and opts.sort_columns:
        out = out.sortWithinPartitions(*opts.sort_columns)
    return out


def arranged(df: DataFrame, table: Table, opts: LoadOptions) -> DataFrame:
    """``df`` partitioned and sorted as a load writes it: one task per bucket of a
    bucketed table, else by the sort scope (the DML insert segment's rows too)."""
    return _bucketed(df, table, opts) or _sorted(df, opts)


def _guess_format(paths: str | Sequence[str]) -> str:
    first = paths if isinstance(paths, str) else (paths[0] if paths else "")
    for fmt in FORMATS:
        if first.rstrip("/").lower().endswith("." + fmt):
            return fmt
    return "csv"


def load(
    table: Table,
    df_or_path: DataFrame | str | Sequence[str],
    *,
    spark: SparkSession | None = None,
    format: str | None = None,  # noqa: A002 - mirrors spark.read.format
    options: Mapping[str, str] | None = None,
    mode: LoadMode = "append",
    progress: LoadUpdate | None = None,
) -> LoadEntry:
    """Load a DataFrame or input files into a new segment of ``table``.

    Args:
        table: the target table.
        df_or_path: a DataFrame, or a path / glob / list of paths of input files.
        spark: session to use (default: the DataFrame's, or the embedded one).
        format: csv (default for paths), parquet, json or orc.
        options: load options (keys case-insensitive), see docs/load.md.
        mode: ``append`` adds a segment; ``overwrite`` also marks every older readable
            segment ``Marked for Delete`` in the same atomic commit.
        progress: called with (rows written, input bytes read) while the load runs
            (rows -1: not known); see :func:`carbonstore.progress.load_progress`.

    Returns:
        The committed tablestatus entry (``Success`` or ``Partial Success``).

    Raises:
        BadRecordError: bad records with FAIL, every row bad, or REDIRECT without a path.
        UserError: invalid options or input columns.
        CarbonStoreError: the Spark job failed (the segment is marked ``Failure``).
    """
    if mode not in ("append", "overwrite"):
        raise UserError(f"mode must be append or overwrite, got {mode!r}")
    options = dict(options or {})
    prebuilt = parse_prebuilt_option(options.pop(PREBUILT_OPTION, None))
    opts = parse_load_options(table, options)
    read: Callable[[], DataFrame]
    csv_plan: CsvPlan | None = None
    fmt, plist = "", list[str]()
    if isinstance(df_or_path, DataFrame):
        df = prepare_source(df_or_path, table)
        read = lambda: df  # noqa: E731
    else:
        if spark is None:
            spark = get_spark()
        fmt = (format or _guess_format(df_or_path)).lower()
        plist = [df_or_path] if isinstance(df_or_path, str) else list(df_or_path)
        check_inputs(table, plist, fmt, opts)  # paths, formats, header, empty input
        if fmt == "csv" and not table.schema.properties.get("bucket_number"):
            # bucketed tables go through Spark's reader: one task per bucket (_bucketed)
            csv_plan = plan_csv_tasks(spark, table, plist, opts)
        session = spark
        read = lambda: read_source(session, table, plist, fmt, opts)  # noqa: E731
        if is_s3_input(plist) and csv_plan is None:  # the JVM cannot open s3://
            if fmt != "parquet":
                s3_refuse(plist, fmt)
            df = prepare_source(parquet_frame(spark, table, plist), table)
            read = lambda: df  # noqa: E731
        elif csv_plan is None:
            try:
                df = read()  # user mistakes in the input show before a segment exists
            except AnalysisException as err:
                raise UserError(f"cannot read the {fmt} input: {_first_line(err)}") from None
            read = lambda: df  # noqa: E731
    txn = LoadTransaction.begin(table, overwrite=mode == "overwrite")
    seg = txn.segment_id
    try:
        done = False
        if csv_plan is not None and spark is not None:
            done = run_csv_tasks(
                spark, table, csv_plan, write_settings(table, seg, opts),
                local_sort=opts.sort_scope == "local_sort", overwrite=mode == "overwrite",
                progress=progress,
            )
        if not done and csv_plan is not None and csv_plan.scan.input_location:
            s3_refuse([csv_plan.scan.input_location], "this CSV")  # a task needs Spark's reader
        if not done:
            watch = (stage_watch(spark.sparkContext, local_bytes(plist), progress)
                     if spark is not None else contextlib.nullcontext())
            with watch:
                _write_through_spark(table, read(), seg, opts, prebuilt, mode)
    except Exception as err:
        dead = marked_dead_error(table, seg)
        if dead is not None:  # tasks then fail on its removed folder: not the error to show
            txn.abort(reason="marked dead before its commit")
            raise dead from None
        after = table.status.read().find(seg)
        reason = str((after.extra if after else {}).get("failureReason") or "")
        cause = (after.extra if after else {}).get("failureCause")
        txn.abort(reason=reason or _first_line(err))
        if after is not None and after.status == FAILURE and cause == "badRecords":
            if fmt == "csv" and spark is not None:
                reason = _placed(spark, table, plist, opts, reason)
            raise BadRecordError(reason) from None
        if isinstance(err, CarbonStoreError):
            raise
        if "FAILED_READ_FILE" in str(err):  # the input itself: plain spark.read fails the same
            raise UserError(
                f"cannot read the input of the load into {table.name} (nothing was loaded): "
                f"{_read_failure(err)}") from None
        raise CarbonStoreError(
            f"load into {table.name} failed; segment {seg} is marked Failure and its files are "
            f"removed: {_first_line(err)}"
        ) from err
    finally:
        txn.release()
    return table.status.read().get(seg)


def _placed(spark: SparkSession, table: Table, paths: Sequence[str], opts: LoadOptions,
            reason: str) -> str:
    """A FAIL load's reason with where its first bad row is (file, line, column, value)."""
    raw = first_sample(reason)
    where = locate_bad_row(spark, table, paths, opts, raw) if raw is not None else ""
    return f"{reason.rstrip('.')}; the first is at {where}" if where else reason


def _write_through_spark(
    table: Table,
    df: DataFrame,
    seg: str,
    opts: LoadOptions,
    prebuilt: Mapping[str, str],
    mode: LoadMode,
) -> None:
    """Build the dictionaries, sort, and write ``df`` through the data source's writer."""
    dict_cols = [c for c in table.schema.dictionary_columns if c not in prebuilt]
    source = df.persist() if dict_cols else df  # the distinct pass and the write read it once
    write_opts = {
        **{k: str(v) for k, v in table.store.conf.values.items() if k.startswith("carbon.")},
        **opts.to_options(),
        "store": table.store.location,
        "segment": seg,
    }
    try:
        if table.schema.dictionary_columns:
            distinct = {c: source.select(c).distinct().toArrow().column(0) for c in dict_cols}
            prepare_dictionaries(table, distinct, seg, prebuilt=prebuilt)
        out = _bucketed(source, table, opts) or _sorted(source, opts)
        with _arrow_batches(out.sparkSession):
            out.write.format("carbonstore").mode(mode).options(**write_opts).save(str(table.name))
    finally:
        if dict_cols:
            source.unpersist()


_BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"


@contextlib.contextmanager
def _arrow_batches(spark: SparkSession, rows: int = 65536) -> Iterator[None]:
    """Larger Arrow batches to the writer tasks (fewer round trips), unless the user chose."""
    current = spark.conf.get(_BATCH_KEY, "10000")
    if current != "10000":
        yield
        return
    spark.conf.set(_BATCH_KEY, str(rows))
    try:
        yield
    finally:
        spark.conf.set(_BATCH_KEY, current)


def _read_failure(err: BaseException) -> str:
    """The file Spark could not read and the root cause (e.g. a timestamp in milliseconds
    beyond what microseconds hold: ``ArithmeticException: long overflow``)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    head = next((ln for ln in lines if "FAILED_READ_FILE" in ln), lines[0] if lines else "")
    causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by: ")]
    text = head.split("] ", 1)[-1].split(" SQLSTATE")[0].strip()
    return (f"{text} {causes[-1]}" if causes else text)[:500]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    for line in text.splitlines():
        if "Error" in line or "Exception" in line:
            return line.strip()[:500]
    return (text.splitlines()[0] if text else type(err).__name__)[:500]
