"""The bloom pack on an object store: written with the snapshot, probed through ranged reads
of the chunks a probe needs, and a damaged pack object changes no plan."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from s3fixtures import BUCKET, S3Store

from carbonstore import Store
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import refresh_index_snapshot
from tests.indexfiles.segbuild import add_segments

SEGMENTS, ROWS = 5, 200


def test_bloom_pack_on_s3(s3_store: S3Store) -> None:
    t = Store(s3_store.location, conf=s3_store.conf(**{"carbon.index.snapshot.max.lag": "1000"})).create_table(
        "db.t", "k string, n long")
    rng = np.random.default_rng(8)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys], row_group_size=100,
                 page_rows=50, bloom_columns=["k"], bloom_fpp=0.001)
    assert refresh_index_snapshot(t) is not None
    (pack,) = [k for k in s3_store.keys() if k.endswith(".carbonbloom")]
    wheres = [f"k = '{keys[s][s + 3]}'" for s in range(SEGMENTS)] + [f"k = '{7:016x}'"]

    def plans() -> list[tuple[str, ...]]:
        clear_cache()
        return [prune(t, w).segments for w in wheres]

    client = s3_store.server.client()
    data = client.get_object(Bucket=BUCKET, Key=pack)["Body"].read()
    COUNTERS.clear()
    with_pack = plans()
    assert COUNTERS["bloom_pack_probes"] >= SEGMENTS and not COUNTERS["bloom_pack_errors"]
    assert all(str(s) in with_pack[s] for s in range(SEGMENTS))
    client.delete_object(Bucket=BUCKET, Key=pack)
    assert plans() == with_pack  # the merge indexes' answers
    for at in (70, len(data) - 1000, len(data) // 2):  # the directory; chunks
        damaged = bytearray(data)
        damaged[at] ^= 0x20
        client.put_object(Bucket=BUCKET, Key=pack, Body=bytes(damaged))
        assert plans() == with_pack, at
    client.put_object(Bucket=BUCKET, Key=pack, Body=data[: len(data) // 2])  # cut
    assert plans() == with_pack
