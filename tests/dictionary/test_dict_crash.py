"""Crash repair: bytes a dead writer appended to .dict are ignored, then truncated."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from carbonstore.dictionary import add_values, clear_cache, load_dictionary
from carbonstore.dictionary.codec import encode_chunk
from carbonstore.dictionary.column import column_files
from carbonstore.errors import DictionaryError
from carbonstore.store import Store, Table

CHILD = textwrap.dedent(
    """
    import os, sys
    from carbonstore.store import Store, load_conf
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


def test_dict_shorter_than_committed_is_reported(table: Table) -> None:
    d = add_values(table, "city", ["x", "y"], segment_id="0")
    with open(d.files.dict_path, "r+b") as f:
        f.truncate(d.meta.committed_end - 3)
    clear_cache()
    with pytest.raises(DictionaryError, match="truncated"):
        load_dictionary(table, "city")
    with pytest.raises(DictionaryError, match="truncated"):
        add_values(table, "city", ["z"], segment_id="1")


def test_corrupt_meta_is_reported(table: Table) -> None:
    d = add_values(table, "city", ["x"], segment_id="0")
    with open(d.files.meta_path, "wb") as f:
        f.write(b'{"columnId": "x"')
    clear_cache()
    with pytest.raises(DictionaryError, match="not a valid dictionary meta file"):
        load_dictionary(table, "city")


def test_corrupt_chunk_is_reported(table: Table) -> None:
    d = add_values(table, "city", ["x", "y"], segment_id="0")
    with open(d.files.dict_path, "r+b") as f:
        f.seek(5)
        f.write(b"\xff\xff\xff")
    clear_cache()
    with pytest.raises(DictionaryError):
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
        "import sys; from carbonstore.store import Store, load_conf; "
        "from carbonstore.dictionary import load_dictionary; "
        "print(load_dictionary(Store(sys.argv[1], conf=load_conf(None)).table('t'), 'city')"
        ".values.to_pylist())"
    )
    out = subprocess.run([sys.executable, "-c", code, store.location], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.strip() == "['a', 'é']"
