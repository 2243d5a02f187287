/*
 * carbonstore side index: .carbonindex (one per load task) and .carbonindexmerge (one
 * per segment). See docs/index-format.md for the file layout around this header.
 *
 * Statistics are stored column-oriented as packed little-endian buffers so a reader
 * turns them into numpy arrays with numpy.frombuffer instead of building one object
 * per row group. Bloom bitsets are NOT in this header: they live in the bloom region
 * after it and are addressed by BloomRefs, so loading for min/max pruning never
 * decodes bloom bytes.
 */
namespace py carbonstore.indexfiles._gen.carbonindex

/* How a column's min/max values are packed (see arrays.py for the array contract). */
enum ValueKind {
  NONE = 0     /* not prunable: no statistics are kept (INT96, nested, unknown) */
  INT64 = 1    /* fixed width: i64 little-endian */
  FLOAT64 = 2  /* fixed width: IEEE double little-endian */
  BYTES = 3    /* variable width: unsigned bytewise order */
  BIGINT = 4   /* variable width: two's complement big-endian integer (big decimals, UINT64) */
}

struct ColumnDesc {
  1: optional string column_id
  2: optional string name            /* leaf path joined with '.' */
  3: optional i32 physical_type      /* parquet Type enum value */
  4: optional string logical_type    /* e.g. "STRING", "DECIMAL(10,2)", "TIMESTAMP(MICROS,UTC)" */
  5: optional string spark_type
  6: optional i32 type_length
  7: optional i32 precision
  8: optional i32 scale
  9: optional ValueKind kind
  10: optional bool nested           /* below a LIST/MAP/repeated group: not prunable */
  11: optional string unit           /* "days", "micros" (temporal kinds), "" otherwise */
}

struct DataFile {
  1: optional string path            /* relative to the segment folder */
  2: optional i64 size
  3: optional i64 num_rows
  4: optional i64 footer_offset
  5: optional i32 footer_length
  6: optional string created_by
  7: optional i32 first_row_group    /* index of its first row group in the RowGroups table */
  8: optional i32 num_row_groups
}

/* One entry per row group of every file, in file order. */
struct RowGroups {
  1: optional binary file_index      /* i32[n] */
  2: optional binary row_group_index /* i32[n] */
  3: optional binary num_rows        /* i64[n] */
  4: optional binary offset          /* i64[n] byte range start */
  5: optional binary length          /* i64[n] byte range length */
}

/* n values: fixed width (data = n * 8 bytes) or variable (offsets = i64[n+1]). */
struct PackedValues {
  1: optional binary data
  2: optional binary offsets
}

/* flags bits: 1 has_min, 2 has_max, 4 min_exact, 8 max_exact, 16 null_page (pages only) */
struct ChunkStats {
  1: optional PackedValues min
  2: optional PackedValues max
  3: optional binary flags           /* u8[n] */
  4: optional binary null_count      /* i64[n], -1 unknown */
  5: optional binary nan_count       /* i64[n], -1 unknown */
}

struct PageStats {
  1: optional binary row_group       /* i32[p]: index into RowGroups */
  2: optional binary first_row_index /* i64[p] */
  3: optional binary row_count       /* i64[p] */
  4: optional binary offset          /* i64[p] page offset in the data file */
  5: optional binary compressed_size /* i32[p] */
  6: optional ChunkStats stats       /* ColumnIndex-equivalent; flags 0 when no ColumnIndex */
  7: optional binary boundary_order  /* i8[n row groups]: -1 no ColumnIndex, else parquet enum */
  8: optional binary has_pages       /* u8[n row groups]: 1 when the OffsetIndex was read */
}

/* In the bloom region each bitset is followed by the u64 xxh64 of its bytes (format 2). */
struct BloomRefs {
  1: optional binary offset          /* i64[n]: offset in the bloom region, -1 none */
  2: optional binary length          /* i32[n]: bitset bytes (the 8 checksum bytes not counted) */
}

struct ColumnIndexData {
  1: optional ChunkStats chunks      /* one entry per row group */
  2: optional PageStats pages
  3: optional BloomRefs blooms
}

struct IndexHeader {
  1: optional i32 format_version
  2: optional string writer
  3: optional string segment_id
  4: optional string task_id
  5: optional list<ColumnDesc> columns
  6: optional list<DataFile> files
  7: optional RowGroups row_groups
  8: optional list<ColumnIndexData> column_data   /* parallel to columns */
  9: optional i64 bloom_region_length
}
