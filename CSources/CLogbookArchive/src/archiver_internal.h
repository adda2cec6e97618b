/* archiver_internal.h — the archiver's state, shared by its files:
 *   archiver.c             the thread, its requests, opening an archived bundle (the public API)
 *   archive_recovery.c     at open: the directory recovered, the ring reconciled with the files
 *   archive_append.c       one archiving pass: writes (io_uring or pwritev), META frames
 *   archive_compression.c  the compression thread
 *   archive_files.c        the files: what each holds, the one being written, rolling, retention,
 *                          announcing, failures
 * Dependencies point one way: each file calls only files listed below it. */
#ifndef LOGBOOK_ARCHIVER_INTERNAL_H
#define LOGBOOK_ARCHIVER_INTERNAL_H

#define _GNU_SOURCE
#include "../../CLogbook/src/internal.h"
#include "logbook_archive.h"
#include "compress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define BATCH_MAX 64u          /* chunks per submitted batch */
#define URING_ENTRIES 128u     /* >= BATCH_MAX + 1 frames */
#define IDLE_WAKE_MS 100u      /* a pass at least this often: chunks below a wake batch, age */

typedef struct meta_ref {
    uint32_t session;          /* first field of every entry body; UINT32_MAX when unknown */
    uint32_t length;           /* head + body */
    size_t offset;             /* in the archiver's copy of the meta entries */
    uint64_t emitted_in;       /* file number + 1 of the file that holds it last */
} meta_ref;

/* What a file holds, as its END frame says (or as a scan found). */
typedef struct file_summary {
    uint64_t chunks, records, first_sequence, last_sequence, first_claim, last_claim;
    int known;                 /* 0: no END frame could be read (a damaged file) */
} file_summary;

typedef struct complete_file {
    uint64_t number, bytes;    /* bytes on disk: compressed ones once compressed */
    int unsynced;
    file_summary summary;
    uint8_t compressed;        /* archive-N.lba.zst */
    /* Its way to on_roll (under files_lock): a file is announced once, by its final name; it is
     * deleted by retention only once announced and not being announced. */
    uint8_t pending;           /* waits for the compression thread */
    uint8_t compressing;       /* the compression thread works on it */
    uint8_t announcing;        /* on_roll runs for it now */
    uint8_t announced;
    uint8_t retired;           /* retention announced it uncompressed to delete it: the compression
                                  thread discards its copy */
    uint8_t sound_zst;         /* recovery only: a compressed file whose seek table checks */
    int64_t created_wall_ns;   /* from its header: for on_roll */
    uint64_t uncompressed_bytes;  /* of a file compressed by this run (for on_roll) */
} complete_file;

typedef struct current_file {
    int fd;                    /* -1: none open */
    uint64_t number, size;
    file_summary summary;      /* of the chunk frames written so far */
    int64_t created_wall_ns;
    uint32_t *sessions;        /* sessions whose meta entries the file holds */
    size_t session_count, session_capacity;
} current_file;

typedef struct candidate {
    uint64_t sequence, claim;
    lb_chunk_header *chunk;
    uint32_t length;           /* image bytes: the chunk's committed end */
    uint32_t records;
} candidate;

typedef struct write_op {
    struct iovec *iov;
    int iovcnt;
    uint64_t offset, length;
} write_op;

typedef struct archiver {
    lb_bundle *b;
    lb_archive_options o;
    char *dir;
    int dir_fd;
    pthread_t thread;
    int thread_started;
    _Atomic int stop;
    _Atomic uint32_t kick;     /* futex: bumped by stop and requests (wakes an error back-off) */
    int stop_result;
    uint32_t backend;
    struct io_uring uring;
    int uring_ready;
    current_file cur;
    complete_file *files;      /* complete files, oldest first */
    size_t file_count, file_capacity;
    uint64_t next_number;
    /* the meta entries, copied from the bundle's meta file */
    uint8_t *meta;
    size_t meta_length, meta_capacity;
    uint64_t meta_offset;
    meta_ref *refs;
    size_t ref_count, ref_capacity;
    int meta_failed;
    /* scratch for a pass */
    candidate *candidates;
    uint8_t *frame;            /* the META frame being built */
    size_t frame_capacity;
    /* requests from other threads, and statistics; under `lock` */
    pthread_mutex_t lock;
    pthread_cond_t done;
    uint64_t roll_requested, roll_done, sync_requested, sync_done;
    int ended;                 /* the thread ended: requests are refused (-EBADF) */
    int request_result;
    lb_archive_stats stats;
    int error_reported;
    /* compression (level != 0): a second thread compresses complete files, oldest first. The file
     * list (`files`) is shared with it: under files_lock, which is never taken inside `lock`'s
     * hold. */
    lb_compressor *compressor;
    pthread_t compress_thread;
    int compress_started;
    pthread_mutex_t files_lock;
    pthread_cond_t compress_wake;
    int compress_stop;         /* under files_lock: compress what is pending, then end */
    pthread_cond_t compress_done;  /* a file was compressed (or given up on) and announced */
    _Atomic int retention_due; /* set by the compression thread: the archiver thread applies it */
    int compress_error_reported;  /* the compression thread's own */
    int waiting_for_compression;  /* under files_lock: rolls waiting (they lend it a priority) */
    uint64_t current_bytes_published; /* under files_lock: the file being written's size, as the
                                       * archiver thread last published it (the compression thread
                                       * publishes the directory's numbers with it) */
} archiver;

/* ---- small helpers ---- */
static inline int64_t now_ns(archiver *a) {
    return a->o.clock ? a->o.clock(a->o.clock_context) : lb_wall_now_ns();
}


static inline int fsync_dir(archiver *a) { return fsync(a->dir_fd) == 0 ? 0 : -errno; }

/* Wakes the archiver thread (and lossless writers waiting for a chunk). */
static inline void wake(archiver *a) {
    atomic_fetch_add(&a->kick, 1);
    lb_futex_wake_all(&a->kick);
    atomic_fetch_add(&a->b->sealed_generation, 1);
    lb_futex_wake_all(&a->b->sealed_generation);
}

/* ---- shared between the archiver's files ---- */

/* Called for each intact CHUNK frame walk_frames finds. */
typedef void (*chunk_frame_visitor)(void *context, uint64_t body_offset,
                                    const lb_archive_frame_head *head, const lb_chunk_header *chunk);

/* the files (archive_files.c) */
int lb_ar_fail(archiver *a, const char *what, const char *name, int rc);
void lb_ar_succeeded(archiver *a);
complete_file *lb_ar_find_file(archiver *a, uint64_t number);
void lb_ar_announce(archiver *a, const complete_file *f, const char *name);
void lb_ar_summary_add(file_summary *s, uint64_t sequence, uint64_t claim, uint64_t records);
int lb_ar_read_end_frame(lb_archive_source *src, uint32_t chunk_size, file_summary *out);
uint64_t lb_ar_walk_frames(lb_archive_source *src, uint32_t chunk_size, uint32_t chunk_count, chunk_frame_visitor chunk, void *context, uint64_t *problem, int *end_frame);
void lb_ar_summarize_chunk(void *context, uint64_t body_offset, const lb_archive_frame_head *head, const lb_chunk_header *ch);
uint64_t lb_ar_first_unsound_frame(lb_archive_source *src, uint32_t chunk_size);
lb_archive_name_kind lb_ar_file_kind(const complete_file *f);
complete_file *lb_ar_add_complete(archiver *a, uint64_t number, uint64_t bytes, int unsynced, const file_summary *summary);
void lb_ar_publish_directory_stats_locked(archiver *a);
void lb_ar_publish_directory_stats_compressed(archiver *a);
int lb_ar_open_archive_source(archiver *a, const char *name, lb_archive_file_header *h, lb_archive_source *src);
void lb_ar_close_source(lb_archive_source *src);
void lb_ar_enforce_retention(archiver *a);
void lb_ar_reset_current(archiver *a);
int lb_ar_open_new_file(archiver *a);
int lb_ar_finish_file(archiver *a, int even_empty, int write_end);
int lb_ar_complete_current(archiver *a, int even_empty);
int lb_ar_roll_current(archiver *a);

/* a pass (archive_append.c) */
int lb_ar_archive_sealed(archiver *a, uint64_t before, size_t *left);
int lb_ar_sync_current(archiver *a);

/* the compression thread (archive_compression.c) */
void lb_ar_compression_priority(archiver *a, int urgent);
void *lb_ar_compress_main(void *arg);
void lb_ar_stop_compression(archiver *a);
void lb_ar_wait_compressed(archiver *a);

/* recovery (archive_recovery.c) */
int lb_ar_recover_directory(archiver *a);

#endif
