"""Crash repair: bytes a dead writer appended to .dict are ignored, then truncated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from carbonstore import Store, Table
from carbonstore.dictionary import add_values, clear_cache, load_dictionary
from carbonstore.dictionary.codec import encode_chunk
from carbonstore.dictionary.column import column_files
from carbonstore.errors import DictionaryError

CHILD = textwrap.dedent(
    """
    import os, sys
    from carbonstore import Store
    from carbonstore.store import load_conf
    from carbonstore.dictionary import writer

    real_append = writer._append

    def append_then_die(*args, **kwargs):
        real_append(*args, **kwargs)   # the chunk is written and fsynced ...
        os._exit(17)                   # ... and the process dies before the .dictmeta commit

    writer._append = append_then_die
    table = Store(sys.argv[1], conf=load_conf(None)).table("t")
    writer.add_values(table, "city", ["dead-1", "dead-2", "a"], segment_id="9")
    """
)


def _dict_size(table: Table) -> int:
    return os.path.getsize(column_files(table, table.schema.column("city")).dict_path)


def test_writer_killed_between_dict_append_and_commit(table: Table) -> None:
    add_values(table, "city", ["a", "b"], segment_id="0")
    committed = _dict_size(table)
    proc = subprocess.run([sys.executable, "-c", CHILD, table.store.location],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 17, proc.stderr
    assert _dict_size(table) > committed  # the dead writer's chunk is on disk
    clear_cache()
    d = load_dictionary(table, "city")  # readers trust only the committed range
    assert d.values.to_pylist() == ["a", "b"]
    d = add_values(table, "city", ["c"], segment_id="1")  # the next writer repairs first
    assert d.values.to_pylist() == ["a", "b", "c"]
    assert d.meta.entries[-1].start_offset == committed
    assert _dict_size(table) == d.meta.committed_end
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["a", "b", "c"]
    assert load_dictionary(table, "city").surrogate_of("dead-1") is None


def test_garbage_tail_is_ignored_and_truncated(table: Table) -> None:
    d = add_values(table, "city", ["x"], segment_id="0")
    path = d.files.dict_path
    with open(path, "ab") as f:
        f.write(b"\x00\x13garbage of a torn write")
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["x"]
    add_values(table, "city", ["y"], segment_id="1")
    clear_cache()
    d = load_dictionary(table, "city")
    assert d.values.to_pylist() == ["x", "y"]
    assert os.path.getsize(path) == d.meta.committed_end


def test_uncommitted_valid_chunk_is_not_read(table: Table) -> None:
    d = add_values(table, "city", ["x"], segment_id="0")
    import pyarrow as pa

    with open(d.files.dict_path, "ab") as f:
        f.write(encode_chunk(pa.array(["ghost"]), 1))
    clear_cache()
    assert load_dictionary(table, "city").surrogate_of("ghost") is None


def _legacy_dictionary(table: Table, values: list[str]) -> str:
    """A format-1 dictionary (before commit records): .dict + a .dictmeta without checksum."""
    files = column_files(table, table.schema.column("city"))
    os.makedirs(files.directory, exist_ok=True)
    import pyarrow as pa

    data = encode_chunk(pa.array(values), 1)
    with open(files.dict_path, "wb") as f:
        f.write(data)
    entry = {"minSurrogate": 2, "maxSurrogate": 1 + len(values), "startOffset": 0,
             "endOffset": len(data), "chunkCount": 1, "segmentId": "0", "time": 1}
    with open(files.meta_path, "w") as f:
        json.dump({"version": 1, "columnId": files.column_id, "columnType": "string",
                   "entries": [entry]}, f)
    return files.dict_path


def test_dict_shorter_than_committed_is_reported(table: Table) -> None:
    # A format-1 dictionary has no other copy of its values: a cut .dict is damage.
    path = _legacy_dictionary(table, ["x", "y"])
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    clear_cache()
    with pytest.raises(DictionaryError, match="truncated"):
        load_dictionary(table, "city")
    with pytest.raises(DictionaryError, match="truncated"):
        add_values(table, "city", ["z"], segment_id="1")


def test_cut_dict_is_read_from_the_commit_records_and_restored(table: Table) -> None:
    # Format 2: each commit record keeps a copy of its chunks, so a cut .dict is read from
    # them and the next writer (holding the lock) writes the range back.
    d = add_values(table, "city", ["x", "y"], segment_id="0")
    with open(d.files.dict_path, "r+b") as f:
        f.truncate(d.meta.committed_end - 3)
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["x", "y"]
    d = add_values(table, "city", ["z"], segment_id="1")
    assert d.values.to_pylist() == ["x", "y", "z"]
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["x", "y", "z"]
    from carbonstore.dictionary.files import read_chunks

    target = load_dictionary(table, "city").arrow_type
    _, unusable = read_chunks(d.files, d.meta.entries, target, column_type="string")
    assert unusable == []  # both ranges read from .dict again


def test_legacy_dictionary_is_read_and_upgraded(table: Table) -> None:
    _legacy_dictionary(table, ["b", "c"])
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["b", "c"]
    d = add_values(table, "city", ["a", "c"], segment_id="1")
    assert d.values.to_pylist() == ["b", "c", "a"]
    assert d.surrogate_of("a") == 4 and d.surrogate_of("b") == 2
    assert sorted(os.listdir(d.files.log_dir)) == ["0000000001.commit", "0000000002.commit"]
    with open(d.files.meta_path) as f:
        assert json.load(f)["version"] == 2
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["b", "c", "a"]


def test_corrupt_meta_is_reported(table: Table) -> None:
    _legacy_dictionary(table, ["x"])  # format 1: .dictmeta is the only committed state
    files = column_files(table, table.schema.column("city"))
    with open(files.meta_path, "wb") as f:
        f.write(b'{"columnId": "x"')
    clear_cache()
    with pytest.raises(DictionaryError, match="not a valid dictionary meta file"):
        load_dictionary(table, "city")


def test_corrupt_chunk_is_reported(table: Table) -> None:
    path = _legacy_dictionary(table, ["x", "y"])
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(b"\xff\xff\xff")
    clear_cache()
    with pytest.raises(DictionaryError):
        load_dictionary(table, "city")


@pytest.mark.parametrize("victim", ["meta", "dict"])
def test_format2_checkpoint_and_chunks_are_checked_and_recovered(table: Table, victim: str) -> None:
    # Format 2: .dictmeta and .dict are checked against checksums and, when damaged, read
    # from the commit records, which are the committed truth.
    d = add_values(table, "city", ["x", "y"], segment_id="0")
    path = d.files.meta_path if victim == "meta" else d.files.dict_path
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(b"\xff\xff\xff")
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["x", "y"]
    record = d.files.record_path(1)
    raw = bytearray(open(record, "rb").read())
    raw[len(raw) // 2] ^= 0x10
    with open(record, "wb") as f:
        f.write(raw)
    clear_cache()
    with pytest.raises(DictionaryError, match="0000000001.commit"):  # no intact copy left
        load_dictionary(table, "city")


def test_missing_sortindex_is_computed_then_rewritten(table: Table) -> None:
    d = add_values(table, "city", ["b", "a"], segment_id="0")
    si = d.files.sortindex_path(2)
    os.remove(si)  # a crash after the .dictmeta commit, before the sort index
    clear_cache()
    assert load_dictionary(table, "city").sorted_values().to_pylist() == ["a", "b"]
    add_values(table, "city", ["a"], segment_id="1")  # nothing new, but the writer heals it
    assert os.path.exists(si)


def test_store_reopened_in_fresh_process_reads_same_values(store: Store, table: Table) -> None:
    add_values(table, "city", ["é", "a"], segment_id="0")
    code = (
        "import sys; from carbonstore.store import StoreRoot, load_conf; "
        "from carbonstore.dictionary import load_dictionary; "
        "print(load_dictionary(StoreRoot(sys.argv[1], conf=load_conf(None)).table('t'), 'city')"
        ".values.to_pylist())"
    )
    out = subprocess.run([sys.executable, "-c", code, store.location], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.strip() == "['a', 'é']"
