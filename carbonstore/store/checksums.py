"""Checksummed JSON metadata files (docs/format.md, "Checksums and bindings").

A metadata file written as one JSON object carries ``checksum`` as its first key: the xxh64
(16 hex digits) of the file's bytes without that key, i.e. the file is
``{"checksum":"<16 hex>",`` followed by the rest of the object as written. Tablestatus
versions, the schema, the schema log and statistics files share this one format and this
one reader:

- a file whose checksum fails is damage;
- a file that names a checksum anywhere but at its start is damage (a flipped bit in the
  prefix must not turn a signed file into an unsigned one);
- a file that holds a key its writers never write is damage (files written before
  checksums have none, and a flipped bit in a key would otherwise read as "key absent");
- a file without a checksum (written before checksums) is read as before.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson
import xxhash

__all__ = ["CHECKSUM_KEY", "checked_object", "checksum_ok", "with_checksum"]

CHECKSUM_KEY = "checksum"
_PREFIX = b'{"checksum":"'
_DIGEST_END = len(_PREFIX) + 16


def with_checksum(body: bytes) -> bytes:
    """``body`` (a JSON object of at least one key) with its xxh64 as first key."""
    return _PREFIX + xxhash.xxh64_hexdigest(body).encode() + b'",' + body[1:]


def checksum_ok(data: bytes) -> bool | None:
    """Whether the checksum of a file matches; None when it carries none."""
    if not data.startswith(_PREFIX):
        return None
    if data[_DIGEST_END:_DIGEST_END + 2] != b'",':
        return False
    body = b"{" + data[_DIGEST_END + 2:]
    return xxhash.xxh64_hexdigest(body).encode() == data[len(_PREFIX):_DIGEST_END]


def checked_object(data: bytes, keys: Collection[str]) -> tuple[dict[str, Any], bool]:
    """The file's JSON object and whether it was signed, checked as the module says.

    Raises:
        ValueError: (``orjson.JSONDecodeError`` is one) the checksum fails or is misplaced,
            the file is no JSON object, or it holds a key not in ``keys``.
    """
    verified = checksum_ok(data)
    if verified is False:
        raise ValueError("its checksum does not match its content")
    obj = orjson.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    unknown = [k for k in obj if k not in keys and k != CHECKSUM_KEY]
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    if verified is None and CHECKSUM_KEY in obj:
        raise ValueError("its checksum is not where writers put it")
    return obj, verified is True
