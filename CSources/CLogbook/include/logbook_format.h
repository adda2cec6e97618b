/*
 * logbook_format.h — the on-disk byte format of a .logbook bundle (format version 3).
 *
 * This header is the single definition of every byte Logbook writes. docs/FORMAT.md mirrors it
 * for readers who will never open C. All integers are little-endian. Every enum starts at 1 so that
 * a zeroed page never decodes as data, except the chunk state, whose 0 means "free" for that reason.
 *
 * A bundle is a directory:
 *
 *   NAME.logbook/
 *     ring    the ring: a header page and a fixed number of equal chunks (preallocated, mapped)
 *     meta    append-only metadata entries: sessions (processes), loggers, call sites
 *     lock    the writer lock (an OFD lock, F_OFD_SETLK); readers never take it
 *
 * ring file
 * ---------
 *
 *   0                 4096            4096 + chunk_size          ...
 *   +-----------------+----------------+----------------+-- ... --+----------------+
 *   | lb_ring_header  | chunk 0        | chunk 1        |         | chunk N-1      |
 *   +-----------------+----------------+----------------+-- ... --+----------------+
 *
 *   A chunk is owned by one writing thread at a time. Chunk sequence numbers come from one global
 *   counter (the only shared atomic step); sequence s lives in slot s % N unless that slot was busy,
 *   in which case the claimer takes the next sequence (so sequences have gaps). Each successful
 *   claim also takes the next CLAIM NUMBER (0, 1, 2, ... without gaps, for the ring's whole life):
 *   every chunk ever claimed is accounted for, which is how `verify` finds chunks that are gone.
 *   A chunk:
 *
 *   0                64                                                     chunk_size
 *   +----------------+-----------+-----------+-----+-----------+------------+
 *   | lb_chunk_header| record    | record    | ... | 8 zero    | stale or   |
 *   | (64 bytes)     | (8-align) | (8-align) |     | bytes     | zero bytes |
 *   +----------------+-----------+-----------+-----+-----------+------------+
 *                                                    ^ the header slot after the last record is
 *                                                      zeroed before that record is committed
 *
 * record
 * ------
 *
 *   0        8            16         20        22      23      24
 *   +--------+------------+----------+---------+-------+-------+---------------------+
 *   | header | timestamp  | site id  | logger  | level | 0     | arguments ...       |
 *   | u64    | u64 ticks  | u32      | u16     | u8    | u8    | tag(u8) + value ... |
 *   +--------+------------+----------+---------+-------+-------+---------------------+
 *
 *   The header word is stored LAST, with a release store, and is the commit:
 *
 *     bits  0..23  length: exact byte count of the record including this header; the next record
 *                  starts at the length rounded up to 8 (after the page check, if any)
 *     bits 24..27  kind (lb_record_kind)
 *     bits 28..31  LB_RECORD_CHECK (0xB)
 *     bits 32..63  tag: the low 32 bits of the chunk's sequence (bytes of an earlier lap of the
 *                  ring carry another tag and are never taken as records)
 *
 *   page check: a record whose bytes lie in more than one 4 KiB page of its chunk (offsets taken
 *   from the chunk's start, which is page-aligned in the ring) is followed by an 8-byte check word
 *   at its rounded-up end, written before the header:
 *
 *     +--------+-- ... --+--------+----------------------+----------------------+
 *     | header | bytes   | 0 pad  | crc u32              | tag u32              |
 *     +--------+-- ... --+--------+----------------------+----------------------+
 *              crc = CRC-32C of the chunk's sequence (u64), the header word as committed, then
 *                    the record's bytes 8..length-1;  tag = the header's tag again
 *
 *   After a power loss each page of the ring can come from another moment; the header's page
 *   proves the header, and the check proves the pages after it (LB_PAGE_SIZE). A record in one
 *   page needs none: a page is written whole.
 *
 *   A record longer than a chunk is written as fragments (FIRST, MIDDLE..., LAST) at the start of
 *   consecutive chunks of the same writer; each continuation chunk names the chunk before it by
 *   prev_delta (its sequence minus the previous one's). A FIRST or MIDDLE fragment fills its chunk
 *   to the end. The fragments' bodies (the bytes after each 8-byte header) concatenated form the
 *   logical record from its timestamp on.
 *
 * argument encoding (after the fixed 24 bytes; no padding between arguments)
 *
 *     tag u8, then: bool u8 | i8 u8 | i16 2 | i32 4 | i64 8 | int 8 | u8 1 | u16 2 | u32 4 | u64 8 |
 *     uint 8 | f32 4 | f64 8 | string/static string/bytes: u32 length + bytes |
 *     redacted: u8 tag of the value that was withheld (the value never reaches the disk) |
 *     metadata/list/map/error: u32 count, then that many items (below)
 *
 *   The message's arguments come first, one per "{}" of the site's template. After them a record
 *   may carry, once each and in this order:
 *
 *     METADATA n   n key/value pairs: the record's structured metadata (metadata:, swift-log's)
 *     ERROR 2      two strings: the type of an attached error, then its description
 *
 *   A pair is a key (string or static string) followed by one value. A value is a scalar, string,
 *   bytes or redacted argument, or a container: LIST n (n values) or MAP n (n pairs). Containers
 *   nest at most LB_ARG_MAX_DEPTH deep (METADATA counts as one level). A reader rejects a record
 *   whose counts run past its end or that breaks these rules.
 *
 * meta file
 * ---------
 *
 *   +---------------------+---------------------+-- ... --+
 *   | lb_meta_file_header | entry               |         |
 *   | (16 bytes)          | 12-byte head + body |         |
 *   +---------------------+---------------------+-- ... --+
 *
 *   entry head: u32 body length, u32 CRC-32C of the body, u16 kind (lb_meta_kind), u16 0.
 *   Strings in bodies are u32 length + UTF-8 bytes. An entry is written completely before any record
 *   that refers to it is committed; a torn entry can therefore only be the last one.
 *
 *     SESSION  u32 session, u32 pid, u64 ticks_per_second, u32 clock (lb_clock_kind), u32 0,
 *              u64 tick anchor, u64 wall anchor ns, string host, string executable
 *     LOGGER   u32 session, u16 logger id, u16 0, string name
 *     SITE     u32 session, u32 site id, u32 line, u32 column, string file, string function,
 *              string template (literal text with "{}" for each argument; "{{" is a literal "{"),
 *              then optionally string source (the module or subsystem of the call; absent or
 *              empty when unknown). Readers ignore bytes after the fields they know.
 *
 *   Site and logger ids are scoped to the session that registered them; chunk headers name their
 *   session.
 *
 * archive files (written by the archiver, CSources/CLogbookArchive)
 * -------------
 *
 *   The archive directory (default NAME.logbook/archive; a custom directory is reached through the
 *   symlink NAME.logbook/archive) holds numbered files:
 *
 *     archive-0000000007.lba.writing   the file being appended to (at most one)
 *     archive-0000000007.lba           a complete file: ends with an END frame, fsynced, renamed,
 *                                      never written again
 *     archive-0000000007.lba.unsynced  complete, but its fsync failed: it may miss data
 *
 *   Numbers have no gaps: the ring header records the oldest number retention kept
 *   (archive_first_number) and the next number to be created (archive_next_number), so a reader
 *   knows every file that must exist.
 *
 *   +--------------------------+-------+-------+-- ... --+-----------+
 *   | lb_archive_file_header   | frame | frame |         | END frame |
 *   | (64 bytes)               |       |       |         | (80 bytes)|
 *   +--------------------------+-------+-------+-- ... --+-----------+
 *
 *   frame: lb_archive_frame_head (16 bytes: u32 body length, u16 kind, u16 0, u32 CRC-32C of the
 *   body, u32 CRC-32C of the 12 bytes before), then the body, then zeros up to a multiple of 8.
 *
 *     META   meta entries exactly as in the meta file (12-byte head + body each): every entry of
 *            each session whose chunks the file holds, written before the first such chunk, so
 *            that a single archive file decodes on its own
 *     CHUNK  a chunk image: the chunk's first `committed` bytes (header and records) as they were
 *            in the ring while the archiver held it: `state` reads ARCHIVING (readers accept any
 *            state from ACTIVE on and otherwise ignore it); the body length is the image length.
 *            Its body CRC is computed by the archiver thread, never on a logging thread.
 *     END    lb_archive_end: what the file holds (chunk and record counts, sequence and claim
 *            ranges, its own offset). Written last, when the file is completed: a complete file
 *            without it, or whose frames disagree with it, was cut short or damaged.
 *
 *   A chunk sequence appears at most once among the files of a directory, but may also still be
 *   in the ring: readers take each sequence once. A crash can leave an incomplete last frame (or a
 *   zeroed tail) in the .writing file; the next archiver cuts it off. It never cuts anything else.
 *
 * compressed archive files (.lba.zst, written by the archiver's compression thread)
 * ------------------------
 *
 *     archive-0000000007.lba.zst           a complete file, compressed: the same bytes as the
 *                                          .lba it replaced, in zstd frames
 *     archive-0000000007.lba.zst.writing   being compressed (deleted by the next archiver)
 *
 *   A complete .lba is compressed into .lba.zst.writing, which is fsynced and checked (every
 *   frame decompressed and its CRC compared) before it is renamed .lba.zst; the directory is
 *   fsynced, and only then is the .lba deleted. Both names may be present for a moment (or after a
 *   crash, until the next archiver deletes the .lba): they hold the same bytes.
 *
 *   The file is a valid zstd stream: `zstd -d` turns it back into the .lba, byte for byte. Logbook's
 *   own parts are zstd skippable frames (u32 LB_ZST_SKIPPABLE_MAGIC, u32 length, bytes), which
 *   zstd ignores:
 *
 *   +-----------------+------------+-- ... --+------------+-----------+----------------------+
 *   | skippable:      | zstd frame | zstd    | zstd frame | skippable:| skippable: seek table |
 *   | archive header  | 0          | frames  | N-1        | listing   | (N x 16) + footer (64)|
 *   | (8 + 64 bytes)  |            |         |            |           |                       |
 *   +-----------------+------------+-- ... --+------------+-----------+----------------------+
 *
 *   - The first skippable frame holds the .lba's lb_archive_file_header, verbatim: a file is
 *     recognised as compressed by its first 4 bytes, and identified without decompressing.
 *   - Data frames: frame k is the zstd compression (with zstd's content size, without its
 *     checksum: the seek table has a CRC-32C) of bytes [u_k, u_k + length_k) of the .lba, u_0 = 0. Every boundary is an archive frame
 *     boundary, and a data frame holds whole archive frames adding up to about
 *     LB_ZST_FRAME_TARGET bytes (a larger archive frame is a data frame alone), so that a reader
 *     decompresses one data frame to read a chunk. No data frame is longer than LB_ZST_FRAME_MAX.
 *   - The listing: one zstd frame whose content is a sequence of pieces { u64 offset, u32 length,
 *     u32 0, bytes, zeros to a multiple of 8 } copied from the .lba: its header, and per archive
 *     frame its head and its body (a CHUNK frame: the first 80 bytes of its body only). A reader
 *     lists a file's frames from it without decompressing the data frames.
 *   - The seek table: per data frame an lb_zst_seek_entry, in order; then lb_zst_footer, the
 *     file's last 64 bytes.
 *
 *   A reader checks the footer, the table and each decompressed data frame's CRC-32C. A data frame
 *   that fails is damage: the chunks in it are reported lost, the others read. A damaged footer or
 *   table is reported, and the data frames are then found by walking zstd's own frame and block
 *   headers (the CRCs of the archive frames inside then guard the content); a damaged listing is
 *   read around (the data frames serve every read).
 */
#ifndef LOGBOOK_FORMAT_H
#define LOGBOOK_FORMAT_H

#include <stdint.h>
#include <stdatomic.h>

#define LB_FORMAT_VERSION 3u

#define LB_RING_MAGIC "LBRING01"
#define LB_RING_HEADER_SIZE 4096u
#define LB_CHUNK_MAGIC 0x4b43424cu   /* "LBCK" */
#define LB_CHUNK_HEADER_SIZE 64u
#define LB_RECORD_FIXED_SIZE 24u     /* header + timestamp + site + logger + level + pad */
#define LB_RECORD_CHECK 0xBu         /* bits 28..31 of every committed record header */
#define LB_RECORD_LENGTH_MASK 0xFFFFFFu /* bits 0..23: the record's length */
#define LB_RECORD_CHECK_SIZE 8u      /* the page check after a record that crosses a page */
#define LB_PAGE_SIZE 4096u           /* the unit a power loss can tear a file into */
#define LB_META_MAGIC "LBMETA01"
#define LB_META_ENTRY_HEAD_SIZE 12u

/* Limits the decoder enforces; the writer never produces anything beyond them. */
#define LB_CHUNK_SIZE_MIN 4096u
#define LB_CHUNK_SIZE_MAX (1u << 24)
#define LB_CHUNK_COUNT_MAX (1u << 24)
#define LB_RECORD_MAX_SIZE (1u << 20)         /* largest logical record: 1 MiB */
#define LB_META_ENTRY_MAX_SIZE (1u << 20)

enum lb_chunk_state {
    LB_CHUNK_FREE = 0,      /* never used since the ring was created */
    LB_CHUNK_CLAIMING = 1,  /* being reset by a claimer: not readable */
    LB_CHUNK_ACTIVE = 2,    /* owned by a writer; records are appended and committed */
    LB_CHUNK_SEALED = 3,    /* no more records will be added */
    LB_CHUNK_ARCHIVED = 4,  /* sealed and persisted by the archiver (reusable under lossless) */
    LB_CHUNK_ARCHIVING = 5, /* sealed; the archiver's write of it is in flight: never reclaimed */
};

enum lb_record_kind {
    LB_RECORD_FULL = 1,
    LB_RECORD_FIRST = 2,
    LB_RECORD_MIDDLE = 3,
    LB_RECORD_LAST = 4,
};

enum lb_arg_type {
    LB_ARG_BOOL = 1,
    LB_ARG_I8 = 2,
    LB_ARG_I16 = 3,
    LB_ARG_I32 = 4,
    LB_ARG_I64 = 5,
    LB_ARG_INT = 6,
    LB_ARG_U8 = 7,
    LB_ARG_U16 = 8,
    LB_ARG_U32 = 9,
    LB_ARG_U64 = 10,
    LB_ARG_UINT = 11,
    LB_ARG_F32 = 12,
    LB_ARG_F64 = 13,
    LB_ARG_STRING = 14,
    LB_ARG_STATIC_STRING = 15,
    LB_ARG_BYTES = 16,
    LB_ARG_REDACTED = 17,
    LB_ARG_METADATA = 18,   /* u32 pair count: the record's metadata (after the message args) */
    LB_ARG_LIST = 19,       /* u32 value count */
    LB_ARG_MAP = 20,        /* u32 pair count */
    LB_ARG_ERROR = 21,      /* u32 count (2): error type string, error description string */
};

#define LB_ARG_MAX_DEPTH 8u   /* nesting of METADATA/ERROR, LIST and MAP */

enum lb_wrap_policy {
    LB_WRAP_OVERWRITE = 1,  /* reuse the oldest sealed chunk: a flight recorder */
    LB_WRAP_LOSSLESS = 2,   /* reuse only archived chunks (the archiver's policy) */
};

enum lb_archive_backend {
    LB_ARCHIVE_BACKEND_IO_URING = 1,  /* batched writes through io_uring */
    LB_ARCHIVE_BACKEND_PWRITE = 2,    /* pwritev from the archiver thread (io_uring unavailable) */
};

/* The ring header's writer_state. A session that ends without a clean close (a crash) leaves
 * OPEN behind; the next writer counts it in unclean_sessions. */
enum lb_writer_state {
    LB_WRITER_STATE_OPEN = 1,    /* a writer has the bundle open, or crashed */
    LB_WRITER_STATE_CLOSED = 2,  /* the last writer closed it cleanly: every counter is exact */
};

enum lb_clock_kind {
    LB_CLOCK_TSC = 1,        /* rdtsc ticks; invariant TSC */
    LB_CLOCK_MONOTONIC = 2,  /* CLOCK_MONOTONIC nanoseconds */
};

enum lb_meta_kind {
    LB_META_SESSION = 1,
    LB_META_LOGGER = 2,
    LB_META_SITE = 3,
};

/* Why records were dropped. Every drop is counted under one of these. */
enum lb_drop_reason {
    LB_DROP_TOO_LARGE = 0,  /* the record exceeded LB_RECORD_MAX_SIZE */
    LB_DROP_NO_CHUNK = 1,   /* no chunk could be claimed (every chunk busy) */
    LB_DROP_REENTRANT = 2,  /* logged while the same thread was building a record */
    LB_DROP_CLOSED = 3,     /* logged to a closed bundle */
    LB_DROP_META = 4,       /* the call site or logger could not be written to the meta file */
    LB_DROP_RING_FULL = 5,  /* lossless ring: every chunk still waits for the archiver */
    LB_DROP_REASON_COUNT = 6,
};

/* The ring file's first page. Fields before `header_crc` are written once at creation. */
typedef struct lb_ring_header {
    char magic[8];                 /* LB_RING_MAGIC */
    uint32_t format_version;       /* LB_FORMAT_VERSION */
    uint32_t header_size;          /* LB_RING_HEADER_SIZE: offset of chunk 0 */
    uint32_t chunk_size;
    uint32_t chunk_count;
    uint32_t wrap_policy;          /* lb_wrap_policy */
    uint32_t reserved0;
    uint64_t created_wall_ns;
    uint32_t header_crc;           /* CRC-32C of the bytes before this field */
    uint8_t pad0[20];
    /* cache line 1 — written by claimers */
    _Atomic uint64_t next_sequence; /* next chunk sequence to hand out (starts at 1) */
    _Atomic uint32_t writer_pid;    /* pid of the current or last writer */
    _Atomic uint32_t session_count; /* sessions ever opened for writing */
    uint8_t pad1[48];
    /* cache line 2 — counters, added to when a chunk is claimed or sealed or a record dropped */
    _Atomic uint64_t records;       /* records in sealed chunks */
    _Atomic uint64_t bytes;         /* record bytes in sealed chunks */
    _Atomic uint64_t chunks_claimed;/* the next claim number: chunks ever claimed */
    _Atomic uint64_t chunks_reused; /* claims that overwrote a sealed or archived chunk */
    _Atomic uint64_t large_records; /* records written as fragments */
    _Atomic uint64_t drops[LB_DROP_REASON_COUNT];
    _Atomic uint64_t records_overwritten; /* records of sealed, unarchived chunks reused
                                             (overwrite policy): gone from the bundle for good */
    _Atomic uint64_t claims_abandoned; /* claims a crash cut short before their header was
                                          complete (recovery): their numbers hold no chunk */
    _Atomic uint64_t chunks_discarded; /* chunks with a damaged header that recovery cleared */
    _Atomic uint32_t writer_state;  /* lb_writer_state: how the last writer session ended */
    _Atomic uint32_t unclean_sessions; /* writer sessions that ended without a clean close
                                          (counted by the next writer) */
    _Atomic uint64_t records_kept_from_claims; /* overwrite policy: records of chunks recovery kept
                                          from claims a crash cut short (the old occupant's header
                                          still whole). Such a claim may already have counted them
                                          in records_overwritten: up to this many records counted
                                          overwritten may still be in the bundle */
    /* cache line 4 — archiver status, written by the archiver thread (0 when none ever ran) */
    _Atomic uint64_t archived_chunks;   /* chunks persisted into archive files, ever */
    _Atomic uint64_t archived_bytes;    /* chunk bytes persisted, ever */
    _Atomic uint64_t archive_failures;  /* failed archive writes, syncs, creates or renames */
    _Atomic uint32_t archive_last_error;/* errno of the last failure; 0 after the next success */
    _Atomic uint32_t archive_backend;   /* lb_archive_backend of the last archiver */
    _Atomic uint64_t chunks_lost_unarchived; /* overwrite: sealed chunks reused before archiving */
    _Atomic uint64_t archive_first_number;   /* oldest archive file retention keeps (files below
                                                it were deleted on purpose); 0: none deleted */
    _Atomic uint64_t archive_next_number;    /* number of the next archive file: every number
                                                from the first up to this one exists */
    _Atomic uint64_t archive_retired_claim;  /* 1 + the highest claim number of a chunk in a file
                                                retention deleted: lower claims may be gone */
    _Atomic uint64_t archive_retired_records;/* records in the files retention deleted */
    uint8_t pad3[LB_RING_HEADER_SIZE - 256 - 72];
} lb_ring_header;

/* The first 64 bytes of every chunk. `state`, `committed` and `record_count` change while the
 * chunk is active (owner: release stores); the rest is written once per claim, then checked by
 * `header_crc`. */
typedef struct lb_chunk_header {
    uint32_t magic;                /* LB_CHUNK_MAGIC */
    _Atomic uint32_t state;        /* lb_chunk_state */
    uint64_t sequence;             /* global chunk sequence, >= 1; sequence % chunk_count = slot */
    uint64_t claim;                /* claim number: 0, 1, 2, ... one per chunk ever claimed */
    uint64_t tick_anchor;          /* clock ticks at claim */
    uint64_t wall_anchor_ns;       /* CLOCK_REALTIME at claim */
    uint32_t prev_delta;           /* sequence - this writer's previous chunk's sequence; 0: none */
    uint32_t thread_id;            /* gettid() of the writer */
    uint32_t session;              /* session (meta SESSION entry) of the writer */
    uint32_t header_crc;           /* CRC-32C of magic and bytes 8..51 (see lb_chunk_crc) */
    _Atomic uint32_t committed;    /* end offset of the last committed record, from chunk start */
    _Atomic uint32_t record_count; /* records committed in this chunk (FULL and LAST records) */
} lb_chunk_header;

/* The sequence of the chunk that the same writer filled before this one (0: none). */
static inline uint64_t lb_chunk_prev_sequence(const lb_chunk_header *h) {
    return h->prev_delta && h->prev_delta < h->sequence ? h->sequence - h->prev_delta : 0;
}

#define LB_ARCHIVE_MAGIC "LBARCH01"
#define LB_ARCHIVE_HEADER_SIZE 64u
#define LB_ARCHIVE_FRAME_HEAD_SIZE 16u

enum lb_archive_frame_kind {
    LB_ARCHIVE_FRAME_META = 1,
    LB_ARCHIVE_FRAME_CHUNK = 2,
    LB_ARCHIVE_FRAME_END = 3,
};

/* The head of every frame of an archive file. */
typedef struct lb_archive_frame_head {
    uint32_t length;               /* body bytes (the frame takes 16 + length rounded up to 8) */
    uint16_t kind;                 /* lb_archive_frame_kind */
    uint16_t reserved;             /* 0 */
    uint32_t body_crc;             /* CRC-32C of the body */
    uint32_t head_crc;             /* CRC-32C of the 12 bytes before this field */
} lb_archive_frame_head;

/* The body of the END frame, the last frame of a complete archive file. */
typedef struct lb_archive_end {
    uint64_t file_number;          /* as in the file header */
    uint64_t chunks;               /* CHUNK frames in the file */
    uint64_t records;              /* the record_count of those chunks, summed */
    uint64_t first_sequence;       /* lowest and highest chunk sequence (0 when no chunk) */
    uint64_t last_sequence;
    uint64_t first_claim;          /* lowest and highest claim number (0 when no chunk) */
    uint64_t last_claim;
    uint64_t end_offset;           /* file offset of the END frame itself */
} lb_archive_end;

#define LB_ARCHIVE_END_FRAME_SIZE (LB_ARCHIVE_FRAME_HEAD_SIZE + sizeof(lb_archive_end))

typedef struct lb_archive_file_header {
    char magic[8];                 /* LB_ARCHIVE_MAGIC */
    uint32_t format_version;       /* LB_FORMAT_VERSION */
    uint32_t header_size;          /* LB_ARCHIVE_HEADER_SIZE: offset of the first frame */
    uint32_t chunk_size;           /* geometry of the ring the chunks came from */
    uint32_t chunk_count;
    uint64_t file_number;          /* as in the file name */
    uint64_t created_wall_ns;      /* when the file was started (age rolling counts from here) */
    uint64_t ring_created_wall_ns; /* the ring's created_wall_ns: which bundle the chunks are of */
    uint32_t header_crc;           /* CRC-32C of the bytes before this field */
    uint8_t reserved[12];
} lb_archive_file_header;

/* Compressed archive files (.lba.zst). */
#define LB_ZST_SKIPPABLE_MAGIC 0x184D2A5Bu   /* a zstd skippable frame (0x184D2A50 + 11) */
#define LB_ZST_FOOTER_MAGIC "LBZSTEND"
#define LB_ZST_FRAME_TARGET (1u << 20)       /* uncompressed bytes per data frame, about */
#define LB_ZST_FRAME_MAX (64u << 20)         /* no data frame decompresses to more */
#define LB_ZST_HEADER_FRAME_SIZE (8u + LB_ARCHIVE_HEADER_SIZE)

/* One data frame in the seek table. Its file offset is the footer's frames_offset plus the
 * compressed lengths of the frames before it; its offset in the .lba the sum of their
 * uncompressed lengths. */
typedef struct lb_zst_seek_entry {
    uint32_t compressed_length;    /* the zstd frame's bytes in the file */
    uint32_t uncompressed_length;  /* bytes of the .lba it holds */
    uint32_t crc;                  /* CRC-32C of those uncompressed bytes */
    uint32_t compressed_crc;       /* CRC-32C of the zstd frame's bytes as stored, so that they can
                                      be checked without decompressing them (the uploader does, as
                                      it sends); 0 in files written before it was recorded: not
                                      checked (nor is a frame whose CRC happens to be 0) */
} lb_zst_seek_entry;

/* The last 64 bytes of a .lba.zst. */
typedef struct lb_zst_footer {
    uint64_t uncompressed_size;    /* the .lba's size: the data frames' uncompressed lengths summed */
    uint64_t frames_offset;        /* file offset of data frame 0 (LB_ZST_HEADER_FRAME_SIZE) */
    uint64_t listing_offset;       /* file offset of the listing's skippable frame */
    uint32_t listing_length;       /* its bytes after the 8-byte skippable head (a zstd frame) */
    uint32_t listing_crc;          /* CRC-32C of those bytes */
    uint64_t table_offset;         /* file offset of the first seek entry */
    uint32_t frame_count;          /* data frames (seek entries) */
    uint32_t table_crc;            /* CRC-32C of the seek entries */
    char magic[8];                 /* LB_ZST_FOOTER_MAGIC */
    uint32_t compression_level;    /* the zstd level it was written with */
    uint32_t footer_crc;           /* CRC-32C of the 60 bytes before this field */
} lb_zst_footer;

typedef struct lb_meta_file_header {
    char magic[8];                 /* LB_META_MAGIC */
    uint32_t format_version;
    uint32_t reserved;
} lb_meta_file_header;

/* durable — what the last sync made durable (lb_bundle_sync, lb_options.sync_interval_ms).
 *
 *   +------------------------+------------------------+
 *   | copy 0                 | copy 1                 |   each copy_size bytes: 96 + 24 x
 *   | head (96) + entries    | head (96) + entries    |   chunk_count, rounded up to 4096
 *   +------------------------+------------------------+
 *
 * mirror — the durable copies of the chunks: chunk_count x chunk_size bytes, slot s at s x
 * chunk_size (the ring's layout without its header page), preallocated.
 *
 * A sync takes a snapshot of every chunk the ring holds (sequence, claim, committed end, record
 * count: its records through that end were committed), syncs meta and the archive file being
 * written, copies what each chunk committed since the last sync into the mirror (then its header,
 * carrying the snapshot's end and count) and fdatasyncs it, and only then writes the snapshot into
 * the copy generation % 2 of `durable` and fdatasyncs that. The ring is never synced. Readers take
 * the valid copy with the higher generation (a write torn by a power loss leaves the other, one
 * sync older) and each listed chunk's prefix from the mirror when the ring's is torn; every record
 * a valid copy lists is durable: a reader must find it, or verify fails. */
#define LB_DURABLE_MAGIC "LBDURAB1"

typedef struct lb_durable_head {
    char magic[8];                 /* LB_DURABLE_MAGIC */
    uint32_t format_version;       /* LB_FORMAT_VERSION */
    uint32_t chunk_count;          /* the ring's */
    uint64_t ring_created_wall_ns; /* the ring's: which ring the snapshot describes */
    uint64_t generation;           /* 1, 2, ...: the copy with the higher valid one is current */
    int64_t sync_wall_ns;          /* CLOCK_REALTIME when the snapshot was taken */
    uint64_t chunks_claimed;       /* the ring's claim counter at the snapshot */
    uint64_t records_overwritten;  /* the ring's, read after the snapshot: the ring header is
                                      never synced, so after a power loss its count can be older */
    uint32_t entry_count;          /* entries after the head */
    uint32_t entries_crc;          /* CRC-32C of the entries */
    uint8_t reserved[28];          /* 0 */
    uint32_t head_crc;             /* CRC-32C of bytes 0..91 */
} lb_durable_head;

typedef struct lb_durable_entry {
    uint64_t sequence;             /* a chunk the ring held (active, sealed, archiving, archived) */
    uint64_t claim;                /* its claim number */
    uint32_t committed;            /* its records end at or after this offset ... */
    uint32_t records;              /* ... and there are at least this many before it */
} lb_durable_entry;

_Static_assert(sizeof(lb_ring_header) == LB_RING_HEADER_SIZE, "ring header is one page");
_Static_assert(sizeof(lb_chunk_header) == LB_CHUNK_HEADER_SIZE, "chunk header is 64 bytes");
_Static_assert(sizeof(lb_meta_file_header) == 16, "meta file header is 16 bytes");
_Static_assert(sizeof(lb_archive_file_header) == LB_ARCHIVE_HEADER_SIZE, "archive header");
_Static_assert(__builtin_offsetof(lb_ring_header, next_sequence) == 64, "claim line");
_Static_assert(__builtin_offsetof(lb_ring_header, records) == 128, "counter line");
_Static_assert(__builtin_offsetof(lb_ring_header, archived_chunks) == 256, "archiver line");
_Static_assert(__builtin_offsetof(lb_chunk_header, header_crc) == 52, "chunk header layout");
_Static_assert(__builtin_offsetof(lb_chunk_header, committed) == 56, "chunk header layout");
_Static_assert(__builtin_offsetof(lb_ring_header, records_overwritten) == 216, "counter line");
_Static_assert(__builtin_offsetof(lb_ring_header, records_kept_from_claims) == 248, "counter line");
_Static_assert(__builtin_offsetof(lb_ring_header, archive_retired_records) == 320, "archiver line");
_Static_assert(sizeof(lb_archive_frame_head) == LB_ARCHIVE_FRAME_HEAD_SIZE, "frame head");
_Static_assert(sizeof(lb_archive_end) == 64, "END frame body");
_Static_assert(sizeof(lb_zst_seek_entry) == 16, "seek entry");
_Static_assert(sizeof(lb_zst_footer) == 64, "compressed archive footer");
_Static_assert(sizeof(lb_durable_head) == 96, "durable head");
_Static_assert(sizeof(lb_durable_entry) == 24, "durable entry");

#define LB_RECORD_HEADER(length, tag, kind) \
    ((uint64_t)((uint32_t)(length) & LB_RECORD_LENGTH_MASK) | ((uint64_t)((uint8_t)(kind) & 0xFu) << 24) | \
     ((uint64_t)LB_RECORD_CHECK << 28) | ((uint64_t)(uint32_t)(tag) << 32))

/* The parts of a record header word (a committed one has lb_record_word_check == LB_RECORD_CHECK). */
static inline uint32_t lb_record_word_length(uint64_t word) { return (uint32_t)word & LB_RECORD_LENGTH_MASK; }
static inline uint8_t lb_record_word_kind(uint64_t word) { return (uint8_t)((word >> 24) & 0xFu); }
static inline uint8_t lb_record_word_check(uint64_t word) { return (uint8_t)((word >> 28) & 0xFu); }
static inline uint32_t lb_record_word_tag(uint64_t word) { return (uint32_t)(word >> 32); }

/* 1 when a record of `length` bytes at chunk offset `offset` has bytes in two pages or more, and so
 * is followed by its page check. */
static inline int lb_record_crosses_page(uint32_t offset, uint32_t length) {
    return ((offset ^ (offset + length - 1u)) & ~(LB_PAGE_SIZE - 1u)) != 0;
}

#endif
