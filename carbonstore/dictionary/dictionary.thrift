/*
 * Global dictionary file formats.
 *
 * A .dict file is a sequence of frames, each a 4-byte little-endian length followed by
 * one DictionaryChunk in the Thrift compact protocol. A chunk holds at most
 * carbon.dictionary.chunk.size values, PLAIN-encoded: byte arrays (string as UTF-8,
 * binary) as a list of binaries; fixed-width values (integers, dates, timestamps as
 * little-endian int64; decimals as 16-byte little-endian two's complement unscaled
 * values) packed back to back in `fixed`.
 *
 * A .sortindex file is one SortIndex: the surrogates of a dictionary of `dict_size`
 * values in value order, and the inverted index (rank of each surrogate), both as
 * packed little-endian int32.
 */

namespace py carbonstore_dictionary

enum ValueEncoding {
  BYTE_ARRAY = 1,
  INT64 = 2,
  DECIMAL128 = 3,
}

struct DictionaryChunk {
  1: required ValueEncoding encoding
  2: required i32 num_values
  3: optional list<binary> byte_arrays
  4: optional binary fixed
}

struct SortIndex {
  1: required i32 dict_size
  /* surrogates ordered by value: sorted_surrogates[rank] = surrogate */
  2: required binary sorted_surrogates
  /* ranks[surrogate - 2] = rank of that surrogate's value */
  3: required binary ranks
}
