/*
 * The subset of the Apache Parquet format (parquet-format parquet.thrift) that
 * carbonstore reads. Field ids are the ones of the Parquet specification; fields we
 * do not declare are skipped by the Thrift decoder, so newer writers stay readable.
 * Every field is declared optional: the reader checks presence itself and reports a
 * corrupt file instead of failing Thrift validation.
 */
namespace py carbonstore.indexfiles._gen.parquet

enum Type {
  BOOLEAN = 0, INT32 = 1, INT64 = 2, INT96 = 3, FLOAT = 4, DOUBLE = 5,
  BYTE_ARRAY = 6, FIXED_LEN_BYTE_ARRAY = 7
}

enum ConvertedType {
  UTF8 = 0, MAP = 1, MAP_KEY_VALUE = 2, LIST = 3, ENUM = 4, DECIMAL = 5, DATE = 6,
  TIME_MILLIS = 7, TIME_MICROS = 8, TIMESTAMP_MILLIS = 9, TIMESTAMP_MICROS = 10,
  UINT_8 = 11, UINT_16 = 12, UINT_32 = 13, UINT_64 = 14,
  INT_8 = 15, INT_16 = 16, INT_32 = 17, INT_64 = 18, JSON = 19, BSON = 20, INTERVAL = 21
}

enum FieldRepetitionType { REQUIRED = 0, OPTIONAL = 1, REPEATED = 2 }

enum BoundaryOrder { UNORDERED = 0, ASCENDING = 1, DESCENDING = 2 }

struct Statistics {
  1: optional binary max
  2: optional binary min
  3: optional i64 null_count
  4: optional i64 distinct_count
  5: optional binary max_value
  6: optional binary min_value
  7: optional bool is_max_value_exact
  8: optional bool is_min_value_exact
  9: optional i64 nan_count
}

struct StringType {}
struct UUIDType {}
struct MapType {}
struct ListType {}
struct EnumType {}
struct DateType {}
struct Float16Type {}
struct NullType {}
struct JsonType {}
struct BsonType {}
struct VariantType { 1: optional i8 specification_version }
struct GeometryType { 1: optional string crs }
struct GeographyType { 1: optional string crs; 2: optional i32 algorithm }

struct DecimalType {
  1: optional i32 scale
  2: optional i32 precision
}

struct MilliSeconds {}
struct MicroSeconds {}
struct NanoSeconds {}

union TimeUnit {
  1: MilliSeconds MILLIS
  2: MicroSeconds MICROS
  3: NanoSeconds NANOS
}

struct TimestampType {
  1: optional bool isAdjustedToUTC
  2: optional TimeUnit unit
}

struct TimeType {
  1: optional bool isAdjustedToUTC
  2: optional TimeUnit unit
}

struct IntType {
  1: optional i8 bitWidth
  2: optional bool isSigned
}

union LogicalType {
  1: StringType STRING
  2: MapType MAP
  3: ListType LIST
  4: EnumType ENUM
  5: DecimalType DECIMAL
  6: DateType DATE
  7: TimeType TIME
  8: TimestampType TIMESTAMP
  10: IntType INTEGER
  11: NullType UNKNOWN
  12: JsonType JSON
  13: BsonType BSON
  14: UUIDType UUID
  15: Float16Type FLOAT16
  16: VariantType VARIANT
  17: GeometryType GEOMETRY
  18: GeographyType GEOGRAPHY
}

struct SchemaElement {
  1: optional Type type
  2: optional i32 type_length
  3: optional FieldRepetitionType repetition_type
  4: optional string name
  5: optional i32 num_children
  6: optional ConvertedType converted_type
  7: optional i32 scale
  8: optional i32 precision
  9: optional i32 field_id
  10: optional LogicalType logicalType
}

struct KeyValue {
  1: optional string key
  2: optional string value
}

struct SortingColumn {
  1: optional i32 column_idx
  2: optional bool descending
  3: optional bool nulls_first
}

struct ColumnMetaData {
  1: optional Type type
  2: optional list<i32> encodings
  3: optional list<string> path_in_schema
  4: optional i32 codec
  5: optional i64 num_values
  6: optional i64 total_uncompressed_size
  7: optional i64 total_compressed_size
  9: optional i64 data_page_offset
  10: optional i64 index_page_offset
  11: optional i64 dictionary_page_offset
  12: optional Statistics statistics
  14: optional i64 bloom_filter_offset
  15: optional i32 bloom_filter_length
}

struct EncryptionWithFooterKey {}

struct EncryptionWithColumnKey {
  1: optional list<string> path_in_schema
  2: optional binary key_metadata
}

union ColumnCryptoMetaData {
  1: EncryptionWithFooterKey ENCRYPTION_WITH_FOOTER_KEY
  2: EncryptionWithColumnKey ENCRYPTION_WITH_COLUMN_KEY
}

struct ColumnChunk {
  1: optional string file_path
  2: optional i64 file_offset
  3: optional ColumnMetaData meta_data
  4: optional i64 offset_index_offset
  5: optional i32 offset_index_length
  6: optional i64 column_index_offset
  7: optional i32 column_index_length
  8: optional ColumnCryptoMetaData crypto_metadata
  9: optional binary encrypted_column_metadata
}

struct RowGroup {
  1: optional list<ColumnChunk> columns
  2: optional i64 total_byte_size
  3: optional i64 num_rows
  4: optional list<SortingColumn> sorting_columns
  5: optional i64 file_offset
  6: optional i64 total_compressed_size
  7: optional i16 ordinal
}

struct TypeDefinedOrder {}
struct IEEE754TotalOrder {}

union ColumnOrder {
  1: TypeDefinedOrder TYPE_ORDER
  2: IEEE754TotalOrder IEEE_754_TOTAL_ORDER
}

struct PageLocation {
  1: optional i64 offset
  2: optional i32 compressed_page_size
  3: optional i64 first_row_index
}

struct OffsetIndex {
  1: optional list<PageLocation> page_locations
  2: optional list<i64> unencoded_byte_array_data_bytes
}

struct ColumnIndex {
  1: optional list<bool> null_pages
  2: optional list<binary> min_values
  3: optional list<binary> max_values
  4: optional BoundaryOrder boundary_order
  5: optional list<i64> null_counts
  6: optional list<i64> repetition_level_histograms
  7: optional list<i64> definition_level_histograms
  8: optional list<i64> nan_counts
}

struct AesGcmV1 {
  1: optional binary aad_prefix
  2: optional binary aad_file_unique
  3: optional bool supply_aad_prefix
}

struct AesGcmCtrV1 {
  1: optional binary aad_prefix
  2: optional binary aad_file_unique
  3: optional bool supply_aad_prefix
}

union EncryptionAlgorithm {
  1: AesGcmV1 AES_GCM_V1
  2: AesGcmCtrV1 AES_GCM_CTR_V1
}

struct FileMetaData {
  1: optional i32 version
  2: optional list<SchemaElement> schema
  3: optional i64 num_rows
  4: optional list<RowGroup> row_groups
  5: optional list<KeyValue> key_value_metadata
  6: optional string created_by
  7: optional list<ColumnOrder> column_orders
  8: optional EncryptionAlgorithm encryption_algorithm
  9: optional binary footer_signing_key_metadata
}

struct SplitBlockAlgorithm {}
union BloomFilterAlgorithm { 1: SplitBlockAlgorithm BLOCK }
struct XxHash {}
union BloomFilterHash { 1: XxHash XXHASH }
struct Uncompressed {}
union BloomFilterCompression { 1: Uncompressed UNCOMPRESSED }

struct BloomFilterHeader {
  1: optional i32 numBytes
  2: optional BloomFilterAlgorithm algorithm
  3: optional BloomFilterHash hash
  4: optional BloomFilterCompression compression
}
