// Package segment stores a contiguous range of a log's batches in one
// append-only file.
//
// A segment is open while its writer appends to it and sealed once a footer
// has been written after its last batch. A sealed segment is modified again
// only when Reopen makes the newest segment of a log open again for a new
// writer (its footer cut off, the cut synced before any batch follows);
// otherwise it is only deleted whole, or its file kept to be written over
// by a new segment (CreateOver), or replaced whole by a merged segment
// holding its batches at the same positions followed by those of the
// segments after it (WriteMerged).
//
// # Files written over
//
// Appending to a new file makes each fdatasync also commit the blocks the
// file grew by; writing over blocks a file already has, within its size,
// does not. So a log keeps the files of some deleted segments, and
// CreateOver makes a new segment in one: it writes the new header at the
// start of the file and syncs it before the file takes the segment's name,
// and the batches then overwrite the old ones. Until they do, the file holds
// the deleted segment's bytes after the new batches. The caller guarantees
// that every offset in the old file is below the new segment's base (its
// footer's next offset is at most the base). Seal writes the footer and cuts
// the file right after it, before its sync, so that a sealed segment's file
// always ends with its footer; Rewind cuts the old bytes after its mark too.
//
// A writer told to (Writer.ZeroAhead) also writes zeros past its last batch
// while its rounds are small, for the same reason: its appends then land on
// blocks the file has, and a new file needs no old one to reuse. Zeros are
// never a valid batch, so recovery ends the segment where they start, as it
// does at old bytes, and Seal and Rewind cut them off the same way.
//
// # File naming
//
// A segment file is named by the offset of its first entry, 20 decimal digits,
// and the suffix ".seg": 00000000000000004096.seg. Sorting the names sorts the
// segments.
//
// # File layout (format version 1; all integers little-endian)
//
//	header, 40 bytes:
//	     0    4 magic       "TRNS"
//	     4    1 version     1
//	     5    3 reserved    zero
//	     8    8 base offset offset of the segment's first entry
//	    16    8 epoch       epoch of the writer that created the segment
//	                        (later writers may append: each batch has
//	                        its own epoch)
//	    24    8 created     Unix nanoseconds
//	    32    4 crc         CRC-32C of bytes [0, 32)
//	    36    4 reserved    zero
//	batches, back to back, as defined by package record, with dense offsets
//	starting at the base offset
//	footer, only in a sealed segment:
//	    index entries, 16 bytes each: offset (8), file position (8) of a batch
//	    trailer, 48 bytes:
//	     0    8 index position  file position of the first index entry, which
//	                            is also where the batches end
//	     8    4 index count
//	    12    4 reserved        zero
//	    16    8 next offset     offset after the segment's last entry
//	    24    8 max time        newest entry time, Unix nanoseconds
//	    32    8 entry bytes     bytes of batches (index position - 40)
//	    40    4 crc             CRC-32C of the index entries and trailer [0, 40)
//	    44    4 magic           "TRNF"
//
// The sparse index holds the first batch and then one batch every
// IndexIntervalBytes of batch data, so a reader seeks to within that many
// bytes of any offset. The open segment's index is kept in memory and rebuilt
// by recovery.
//
// # Recovery
//
// Only the open (last) segment is scanned; sealed segments are trusted after
// their footer's CRC. Scanning stops at the first position that does not hold
// a valid batch with the expected base offset. A valid batch there whose base
// offset is at least the segment's base (but not the expected one) is damage.
// A valid batch whose base offset is below the segment's base is not: it can
// only be an old batch of the deleted segment whose file the segment was
// created over, and the segment ends there. From the position where the scan
// stopped, if no valid batch with a base offset at least the segment's base
// starts after it anywhere in the file, the bytes from it on are a torn
// tail left by a crash (and, in a file written over, old bytes) and are
// truncated. Otherwise the damage is not a torn tail: recovery refuses to
// guess and returns a *rpcerr.CorruptError naming the file and position.
// This is exact because the offsets of a segment's own batches are at least
// its base, and those of the old file's all below it: no old batch passes
// for a new one, and no new one is taken for old bytes. Inspect then describes such a file without changing it (its
// valid prefix, and the valid batches after the damage), Cut truncates it
// at the end of the prefix once a person has accepted the loss, and Verify
// reads every batch of a sealed segment against its footer.
package segment
