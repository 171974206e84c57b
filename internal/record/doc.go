// Package record defines how entries are framed into batches: the unit of
// checksumming, atomicity and replication. Every backend stores these bytes as
// they are; they are encoded once, by the writer, and never re-encoded.
//
// The package does no I/O: it appends to and parses byte slices.
//
// # Batch layout (wire format, versions 1 and 2)
//
// All integers are little-endian. Offsets are in bytes from the batch start.
//
//	offset size field
//	     0    4 magic       "TRNB" (0x54 0x52 0x4e 0x42)
//	     4    1 version     1 (uncompressed) or 2 (compressed)
//	     5    1 flags       bits 0-2: compression codec (0 = none, 1 =
//	                        zstd, 2 = lz4; 3-7 are rejected), bit 3: an
//	                        appends section follows the entries, bits 4-7:
//	                        zero
//	     6    2 reserved    zero
//	     8    4 length      bytes in the batch, header included (>= 48)
//	    12    4 crc         CRC-32C (Castagnoli) of bytes [16, length)
//	    16    8 base offset offset of the first entry
//	    24    8 epoch       epoch of the writer that wrote the batch
//	    32    8 first time  the first entry's time, Unix nanoseconds
//	    40    4 count       number of entries (>= 1)
//	    44    4 body length version 1: zero; version 2: the bytes of the
//	                        body (entries and appends) uncompressed, at
//	                        most MaxBodyBytes (64 MiB)
//	    48    - body        version 1: the entries, count of them back to
//	                        back, then with flag bit 3 the appends section,
//	                        up to length; version 2: that body compressed
//	                        by the codec, up to length
//
// # Compression
//
// A log's writer may compress each batch's body, once, when it finishes the
// batch: the compressed bytes are what goes to disk, to replicas and to
// objects, and readers decompress. A batch is version 2 exactly when its
// codec is not none, and version 1 exactly when it is, with zero at byte
// 44: an uncompressed batch has the same bytes as before compression
// existed, and a reader that predates compression refuses a compressed one
// as "unknown version 2" rather than misreading it. Zstd bodies are one
// zstd frame (its own checksum is left out: the CRC covers it); lz4 bodies
// are one lz4 block, without the frame format. A writer stores a body
// uncompressed when compression does not make it shorter or when it is
// over MaxBodyBytes, so a compressed batch is never longer than the same
// batch uncompressed.
//
// The CRC covers the compressed bytes, so damage is found before anything
// is decompressed. A reader checks the declared body length against
// MaxBodyBytes and the count before allocating, decompresses into exactly
// that many bytes, and reports ErrCorrupt if the codec fails or the body
// is not exactly the declared length. The rules below then apply to the
// uncompressed body. The compressed bytes themselves are not canonical
// (another encoder version may compress the same body differently), the
// body they decompress to is.
//
// Each entry is:
//
//	varint   time delta: entry time minus first time, nanoseconds (zig-zag,
//	         wrapping); 0 for the first entry
//	uvarint  payload length, then the payload bytes
//	uvarint  number of properties, then for each, in strictly ascending
//	         bytewise key order (so no key repeats):
//	         uvarint key length, key bytes, uvarint value length, value bytes
//
// The appends section says which appends the batch holds, in entry order:
// the group committer merges many appends into one batch, and this is how
// the log records which (producer, sequence number) it applied, for
// deduplication after a restart. It is a sequence of runs, each of
// consecutive appends of one producer:
//
//	uvarint  producer ID (0: anonymous)
//	uvarint  number of appends in the run (>= 1)
//	then for each append of the run:
//	varint   sequence number minus the previous one of the run (the
//	         first: minus 0), zig-zag, wrapping
//	uvarint  number of entries of the append (>= 1)
//
// Two adjacent runs never have the same producer; an anonymous append has
// sequence 0 and a producer's appends have sequences >= 1; the counts sum
// to the batch's count. A batch whose appends are all anonymous has no
// section and flag bit 3 clear: its bytes are those of a batch written
// before the section existed, and it reads as one anonymous append of
// every entry.
//
// Varints are encoding/binary's, in their shortest form.
//
// Entry i of a batch has offset base offset + i. A batch is valid only if its
// magic, version, flags, reserved bytes, lengths and count are as above, its
// CRC matches, base offset + count (the offset after the batch) fits in 64
// bits, and its entries, then its appends section if flag bit 3 says so,
// are encoded as above and fill the body exactly. The encoding is therefore
// canonical: a valid batch is exactly the bytes its entries and appends
// encode to. Anything else is reported as ErrCorrupt (or
// io.ErrUnexpectedEOF when the bytes end before the batch does), and no entry
// of an invalid batch is ever returned. Because the CRC covers the whole
// batch, a batch is atomic: a crash leaves it whole or detectably broken.
package record
