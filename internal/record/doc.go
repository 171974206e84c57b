// Package record defines how entries are framed into batches: the unit of
// checksumming, atomicity and replication. Every backend stores these bytes as
// they are; they are encoded once, by the writer, and never re-encoded.
//
// The package does no I/O: it appends to and parses byte slices.
//
// # Batch layout (wire format, version 1)
//
// All integers are little-endian. Offsets are in bytes from the batch start.
//
//	offset size field
//	     0    4 magic       "TRNB" (0x54 0x52 0x4e 0x42)
//	     4    1 version     1
//	     5    1 flags       bits 0-2: compression codec (0 = none; others are
//	                        reserved and rejected), bits 3-7: zero
//	     6    2 reserved    zero
//	     8    4 length      bytes in the batch, header included (>= 48)
//	    12    4 crc         CRC-32C (Castagnoli) of bytes [16, length)
//	    16    8 base offset offset of the first entry
//	    24    8 epoch       epoch of the writer that wrote the batch
//	    32    8 first time  the first entry's time, Unix nanoseconds
//	    40    4 count       number of entries (>= 1)
//	    44    4 reserved    zero
//	    48    - entries     count entries, back to back
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
// Varints are encoding/binary's, in their shortest form.
//
// Entry i of a batch has offset base offset + i. A batch is valid only if its
// magic, version, flags, reserved bytes, length and count are as above, its
// CRC matches, base offset + count (the offset after the batch) fits in 64
// bits, and its entries are encoded as above and fill the body exactly.
// The encoding is therefore canonical: a valid batch is exactly the bytes its
// entries encode to. Anything else is reported as ErrCorrupt (or
// io.ErrUnexpectedEOF when the bytes end before the batch does), and no entry
// of an invalid batch is ever returned. Because the CRC covers the whole
// batch, a batch is atomic: a crash leaves it whole or detectably broken.
package record
