"""Single-bit damage and swapped files of the schema, the schema log, delete deltas and
statistics files: each case read for real (the read path's scan through the Python API and
the CLI, without a JVM). Allowed outcomes: the answer of the undamaged table, or one line
naming the file with exit status 2.

Every case here answered differently with exit 0 (or ended in a traceback) before these
files carried a checksum of their bytes and named what they belong to (docs/format.md,
"Checksums and bindings").
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import CarbonStoreError, CorruptMetadataError
from carbonstore.segments.dml import delete_rows
from carbonstore.store.alter import add_columns, alter_table, set_properties
from carbonstore.store.schema import Column, parse_type
from carbonstore.store.schema_log import forget_decoded
from carbonstore.store.table import Table
from tests.reliability.test_metadata_damage import _forget as _forget_status
from tests.reliability.test_metadata_damage import assert_same_or_one_line
from tests.reliability.test_metadata_damage import cli as _cli
from tests.reliability.workload import SCHEMA, load, rows, scan

_HEX = "0123456789abcdef"


def _forget() -> None:
    _forget_status()
    forget_decoded()


def cli(capsys: pytest.CaptureFixture[str], table: Table, *argv: str) -> tuple[int, str, str]:
    forget_decoded()
    return _cli(capsys, table, *argv)


def _make(store: Store, name: str, first: int) -> Table:
    """Three loads (the first of two data files), then ``ALTER ADD COLUMN z int DEFAULT 7``
    and one more load: a schema log version, a dictionary column, several data files."""
    t = store.create_table(name, SCHEMA, properties={"dictionary_include": "city"})
    load(t, rows(first, 40), tasks=2)
    load(t, rows(first + 1000, 20), tasks=1)
    alter_table(t, add_columns([Column(name="z", type=parse_type("int"), default="7")]),
                operation="ALTER ADD COLUMNS")
    t = store.table(name)
    data = rows(first + 2000, 20)
    load(t, data.append_column("z", pa.array(range(20), pa.int32())), tasks=1)
    return store.table(name)


@pytest.fixture
def table(store: Store) -> Table:
    return _make(store, "db.t", 0)


def _rows(table: Table) -> list[str] | str:
    """Every row of a real read (sorted, as text: NaN equals NaN), or the error's message
    when it refused."""
    _forget()
    try:
        fresh = table.store.table(str(table.name))
        got = scan(fresh)
    except CarbonStoreError as err:  # a refusal (its message is one line)
        return str(err)
    cols = [got.column(n).to_pylist() for n in got.column_names]
    return sorted(repr(r) for r in zip(*cols, strict=True))


def _same_or_refused(table: Table, want: list[str] | str, path: str) -> None:
    got = _rows(table)
    if isinstance(got, str):
        assert os.path.basename(path) in got and "\n" not in got, got
    else:
        assert got == want, f"a damaged {path} changed the rows read (exit 0)"


def _flip(path: str, old: bytes, new: bytes) -> None:
    data = Path(path).read_bytes()
    assert data.count(old) >= 1, (path, old)
    assert sum(bin(a ^ b).count("1") for a, b in zip(old, new, strict=True)) == 1
    Path(path).write_bytes(data.replace(old, new, 1))


def _schema_log(table: Table) -> str:
    folder = f"{table.paths.metadata}/schema_log"
    return f"{folder}/{sorted(os.listdir(folder))[-1]}"


def _hex_flip(digit: str) -> str:
    """A hex digit one bit away from ``digit``."""
    return next(c for b in range(8) if (c := chr(ord(digit) ^ 1 << b)) in _HEX and c != digit)


CLI_READS = (("describe", "db.t"), ("show-segments", "db.t", "--json"),
             ("prune", "db.t", "--where", "id >= 1000", "--json"), ("stats", "db.t", "--json"),
             ("dictionary", "db.t", "city", "--json"))


def _cli_same_or_one_line(table: Table, capsys: pytest.CaptureFixture[str],
                          want: dict[tuple[str, ...], str], path: str) -> int:
    """Every CLI read answers as before or fails in one line naming ``path``; the refusals."""
    refused = 0
    for argv in CLI_READS:
        code, out, err = cli(capsys, table, *argv)
        assert_same_or_one_line(code, out, err, want[argv])
        if code:
            assert os.path.basename(path) in err, (argv, err)
            refused += 1
    return refused


def _cli_answers(table: Table, capsys: pytest.CaptureFixture[str]) -> dict[tuple[str, ...], str]:
    out = {}
    for argv in CLI_READS:
        code, text, err = cli(capsys, table, *argv)
        assert code == 0, (argv, err)
        out[argv] = text
    return out


# ---- issue item 4: the schema and the schema log ------------------------------------------------
@pytest.mark.parametrize("which", ["schema", "schema_log"])
@pytest.mark.parametrize("damage", ["column id digit", "properties key"])
def test_a_bit_flip_in_a_schema_file_never_changes_rows(
    table: Table, capsys: pytest.CaptureFixture[str], which: str, damage: str
) -> None:
    """A column id hex digit flipped to another hex digit read that column as NULL in every
    older segment; the key ``"properties"`` flipped to ``"propertieq"`` dropped
    ``dictionary_include``: the dictionary column read its surrogates as values. Both with
    exit 0. Now the file's checksum fails: one line naming it, exit 2."""
    want, answers = _rows(table), _cli_answers(table, capsys)
    assert isinstance(want, list)
    path = table.paths.schema if which == "schema" else _schema_log(table)
    text = Path(path).read_text()
    if damage == "column id digit":
        cid = table.schema.column("x").column_id
        _flip(path, cid.encode(), (_hex_flip(cid[0]) + cid[1:]).encode())
    else:
        _flip(path, b'"properties"', b'"propertieq"')
    assert Path(path).read_text() != text
    _same_or_refused(table, want, path)
    assert _cli_same_or_one_line(table, capsys, answers, path) == len(CLI_READS)


def test_a_flipped_default_in_the_schema_log_never_changes_rows(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """``DEFAULT 7`` flipped to ``6`` (one bit) read every row of the older segments as 6."""
    want = _rows(table)
    assert isinstance(want, list) and sum(1 for r in want if r.endswith(', 7)')) == 61
    path = _schema_log(table)
    _flip(path, b'"default": "7"', b'"default": "6"')
    _same_or_refused(table, want, path)
    code, out, err = cli(capsys, table, "describe", "db.t")
    assert code == 2 and "schema_log" in err and len(err.strip().splitlines()) == 1, (out, err)


@pytest.mark.parametrize("which", ["schema", "schema_log", "both"])
def test_another_tables_schema_file_in_place_is_refused(
    store: Store, table: Table, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    """Another table's schema files (same columns, other ids) copied over this table's:
    the column ids no segment was written with read every column as NULL (exit 0). Now
    the file names the table it belongs to (``tableId``): one line, exit 2."""
    other = _make(store, "db.u", 5000)
    want, answers = _rows(table), _cli_answers(table, capsys)
    assert isinstance(want, list)
    if which in ("schema", "both"):
        shutil.copyfile(other.paths.schema, table.paths.schema)
    if which in ("schema_log", "both"):
        shutil.copyfile(_schema_log(other), _schema_log(table))
    path = table.paths.schema if which != "schema_log" else _schema_log(table)
    got = _rows(table)
    assert isinstance(got, str), "another table's schema was read as this table's"
    assert "\n" not in got
    assert _cli_same_or_one_line(table, capsys, answers, path) == len(CLI_READS)


def test_schema_log_versions_swapped_are_refused(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two versions of the schema log exchanged: each names its version, one line."""
    alter_table(table, set_properties({"bloom_columns": "id"}), operation="ALTER SET")
    folder = Path(table.paths.metadata) / "schema_log"
    a, b = sorted(folder.iterdir())[-2:]
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    got = _rows(table)
    assert isinstance(got, str) and "schema_log" in got, got


def test_a_schema_written_before_checksums_still_opens(table: Table) -> None:
    """Files written before checksums have none and open as before (a key no writer
    writes is still refused); what is written from now on carries one."""
    import orjson

    want = _rows(table)
    for path in (table.paths.schema, _schema_log(table)):
        obj = orjson.loads(Path(path).read_bytes())
        assert list(obj)[0] == "checksum"
        del obj["checksum"]
        Path(path).write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2))
    assert _rows(table) == want
    _flip(table.paths.schema, b'"properties"', b'"propertieq"')
    got = _rows(table)
    assert isinstance(got, str) and "propertieq" in got, got


# ---- issue item 5: delete deltas ------------------------------------------------------------
def _deltas(table: Table) -> list[Path]:
    seg = Path(table.paths.segment_dir("0"))
    return sorted(seg.glob("*.deletedelta"))


def test_a_delta_copied_over_another_of_the_same_cardinality_is_refused(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Segment 0 has two data files (ids 0-19 and 20-39); one row deleted in each gives two
    deltas of one position each. The first copied over the second passed its CRC and its
    row count: id 23 vanished and the deleted id 25 came back (exit 0). A delta now names
    the data file and segment it deletes from: one line naming it, exit 2, on every read,
    compaction and DML statement."""
    delete_rows(table, "id = 3")
    delete_rows(table, "id = 25")
    first, second = _deltas(table)
    want = _rows(table)
    assert isinstance(want, list) and len(want) == 78
    shutil.copyfile(first, second)
    _same_or_refused(table, want, str(second))
    for argv in (("compact", "db.t", "--type", "custom", "--segments", "0,1", "--engine",
                  "local"),
                 ("delete", "db.t", "--where", "id = 24"),
                 ("analyze", "db.t", "--engine", "local")):
        code, out, err = cli(capsys, table, *argv)
        assert code == 2, (argv, code, out, err)
        assert len(err.strip().splitlines()) == 1 and second.name in err, (argv, err)
    _same_or_refused(table, want, str(second))


def test_a_delta_of_another_segment_or_table_is_refused(
    store: Store, table: Table
) -> None:
    """A delta in place of one of another segment's file or another table's."""
    other = _make(store, "db.u", 5000)
    delete_rows(table, "id = 3")
    delete_rows(table, "id = 1003")
    delete_rows(other, "id = 5003")
    want = _rows(table)
    (mine,) = _deltas(table)
    (seg1,) = Path(table.paths.segment_dir("1")).glob("*.deletedelta")
    (theirs,) = _deltas(other)
    original = mine.read_bytes()
    for source in (seg1, theirs):
        shutil.copyfile(source, mine)
        _same_or_refused(table, want, str(mine))
        got = _rows(table)
        assert isinstance(got, str), f"{source} read as {mine}"
        mine.write_bytes(original)
    assert _rows(table) == want


# ---- issue item 6: statistics files ---------------------------------------------------------
def _stats(table: Table, sid: str = "1") -> Path:
    return Path(table.paths.stats_dir) / f"segment_{sid}.stats"


def test_bit_flips_in_a_statistics_file_are_refused(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Single-bit flips over a segment's statistics file: 79 of 528 changed ``stats`` with
    exit 0 and 48 more ended in tracebacks (``Input stream is not an HLL sketch``,
    IndexError, TypeError). Now each is the same answer or one line naming the file, exit 2
    (a flip the checksum catches always: every flip here is refused)."""
    code, want, err = cli(capsys, table, "stats", "db.t", "--json")
    assert code == 0, err
    path = _stats(table)
    original = path.read_bytes()
    step = max(1, len(original) // 60)
    tried = 0
    for pos in range(0, len(original), step):
        damaged = bytearray(original)
        damaged[pos] ^= 1 << (pos % 8)
        path.write_bytes(bytes(damaged))
        code, out, err = cli(capsys, table, "stats", "db.t", "--json")
        assert code == 2, (pos, code, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (pos, err)
        assert path.name in err, (pos, err)
        tried += 1
    assert tried >= 50
    path.write_bytes(original)
    assert cli(capsys, table, "stats", "db.t", "--json")[1] == want


def test_another_tables_statistics_file_is_refused(
    store: Store, table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another table's ``segment_1.stats`` (same columns, other rows) was shown as this
    table's (21 of 21 files). Now it names its table: one line, exit 2; compaction treats
    it as missing (statistics are derived data)."""
    from carbonstore.statistics.store import get_segment_statistics

    other = _make(store, "db.u", 5000)
    shutil.copyfile(_stats(other), _stats(table))
    code, out, err = cli(capsys, table, "stats", "db.t", "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, out, err)
    assert "segment_1.stats" in err and "carbonstore analyze" in err, err
    with pytest.raises(CorruptMetadataError, match="segment_1.stats"):
        get_segment_statistics(table, "1")
    assert get_segment_statistics(table, "1", damaged_as_missing=True) is None


def test_another_tables_schema_without_a_schema_log_is_not_a_drop(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ALTERs, another table's ``Metadata/schema`` in place made the table read as
    dropped ("'carbonstore create' moves it to the trash": following that would have moved
    its data away). Its tablestatus log folder is named by its table id: one line naming
    the schema file, exit 2, and ``create`` refuses too."""
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 10), tasks=1)
    u = store.create_table("db.u", SCHEMA)
    shutil.copyfile(u.paths.schema, t.paths.schema)
    _forget()
    with pytest.raises(CorruptMetadataError, match="belongs to table id"):
        store.table("db.t")
    for argv in (("show-segments", "db.t"), ("create", "db.t", "--schema", "id long")):
        code, out, err = cli(capsys, t, *argv)
        assert code == 2 and "Metadata/schema" in err and "belongs to" in err, (argv, out, err)
    assert os.listdir(t.paths.segment_dir("0"))


def test_a_delta_written_before_bindings_still_reads(table: Table) -> None:
    """Format-1 deltas (a CRC-32 of the payload, no binding) read as before."""
    import struct
    import zlib

    from pyroaring import BitMap

    delete_rows(table, "id = 3")
    want = _rows(table)
    (path,) = _deltas(table)
    bits = BitMap([3])
    payload = bits.serialize()
    path.write_bytes(struct.pack("<4sHHQII", b"CSDD", 1, 0, 1, len(payload),
                                 zlib.crc32(payload)) + payload)
    assert _rows(table) == want


def test_a_statistics_file_written_before_checksums_still_reads(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """A statistics file without checksum and table id (written before them) is shown as
    before; one naming another table is not."""
    import orjson

    want = cli(capsys, table, "stats", "db.t", "--json")
    assert want[0] == 0
    path = _stats(table)
    obj = orjson.loads(path.read_bytes())
    del obj["checksum"], obj["tableId"]
    path.write_bytes(orjson.dumps(obj))
    assert cli(capsys, table, "stats", "db.t", "--json") == want
    obj["table"] = "db.u"
    path.write_bytes(orjson.dumps(obj))
    code, _, err = cli(capsys, table, "stats", "db.t", "--json")
    assert code == 2 and "db.u" in err and path.name in err, err


def test_another_tables_merge_index_is_refused(
    store: Store, table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the random damage test: another table's merge index of the same segment id
    and row counts in place of this one's passed every check (checksums, segment id, row
    counts): ``prune`` answered from the other table's statistics with exit 0 and the read
    looked for data files this segment does not have. Column ids are per table: one line
    naming the file."""
    other = _make(store, "db.u", 5000)
    (mine,) = Path(table.paths.segment_dir("1")).glob("*.carbonindexmerge")
    (theirs,) = Path(other.paths.segment_dir("1")).glob("*.carbonindexmerge")
    shutil.rmtree(Path(table.paths.metadata) / "index", ignore_errors=True)
    shutil.copyfile(theirs, mine)
    got = _rows(table)
    assert isinstance(got, str) and mine.name in got and "another table" in got, got
    code, out, err = cli(capsys, table, "prune", "db.t", "--where", "id >= 1000", "--json")
    assert code == 2 and mine.name in err and len(err.strip().splitlines()) == 1, (out, err)


def test_a_lost_schema_log_version_below_the_newest_is_damage(table: Table) -> None:
    """A schema log version deleted while a later one exists was skipped: reads of the
    newest schema answered, and time travel into the lost version's range used the schema
    before it. Versions are written in order, each once: a gap is a lost file."""
    alter_table(table, set_properties({"bloom_columns": "id"}), operation="ALTER SET")
    folder = Path(table.paths.metadata) / "schema_log"
    lost = sorted(folder.iterdir())[0]
    lost.unlink()
    got = _rows(table)
    assert isinstance(got, str) and lost.name in got and "missing" in got, got
