/*
 * logbook_cache.h — a persistent message cache: app-defined messages (bytes) kept in one file of
 * a fixed size, in append order, thread-safe, with the durability the caller chooses. The byte format is
 * docs/FORMAT.md, "Cache".
 *
 *     lb_cache_options options;
 *     lb_cache_options_init(&options);            // 1 MiB, overwrite the oldest, process durability
 *     lb_cache *cache;
 *     if (lb_cache_open("/var/lib/app/events.cache", &options, &cache) != 0) ...
 *     uint64_t sequence;
 *     lb_cache_append(cache, bytes, length, &sequence);
 *     lb_cache_remove_through(cache, sequence);   // handled: the space is free again
 *     lb_cache_close(cache);
 *
 * The file: a 4096-byte header (mapped; its moving fields are atomic and published with release
 * stores) and a circular region of frames with the archive files' frame head
 * (lb_archive_frame_head: length, kind, CRC-32C of the body, CRC-32C of the head). A frame is
 * written, then published by storing the header's tail: a kill before the store leaves it
 * invisible, never half-read. Every function returns 0 (or a count) or -errno; lb_error_detail()
 * (logbook.h) says more after a failed open.
 */
#ifndef LOGBOOK_CACHE_H
#define LOGBOOK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LB_CACHE_MAGIC "LBCACHE1"
#define LB_CACHE_FORMAT_VERSION 1u
#define LB_CACHE_HEADER_SIZE 4096u
#define LB_CACHE_MINIMUM_BYTES 8192u

enum lb_cache_frame_kind {
    LB_CACHE_FRAME_MESSAGE = 16, /* body: u64 sequence, i64 wall ns, the message's bytes */
    LB_CACHE_FRAME_WRAP = 17,    /* the rest of the region is unused: the next frame is at its start */
};

enum lb_cache_durability {
    LB_CACHE_DURABLE_PROCESS = 1, /* an append survives kill -9 and crashes of the app, once it returns */
    LB_CACHE_DURABLE_POWER = 2,   /* ... and power loss: it returns after the data is on stable storage
                                   * (concurrent appenders share one sync) */
};

/* The header's first 64 bytes (fixed when the file is created) and its moving fields. */
typedef struct lb_cache_header {
    char magic[8];                   /* LB_CACHE_MAGIC */
    uint32_t format_version;         /* LB_CACHE_FORMAT_VERSION */
    uint32_t header_size;            /* LB_CACHE_HEADER_SIZE: where the region starts */
    uint64_t region_size;            /* bytes of the region (a multiple of 8) */
    uint64_t created_wall_ns;
    uint64_t sequence_floor;         /* next_sequence when the file was (re)built: it may be above the
                                      * newest message's sequence + 1 until the next append */
    uint8_t reserved[20];
    uint32_t fixed_crc;              /* CRC-32C of the 60 bytes before this field */
    /* moving: positions are logical byte counts since creation (physical = position % region) */
    _Atomic uint64_t head;           /* the first frame kept */
    _Atomic uint64_t tail;           /* the end of the last frame published */
    _Atomic uint64_t head_sequence;  /* the sequence of the first message kept */
    _Atomic uint64_t next_sequence;  /* the sequence the next message gets */
    _Atomic uint64_t messages;       /* messages kept */
    _Atomic uint64_t message_bytes;  /* their bytes (messages only, not frames) */
    _Atomic uint64_t evicted_overwrite, evicted_count, evicted_age; /* messages the limits removed */
    _Atomic uint64_t removed;        /* messages lb_cache_remove_through removed */
    _Atomic uint64_t durable_tail;   /* the tail the last sync covered (power durability) */
    _Atomic uint64_t rebuilds;       /* times a damaged file was rebuilt from a scan of its region */
    _Atomic uint64_t damage_found;   /* damaged messages or regions rebuilds and eviction found */
    _Atomic uint64_t last_frame;     /* position of the newest message's frame (its end is the tail) */
    _Atomic uint64_t appending;      /* 1 while an append is under way: a reader that finds the cache
                                      * empty then (the append removed every message to make room)
                                      * waits for its tail */
} lb_cache_header;

typedef struct lb_cache_options {
    uint64_t maximum_bytes;  /* the whole file, header included; at least LB_CACHE_MINIMUM_BYTES */
    uint32_t overwrite;      /* 1: the oldest messages make room; 0: a full cache refuses (-ENOSPC) */
    uint32_t durability;     /* lb_cache_durability */
    uint64_t maximum_count;  /* messages kept at most (0: no limit) */
    uint64_t maximum_age_ns; /* older messages are removed as new ones come (0: no limit) */
} lb_cache_options;

typedef struct lb_cache lb_cache;

typedef struct lb_cache_stats {
    uint64_t messages, message_bytes, head_sequence, next_sequence;
    uint64_t evicted_overwrite, evicted_count, evicted_age, removed;
    uint64_t region_size, used_bytes;
    uint64_t rebuilds, damage_found; /* see lb_cache_header */
} lb_cache_stats;

void lb_cache_options_init(lb_cache_options *options);

/* Opens (or creates, 0600, in a directory this user owns; see logbook_files.h) the cache file at
 * `path` for writing. One process at a time: -EWOULDBLOCK, "another process writes to this cache".
 * A file of another size is rebuilt with the newest messages that fit, atomically. A damaged file
 * (header checksum, positions out of bounds, truncated) is rebuilt from what a scan of its region
 * finds (counted in `rebuilds` and `damage_found`). -EPROTO: not a cache (wrong magic; the file is
 * left alone) or another format version. -EMLINK: another name reaches the file (a hard link
 * planted as the cache): it is never written; the detail names it. -ELOOP: the path is a symbolic
 * link, never followed; -EINVAL: not a regular file. */
int lb_cache_open(const char *path, const lb_cache_options *options, lb_cache **out);

/* Appends one message; any thread. -EMSGSIZE: larger than the region can ever hold; -ENOSPC: full
 * and not overwriting. `sequence` (may be NULL) receives its sequence number (never given to two
 * messages; a kill during an append may leave one unused). After fork(), a
 * child's appends, syncs and removals are refused (-EBADF: the parent is the writer); the child
 * may close the cache (it frees memory only) or read it with a reader. */
int lb_cache_append(lb_cache *cache, const void *bytes, size_t length, uint64_t *sequence);

/* Makes everything appended so far survive power loss (power durability does this per append). */
int lb_cache_sync(lb_cache *cache);

/* Removes every message up to and including `sequence` (handled by the caller). */
int lb_cache_remove_through(lb_cache *cache, uint64_t sequence);

int lb_cache_stats_get(lb_cache *cache, lb_cache_stats *out);

int lb_cache_close(lb_cache *cache);

/* ---- reading: any process, with pread (never a mapping), bounds-checked ---- */

typedef struct lb_cache_message {
    uint64_t sequence;
    int64_t wall_ns;
    const uint8_t *bytes; /* valid until the next call on the reader */
    uint32_t length;
} lb_cache_message;

enum lb_cache_issue_kind {
    LB_CACHE_ISSUE_DAMAGE = 1,    /* damaged or missing bytes, skipped */
    LB_CACHE_ISSUE_OVERTAKEN = 2, /* the writer removed messages before this reader reached them */
};

typedef struct lb_cache_issue {
    uint64_t offset; /* in the file */
    uint64_t length;
    const char *what;
    uint32_t kind;   /* lb_cache_issue_kind */
    /* OVERTAKEN: the sequences the reader skipped, missed_first up to missed_first + missed - 1
     * (a sequence a killed writer left unused counts among them) */
    uint64_t missed_first, missed;
} lb_cache_issue;

typedef struct lb_cache_reader lb_cache_reader;

/* -EPROTO: not a cache, or another format version (lb_error_detail() says which). A damaged
 * header is not an error: the reader scans the region for intact messages, in sequence order, and
 * records an issue at offset 0 (messages already removed may come back: at least once, never
 * lost). A truncated file yields what is left, with an issue for what is missing. */
int lb_cache_reader_open(const char *path, lb_cache_reader **out);
/* The next message: 1, 0 at the end, or -errno. Damaged frames are skipped and recorded as issues.
 * A reader returns messages in sequence order without a gap that no issue accounts for (but for a
 * sequence a killed writer left unused, see lb_cache_append). It copies the region from the
 * oldest message kept to the newest published when it was opened, up to 4 MiB at a time (see
 * lb_cache_reader_set_window), and
 * checks each copy against the writer's head, so it never returns a message the writer had
 * overwritten: a cache of up to 4 MiB is copied whole by the first call, and what the reader
 * returns is a run of what the cache held at one moment. Messages the writer removed between the
 * open and that copy are named missed too (an OVERTAKEN issue before the first message). A larger cache whose writer laps it
 * before the reader's next copy (its consumer is slower than the writer) overtakes the reader:
 * the reader goes on at the oldest message left and records a LB_CACHE_ISSUE_OVERTAKEN issue
 * naming the sequences it missed; when the writer passed the reader's end, the end is read again
 * (at most 4 times, then the reader stops, with the issue). The same holds when another process
 * removes messages (lb_cache_remove_through) the reader had not reached. */
int lb_cache_reader_next(lb_cache_reader *reader, lb_cache_message *message);
/* The most the reader copies at once (before its first lb_cache_reader_next): 4 MiB unless set;
 * at least 4096 (-EINVAL). UINT64_MAX copies the whole cache at once, as MessageCache.messages()
 * does: what it returns is then what the cache held at one moment, whatever its size, at the
 * cost of memory for all of it. */
int lb_cache_reader_set_window(lb_cache_reader *reader, uint64_t bytes);
size_t lb_cache_reader_issue_count(const lb_cache_reader *reader);
int lb_cache_reader_issue(const lb_cache_reader *reader, size_t index, lb_cache_issue *out);
int lb_cache_reader_close(lb_cache_reader *reader);

#ifdef __cplusplus
}
#endif

#endif
