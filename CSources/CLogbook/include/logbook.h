/*
 * logbook.h — the public C API of Logbook.
 *
 * Every function named lb_<object>_<verb> that returns int returns 0 or a negative errno.
 * The byte format is defined in logbook_format.h; docs/FORMAT.md describes it in prose.
 *
 * Writing (one writer process per bundle, any number of threads):
 *
 *     lb_bundle *bundle;
 *     lb_options options; lb_options_init(&options);
 *     if (lb_bundle_open("app.logbook", &options, &bundle) != 0) ...
 *     lb_logger *net; lb_logger_register(bundle, "net", &net);
 *     LB_INFO(net, "request {} took {} ms", request_id, 12.5);
 *     lb_bundle_close(bundle);
 *
 * The LB_<LEVEL> macros register the call site's template once per bundle and write one record
 * with typed arguments (integers, floating point, bool, C strings). The hot path is inline below:
 * lb_writer_get, lb_record_begin, lb_record_put_*, lb_record_commit. Always call
 * lb_record_commit after lb_record_begin, even when a put failed: commit reports the outcome.
 *
 * Reading (live or after the writer died) goes through lb_reader_* and never maps the files.
 */
#ifndef LOGBOOK_H
#define LOGBOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "logbook_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Levels
 */
enum lb_level {
    LB_LEVEL_TRACE = 1,
    LB_LEVEL_DEBUG = 2,
    LB_LEVEL_INFO = 3,
    LB_LEVEL_NOTICE = 4,
    LB_LEVEL_WARNING = 5,
    LB_LEVEL_ERROR = 6,
    LB_LEVEL_CRITICAL = 7,
    LB_LEVEL_OFF = 255,   /* as a minimum level: the logger is switched off */
};

/* ---------------------------------------------------------------------------------------------
 * Bundles
 */
typedef struct lb_bundle lb_bundle;

typedef struct lb_options {
    uint64_t capacity;        /* ring bytes (chunks only), used when the bundle is created */
    uint32_t chunk_size;      /* bytes per chunk, a power of two in [4 KiB, 16 MiB] */
    uint32_t wrap_policy;     /* lb_wrap_policy; LB_WRAP_OVERWRITE by default */
    uint32_t idle_seal_ms;    /* seal a chunk whose writer has been idle this long; 0 = never */
    uint32_t lossless_wait_ms;/* lossless ring full: how long a writer waits for the archiver to
                                 free a chunk before it drops the record (LB_DROP_RING_FULL);
                                 0 = drop at once. After a wait that timed out, records are
                                 dropped at once until the archiver frees a chunk again */
    uint32_t ignore_environment_filter; /* 1: do not apply LOGBOOK_FILTER */
    const char *filter;       /* runtime filter rules to start with (see "Runtime filters");
                                 NULL = none. LOGBOOK_FILTER is applied on top. */
    uint32_t sync_interval_ms;/* bounded loss: a background thread runs lb_bundle_sync this often
                                 (when anything was logged since the last one), so a power loss or
                                 kernel crash loses at most the records of the last interval and
                                 the sync under way; 0 = never (the default: the ring survives a
                                 process crash, and a power loss keeps what the kernel wrote back,
                                 a torn record never shown). Costs a second file the ring's size
                                 (`mirror`) and the disk writes of what is logged */
    uint32_t create_parents;  /* 1: create the bundle directory's missing parents too (each made
                                 with the bundle directory's mode; the path is resolved as below,
                                 and the bundle directory checked as always); 0 (default): a
                                 missing parent is -ENOENT */
    uint32_t permissions;     /* lb_permissions: who may read the bundle. Applied at every open
                                 for writing, exactly, to the directory, its files and the
                                 archive's: a private open takes back what a group-readable one
                                 gave. Never to a file another name reaches (a hard link): a
                                 bundle file so is refused (-EMLINK), an archive file so keeps
                                 its mode (the uploader's spool links complete ones) */
} lb_options;

/* Who may read a bundle. Nobody but its owner may ever write to it. */
typedef enum lb_permissions {
    LB_PERMISSIONS_PRIVATE = 0,        /* directories 0700, files 0600 (the default) */
    LB_PERMISSIONS_GROUP_READABLE = 1, /* directories 0750, files 0640: the members of the owner's
                                          group (a log shipper, an operator) read it, with
                                          `logbook show` or the reader */
} lb_permissions;

/* Defaults: 16 MiB ring of 64 KiB chunks, overwrite, idle chunks sealed after 1000 ms, a lossless
 * writer waits up to 100 ms for the archiver (long enough for a slow fsync, short enough that a
 * stalled disk never hangs the program: it loses records, counted, instead). */
void lb_options_init(lb_options *options);

/* Opens the bundle directory at `path` for writing, creating it (0700, files 0600, or as
 * `permissions` says) if needed, and its missing parents with `create_parents`.
 * An existing bundle keeps its geometry (capacity and chunk size from the options are ignored) and
 * its records; new records follow them.
 *
 * Safe in shared directories such as /tmp: the directory must be owned by this user and not
 * writable by other users (nor by a group other than this user's own): -EPERM otherwise. The path
 * is resolved one component at a time, and a symlink anywhere on it ("link", "link/",
 * "link/.", "link/sub/..") is followed only if this user or root owns the link (-ELOOP
 * otherwise). Every file in it is opened relative to the directory, never through a symlink
 * (-ELOOP), and must be a regular file (-EINVAL for a FIFO, directory, socket or device in its
 * place) that no other name reaches (-EMLINK for a hard link: the lock, ring, meta, mirror and
 * durable files are written or given the bundle's mode, which would change a file elsewhere);
 * new files are created exclusively. After lb_bundle_shutdown nothing is written to the
 * bundle's files any more (a later writer may own them): a log call at a new call site is
 * dropped, its site not registered.
 *
 * Returns 0, or: -EWOULDBLOCK when another process holds the writer lock; -EINVAL for bad options;
 * -EPROTO for a file that is not a Logbook bundle of this version (or a damaged ring header);
 * -EPERM, -ELOOP, -ENOTDIR, -EMLINK as above; -errno of a failed system call. On failure,
 * lb_error_detail() says in a sentence what was wrong (the option and its allowed range, the file
 * or directory and why). */
int lb_bundle_open(const char *path, const lb_options *options, lb_bundle **out);

/* What the last failed lb_bundle_open, lb_bundle_open_archived or lb_reader_open of this thread
 * found wrong, as a sentence without a trailing period, e.g. "chunk size 1000 is not a power of
 * two from 4096 to 16777216 bytes" or "another process is writing to this bundle"; "" when it said
 * nothing more than its errno. Thread-local; valid until the next such call on this thread. */
const char *lb_error_detail(void);

/* Seals every thread's chunk, releases the writer lock and frees the bundle (with an archiver:
 * archives every chunk and completes the file being written first). No thread may log to the
 * bundle once close has begun. Returns the first error seen (the bundle is freed regardless); 0
 * after an earlier lb_bundle_shutdown. In a child forked while the bundle was open, it frees the
 * child's copy only: the parent's chunks, lock, archiver and threads are left alone. */
int lb_bundle_close(lb_bundle *bundle);

/* Stops accepting records (later ones are dropped and counted as LB_DROP_CLOSED; a record a
 * thread began before is kept, so each thread's records are an unbroken run and its drops come
 * after them), seals every thread's chunk and releases the writer lock. It waits up to 2 s for
 * threads in the middle of a record; a thread still inside one then (e.g. in a description that
 * blocks) keeps its chunk, which the files keep active with the records it committed, as after a
 * crash (the next writer's recovery seals it). The memory stays valid, so that a racing or stuck
 * writer never touches unmapped memory, but the ring is mapped over anonymous memory: nothing
 * reaches the files any more, also not a drop count or a stuck thread's record (its commit returns
 * -EBADF, and it is counted as dropped, LB_DROP_CLOSED, in lb_bundle_counters once its call
 * returns; a record that fits its chunk committed before the ring was detached reached the file
 * and is kept and counted, while a larger one needs the detached writer and is dropped).
 * lb_bundle_close does this and then frees: call it only once no thread shutdown gave up on can
 * still be inside a record. -EBADF when the bundle was already shut down. */
int lb_bundle_shutdown(lb_bundle *bundle);

/* Seals the active chunk of every thread, so that readers and the archiver see them as complete,
 * and schedules the ring for writeback (msync MS_ASYNC): every record committed before the call is
 * in a sealed chunk when it returns. A thread in the middle of a record is asked to seal its chunk
 * at its next record; flush waits for that, or takes the chunk once the record is committed, for
 * up to 2 s in all (a thread stuck inside a record keeps its chunk until its next record).
 * -EBADF after lb_bundle_shutdown, and in a forked child (which never touches the parent's chunks). */
int lb_bundle_flush(lb_bundle *bundle);

/* Makes every record logged before the call durable: it survives a power loss or a kernel crash.
 * Syncs the meta file and the archive file being written (with an archiver), copies what each
 * chunk committed since the last sync into the bundle's `mirror` and syncs it, then records what it
 * made durable in the bundle's `durable` file (logbook_format.h), which verify checks: a durable
 * record a reader cannot find fails verify. The ring itself is never synced, so logging threads
 * pay nothing for it. From the first sync on, the archiver syncs each batch before its chunks'
 * slots can be reused, and a clean close ends with a sync. One sync runs at a time; it blocks for
 * the disk's write of what was logged since the last one. Returns 0, -EBADF after
 * lb_bundle_shutdown (or in a forked child), or -errno of a failed fdatasync or write (nothing is
 * retried into success: the records are then not known to be durable). */
int lb_bundle_sync(lb_bundle *bundle);

typedef struct lb_counters {
    uint64_t records;          /* committed records, including those in active chunks (after
                                  close: in chunks it left active, see lb_bundle_shutdown) */
    uint64_t bytes;            /* committed record bytes */
    uint64_t chunks_claimed;
    uint64_t chunks_reused;    /* claims that overwrote an older chunk */
    uint64_t large_records;    /* records written as fragments */
    uint64_t drops[LB_DROP_REASON_COUNT];
    uint64_t dropped;          /* the sum of drops */
} lb_counters;

/* The counters at one moment: each committed record is counted once, in `records` or in its
 * chunk, so `records` never goes down. Takes the writers' locks briefly; while lb_bundle_shutdown
 * or lb_bundle_flush waits for a thread in the middle of a record (up to 2 s), it waits too. */
int lb_bundle_counters(lb_bundle *bundle, lb_counters *out);

/* The writer's view of its ring: chunks by state and the bytes they hold now. */
typedef struct lb_ring_usage {
    uint32_t chunk_size;
    uint32_t chunk_count;
    uint64_t chunks_free;       /* never used since the ring was created */
    uint64_t chunks_active;     /* owned by a writer (being claimed included) */
    uint64_t chunks_sealed;     /* complete, not archived (without an archiver: every full chunk) */
    uint64_t chunks_archiving;  /* the archiver's write of them is in flight */
    uint64_t chunks_archived;   /* persisted by the archiver (reusable under lossless) */
    uint64_t bytes_in_use;      /* the committed part of every active, sealed, archiving and
                                   archived chunk (its 64-byte header included): what the ring
                                   holds, as opposed to capacity = chunk_size * chunk_count */
} lb_ring_usage;

/* Counts the ring's chunks by state with one relaxed pass over the chunk headers (O(chunks), no
 * lock on the logging path, nothing written; a mutex only against shutdown): for a poller such as
 * a metrics reporter. A snapshot, not a consistent cut: chunks change state while it reads. After
 * lb_bundle_shutdown: the chunks as shutdown left them. Returns 0, or -EINVAL. */
int lb_bundle_ring_usage(lb_bundle *bundle, lb_ring_usage *out);

/* A name for a drop reason ("too_large", "no_chunk", ...), or NULL. */
const char *lb_drop_reason_name(unsigned reason);

/* ---------------------------------------------------------------------------------------------
 * Loggers: a name, an id in the bundle and a minimum level that any thread may change.
 */
typedef struct lb_logger {
    _Atomic uint8_t min_level;  /* lb_level; LB_LEVEL_OFF switches the logger off */
    uint8_t reserved;
    uint16_t id;
    uint32_t reserved2;
    lb_bundle *bundle;
    const char *name;           /* owned by the bundle */
} lb_logger;

/* Returns the bundle's logger with this name, registering it on first use (min level: TRACE). The
 * logger lives as long as the bundle. -ENOSPC past 65535 loggers, -EBADF after lb_bundle_shutdown. */
int lb_logger_register(lb_bundle *bundle, const char *name, lb_logger **out);

static inline void lb_logger_set_min_level(lb_logger *logger, uint8_t level) {
    atomic_store_explicit(&logger->min_level, level, memory_order_relaxed);
}

static inline uint8_t lb_logger_min_level(const lb_logger *logger) {
    return atomic_load_explicit(&logger->min_level, memory_order_relaxed);
}

static inline bool lb_logger_enabled(const lb_logger *logger, uint8_t level) {
    return level >= atomic_load_explicit(&logger->min_level, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------------
 * Call sites: constant text registered once per bundle, referred to by id from every record.
 */
typedef struct lb_site_desc {
    const void *key_file;       /* identity: pointer to a string constant (e.g. __FILE__) */
    const void *key_extra;      /* identity: a second pointer (the template for C, NULL for Swift) */
    uint32_t line;
    uint32_t column;
    const char *file;           /* text stored in the bundle */
    size_t file_length;
    const char *function;
    size_t function_length;
    const char *template_text;  /* literal text with "{}" per argument, "{{" for a literal "{" */
    size_t template_length;
    const char *source;         /* the call's module or subsystem; NULL or "" when unknown */
    size_t source_length;
} lb_site_desc;

/* Returns the id of the site with this identity, registering it (one meta entry, written before
 * any record can refer to it) on first use. */
int lb_site_register(lb_bundle *bundle, const lb_site_desc *site, uint32_t *id_out);

#define LB_SITE_CACHE_SIZE 4096u

typedef struct lb_site_slot {
    const void *key_file;
    const void *key_extra;
    uint32_t line;
    uint32_t column;
    uint32_t id;
    uint32_t reserved;
} lb_site_slot;

/* The part of lb_bundle the inline functions read. lb_bundle starts with it. */
typedef struct lb_bundle_hot {
    const lb_site_slot *_Atomic site_cache[LB_SITE_CACHE_SIZE];
} lb_bundle_hot;

static inline uint32_t lb_site_slot_index(const void *file, const void *extra, uint32_t line,
                                          uint32_t column) {
    uint64_t h = (uint64_t)(uintptr_t)file * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uintptr_t)extra * 0xC2B2AE3D27D4EB4Full;
    h ^= ((uint64_t)line << 20 | column) * 0x165667B19E3779F9ull;
    return (uint32_t)(h >> 40) & (LB_SITE_CACHE_SIZE - 1);
}

/* The id of an already registered site, or 0. Lock-free; a miss goes to lb_site_register. */
static inline uint32_t lb_site_lookup(lb_bundle *bundle, const void *file, const void *extra,
                                      uint32_t line, uint32_t column) {
    const lb_bundle_hot *hot = (const lb_bundle_hot *)(const void *)bundle;
    const lb_site_slot *slot = atomic_load_explicit(
        &hot->site_cache[lb_site_slot_index(file, extra, line, column)], memory_order_acquire);
    if (slot && slot->key_file == file && slot->key_extra == extra && slot->line == line &&
        slot->column == column)
        return slot->id;
    return 0;
}

/* Sites named by text instead of by address, for callers whose file and function strings are
 * not constants with a stable address (a bridge from another logging API, such as swift-log's
 * backend). The identity is a 128-bit hash of the file, function and source text (and the line):
 * use the two keys as key_file and key_extra with column 0, for lb_site_lookup and in the desc. */
static inline uint64_t lb__site_text_mix(uint64_t h, uint64_t v, uint64_t k) {
    h = (h ^ v) * k;
    return h ^ (h >> 32);
}

static inline void lb__site_text_hash(uint64_t *a, uint64_t *b, const char *p, size_t n) {
    *a = lb__site_text_mix(*a, n, 0x9E3779B97F4A7C15ull);
    *b = lb__site_text_mix(*b, n, 0xC2B2AE3D27D4EB4Full);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        *a = lb__site_text_mix(*a, v, 0x9E3779B97F4A7C15ull);
        *b = lb__site_text_mix(*b, v, 0xC2B2AE3D27D4EB4Full);
    }
    if (n) {
        uint64_t v = 0;
        memcpy(&v, p, n);
        *a = lb__site_text_mix(*a, v, 0x9E3779B97F4A7C15ull);
        *b = lb__site_text_mix(*b, v, 0xC2B2AE3D27D4EB4Full);
    }
}

typedef struct lb_site_text_key {
    const void *key_file;
    const void *key_extra;
} lb_site_text_key;

static inline lb_site_text_key lb_site_text_key_make(const char *file, size_t file_length,
                                                     const char *function, size_t function_length,
                                                     const char *source, size_t source_length) {
    uint64_t a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
    lb__site_text_hash(&a, &b, file, file_length);
    lb__site_text_hash(&a, &b, function, function_length);
    lb__site_text_hash(&a, &b, source, source_length);
    /* Another site's identity would have to match both 64-bit keys and the line. */
    lb_site_text_key key = {(const void *)(uintptr_t)a, (const void *)(uintptr_t)b};
    return key;
}

/* ---------------------------------------------------------------------------------------------
 * Runtime filters: which loggers record which levels, changeable at any time from any thread.
 *
 * A filter is a list of rules "pattern=level", separated by commas, e.g. "net=debug,db=off,*=info":
 *
 *   name      the logger `name` and the loggers below it in the dot hierarchy ("name.anything")
 *   prefix*   every logger whose name starts with `prefix`
 *   *         every logger (a bare level, "info", means the same)
 *
 * Levels: trace, debug, info, notice, warning (or warn), error, critical, off; case-insensitive.
 * For each logger the most specific matching rule wins (the longest pattern; a name beats a prefix
 * of the same length); with no match the logger records everything. A logger's minimum level is
 * one atomic byte, so a filtered-out call costs a load and a compare.
 *
 * lb_bundle_open applies lb_options.filter, then the environment variable LOGBOOK_FILTER on top
 * (its rules replace those for the same pattern). A malformed LOGBOOK_FILTER is ignored with one
 * line on stderr; lb_bundle_filter_warning returns that line.
 */
typedef struct lb_filter_error {
    uint32_t offset;            /* byte offset in the spec of the rule that failed */
    char message[240];          /* what is wrong, naming the rule */
} lb_filter_error;

typedef struct lb_filter_rule {
    uint32_t pattern_offset;    /* the pattern's bytes in the spec */
    uint32_t pattern_length;
    uint8_t level;              /* lb_level, or LB_LEVEL_OFF */
} lb_filter_rule;

/* Parses a spec without applying it. Fills up to `capacity` rules (rules may be NULL) and sets
 * *count to the number of rules. Returns 0, or -EINVAL with `error` (may be NULL) filled. */
int lb_filter_parse(const char *spec, lb_filter_rule *rules, size_t capacity, size_t *count,
                    lb_filter_error *error);

/* Replaces the bundle's rules with those of `spec` and applies them to every logger at once.
 * -EINVAL (and `error`) for a malformed spec, which changes nothing. */
int lb_bundle_set_filter(lb_bundle *bundle, const char *spec, lb_filter_error *error);

/* Sets the rule for one pattern (taken literally; a trailing '*' makes it a prefix), keeping the
 * others: level is an lb_level or LB_LEVEL_OFF; 0 removes the pattern's rule. */
int lb_bundle_set_filter_rule(lb_bundle *bundle, const char *pattern, uint8_t level);

/* Replaces the bundle's rules with `count` rules given as patterns (taken literally, as for
 * lb_bundle_set_filter_rule) and levels (lb_level or LB_LEVEL_OFF), applied at once. */
int lb_bundle_set_filter_rules(lb_bundle *bundle, const char *const *patterns,
                               const uint8_t *levels, size_t count);

/* Writes the current rules as a spec ("net=debug,db=off") with a terminating NUL if it fits.
 * Returns the spec's length (without the NUL); call again with a larger buffer if it is >= size. */
size_t lb_bundle_filter(lb_bundle *bundle, char *buffer, size_t size);

/* Rule `index` (0-based, in the order set) exactly as stored, also when its pattern could not be
 * written in a spec (a name with ',' or spaces): copies the pattern (NUL-terminated, cut to `size`)
 * and the level. Returns the pattern's length, or -ENOENT past the last rule. */
int lb_bundle_filter_rule(lb_bundle *bundle, size_t index, char *pattern, size_t size,
                          uint8_t *level);

/* The complaint about a malformed LOGBOOK_FILTER at open, or NULL when it was fine or unset. */
const char *lb_bundle_filter_warning(lb_bundle *bundle);

/* ---------------------------------------------------------------------------------------------
 * The Swift façade's per-type logger cache (LogCategory): a process-wide direct-mapped table of
 * pointers to immutable entries that the façade owns and never frees, and a generation that the
 * façade bumps when the entries become stale. Here so that a lookup is one plain atomic load, with
 * no lazy global initialisation or reference counting on the logging path.
 */
#define LB_TYPE_CACHE_SIZE 256u
extern const void *_Atomic lb_type_cache[LB_TYPE_CACHE_SIZE];
extern _Atomic uint64_t lb_type_cache_generation;

static inline const void *lb_type_cache_load(uint32_t index) {
    return atomic_load_explicit(&lb_type_cache[index & (LB_TYPE_CACHE_SIZE - 1)],
                                memory_order_acquire);
}
static inline void lb_type_cache_store(uint32_t index, const void *entry) {
    atomic_store_explicit(&lb_type_cache[index & (LB_TYPE_CACHE_SIZE - 1)], entry,
                          memory_order_release);
}
static inline uint64_t lb_type_cache_current_generation(void) {
    return atomic_load_explicit(&lb_type_cache_generation, memory_order_acquire);
}
static inline void lb_type_cache_set_generation(uint64_t generation) {
    atomic_store_explicit(&lb_type_cache_generation, generation, memory_order_release);
}

/* ---------------------------------------------------------------------------------------------
 * Clock
 */
extern bool lb_clock_is_tsc;   /* set once by the first lb_bundle_open; read-only afterwards */

static inline uint64_t lb_clock_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(lb_clock_is_tsc, 1)) return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------
 * The hot path: a per-thread writer appends records to the chunk it owns.
 *
 * Fields are private to the implementation; they are here only so that the functions below can be
 * inlined into C and Swift callers.
 */
enum lb_writer_mode {
    LB_WRITER_DIRECT = 0,   /* building the record in the chunk */
    LB_WRITER_STAGING = 1,  /* building a record too large for the chunk in a heap buffer */
    LB_WRITER_DISCARD = 2,  /* the record is dropped; puts go to a scratch area */
};

typedef struct lb_writer {
    /* hot, owner thread only */
    uint8_t *cur;                  /* next byte of the record being built */
    uint8_t *end;                  /* end of the area `cur` may advance to (in a chunk: its end
                                      less the 8 bytes a page check may need) */
    uint8_t *record;               /* start of the record being built */
    uint8_t *chunk_end;            /* end of the owned chunk (NULL when none) */
    lb_chunk_header *chunk;        /* the owned chunk, or NULL */
    uint64_t tag_bits;             /* this chunk's record header bits: tag and check, no kind */
    uint32_t mode;                 /* lb_writer_mode of the record being built */
    _Atomic uint32_t building;     /* 1 from begin to commit; the steal protocol's busy flag */
    _Atomic uint64_t last_ticks;   /* clock ticks of the last record begun (read by the sealer) */
    void *capture;                 /* façade use: collects a new call site's literal text */
    /* written by another thread (flush, close, idle sealer) */
    _Atomic uint32_t steal;        /* another thread asks to take this writer's chunk */
    uint32_t pad;
    uint8_t cold[];                /* implementation state (lb_writer_cold in writer.c) */
} lb_writer;

extern _Thread_local lb_bundle *lb_tls_bundle;  /* the bundle this thread logged to last */
extern _Thread_local lb_writer *lb_tls_writer;  /* this thread's writer for lb_tls_bundle */

lb_writer *lb_writer_get_slow(lb_bundle *bundle);
void lb_record_begin_slow(lb_writer *w, uint16_t logger, uint8_t level, int nested);
uint8_t *lb_record_reserve_slow(lb_writer *w, size_t size);
int lb_record_commit_slow(lb_writer *w, uint32_t site);
int lb_record_commit_late(lb_writer *w, const uint8_t *record);
int lb_record_commit_crossing(lb_writer *w, uint32_t site);

/* Abandons the record being built: the following lb_record_commit drops it and counts `reason`
 * (lb_drop_reason). Used when its call site could not be registered. */
void lb_record_discard(lb_writer *w, unsigned reason);

/* This thread's writer for `bundle`. Never NULL: when no writer can be made, the returned writer
 * drops (and counts) what is logged through it. */
static inline lb_writer *lb_writer_get(lb_bundle *bundle) {
    /* A writer whose bundle was closed keeps `steal` set for good: a new bundle allocated at the
     * closed one's address must not be served by it. */
    lb_writer *w = lb_tls_writer;
    if (__builtin_expect(lb_tls_bundle == bundle && w &&
                             !atomic_load_explicit(&w->steal, memory_order_relaxed),
                         1))
        return w;
    return lb_writer_get_slow(bundle);
}

/* This thread's writer if it is between lb_record_begin and lb_record_commit, else NULL. */
static inline lb_writer *lb_writer_building(void) {
    lb_writer *w = lb_tls_writer;
    return (w && atomic_load_explicit(&w->building, memory_order_relaxed)) ? w : NULL;
}

/* Starts a record. Must be followed by puts and exactly one lb_record_commit. */
static inline void lb_record_begin(lb_writer *w, uint16_t logger, uint8_t level) {
    if (__builtin_expect(atomic_load_explicit(&w->building, memory_order_relaxed), 0)) {
        lb_record_begin_slow(w, logger, level, 1);
        return;
    }
    /* Busy first, then look for a steal request: the other side pairs this with membarrier(). */
    atomic_store_explicit(&w->building, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    uint8_t *r = w->cur;
    if (__builtin_expect(atomic_load_explicit(&w->steal, memory_order_acquire) != 0 ||
                             (size_t)(w->end - r) < LB_RECORD_FIXED_SIZE,
                         0)) {
        lb_record_begin_slow(w, logger, level, 0);
        return;
    }
    uint64_t t = lb_clock_ticks();
    atomic_store_explicit(&w->last_ticks, t, memory_order_relaxed);
    memcpy(r + 8, &t, 8);
    uint32_t who = (uint32_t)logger | (uint32_t)level << 16;
    memcpy(r + 20, &who, 4);
    w->record = r;
    w->cur = r + LB_RECORD_FIXED_SIZE;
}

/* Space for `size` more bytes of the record being built, or NULL when the record is dropped. */
static inline uint8_t *lb_record_reserve(lb_writer *w, size_t size) {
    uint8_t *p = w->cur;
    if (__builtin_expect((size_t)(w->end - p) < size, 0)) return lb_record_reserve_slow(w, size);
    w->cur = p + size;
    return p;
}

#define LB__DEFINE_PUT(name, ctype, tag)                                   \
    static inline void lb_record_put_##name(lb_writer *w, ctype value) {  \
        uint8_t *p = lb_record_reserve(w, 1 + sizeof(ctype));              \
        if (__builtin_expect(p != NULL, 1)) {                              \
            p[0] = (uint8_t)(tag);                                         \
            memcpy(p + 1, &value, sizeof(ctype));                          \
        }                                                                  \
    }
LB__DEFINE_PUT(i8, int8_t, LB_ARG_I8)
LB__DEFINE_PUT(i16, int16_t, LB_ARG_I16)
LB__DEFINE_PUT(i32, int32_t, LB_ARG_I32)
LB__DEFINE_PUT(i64, int64_t, LB_ARG_I64)
LB__DEFINE_PUT(int, int64_t, LB_ARG_INT)
LB__DEFINE_PUT(u8, uint8_t, LB_ARG_U8)
LB__DEFINE_PUT(u16, uint16_t, LB_ARG_U16)
LB__DEFINE_PUT(u32, uint32_t, LB_ARG_U32)
LB__DEFINE_PUT(u64, uint64_t, LB_ARG_U64)
LB__DEFINE_PUT(uint, uint64_t, LB_ARG_UINT)
LB__DEFINE_PUT(f32, float, LB_ARG_F32)
LB__DEFINE_PUT(f64, double, LB_ARG_F64)
#undef LB__DEFINE_PUT

static inline void lb_record_put_bool(lb_writer *w, bool value) {
    uint8_t *p = lb_record_reserve(w, 2);
    if (__builtin_expect(p != NULL, 1)) {
        p[0] = LB_ARG_BOOL;
        p[1] = value ? 1 : 0;
    }
}

/* Strings (LB_ARG_STRING, LB_ARG_STATIC_STRING) and raw bytes (LB_ARG_BYTES). */
static inline void lb_record_put_data(lb_writer *w, uint8_t tag, const void *bytes, size_t length) {
    if (__builtin_expect(length > LB_RECORD_MAX_SIZE, 0)) length = (size_t)LB_RECORD_MAX_SIZE + 1;
    uint8_t *p = lb_record_reserve(w, 5 + length);
    if (__builtin_expect(p != NULL, 1)) {
        uint32_t n = (uint32_t)length;
        p[0] = tag;
        memcpy(p + 1, &n, 4);
        if (length) memcpy(p + 5, bytes, length);
    }
}

static inline void lb_record_put_string(lb_writer *w, const char *text, size_t length) {
    lb_record_put_data(w, LB_ARG_STRING, text, length);
}

static inline void lb_record_put_cstring(lb_writer *w, const char *text) {
    if (text) lb_record_put_data(w, LB_ARG_STRING, text, strlen(text));
    else lb_record_put_data(w, LB_ARG_STRING, "(null)", 6);
}

/* The start of a container (LB_ARG_METADATA, LB_ARG_LIST, LB_ARG_MAP or LB_ARG_ERROR) of `count`
 * items, which the following puts supply (logbook_format.h: a pair is a string key and a value).
 * Metadata goes after the message's arguments; the error (two strings: type, description) last.
 * A key put twice in one metadata or map is stored twice; readers (`logbook show`, the JSON, OTLP)
 * keep its last value, as Swift's LogMetadata does when built from pairs. */
static inline void lb_record_put_container(lb_writer *w, uint8_t tag, uint32_t count) {
    uint8_t *p = lb_record_reserve(w, 5);
    if (__builtin_expect(p != NULL, 1)) {
        p[0] = tag;
        memcpy(p + 1, &count, 4);
    }
}

/* A withheld value: only its type reaches the disk. */
static inline void lb_record_put_redacted(lb_writer *w, uint8_t type) {
    uint8_t *p = lb_record_reserve(w, 2);
    if (__builtin_expect(p != NULL, 1)) {
        p[0] = LB_ARG_REDACTED;
        p[1] = type;
    }
}

/* Commits the record with its call site: zeroes the next header slot, then release-stores the
 * header. Returns 0, or when the record was dropped (and counted): -EMSGSIZE (too large),
 * -ENOSPC (no chunk free: every chunk owned by a writer), -ENOBUFS (a lossless ring full: the
 * archiver freed no chunk within lossless_wait_ms, counted `ring_full`; a large record is dropped
 * so too, whatever its size), -EBADF (closed), -EDEADLK (logged from inside a logging call) or
 * -EIO. A record begun before lb_bundle_shutdown and committed after shutdown gave up
 * waiting for it (2 s) and detached the ring returns -EBADF (dropped, counted `closed`); one
 * committed before the ring was detached reached the file and returns 0. */
static inline int lb_record_commit(lb_writer *w, uint32_t site) {
    if (__builtin_expect(w->mode != LB_WRITER_DIRECT, 0)) return lb_record_commit_slow(w, site);
    uint8_t *r = w->record;
    uint32_t length = (uint32_t)(w->cur - r);
    /* A record with bytes in two pages carries a page check (logbook_format.h): the slow path. */
    if (__builtin_expect((((uintptr_t)r ^ ((uintptr_t)r + length - 1u)) & ~(uintptr_t)(LB_PAGE_SIZE - 1u)) != 0, 0))
        return lb_record_commit_crossing(w, site);
    memcpy(r + 16, &site, 4);
    uint8_t *next = r + ((length + 7u) & ~7u);
    if ((size_t)(w->chunk_end - next) >= 8) {
        uint64_t zero = 0;
        memcpy(next, &zero, 8);
    }
    /* The builtin rather than a cast to an _Atomic pointer: the same release store, and Swift's
     * importer, which compiles this function into every Swift module that logs, cannot represent
     * an _Atomic cast (it printed a note into every client's build). */
    __atomic_store_n((uint64_t *)(void *)r,
                     (uint64_t)length | w->tag_bits | ((uint64_t)LB_RECORD_FULL << 24),
                     __ATOMIC_RELEASE);
    lb_chunk_header *chunk = w->chunk;
    atomic_store_explicit(&chunk->committed, (uint32_t)(next - (uint8_t *)chunk),
                          memory_order_release);
    atomic_store_explicit(&chunk->record_count,
                          atomic_load_explicit(&chunk->record_count, memory_order_relaxed) + 1,
                          memory_order_release);
    w->cur = next;
    atomic_store_explicit(&w->building, 0, memory_order_release);
    /* Another thread asked for the chunk: flush, the idle sealer, or close, which may have given
     * up on this record and replaced the ring's memory before it was stored. */
    if (__builtin_expect(atomic_load_explicit(&w->steal, memory_order_acquire) != 0, 0))
        return lb_record_commit_late(w, r);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * C convenience: LB_TRACE .. LB_CRITICAL(logger, "template {}", args...), up to 12 arguments of
 * integer, floating point, bool or C string type. Evaluates the arguments only when enabled.
 */
#define LB__PUT(w, x)                                                                          \
    _Generic((x), _Bool: lb_record_put_bool, char: lb_record_put_i8,                           \
             signed char: lb_record_put_i8, unsigned char: lb_record_put_u8,                   \
             short: lb_record_put_i16, unsigned short: lb_record_put_u16,                      \
             int: lb_record_put_i32, unsigned int: lb_record_put_u32,                          \
             long: lb_record_put_i64, unsigned long: lb_record_put_u64,                        \
             long long: lb_record_put_i64, unsigned long long: lb_record_put_u64,              \
             float: lb_record_put_f32, double: lb_record_put_f64,                              \
             char *: lb_record_put_cstring, const char *: lb_record_put_cstring)(w, x);
#define LB__N(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define LB__CAT(a, b) LB__CAT2(a, b)
#define LB__CAT2(a, b) a##b
#define LB__PUTS0(w)
#define LB__PUTS1(w, a) LB__PUT(w, a)
#define LB__PUTS2(w, a, ...) LB__PUT(w, a) LB__PUTS1(w, __VA_ARGS__)
#define LB__PUTS3(w, a, ...) LB__PUT(w, a) LB__PUTS2(w, __VA_ARGS__)
#define LB__PUTS4(w, a, ...) LB__PUT(w, a) LB__PUTS3(w, __VA_ARGS__)
#define LB__PUTS5(w, a, ...) LB__PUT(w, a) LB__PUTS4(w, __VA_ARGS__)
#define LB__PUTS6(w, a, ...) LB__PUT(w, a) LB__PUTS5(w, __VA_ARGS__)
#define LB__PUTS7(w, a, ...) LB__PUT(w, a) LB__PUTS6(w, __VA_ARGS__)
#define LB__PUTS8(w, a, ...) LB__PUT(w, a) LB__PUTS7(w, __VA_ARGS__)
#define LB__PUTS9(w, a, ...) LB__PUT(w, a) LB__PUTS8(w, __VA_ARGS__)
#define LB__PUTS10(w, a, ...) LB__PUT(w, a) LB__PUTS9(w, __VA_ARGS__)
#define LB__PUTS11(w, a, ...) LB__PUT(w, a) LB__PUTS10(w, __VA_ARGS__)
#define LB__PUTS12(w, a, ...) LB__PUT(w, a) LB__PUTS11(w, __VA_ARGS__)
#define LB__PUTS(w, ...) \
    LB__CAT(LB__PUTS, LB__N(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0))(w, __VA_ARGS__)

/* Registers the site of a C call (slow path of LB_LOG). Returns the id, or 0 on failure. */
uint32_t lb_site_register_c(lb_bundle *bundle, const char *file, uint32_t line,
                            const char *function, const char *template_text);

#define LB_LOG(logger, level, template_text, ...)                                              \
    do {                                                                                       \
        lb_logger *lb__logger = (logger);                                                      \
        if (lb_logger_enabled(lb__logger, (level))) {                                          \
            lb_writer *lb__w = lb_writer_get(lb__logger->bundle);                              \
            lb_record_begin(lb__w, lb__logger->id, (level));                                   \
            LB__PUTS(lb__w, ##__VA_ARGS__)                                                     \
            uint32_t lb__site = lb_site_lookup(lb__logger->bundle, __FILE__, template_text,    \
                                               __LINE__, 0);                                   \
            if (!lb__site)                                                                     \
                lb__site = lb_site_register_c(lb__logger->bundle, __FILE__, __LINE__, __func__, \
                                              template_text);                                  \
            if (!lb__site) lb_record_discard(lb__w, LB_DROP_META);                             \
            (void)lb_record_commit(lb__w, lb__site);                                           \
        }                                                                                      \
    } while (0)

#define LB_TRACE(logger, ...) LB_LOG(logger, LB_LEVEL_TRACE, __VA_ARGS__)
#define LB_DEBUG(logger, ...) LB_LOG(logger, LB_LEVEL_DEBUG, __VA_ARGS__)
#define LB_INFO(logger, ...) LB_LOG(logger, LB_LEVEL_INFO, __VA_ARGS__)
#define LB_NOTICE(logger, ...) LB_LOG(logger, LB_LEVEL_NOTICE, __VA_ARGS__)
#define LB_WARNING(logger, ...) LB_LOG(logger, LB_LEVEL_WARNING, __VA_ARGS__)
#define LB_ERROR(logger, ...) LB_LOG(logger, LB_LEVEL_ERROR, __VA_ARGS__)
#define LB_CRITICAL(logger, ...) LB_LOG(logger, LB_LEVEL_CRITICAL, __VA_ARGS__)

/* ---------------------------------------------------------------------------------------------
 * Reading. A reader never maps the files (a truncated file cannot SIGBUS it); it reads with
 * pread, checks every length and offset and reports what it could not use as issues.
 */
typedef struct lb_reader lb_reader;

/* Opens a bundle, an archive directory or one archive file for reading; nothing is read until
 * lb_reader_scan. -ENOENT for a missing path, -EINVAL for a FIFO, socket or device, -EPROTO for a
 * directory that is neither a bundle nor an archive directory, -EACCES (or -EPERM) when this user
 * may not read the bundle's directory, ring, meta, archive directory or an archive file (each
 * opened once to see; lb_error_detail() names it: the records are not lost, only not readable by
 * this user). An archive directory that becomes unreadable later is an issue (MISSING). A
 * bundle's own `archive` directory holding no file (nothing archived yet) opens as an empty
 * archive directory. A bundle directory whose creation was cut short (no ring; a meta without
 * entries, be it its header, part of it or empty, or none; no mirror, durable or archive) opens
 * as an empty bundle with one TORN issue saying it was never completed: nothing was ever logged
 * to it (verify passes; the meta is not read). */
int lb_reader_open(const char *path, lb_reader **out);
void lb_reader_close(lb_reader *reader);

/* 1 when the reader was opened on a bundle whose creation was cut short (see lb_reader_open):
 * nothing was ever logged to it, and it has no ring to describe (lb_reader_ring_info: -ENOENT).
 * Else 0. */
int lb_reader_never_completed(const lb_reader *reader);

/* Reads what is new since the last scan (sessions, loggers, sites, committed records) and appends
 * the new entries, sorted by time among themselves. Returns the number of new entries (>= 0) or
 * -errno when the bundle cannot be read at all. A record is reported once, also across scans of a
 * live bundle. */
long lb_reader_scan(lb_reader *reader);

/* Drops the entries held so far (their memory is released); entry indices start again at 0. */
void lb_reader_discard_entries(lb_reader *reader);

typedef struct lb_entry {
    int64_t wall_ns;            /* nanoseconds since the Unix epoch (UTC) */
    uint64_t ticks;             /* raw clock ticks */
    uint64_t chunk_sequence;
    uint32_t chunk_offset;      /* offset of the record in its chunk (of its first fragment) */
    uint32_t thread_id;
    uint32_t session;
    uint32_t site_id;
    uint16_t logger_id;
    uint8_t level;
    uint8_t fragmented;         /* 1 when the record was stored as fragments */
    const uint8_t *args;        /* the encoded arguments (valid until discard or close) */
    uint32_t args_length;
    uint32_t pid;               /* of the writing session */
} lb_entry;

size_t lb_reader_entry_count(const lb_reader *reader);
int lb_reader_entry(const lb_reader *reader, size_t index, lb_entry *out);

/* ---- Streaming: entries handed out one at a time, memory bounded by a window ---- */

struct lb_site_info;

/* What lb_reader_stream hands out. Records that fail it are skipped before their arguments are
 * checked or copied; they still count as read (lb_reader_verify's records_found), so verify is
 * exact only after unfiltered reads. Zero-initialised: every record passes. */
typedef struct lb_read_filter {
    uint8_t min_level;          /* lb_level: records below it are skipped; 0 for no bound */
    uint8_t max_level;          /* records above it are skipped; 0 for no bound */
    int64_t since_ns;           /* records before this wall time are skipped; 0 for no bound */
    int64_t until_ns;           /* records at or after this wall time are skipped; 0 for none */
    /* Asked once per (session, call site, logger) that records name, with the site (NULL when no
     * meta entry defines it) and the logger's name (NULL when unknown): nonzero keeps their
     * records. NULL keeps every record. */
    int (*accept)(void *context, const struct lb_site_info *site, const char *logger_name);
    void *accept_context;
} lb_read_filter;

/* Receives one entry; its `args` stay valid until it returns. Nonzero stops the stream. */
typedef int (*lb_entry_visitor)(void *context, const lb_entry *entry);

/* Reads what is new since the last scan or stream, like lb_reader_scan, but hands each entry to
 * `visit` in time order instead of holding it: memory is bounded by the chunks that overlap in time
 * (about one per thread writing at once; more when writing threads were preempted; never more than
 * 64 MiB of chunks, whatever the bundle; lb_reader_window_peak says how many). Time order is exact
 * once the writer has stopped, but for a record whose timestamp is older than 64 MiB of records
 * written after it (a record whose arguments took long to evaluate while other threads wrote):
 * it comes when it is read. While a writer runs, each call hands out its own entries in order, but
 * across calls a record can come after later ones: one committed late after taking its timestamp,
 * and one whose chunk a call could not read yet while it read later chunks (the chunk's archive
 * file not listed yet, or the beginning of a fragment in it awaited). A directory of more archive
 * files than half the process's descriptor limit is read a batch of the oldest files at a time,
 * each closed once read. Returns the number of entries visited, or -errno when the bundle cannot
 * be read at all. When `visit` returns nonzero, no more entries are handed out by this call, but it still
 * reads to the end of what is new (without decoding), so that the reader stays whole: the records
 * not handed out count as read (verify does not report them) and the next call starts after them.
 * Issues, lb_reader_overwritten and lb_reader_verify work as after lb_reader_scan. */
long lb_reader_stream(lb_reader *reader, const lb_read_filter *filter, lb_entry_visitor visit,
                      void *context);

/* The most chunks the window held at once, since the reader was opened: what its memory is
 * bounded by (each holds one chunk image and its entries). */
size_t lb_reader_window_peak(const lb_reader *reader);

typedef struct lb_site_info {
    uint32_t session;
    uint32_t id;
    uint32_t line;
    uint32_t column;
    const char *file;           /* NUL-terminated copies owned by the reader */
    const char *function;
    const char *template_text;
    const char *source;         /* "" when the site has none */
} lb_site_info;

/* NULL when the site is unknown (its entry was lost or corrupt). */
const lb_site_info *lb_reader_site(const lb_reader *reader, uint32_t session, uint32_t site_id);
/* The logger's name, or NULL. */
const char *lb_reader_logger_name(const lb_reader *reader, uint32_t session, uint16_t logger_id);

typedef struct lb_session_info {
    uint32_t session;
    uint32_t pid;
    uint32_t clock;             /* lb_clock_kind */
    uint64_t ticks_per_second;
    uint64_t tick_anchor;
    uint64_t wall_anchor_ns;
    const char *host;
    const char *executable;
} lb_session_info;

size_t lb_reader_session_count(const lb_reader *reader);
const lb_session_info *lb_reader_session(const lb_reader *reader, size_t index);

/* One argument decoded from lb_entry.args. Strings point into the entry's bytes. */
typedef struct lb_arg {
    uint8_t type;               /* lb_arg_type */
    uint8_t redacted_type;      /* for LB_ARG_REDACTED: the type that was withheld */
    uint32_t length;            /* for strings and bytes */
    union {
        int64_t i;
        uint64_t u;
        double f;
        bool b;
    } value;
    const uint8_t *bytes;
} lb_arg;

/* Decodes the argument at *offset and advances it. Returns 1 when an argument was decoded, 0 at
 * the end, -EBADMSG for bytes that are not a valid argument. */
int lb_arg_next(const uint8_t *args, uint32_t args_length, uint32_t *offset, lb_arg *out);

enum lb_issue_kind {
    LB_ISSUE_CORRUPT = 1,       /* bytes that should be valid are not: verify fails */
    LB_ISSUE_TRUNCATED = 2,     /* a file is shorter than it should be: verify fails */
    LB_ISSUE_TORN = 3,          /* an incomplete write: at a crash (meta tail, lone fragment),
                                   or a large record its writer gave up midway (dropped and
                                   counted, e.g. when a lossless ring filled): no record is lost
                                   that the counters do not account for */
    LB_ISSUE_UNKNOWN_SITE = 4,  /* a record names a site that no meta entry defines */
    LB_ISSUE_MISSING = 5,       /* a file, chunks or records the bundle says it holds are not
                                   there: verify fails */
    LB_ISSUE_OVERWRITTEN = 6,   /* records the overwrite policy destroyed before they were
                                   archived or read (counted; verify does not fail) */
};

typedef struct lb_issue {
    uint32_t kind;              /* lb_issue_kind */
    const char *file;           /* "ring", "meta", "archive" or an archive file's name */
    uint64_t offset;            /* byte offset in that file */
    uint64_t length;            /* bytes skipped */
    const char *reason;         /* what is wrong; valid until lb_reader_close */
    uint64_t records;           /* records this issue accounts for (unreadable, lost or
                                   overwritten); 0 when it cannot say */
} lb_issue;

size_t lb_reader_issue_count(const lb_reader *reader);
int lb_reader_issue(const lb_reader *reader, size_t index, lb_issue *out);

/* What verify found, after every entry was read. */
typedef struct lb_verify_summary {
    uint64_t records_found;      /* entries read, by every scan of this reader */
    uint64_t records_expected;   /* what the ring header's counters say the bundle holds: records
                                    written, less those overwritten and those in archive files
                                    retention deleted (0 when not accounted); for a reader that
                                    followed a live overwrite ring, plus the records it read
                                    (found, or accounted for by issues) before the ring overwrote
                                    them. After a crash inside a claim, up to the records of the
                                    chunks recovery kept from such claims more (the claim may
                                    have counted them overwritten; they are here) */
    uint64_t records_unreadable; /* records the issues account for (damaged, cut short) */
    uint64_t records_lost;       /* expected, neither found nor accounted for by an issue */
    uint64_t records_overwritten;/* by the overwrite policy, before they were archived: the
                                    ring header's count, plus the records of the ring whose
                                    beginning it destroyed (their last fragment is here) */
    uint64_t records_retired;    /* in archive files retention deleted */
    uint64_t records_dropped;    /* never stored: dropped when logged, counted by reason */
    uint32_t accounted;          /* 1 when the counts were checked: a bundle whose ring header is
                                    intact, whose counters are possible and whose writer has
                                    stopped */
    uint32_t writer_alive;       /* a writer holds the bundle: counts move, so only files and
                                    bytes were checked */
} lb_verify_summary;

/* Call once, after lb_reader_scan has read everything: checks what needs the whole bundle and
 * adds an issue for each thing missing. Archive file numbers must have no gaps (from the first
 * one retention kept to the newest one made; for an archive directory alone, between the lowest
 * and highest present); a lossless bundle must hold every chunk ever claimed (in the ring or an
 * archive file) but for those retention deleted; the ring header's counters must be possible
 * (records overwritten no more than the chunks reused held, none for a lossless ring, records
 * sealed and retired no more than the chunks claimed held); and the records read, plus those
 * the issues account for, must match what the ring header counts.
 *
 * Returns the number of issues that fail verification (corrupt, truncated, missing, unknown
 * site: every kind but torn and overwritten), those of the scans included: 0 when the bundle
 * verified clean, more when `logbook verify` would exit 1 (at most INT_MAX). -EINVAL, or
 * -EALREADY on a second call. */
int lb_reader_verify(lb_reader *reader, lb_verify_summary *out);

/* Records of an overwrite ring that the overwrite policy destroyed before this reader could read
 * them, since its first scan (a follower that a fast writer lapped), a record whose beginning was
 * overwritten included (an overwritten issue names it too). Records that cannot be read because
 * their bytes are damaged are never counted here: issues account for them (lb_issue.records, verify's
 * records_unreadable). Records shown + this + the damaged ones = records written. Exact once the
 * writer stops; while it runs it may lag by the chunks reused during the last scan, never run
 * ahead. */
uint64_t lb_reader_overwritten(const lb_reader *reader);

/* Archive files that retention deleted after this reader began and before it could read them (a
 * follower that fell behind): listed and gone when it came to open them, or made and deleted
 * between two of its listings. Their records are lost to this reader; the ring counts them among
 * archive_retired_records. What retention deleted before the reader's first listing is not
 * counted. */
uint64_t lb_reader_archive_files_deleted_unread(const lb_reader *reader);

/* Whether the bundle at the reader's path is still the one it reads (a follower's question): 0
 * yes (always for a reader of archives), 1 its ring is another file now (the bundle was removed
 * and made again at the path, or a ring is there where the reader found none), 2 no ring is
 * there, or -errno. A reader keeps reading the file it opened; a new bundle needs a new reader. */
int lb_reader_ring_replaced(const lb_reader *reader);

typedef struct lb_ring_info {
    uint32_t format_version;
    uint32_t chunk_size;
    uint32_t chunk_count;
    uint32_t wrap_policy;
    uint64_t created_wall_ns;
    uint32_t writer_pid;
    uint32_t writer_alive;      /* 1 when a process holds the writer lock now */
    uint64_t next_sequence;
    uint64_t chunks_free, chunks_active, chunks_sealed, chunks_archived;
    lb_counters counters;       /* as stored in the ring header, plus active chunks' records */
    /* The archiver (all 0 when none ever ran on this bundle). Its lag is what is sealed but not
     * yet archived: chunks_sealed + chunks_archiving, unarchived_bytes, and how old it is. */
    uint64_t chunks_archiving;
    uint64_t unarchived_bytes;
    int64_t oldest_unarchived_wall_ns;  /* claim time of the oldest unarchived sealed chunk */
    uint64_t archived_chunks;           /* ever, by every archiver of this bundle */
    uint64_t archived_bytes;
    uint64_t archive_failures;
    uint64_t chunks_lost_unarchived;    /* overwrite policy: sealed chunks reused unarchived */
    uint32_t archive_last_error;        /* errno, 0 when the last attempt succeeded */
    uint32_t archive_backend;           /* lb_archive_backend, 0 when none ran */
    uint64_t records_overwritten;       /* overwrite policy: records of unarchived chunks reused */
    uint64_t claims_abandoned;          /* chunk claims a crash cut short (they held nothing) */
    uint64_t chunks_discarded;          /* chunks with a damaged header cleared at reopen */
    uint64_t archive_first_number;      /* oldest archive file retention keeps (0: none deleted) */
    uint64_t archive_next_number;       /* number the next archive file gets (0: none made) */
    uint64_t archive_retired_records;   /* records in archive files retention deleted */
} lb_ring_info;

/* Reads the ring header, chunk states and counters (also of a live bundle). -ENOTSUP when the
 * reader was opened on archive files only. */
int lb_reader_ring_info(lb_reader *reader, lb_ring_info *out);

typedef struct lb_archive_info {
    uint64_t files;             /* complete archive files */
    uint64_t writing_files;     /* being written (or left by a crash, until the next open) */
    uint64_t unsynced_files;    /* complete, but their fsync failed: they may miss data */
    uint64_t bytes;             /* of all of them, on disk */
    uint64_t oldest_number, newest_number;
    uint64_t compressed_files;  /* of the complete files, those compressed (.lba.zst) */
} lb_archive_info;

/* Lists the archive files the reader reads (a bundle's archive directory, an archive directory or
 * the one file). All zero when there are none. */
int lb_reader_archive_info(lb_reader *reader, lb_archive_info *out);

/* Which ring the archive files the reader reads were written from (their header's
 * ring_created_wall_ns: the ring's created_wall_ns), that of the newest file whose header reads;
 * 0 when none does. Tells a bundle made again at the same path (its files and chunk sequences
 * numbered from 1 again) from the one before, also when the archive directory or one archive
 * file is read without its bundle. 0 or -errno. */
int lb_reader_archive_ring(lb_reader *reader, uint64_t *ring_created_wall_ns);

#ifdef __cplusplus
}
#endif
#endif
