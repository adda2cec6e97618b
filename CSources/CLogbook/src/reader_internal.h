/* reader_internal.h — the reader's state (struct lb_reader) and the helpers its files share:
 * reader.c (open, walk, order, the read window, scan and stream) and reader_verify.c (verify and
 * the ring's and archive's facts). Private to CSources/CLogbook/src. */
#ifndef LOGBOOK_READER_INTERNAL_H
#define LOGBOOK_READER_INTERNAL_H
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_TABLE_SIZE 1024u
#define ARENA_BLOCK (4u << 20)
#define PENDING_MAX 4096u
/* Source buffers of argument bytes (the chunk buffer, assembled fragments) end with this much
 * slack, so that arena_copy may move small arguments in fixed 16-byte pieces. */
#define COPY_SLACK 32u

typedef struct name_entry {
    uint32_t session;
    uint32_t id;
    char *name;
    lb_site_info site;  /* used by the site table */
    struct name_entry *next;
} name_entry;

typedef struct arena_block {
    struct arena_block *next;
    size_t used, capacity;
    uint8_t bytes[];
} arena_block;

typedef struct slot_progress {
    uint64_t sequence;   /* chunk read last from this slot */
    uint32_t offset;     /* where its walk stopped */
    uint32_t broken;     /* a corrupt record was reported: do not walk it again */
} slot_progress;

/* Every chunk sequence read so far, from the ring or an archive file, and how far: a chunk is read
 * once even when the ring and the archive both hold it. Open addressing; sequence 0 is empty. */
/* A chunk found: its claim number and sequence (verify_claims names the sequences around a gap). */
typedef struct noted_claim {
    uint64_t claim, sequence;
} noted_claim;

typedef struct seen_chunk {
    uint64_t sequence;
    uint32_t offset;     /* where its walk stopped */
    uint32_t records;    /* records (FULL and LAST) its walks found so far */
    uint8_t broken;      /* a corrupt record was reported: do not walk it again */
    uint8_t archived;    /* an archive file holds it (a second one would be a duplicate) */
    uint8_t gone;        /* its ring slot was reused while no archive file held it */
    uint8_t active;      /* last read from the ring while ACTIVE (its records are not yet in
                            the ring header's count) */
    uint8_t claim_noted; /* its claim number is in r->claims */
    uint8_t kept_from_claim; /* found CLAIMING with its old header whole in a dead writer's ring:
                                its records are in r->claiming_kept_records */
    uint8_t deferrals;   /* scans whose walk stopped before a fragment to read its beginning
                            first (see fragment_beginning_may_come) */
    uint32_t shown;      /* entries made from its records (a walked record may not make one: a
                            fragment whose beginning was lost, arguments that do not decode) */
    uint32_t unreadable; /* records of it that issues account for as damaged: walked and not
                            shown, or not walked past where its walk broke off */
    uint32_t beginnings_overwritten; /* LAST fragments walked whose beginning the overwrite policy
                                        destroyed (an issue names each too) */
    uint8_t trailing;    /* what became of the large record its last fragment (a FIRST or MIDDLE)
                            begins or continues, once walked: TRAILING_* */
} seen_chunk;

/* seen_chunk.trailing: a chunk that ends with a FIRST or MIDDLE fragment. The chunk after it that
 * finds no beginning pending learns from this whether the overwrite policy destroyed it. */
enum {
    TRAILING_PENDING = 1,     /* pending (or given up whole) */
    TRAILING_OVERWRITTEN = 2, /* a MIDDLE whose beginning the overwrite policy destroyed */
    TRAILING_LOST = 3,        /* damaged, or a MIDDLE whose beginning was lost so */
};

/* An archive file being read (see logbook_format.h). */
typedef struct archive_file {
    uint64_t number;
    char *name;          /* its current path (a .writing file is renamed when complete) */
    char *label;         /* its first base name, for issues; kept until close */
    int fd;
    lb_archive_source src;  /* reads at uncompressed offsets (a .lba.zst is decompressed) */
    struct source_damage *damage;  /* the context of src's damage reports */
    int kind;            /* lb_archive_name_kind of `name` */
    int opened_kind;     /* the kind of the name `fd` was opened by (the file may have been
                          * renamed or compressed since: fd still reads the bytes it named) */
    int header_ok, done;
    int in_directory;    /* found by listing a directory (a symlink there is never followed) */
    int named;           /* its name is an archive file's (its suffix must match what it holds) */
    uint32_t chunk_size, chunk_count;
    uint64_t ring_created_wall_ns;
    uint64_t offset;     /* the next frame to read */
    /* what its frames held, for the END frame's account */
    uint64_t chunk_frames, chunk_records;
    int end_found;       /* an END frame was read (the last frame) */
    int damaged;         /* a frame head failed its check (frames after it were searched for) */
    int foreign;         /* another bundle's file (reported, not read) */
    int planted;         /* no archive header and another name (a hard link): a file planted
                            from outside (reported, not read, not one of the archive's numbers) */
    lb_archive_end end;
    uint64_t last_listed;  /* the newest sequence this pass lists in it: once read, the file's
                            * decoding buffers are released (lb_archive_source_rest) */
} archive_file;

typedef struct pending_record {
    uint64_t last_sequence;  /* chunk holding the newest fragment */
    uint64_t first_sequence;
    uint32_t first_offset;
    uint64_t first_file_offset;
    const char *first_file;
    uint32_t thread_id, session;
    uint8_t *bytes;          /* logical record from its timestamp on */
    size_t length;
    int consumed;            /* emitted or given up by the walk under way: dropped once that walk
                                counts (a ring chunk reused while it was copied does not, and
                                its walk is undone: see read_ring_chunk) */
    int orphaned;            /* a later chunk of its thread did not continue it: its end will
                                never come (a crash, a damaged chunk), so it no longer holds the
                                read window back (see watermark) */
} pending_record;

/* What a walk may change of the records pending before it, to undo it. */
typedef struct pending_state {
    uint64_t last_sequence;
    size_t length;
} pending_state;

/* Per session: the span of chunk anchors seen, to refine the tick rate. A 20 ms calibration at
 * open is good to ~50 ppm; anchors minutes apart pin it down far better. */
typedef struct session_clock {
    uint32_t session;
    uint64_t first_ticks, last_ticks;
    int64_t first_wall, last_wall;
} session_clock;

/* ---- the read window ----
 * A scan reads chunks in sequence order. The entries of each chunk it walks form a run, in tick
 * order already (one thread wrote them), whose argument bytes stay in the run's own copy of the
 * chunk image. Runs wait in a heap until no chunk still to be read can hold an earlier record.
 * A writer takes a chunk's tick anchor when it claims the chunk, so every record it writes there
 * later is newer; only the record that made it claim the chunk may be older (its timestamp was
 * taken first), and chunk_floor takes the lesser of the two. The watermark is the least (session,
 * floor) of the chunks not read yet and the least (session, ticks) of the large records begun but
 * not finished; entries below it are handed out in time order and their runs recycled. Memory is
 * bounded by the chunks that overlap in time (about one per thread writing at once, more when
 * writers were preempted), not by the bundle. */
typedef struct window_run {
    lb_entry *entries;
    size_t count, next, capacity;
    uint64_t head_ticks;         /* key of entries[next], kept here for the heap's comparisons */
    uint32_t head_session;
    uint32_t found;              /* records walked into entries, those a filter skipped included */
    uint64_t serial;             /* arrival order: equal ticks keep it */
    uint8_t *image;              /* the chunk image the entries' arguments point into */
    size_t image_capacity;       /* its bytes, less COPY_SLACK */
    uint8_t **spill;             /* copies of the arguments of reassembled large records */
    size_t spill_count, spill_capacity;
} window_run;

/* Time order: sessions one after another, within a session by clock ticks. */
typedef struct order_key {
    uint32_t session;
    uint64_t ticks;
} order_key;

/* Whether records of (session, site, logger) pass the filter's accept callback: asked once. */
typedef struct accept_memo {
    uint32_t session, site;
    uint16_t logger;
    uint8_t used, accept;
} accept_memo;

struct lb_reader {
    char *path;
    int ring_mode;          /* reading a bundle (ring and meta), not only archive files */
    int ring_fd, meta_fd, lock_fd;
    int durable_fd;         /* the bundle's `durable` file, or -1 */
    int mirror_fd;          /* its `mirror`: the durable prefixes of the chunks it lists, or -1 */
    lb_durable_entry *durable;  /* what the last sync made durable, by sequence (durable.c) */
    size_t durable_count;
    int durable_valid;          /* a valid copy of `durable` exists: the bundle syncs */
    uint64_t durable_claimed;   /* the claim counter when it was taken */
    uint64_t durable_overwritten; /* the ring's count of records overwritten then */
    uint64_t durable_superseded;  /* records of listed chunks overwritten since (see
                                     drop_superseded_durable) */
    int header_ok, meta_ok, truncation_reported;
    int ring_broken;        /* the ring header is damaged (reported once); chunks are read with
                               the geometry of an archive file of this bundle when one says it */
    int geometry_known;     /* r->header's chunk_size and chunk_count can be used */
    int open_reported;      /* missing ring or meta file reported */
    int never_completed;    /* a bundle whose creation was cut short: no ring, a meta with no
                               entry or none, nothing else a writer makes after creation */
    int ring_open_error, meta_open_error;  /* -errno when `ring` or `meta` could not be opened */
    /* accounting (lb_reader_verify) */
    noted_claim *claims;    /* the claim numbers of every chunk found (ring or archive; repeats),
                               with its sequence */
    size_t claim_count, claim_capacity;
    uint64_t claiming_slots;/* slots found CLAIMING with an incomplete header (a claim a crash
                               cut short, if the writer is dead) */
    uint64_t claiming_kept_records; /* records of chunks a dead writer left CLAIMING with their
                               header whole, read as recovery keeps them (overwrite policy): the
                               claim may have counted them overwritten already */
    int archive_dir_missing;
    int archive_dir_reported;                   /* an unreadable archive directory was reported */
    uint64_t archive_listed_max; /* the highest archive file number a listing found so far */
    uint64_t archive_gap_low, archive_gap_high; /* numbers the last listing skipped: counted
                                                   deleted unread if the next lacks them too */
    uint64_t archive_files_deleted_unread; /* lb_reader_archive_files_deleted_unread */
    int archives_deferred;   /* the last pass read only the oldest archive files: more than may be
                                open at once were waiting (lb_reader_stream reads on) */
    /* records overwritten before this reader could read them (lb_reader_overwritten) */
    int overwritten_baseline_set;
    uint64_t overwritten_baseline, overwritten_now;
    uint64_t gone_read;     /* records of chunks that left the ring unarchived that this reader
                               had shown, or that issues account for as damaged */
    uint64_t gone_beginnings; /* LAST fragments of those chunks whose beginning was overwritten */
    uint64_t beginnings_overwritten; /* LAST fragments walked in chunks that did not leave the ring
                                        whose beginning the overwrite policy destroyed */
    uint64_t emitted;       /* entries made by every scan so far (discarded ones included) */
    int verified;           /* lb_reader_verify ran (its issues are added once) */
    char **owned;           /* strings that issues point to */
    size_t owned_count, owned_capacity;
    lb_ring_header header;
    uint64_t meta_offset;
    uint64_t meta_torn_reported;
    lb_session_info *sessions;
    size_t session_count, session_capacity;
    name_entry *loggers[NAME_TABLE_SIZE];
    name_entry *sites[NAME_TABLE_SIZE];
    slot_progress *progress;
    uint8_t *chunk;
    lb_entry *entries;
    size_t entry_count, entry_capacity;
    arena_block *arena;
    lb_issue *issues;
    size_t issue_count, issue_capacity;
    pending_record *pending;
    size_t pending_count;
    session_clock *clocks;
    size_t clock_count, clock_capacity;
    uint32_t known_site_session, known_site_id;  /* the last site found defined */
    uint32_t *order;                             /* entries in time order, by index */
    size_t order_capacity;
    size_t chunk_capacity;                       /* bytes of `chunk` (the largest chunk size) */
    seen_chunk *seen;
    size_t seen_count, seen_capacity;
    /* archive files: a bundle's "archive" directory, an archive directory, or a single file */
    char *archive_dir;                           /* NULL when reading one file */
    archive_file *archives;
    size_t archive_count, archive_capacity;
    /* Archived chunks whose walk stopped before their end: before a fragment whose beginning was
     * not read yet (deferred), or to read a copy that follows. A file's frames are listed once,
     * so the next passes list these again until the rest is read (lb_rd_relist_unfinished). */
    struct chunk_ref *unfinished;
    size_t unfinished_count, unfinished_capacity;
    /* the read window (see window_run) */
    window_run *run;                             /* the run the chunk being walked fills */
    window_run **heap;                           /* runs with entries to hand out */
    size_t heap_count, heap_capacity;
    window_run **spare;                          /* runs to reuse */
    size_t spare_count, spare_capacity;
    uint64_t run_serial;
    size_t window_peak;                          /* most runs held at once (lb_reader_window_peak) */
    int run_counts;                              /* the walk that filled r->run counts */
    order_key *floors;                           /* floors[i]: least key of refs[i..] */
    size_t floor_capacity;
    /* the pass under way: where entries go, and what they must pass */
    lb_entry_visitor visit;
    void *visit_context;
    long visited;
    int stopped;                                 /* the visitor asked to stop */
    int filtering;
    lb_read_filter filter;
    accept_memo *memo;
    size_t memo_count, memo_capacity;
    accept_memo *memo_last;
};

/* What a walk found that it could not show, for lb_reader_overwritten and verify: records that
 * issues account for as damaged, and records whose beginning the overwrite policy destroyed (which
 * an issue names too); the two never overlap. */
typedef struct walk_tally {
    uint32_t unreadable;
    uint32_t beginnings_overwritten;
    uint8_t trailing;            /* TRAILING_*: the chunk ends with a FIRST or MIDDLE fragment */
} walk_tally;

typedef struct chunk_ref {
    uint64_t sequence;
    int32_t source;    /* SOURCE_RING, SOURCE_MIRROR, or the index of an archive file */
    uint32_t slot;     /* ring: the slot */
    uint64_t offset;   /* archive: file offset of the chunk image */
    uint32_t length;   /* archive: bytes of the image */
    uint32_t records;  /* the chunk's record_count: sizes the entry array */
    uint32_t body_crc; /* archive: the frame's CRC-32C of the image */
    uint32_t session;  /* of its header: with the anchor, the least key its records can have */
    uint64_t anchor;   /* its tick anchor, taken at claim before any record was written */
    uint64_t file_number; /* archive: the file's number. `source` is where the file was in
                             r->archives when listed; a later listing can insert a file before it
                             (one readdir missed while it was renamed), so the number is what
                             identifies it (lb_rd_ref_file) */
} chunk_ref;

typedef struct ref_list {
    chunk_ref *refs;
    size_t count, capacity;
} ref_list;

/* The least ticks a record of a chunk can have, from its header and the 16 bytes after it (its
 * first record's header and timestamp): the tick anchor taken at claim, or the first record's
 * timestamp when that is earlier (a writer reads the clock, then finds that the record does not fit
 * and claims a new chunk for it). Only ordering depends on it. */
typedef struct chunk_start {
    lb_chunk_header h;
    uint8_t first[16];
} chunk_start;

/* Where a chunk reference's bytes are: an archive file's index when >= 0, else one of these. */
#define SOURCE_RING (-1)
#define SOURCE_MIRROR (-2)  /* a durable prefix in `mirror`: read before the ring's copy */

/* The meta tables: (session, id) -> call site or logger name, chained. */
static inline uint32_t lb_rd_name_hash(uint32_t session, uint32_t id) {
    return (session * 2654435761u ^ id * 40503u) & (NAME_TABLE_SIZE - 1);
}

static inline name_entry *lb_rd_name_find(name_entry *const *table, uint32_t session, uint32_t id) {
    for (name_entry *e = table[lb_rd_name_hash(session, id)]; e; e = e->next)
        if (e->session == session && e->id == id) return e;
    return NULL;
}

/* Shared by the reader's files, which call each other one way only, in this order (a file calls
 * only files after it; scripts/check-c-layers checks it): reader.c (open, close, a pass) ->
 * reader_verify.c -> reader_chunks.c (the ring's chunks) -> reader_archive.c (archive files) ->
 * reader_records.c (a chunk's records) -> reader_order.c (time order) -> reader_tables.c
 * (bookkeeping) -> archive_source.c. */

/* reader_tables.c: containers, issues, the seen-chunk table, references, the durable mirror */
lb_issue *lb_rd_add_issue(lb_reader *r, uint32_t kind, const char *file, uint64_t offset,
                          uint64_t length, const char *reason);
lb_issue *lb_rd_add_issuef(lb_reader *r, uint32_t kind, const char *file, uint64_t offset,
                           uint64_t length, uint64_t records, const char *format, ...)
    __attribute__((format(printf, 7, 8)));
const char *lb_rd_keep_string(lb_reader *r, char *s);
int lb_rd_chunk_buffer(lb_reader *r, uint32_t chunk_size);
seen_chunk *lb_rd_seen_find(lb_reader *r, uint64_t sequence);
seen_chunk *lb_rd_seen_add(lb_reader *r, uint64_t sequence);
void lb_rd_note_claim(lb_reader *r, uint64_t claim, uint64_t sequence);
void lb_rd_note_walk(lb_reader *r, uint64_t sequence, size_t entry_mark, uint32_t stop, uint32_t records, int corrupt, const walk_tally *tally, int archived, int active);
uint32_t lb_rd_durable_through(const lb_reader *r, uint64_t sequence);
void lb_rd_push_ref(ref_list *list, chunk_ref ref);
uint64_t lb_rd_chunk_floor(const chunk_start *start);
int lb_rd_compare_refs(const void *a, const void *b);
int lb_rd_writer_alive(lb_reader *r);

/* reader_records.c: meta, a chunk's walk, large records in pieces */
void lb_rd_meta_visit(void *context, uint16_t kind, const uint8_t *body, uint32_t length);
void lb_rd_read_meta(lb_reader *r);
void lb_rd_site_info_free(lb_site_info *s);
void lb_rd_note_anchor(lb_reader *r, const lb_chunk_header *h);
int lb_rd_read_after_power_loss(lb_reader *r);
void lb_rd_walk_chunk(lb_reader *r, uint32_t image_length, uint32_t chunk_size, const char *file, uint64_t file_offset, int complete, size_t *entry_mark, size_t *issue_mark, size_t *pending_mark, uint32_t *stop, int *corrupt, uint32_t *records, walk_tally *tally);
void lb_rd_drop_pending(lb_reader *r, pending_record *p);
void lb_rd_drop_consumed_pending(lb_reader *r);
void lb_rd_orphan_pending(lb_reader *r, const lb_chunk_header *h);

/* reader_chunks.c: the ring's chunks */
int lb_rd_read_header(lb_reader *r);
int lb_rd_collect_ring(lb_reader *r, ref_list *refs);
void lb_rd_collect_mirror(lb_reader *r, ref_list *refs);
void lb_rd_read_mirror_chunk(lb_reader *r, const chunk_ref *ref);
int lb_rd_read_ring_chunk(lb_reader *r, const chunk_ref *ref);
void lb_rd_adopt_archive_geometry(lb_reader *r);

/* reader_archive.c: archive files */
void lb_rd_list_archive_directory(lb_reader *r);
const char *lb_rd_archive_label(lb_reader *r, archive_file *f);
void lb_rd_collect_archive(lb_reader *r, size_t index, ref_list *refs);
void lb_rd_read_archived_chunk(lb_reader *r, const chunk_ref *ref, int intact_copy_follows, int *walked);
void lb_rd_close_archive_file(archive_file *f);
archive_file *lb_rd_ref_file(lb_reader *r, const chunk_ref *ref);
void lb_rd_keep_unfinished(lb_reader *r, const chunk_ref *ref);
void lb_rd_relist_unfinished(lb_reader *r, ref_list *refs);

/* reader_order.c: time order and the read window */
int lb_rd_order_entries(const lb_entry *entries, uint32_t *order, size_t first, size_t count);
window_run *lb_rd_run_acquire(lb_reader *r);
uint8_t *lb_rd_spill_copy(window_run *run, const uint8_t *bytes, size_t length);
void lb_rd_run_free(window_run *run);
void lb_rd_finish_run(lb_reader *r);
void lb_rd_drain(lb_reader *r, const order_key *floor);
int lb_rd_compute_floors(lb_reader *r, const ref_list *refs);
order_key lb_rd_watermark(const lb_reader *r, size_t next);

#endif
