/* internal.h — declarations shared by the C core's source files; not installed. */
#ifndef LOGBOOK_INTERNAL_H
#define LOGBOOK_INTERNAL_H

#include "logbook.h"
#include "logbook_files.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define LB_LIKELY(x) __builtin_expect(!!(x), 1)
#define LB_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- CRC-32C (Castagnoli): headers, meta entries, archived frames ---- */
uint32_t lb_crc32c_portable(uint32_t crc, const void *data, size_t length);  /* table only */
uint32_t lb_ring_header_crc(const lb_ring_header *header);
uint32_t lb_chunk_crc(const lb_chunk_header *chunk);
/* The page check of a record that crosses a page (logbook_format.h): CRC-32C of the chunk's
 * sequence, the committed header word, then the record's bytes after its header. */
uint32_t lb_record_page_check(uint64_t sequence, uint64_t word, const uint8_t *record, uint32_t length);

/* ---- clock ---- */
/* Decides TSC or CLOCK_MONOTONIC once and returns ticks per second (calibrated once). */
uint64_t lb_clock_setup(void);
int64_t lb_wall_now_ns(void);

/* ---- a background thread that runs `tick` every period until stopped: the idle sealer and the
 * interval syncer of a bundle (one home for the wait, the wake-up and the fork rules) ---- */
typedef struct lb_ticker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running, stop;
    uint32_t period_ms;
    void (*tick)(void *context);
    void *context;
} lb_ticker;

void lb_ticker_init(lb_ticker *t);     /* at allocation: locks, no thread */
/* Starts the thread: 0, or -errno when it cannot be created (nothing runs then). */
int lb_ticker_start(lb_ticker *t, uint32_t period_ms, void (*tick)(void *context), void *context);
void lb_ticker_stop(lb_ticker *t);     /* wakes it, waits for a tick under way, joins */
/* In a forked child: the thread was not copied, and its locks (which it may have held, or waited
 * on) are made again rather than destroyed. */
void lb_ticker_forked(lb_ticker *t);
void lb_ticker_destroy(lb_ticker *t);

/* ---- one chunk walker, used by recovery and by the reader ---- */
typedef struct lb_walk_record {
    uint32_t offset;       /* from the chunk start */
    uint32_t length;       /* exact length including the 8-byte header */
    uint8_t kind;          /* lb_record_kind */
    const uint8_t *bytes;  /* the record, header included */
    uint32_t next;         /* where the next record starts: after it and its page check */
    uint8_t altered;       /* 1: it crosses a page and fails its page check (its later pages are
                              from another moment, or damaged): its bytes are not what was logged */
} lb_walk_record;

typedef enum lb_walk_end {
    LB_WALK_END_CLEAN = 0,   /* a zero header slot or the chunk's end */
    LB_WALK_END_INVALID = 1, /* a non-zero header that is not a valid record of this chunk */
} lb_walk_end;

/* Visits committed records of `chunk` (chunk_size bytes, already validated header) from offset
 * `start`. The visitor returns 0 to go on. Returns the offset where the walk stopped; *end says
 * why. */
typedef int (*lb_walk_visitor)(void *context, const lb_walk_record *record);
uint32_t lb_chunk_walk(const uint8_t *chunk, uint32_t chunk_size, uint32_t start,
                       lb_walk_visitor visit, void *context, lb_walk_end *end);

/* lb_chunk_walk's body, inlined where the visitor is known (the reader's hot loop) so that the
 * call per record is direct. */
static inline __attribute__((always_inline)) uint32_t
lb_chunk_walk_inline(const uint8_t *chunk, uint32_t chunk_size, uint32_t start,
                     lb_walk_visitor visit, void *context, lb_walk_end *end) {
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)chunk;
    const uint32_t tag = (uint32_t)h->sequence;
    uint32_t off = start < LB_CHUNK_HEADER_SIZE ? LB_CHUNK_HEADER_SIZE : start;
    *end = LB_WALK_END_CLEAN;
    if (off & 7u) {
        *end = LB_WALK_END_INVALID;
        return off;
    }
    while ((uint64_t)off + 8 <= chunk_size) {
        uint64_t word;
        memcpy(&word, chunk + off, 8);
        if (word == 0) return off;
        uint32_t length = lb_record_word_length(word);
        uint8_t kind = lb_record_word_kind(word);
        uint32_t minimum = (kind == LB_RECORD_FULL || kind == LB_RECORD_FIRST)
                               ? LB_RECORD_FIXED_SIZE
                               : 9u;
        if (lb_record_word_check(word) != LB_RECORD_CHECK || lb_record_word_tag(word) != tag ||
            kind < LB_RECORD_FULL || kind > LB_RECORD_LAST || length < minimum ||
            length > chunk_size - off) {
            *end = LB_WALK_END_INVALID;
            return off;
        }
        uint32_t next = off + ((length + 7u) & ~7u);
        lb_walk_record record = {off, length, kind, chunk + off, next, 0};
        if (LB_UNLIKELY(lb_record_crosses_page(off, length))) {
            /* Its page check follows it; one the chunk has no room for is not a record. */
            uint32_t check[2];
            if ((uint64_t)next + LB_RECORD_CHECK_SIZE > chunk_size) {
                *end = LB_WALK_END_INVALID;
                return off;
            }
            memcpy(check, chunk + next, 8);
            record.altered = check[1] != tag ||
                             check[0] != lb_record_page_check(h->sequence, word, chunk + off, length);
            next += LB_RECORD_CHECK_SIZE;
            record.next = next;
        }
        if (visit && visit(context, &record) != 0) return off;
        if (next <= off) break;
        off = next;
    }
    return off > chunk_size ? chunk_size : off;
}

/* Checks a chunk header read from slot `slot` of a ring with this geometry. 0 if usable,
 * 1 if the slot was never used, -1 if corrupt, 2 if a claim is in progress. */
int lb_chunk_header_check(const lb_chunk_header *header, uint32_t slot, uint32_t chunk_count);

/* ---- meta file entries, written by the bundle and parsed by the reader ---- */
typedef struct lb_meta_buffer {
    uint8_t *bytes;
    size_t length, capacity;
    int failed;
} lb_meta_buffer;

void lb_meta_put_u16(lb_meta_buffer *b, uint16_t v);
void lb_meta_put_u32(lb_meta_buffer *b, uint32_t v);
void lb_meta_put_u64(lb_meta_buffer *b, uint64_t v);
void lb_meta_put_string(lb_meta_buffer *b, const char *s, size_t length);

typedef struct lb_meta_cursor {
    const uint8_t *bytes;
    size_t length, offset;
    int failed;
} lb_meta_cursor;

uint16_t lb_meta_get_u16(lb_meta_cursor *c);
uint32_t lb_meta_get_u32(lb_meta_cursor *c);
uint64_t lb_meta_get_u64(lb_meta_cursor *c);
/* Returns a malloc'd NUL-terminated copy, or NULL (and sets failed) on a bad length. */
char *lb_meta_get_string(lb_meta_cursor *c);

/* Reads entries from `fd` starting at *offset. For each complete, CRC-valid entry calls
 * visit(kind, body, length). Stops at the end of the complete entries and sets *offset to it.
 * Returns 0 when all bytes were consumed, 1 when a partial entry remains at the end (a torn tail or
 * an entry being written), -1 when an entry in the middle is corrupt (*offset points at it),
 * or -errno on a read error. */
typedef void (*lb_meta_visitor)(void *context, uint16_t kind, const uint8_t *body, uint32_t length);
int lb_meta_read_entries(int fd, uint64_t *offset, lb_meta_visitor visit, void *context);

/* Visits the entries of a buffer holding whole entries (an archive META frame). 0 when every byte
 * was a valid entry, -1 at the first that is not (the ones before it were visited). */
int lb_meta_parse_entries(const uint8_t *bytes, size_t length, lb_meta_visitor visit,
                          void *context);

/* ---- I/O helpers: full reads and writes, EINTR retried in one place ---- */
ssize_t lb_pread_full(int fd, void *buffer, size_t length, uint64_t offset);
/* "dir/name", malloc'd, or NULL. */
char *lb_path_join(const char *dir, const char *name);

/* ---- error details (lb_error_detail): set by the open calls beside their -errno; the setter
 * and lb_error_detail_clear are declared in logbook_files.h, for the modules above the core ---- */

/* ---- files Logbook writes: include/logbook_files.h (public, for the other modules too) ---- */
int lb_pwrite_full(int fd, const void *buffer, size_t length, uint64_t offset);

/* ---- archive files: names and frames, shared by the archiver and the reader ---- */
#define LB_ARCHIVE_FRAME_MAX (64u << 20)    /* largest frame body a reader accepts */
/* (Archive file names, lb_archive_name_parse and _format: logbook_files.h, for the uploader too.) */
uint32_t lb_archive_header_crc(const lb_archive_file_header *header);
/* Checks a file header (read from a file of file_size bytes): NULL when valid, else why not. */
const char *lb_archive_header_problem(const lb_archive_file_header *header, uint64_t file_size);
/* Fills a frame head: length, kind, the body's CRC-32C and the head's own CRC. */
void lb_archive_frame_head_make(lb_archive_frame_head *head, uint32_t length, uint16_t kind,
                                uint32_t body_crc);

/* An archive file to read, plain (.lba, .lba.writing) or compressed (.lba.zst): reads take offsets
 * in the uncompressed file, so the frame walk is the same for both. A compressed file's reads are
 * served from its listing (frame heads and chunk starts) when they fall inside it, else from the
 * data frame that holds them, decompressed (and checked) once and kept until another is needed;
 * the next data frame is decompressed ahead on a second thread while a file is read in order. */
typedef struct lb_zst_reader lb_zst_reader;
typedef void (*lb_archive_damage_report)(void *context, uint64_t offset, uint64_t length,
                                         const char *what);
typedef struct lb_archive_source {
    int fd;                  /* not owned */
    uint64_t size;           /* of the uncompressed file */
    lb_zst_reader *zst;      /* NULL: plain */
    lb_archive_damage_report report;  /* damage a compressed file's parts show, once each */
    void *report_context;
} lb_archive_source;

static inline void lb_archive_source_plain(lb_archive_source *s, int fd, uint64_t size) {
    s->fd = fd;
    s->size = size;
    s->zst = NULL;
    s->report = NULL;
    s->report_context = NULL;
}
/* Whether the `length` bytes at the start of a file (at least 4) are a compressed archive's. */
int lb_archive_bytes_compressed(const uint8_t *start, size_t length);
/* Opens the file open as `fd` (file_size bytes on disk): compressed when it starts with the
 * skippable frame, plain otherwise. `report` (may be NULL) hears about damage as it is found: a
 * footer or seek table that fails (frames then found by walking), a damaged listing, a data frame
 * that fails to decompress or its CRC. 0, -ENOMEM, or -EPROTO with *problem for a compressed file
 * whose data frames cannot be found at all. */
int lb_archive_source_open(lb_archive_source *s, int fd, uint64_t file_size,
                           lb_archive_damage_report report, void *report_context,
                           const char **problem);
/* Reads like pread at an uncompressed offset: the bytes read, short at the end of the file or at
 * a damaged data frame. */
ssize_t lb_archive_source_read(lb_archive_source *s, void *buffer, size_t length, uint64_t offset);
/* For a compressed file: when `offset` lies in a data frame that cannot be read, the offset where
 * the next data frame starts (an archive frame boundary); otherwise 0. */
uint64_t lb_archive_source_damaged_until(lb_archive_source *s, uint64_t offset);
/* Frees a compressed file's state (joins its thread); the descriptor is the caller's. */
void lb_archive_source_close(lb_archive_source *s);
/* Releases what decoding a compressed file holds (frame buffers, the read-ahead thread and its
 * context: about 3 MB), keeping its listing: a later read loads again. For a pass that has moved
 * on to another file, so that memory does not grow with the files a pass reads. */
void lb_archive_source_rest(lb_archive_source *s);

typedef enum lb_frame_status {
    LB_FRAME_OK = 0,
    LB_FRAME_END = 1,      /* no more bytes, or only part of a frame (being written, or torn) */
    LB_FRAME_INVALID = -1, /* the head fails its check or names an impossible length */
} lb_frame_status;

/* Reads the frame head at `offset` of a file of `file_size` bytes. On LB_FRAME_OK the body is at
 * offset + 16 and the next frame at offset + lb_archive_frame_span(length). The body's CRC is the
 * caller's to check (it reads the body anyway). */
lb_frame_status lb_archive_frame_read(lb_archive_source *source, uint64_t offset,
                                      uint32_t chunk_size, lb_archive_frame_head *out);
static inline uint64_t lb_archive_frame_span(uint32_t length) {
    return LB_ARCHIVE_FRAME_HEAD_SIZE + (((uint64_t)length + 7u) & ~(uint64_t)7u);
}
/* After damage at `from`: the offset of the next valid frame head (8-aligned, whole frame inside
 * the file), or the file's size when there is none. A head has its own CRC-32C, so a false match needs
 * 32 bits of luck. */
uint64_t lb_archive_frame_resync(lb_archive_source *source, uint64_t from, uint32_t chunk_size);
/* 1 when every byte of [from, to) is zero (or past the end of the file), 0 otherwise. */
int lb_file_range_is_zero(int fd, uint64_t from, uint64_t to);

/* ---- the bundle (writer side) ---- */
typedef struct lb_site_entry {
    lb_site_slot slot;             /* immutable once published in the cache */
    struct lb_site_entry *next;    /* hash chain */
} lb_site_entry;

#define LB_SITE_TABLE_SIZE 1024u

/* A chunk a writer still held when close gave up waiting for it: the file keeps it active, with
 * the records whose headers reached it (`end`: where the next record would start). */
typedef struct lb_abandoned_chunk {
    lb_chunk_header *chunk;  /* in the ring; in the anonymous mapping that replaced it once detached */
    uint32_t end;            /* set by detach_ring */
    uint32_t header_records, header_end;  /* the chunk's header just before the remap */
} lb_abandoned_chunk;

/* Grows a malloc'ed array to hold at least `need` elements of `element` bytes (capacity doubles
 * from 16). 0, or -ENOMEM with the array as it was. The reader's and the archiver's lists. */
static inline int lb_array_grow(void **array, size_t *capacity, size_t need, size_t element) {
    if (need <= *capacity) return 0;
    size_t cap = *capacity ? *capacity : 16;
    while (cap < need) cap *= 2;
    void *p = realloc(*array, cap * element);
    if (!p) return -ENOMEM;
    *array = p;
    *capacity = cap;
    return 0;
}

/* The modes of a bundle's directories and files (lb_options.permissions). */
#define LB_DIR_MODE(b) ((b)->group_readable ? 0750 : 0700)
#define LB_FILE_MODE(b) ((b)->group_readable ? 0640 : 0600)

/* A file or directory of the bundle given the mode its permissions say, exactly: 0640/0750 for a
 * group-readable bundle, 0600/0700 for a private one (so a private open takes back what an earlier
 * group-readable one gave). 0 or -errno. */
static inline int lb_bundle_set_mode(const struct lb_bundle *b, int fd, int directory);

struct lb_bundle {
    lb_bundle_hot hot;             /* must stay first: read by inline lb_site_lookup */
    char *path;
    int dir_fd;                    /* the bundle directory, checked: every file is opened in it */
    int ring_fd, meta_fd, lock_fd;
    int group_readable;            /* LB_PERMISSIONS_GROUP_READABLE: every file 0640, directory 0750 */
    int after_unclean_session;     /* the last writer did not close cleanly (a crash or a power loss:
                                      the ring header's page can be older than the archive files) */
    uint64_t durable_claimed_at_open; /* the last sync's chunks_claimed, as this writer found it:
                                      claims from it on were never durable (0: no sync) */
    lb_ring_header *ring;
    size_t map_length;
    uint8_t *chunks;
    uint32_t chunk_size, chunk_count, wrap_policy;
    uint32_t session;
    uint64_t ticks_per_second;
    uint64_t meta_offset;          /* append position; under `lock` */
    uint32_t meta_sessions;        /* 1 + the highest session meta names, found at open */
    pthread_mutex_t lock;          /* meta file, sites, loggers */
    lb_site_entry *site_table[LB_SITE_TABLE_SIZE];
    uint32_t next_site_id;
    lb_logger **loggers;           /* by id - 1 */
    uint32_t logger_count, logger_capacity;
    uint16_t *logger_index;        /* open-addressed by name hash: id, 0 = empty; 2 x capacity slots */
    struct lb_filter_set *filter;  /* runtime filter rules (filter.c); under `lock` */
    char *filter_warning;          /* a malformed LOGBOOK_FILTER at open, or NULL */
    struct lb_writer *writers;     /* attached writers; under the registry lock */
    struct lb_bundle *next_open;   /* every open bundle of the process; under the registry lock */
    _Atomic int closed;
    _Atomic int meta_closed;       /* meta entries refused: set once close detached every writer,
                                      before it releases the writer lock */
    int forked;                    /* inherited by fork(): this process must not touch its chunks */
    /* After shutdown the ring is mapped over anonymous memory (ring_detached): a thread close gave
     * up waiting for (stuck inside a record) writes nothing to the files when it goes on. The
     * fields below and the remap itself are under detach_lock, which lb_bundle_counters and
     * lb_bundle_ring_usage take: they never read the header half copied. */
    pthread_mutex_t detach_lock;
    int ring_detached;
    uint32_t writers_given_up;     /* by close's wait; under the registry lock */
    /* The chunks they held: set when close detaches the writers (under the registry lock), read
     * back from the file when the ring is detached. */
    struct lb_abandoned_chunk *abandoned;
    uint32_t abandoned_count;
    uint64_t abandoned_records, abandoned_bytes;  /* once detached (or when no list fits) */
    lb_ring_usage final_usage;     /* the ring's chunks when it was detached */
    /* archiver (CSources/CLogbookArchive), when one is attached */
    uint32_t lossless_wait_ms;
    int archiving;                         /* an archiver was attached (never cleared) */
    void *archiver;                        /* its state, for archiver_stop */
    int (*archiver_stop)(void *archiver);  /* drains sealed chunks and stops; called by shutdown */
    void (*archiver_forget)(void *archiver); /* frees a forked child's copy (lb_bundle_close) */
    _Atomic uint32_t sealed_generation;    /* futex: bumped when a chunk is sealed */
    _Atomic uint32_t archiver_sleeping;    /* the archiver waits on sealed_generation */
    _Atomic uint32_t archiver_seen_generation; /* sealed_generation at its last pass */
    uint32_t archiver_wake_batch;          /* sealed chunks that wake a sleeping archiver */
    _Atomic uint32_t archived_generation;  /* futex: bumped when chunks become reusable */
    _Atomic uint32_t writers_waiting;      /* lossless writers wait on archived_generation */
    _Atomic uint32_t lossless_stalled;     /* archived_generation + 1 when a wait timed out at it;
                                              claims fail at once until the generation moves */
    /* durability (durable.c): syncs, the `durable` file, the interval syncer */
    _Atomic uint32_t durability_wanted;    /* set by the first sync or sync_interval_ms: the
                                              archiver fdatasyncs a batch before marking it archived */
    uint32_t sync_interval_ms;
    int durable_fd, mirror_fd;
    uint64_t durable_generation;
    struct { uint64_t sequence; uint32_t end; } *mirrored;  /* per slot: what the mirror holds */
    struct lb_durable_entry *durable_entries, *durable_previous;  /* chunk_count each */
    uint32_t durable_previous_count;
    int (*archiver_datasync)(void *archiver);  /* fdatasync of the file being written */
    pthread_mutex_t sync_lock;             /* one sync at a time */
    lb_ticker syncer;                      /* every sync_interval_ms, when set */
    int sync_failure_said;                 /* an interval sync's failure is said once */
    /* idle sealer */
    uint32_t idle_seal_ms;
    uint64_t idle_seal_ticks;
    lb_ticker sealer;                      /* every idle_seal_ms / 2 */
};

/* ---- durability (durable.c) ---- */
void lb_durable_init(lb_bundle *b);              /* at allocation: locks, no descriptor */
int lb_durable_start(lb_bundle *b, const lb_options *options);  /* end of open */
void lb_durable_stop(lb_bundle *b);              /* shutdown, first: the interval syncer ends */
int lb_durable_final(lb_bundle *b);              /* shutdown, before detach: the last sync */
void lb_durable_free(lb_bundle *b);
/* The entry of chunk `sequence` in entries sorted by sequence (as lb_durable_read returns them),
 * or NULL. */
const struct lb_durable_entry *lb_durable_find(const struct lb_durable_entry *entries, size_t count,
                                               uint64_t sequence);
/* 1 when `chunk` (length bytes) walks without a page check failing to at least `end`, with at least
 * `records` records before it: it holds what a sync made durable of it. */
int lb_durable_prefix_holds(const uint8_t *chunk, uint32_t length, uint32_t end, uint32_t records);
/* Open, before recovery: chunks torn since the last sync are put back from the mirror. */
int lb_durable_restore(lb_bundle *b);
/* Raises the ring header's next sequence, claim counter and session count past a chunk or session
 * found elsewhere: after a power loss the header's page can be older than the chunks, meta, mirror
 * or archive files, and a number handed out twice would make readers take one chunk (or session)
 * for another. */
void lb_ring_counters_cover(lb_bundle *b, uint64_t sequence, uint64_t claim, uint32_t session);
/* The current copy of a bundle's `durable` file for a ring of this header: entries sorted by
 * sequence (malloc'd, *count of them), or 0 entries when the file is absent, damaged in both
 * copies or describes another ring. Returns 0, or -errno of a failed read. */
int lb_durable_read(int fd, uint64_t ring_created_wall_ns, uint32_t chunk_count,
                    struct lb_durable_entry **entries, size_t *count, uint64_t *generation,
                    uint64_t *chunks_claimed, uint64_t *records_overwritten);

/* ---- runtime filters (filter.c) ---- */
/* The minimum level the bundle's rules give a logger of this name. Caller holds b->lock. */
uint8_t lb_filter_level_for(const lb_bundle *b, const char *name);
/* Applies options->filter, then LOGBOOK_FILTER (unless ignored); -EINVAL for a bad options->filter. */
int lb_filter_open(lb_bundle *b, const lb_options *options);
void lb_filter_free(lb_bundle *b);

/* The registry lock guards writer attachment: bundle->writers lists and writer->bundle. */
void lb_registry_lock(void);
void lb_registry_unlock(void);
/* Open bundles: added at open, removed at close; fork handling walks them. */
void lb_registry_add_bundle(lb_bundle *bundle);
void lb_registry_remove_bundle(lb_bundle *bundle);

/* Writer operations used by the bundle (writer.c). */
/* close, first: every writer's next record goes to the slow path, which sees `closed` (a thread
 * whose chunk has room would go on logging into it on its fast path until detached) */
void lb_writers_stop_all(lb_bundle *bundle);
void lb_writers_detach_all(lb_bundle *bundle);  /* close: seal every chunk and detach */
void lb_writers_seal_all(lb_bundle *bundle);    /* flush: seal every chunk, keep writers */
void lb_writers_seal_idle(lb_bundle *bundle, uint64_t idle_ticks);
/* The records and bytes committed: the ring's totals plus every writer's chunk, at one moment.
 * The caller holds detach_lock (ring_detached and abandoned_* change under it). */
void lb_writers_count_records(lb_bundle *bundle, uint64_t *records, uint64_t *bytes);
void lb_bundle_count_drop(lb_bundle *bundle, unsigned reason);
int lb_membarrier(void);  /* 0 when the asymmetric fence ran, -errno when unavailable */

/* Chunk operations (bundle.c). */
static inline lb_chunk_header *lb_chunk_at(const lb_bundle *b, uint32_t slot) {
    return (lb_chunk_header *)(void *)(b->chunks + (size_t)slot * b->chunk_size);
}
int lb_chunk_claim(lb_bundle *b, uint64_t prev_sequence, uint32_t thread_id,
                   lb_chunk_header **out);
void lb_chunk_seal(lb_bundle *b, lb_chunk_header *chunk);

/* ---- the archiver's side of the bundle (used by CSources/CLogbookArchive) ---- */
/* Futex wait while *word == expected, at most timeout_ms (0: no limit); futex wake of all. */
void lb_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint32_t timeout_ms);
void lb_futex_wake_all(_Atomic uint32_t *word);
/* Attaches an archiver: `stop` runs in shutdown after every chunk is sealed; `forget` frees a
 * forked child's copy of it (memory and descriptors only). */
void lb_bundle_attach_archiver(lb_bundle *b, void *archiver, int (*stop)(void *archiver),
                               void (*forget)(void *archiver));
/* Wakes lossless writers waiting for a reusable chunk. */
void lb_bundle_chunks_released(lb_bundle *b);
/* The bundle's directory and geometry, for the archiver. */
static inline const char *lb_bundle_path(const lb_bundle *b) { return b->path; }

static inline int lb_bundle_set_mode(const struct lb_bundle *b, int fd, int directory) {
    if (fd < 0) return 0;
    return lb_fd_set_mode(fd, directory ? LB_DIR_MODE(b) : LB_FILE_MODE(b));
}

#endif
