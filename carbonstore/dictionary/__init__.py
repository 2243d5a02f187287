"""Global dictionary: .dict / .dictmeta / .sortindex, encode/decode, filter translation.

See docs/dictionary.md. Typical use by a load::

    snap = prepare_dictionaries(table, {"city": distinct_cities}, segment_id)
    for batch in batches:
        writer.write_batch(encode_batch(batch, snap))

and by a reader: ``decode_batch(batch, table)``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from carbonstore.dictionary.codec import arrow_type
    from carbonstore.dictionary.column import (
        NULL_SURROGATE,
        ColumnDictionary,
        MissingDictionaryValueError,
        clear_cache,
        load_dictionary,
    )
    from carbonstore.dictionary.load import (
        METADATA_KEY,
        PREBUILT_OPTION,
        BatchEncoder,
        DictionarySnapshot,
        decode_batch,
        decode_schema,
        distinct_values,
        encode_batch,
        parse_prebuilt_option,
        prepare_dictionaries,
        snapshot,
        storage_schema,
    )
    from carbonstore.dictionary.writer import (
        add_values,
        add_values_from_file,
        obsolete_sortindex_files,
        repair,
    )

# Each name's module, imported on first use (PEP 562): a plan that translates a filter
# needs the reader (column.py) alone; the load and write sides bring pyarrow.compute
# (about 60 ms of a fresh process).
_HOME = {
    "arrow_type": "codec",
    **dict.fromkeys(("NULL_SURROGATE", "ColumnDictionary", "MissingDictionaryValueError",
                     "clear_cache", "load_dictionary"), "column"),
    **dict.fromkeys(("METADATA_KEY", "PREBUILT_OPTION", "BatchEncoder", "DictionarySnapshot",
                     "decode_batch", "decode_schema", "distinct_values", "encode_batch",
                     "parse_prebuilt_option", "prepare_dictionaries", "snapshot",
                     "storage_schema"), "load"),
    **dict.fromkeys(("add_values", "add_values_from_file", "obsolete_sortindex_files", "repair"),
                    "writer"),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "METADATA_KEY",
    "NULL_SURROGATE",
    "PREBUILT_OPTION",
    "BatchEncoder",
    "ColumnDictionary",
    "DictionarySnapshot",
    "MissingDictionaryValueError",
    "add_values",
    "add_values_from_file",
    "arrow_type",
    "clear_cache",
    "decode_batch",
    "decode_schema",
    "distinct_values",
    "encode_batch",
    "load_dictionary",
    "parse_prebuilt_option",
    "obsolete_sortindex_files",
    "prepare_dictionaries",
    "repair",
    "snapshot",
    "storage_schema",
]
