"""Column statistics per segment and per table, shaped like the Hive metastore's (DESIGN.md 8).

The records and their merging, their files under ``Metadata/stats/``, the HLL hashing with
its compiled kernels, the accumulator a writer task feeds, and the driver side of analyze.
Statistics import nothing from ``carbonstore.segments``: the writer, the load commit and
compaction call into them.
"""
