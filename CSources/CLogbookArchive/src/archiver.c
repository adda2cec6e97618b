/* archiver.c — one background thread per bundle persists sealed chunks into rolling archive files.
 *
 * A pass: find the ring's sealed chunks, oldest sequence first; take each for archiving
 * (SEALED -> ARCHIVING, which no claimer touches); checksum it (CRC-32C, here on the archiver
 * thread, never on a logging thread); append it to the current file as a frame, preceded by the
 * meta entries of its session the file does not hold yet; submit the writes in one batch
 * (io_uring, or pwritev); only when every write of the batch completed, mark the chunks ARCHIVED
 * and wake lossless writers waiting for a chunk. A failed batch is cut off the file again and its
 * chunks go back to SEALED, to be retried.
 *
 * Files roll by size (before a frame would cross max_file_size), by age, on request and at close:
 * an END frame (what the file holds), fsync, rename ".lba.writing" -> ".lba", fsync of the
 * directory, then the on_roll callback. Retention deletes the oldest complete files while their
 * count or the directory's bytes exceed the limits, and first records in the ring header what it
 * deleted, so that a reader can tell a file retention removed from one that went missing.
 *
 * At open, before anything new is archived, the directory is recovered (a torn tail cut off the
 * file being written, nothing else ever cut) and every chunk the ring holds sealed or archived is
 * reconciled with the files: ARCHIVED only if an intact copy is found, SEALED (archived again)
 * otherwise. A damaged or missing archive file therefore never lets the ring reuse the only copy
 * of a chunk.
 *
 * This file reaches into the bundle's internals (chunk states, the meta file, the futex words) on
 * purpose: the archiver is the core's other half, kept in its own target only because it links
 * liburing. */
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
} archiver;

static int archiver_datasync(void *archiver_state);
static int wait_request(archiver *a, uint64_t *done, uint64_t target, uint32_t timeout_ms);

/* ---- small helpers ---- */
static int64_t now_ns(archiver *a) {
    return a->o.clock ? a->o.clock(a->o.clock_context) : lb_wall_now_ns();
}

static int grow(void **p, size_t *capacity, size_t need, size_t element) {
    if (need <= *capacity) return 0;
    size_t cap = *capacity ? *capacity : 16;
    while (cap < need) cap *= 2;
    void *q = realloc(*p, cap * element);
    if (!q) return -ENOMEM;
    *p = q;
    *capacity = cap;
    return 0;
}

/* Records a failure: counted, kept as last_error, said once on stderr per streak of failures. */
static int fail(archiver *a, const char *what, const char *name, int rc) {
    pthread_mutex_lock(&a->lock);
    a->stats.failures++;
    a->stats.last_error = rc;
    int say = !a->error_reported;
    a->error_reported = 1;
    pthread_mutex_unlock(&a->lock);
    atomic_fetch_add(&a->b->ring->archive_failures, 1);
    atomic_store(&a->b->ring->archive_last_error, (uint32_t)-rc);
    if (say)
        fprintf(stderr, "logbook: archiver: %s %s/%s: %s (records stay in the ring; retrying)\n",
                what, a->dir, name ? name : "", strerror(-rc));
    return rc;
}

static void succeeded(archiver *a) {
    if (!a->error_reported && a->stats.last_error == 0) return;
    pthread_mutex_lock(&a->lock);
    a->stats.last_error = 0;
    a->error_reported = 0;
    pthread_mutex_unlock(&a->lock);
    atomic_store(&a->b->ring->archive_last_error, 0);
}

static int fsync_dir(archiver *a) { return fsync(a->dir_fd) == 0 ? 0 : -errno; }

/* ---- writes: io_uring, or pwritev ---- */
static int pwritev_full(int fd, struct iovec *iov, int iovcnt, uint64_t offset, uint64_t skip) {
    /* Skip `skip` bytes already written, then write the rest, resuming after short writes. */
    struct iovec local[3];
    while (iovcnt > 0) {
        if (skip >= iov[0].iov_len) {
            skip -= iov[0].iov_len;
            offset += iov[0].iov_len;
            iov++;
            iovcnt--;
            continue;
        }
        int n = iovcnt < 3 ? iovcnt : 3;
        memcpy(local, iov, (size_t)n * sizeof *iov);
        local[0].iov_base = (uint8_t *)local[0].iov_base + skip;
        local[0].iov_len -= skip;
        offset += skip;
        skip = 0;
        ssize_t w = pwritev(fd, local, n, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (w == 0) return -EIO;
        skip = (uint64_t)w;
    }
    return 0;
}

static void switch_to_pwrite(archiver *a, int rc) {
    fprintf(stderr, "logbook: archiver: io_uring unavailable (%s); writing with pwritev\n",
            strerror(-rc));
    a->backend = LB_ARCHIVE_BACKEND_PWRITE;
    atomic_store(&a->b->ring->archive_backend, LB_ARCHIVE_BACKEND_PWRITE);
    pthread_mutex_lock(&a->lock);
    a->stats.backend = LB_ARCHIVE_BACKEND_PWRITE;
    pthread_mutex_unlock(&a->lock);
}

/* Submits every op as one io_uring batch and reaps all completions. Returns 0, -errno of the first
 * failed write, or 1 when io_uring itself refused (the caller falls back to pwritev; every op
 * writes at a fixed offset, so redoing them all is harmless). */
static int uring_write(archiver *a, int fd, write_op *ops, size_t n) {
    size_t submitted = 0, completed = 0;
    int err = 0;
    while (completed < n) {
        while (submitted < n) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&a->uring);
            if (!sqe) break;
            io_uring_prep_writev(sqe, fd, ops[submitted].iov, (unsigned)ops[submitted].iovcnt,
                                 ops[submitted].offset);
            io_uring_sqe_set_data(sqe, (void *)(uintptr_t)submitted);
            submitted++;
        }
        int rc = io_uring_submit_and_wait(&a->uring, 1);
        if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) continue;
        if (rc < 0) {
            /* Reap what did complete before giving the ring up. */
            io_uring_queue_exit(&a->uring);
            a->uring_ready = 0;
            switch_to_pwrite(a, rc);
            return 1;
        }
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(&a->uring, &cqe) == 0) {
            size_t index = (size_t)(uintptr_t)io_uring_cqe_get_data(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&a->uring, cqe);
            completed++;
            if (index >= n) continue;
            if (res < 0) {
                if (!err) err = res;
            } else if ((uint64_t)res < ops[index].length && !err) {
                /* A short write (a signal, a nearly full disk): finish it synchronously. */
                err = pwritev_full(fd, ops[index].iov, ops[index].iovcnt, ops[index].offset,
                                   (uint64_t)res);
            }
        }
    }
    return err;
}

static int write_ops(archiver *a, int fd, write_op *ops, size_t n) {
    if (a->backend == LB_ARCHIVE_BACKEND_IO_URING && a->uring_ready) {
        int rc = uring_write(a, fd, ops, n);
        if (rc != 1) return rc;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = pwritev_full(fd, ops[i].iov, ops[i].iovcnt, ops[i].offset, 0);
        if (rc) return rc;
    }
    return 0;
}

/* ---- the meta entries ---- */
static void meta_copy(void *context, uint16_t kind, const uint8_t *body, uint32_t length) {
    archiver *a = context;
    size_t total = LB_META_ENTRY_HEAD_SIZE + (size_t)length;
    if (grow((void **)&a->meta, &a->meta_capacity, a->meta_length + total, 1) ||
        grow((void **)&a->refs, &a->ref_capacity, a->ref_count + 1, sizeof *a->refs)) {
        a->meta_failed = 1;
        return;
    }
    uint8_t *p = a->meta + a->meta_length;
    uint32_t crc = lb_crc32c(0, body, length);
    uint16_t zero = 0;
    memcpy(p, &length, 4);
    memcpy(p + 4, &crc, 4);
    memcpy(p + 8, &kind, 2);
    memcpy(p + 10, &zero, 2);
    memcpy(p + LB_META_ENTRY_HEAD_SIZE, body, length);
    uint32_t session = UINT32_MAX;
    if (length >= 4) memcpy(&session, body, 4);
    a->refs[a->ref_count++] = (meta_ref){session, (uint32_t)total, a->meta_length, 0};
    a->meta_length += total;
}

/* Copies the entries appended to the bundle's meta file since the last call. Every entry a sealed
 * chunk's records refer to was written before those records were committed, so it is there. */
static void meta_refresh(archiver *a) {
    if (a->meta_failed) return;
    int rc = lb_meta_read_entries(a->b->meta_fd, &a->meta_offset, meta_copy, a);
    (void)rc;  /* a torn tail is an entry being written: the next refresh gets it */
}

static int has_session(const uint32_t *sessions, size_t count, uint32_t session) {
    for (size_t i = 0; i < count; i++)
        if (sessions[i] == session) return 1;
    return 0;
}

/* Builds in a->frame the META frame with every entry of `sessions` the current file lacks.
 * Returns its size (0 when nothing is missing) and marks the entries as in the file. */
static size_t build_meta_frame(archiver *a, const uint32_t *sessions, size_t session_count) {
    uint64_t mark = a->cur.number + 1;
    size_t body = 0;
    for (size_t i = 0; i < a->ref_count; i++) {
        meta_ref *r = &a->refs[i];
        if (r->emitted_in != mark && has_session(sessions, session_count, r->session))
            body += r->length;
    }
    if (body == 0) return 0;
    size_t span = (size_t)lb_archive_frame_span((uint32_t)body);
    if (grow((void **)&a->frame, &a->frame_capacity, span, 1)) return 0;
    size_t at = LB_ARCHIVE_FRAME_HEAD_SIZE;
    for (size_t i = 0; i < a->ref_count; i++) {
        meta_ref *r = &a->refs[i];
        if (r->emitted_in == mark || !has_session(sessions, session_count, r->session)) continue;
        memcpy(a->frame + at, a->meta + r->offset, r->length);
        at += r->length;
        r->emitted_in = mark;
    }
    memset(a->frame + at, 0, span - at);
    lb_archive_frame_head head;
    lb_archive_frame_head_make(&head, (uint32_t)body, LB_ARCHIVE_FRAME_META,
                               lb_crc32c(0, a->frame + LB_ARCHIVE_FRAME_HEAD_SIZE, body));
    memcpy(a->frame, &head, sizeof head);
    return span;
}

/* After a failed write: the entries marked for this file are not in it after all. */
static void unmark_meta(archiver *a, uint64_t file_number) {
    for (size_t i = 0; i < a->ref_count; i++)
        if (a->refs[i].emitted_in == file_number + 1) a->refs[i].emitted_in = 0;
}

/* ---- what files hold ---- */
static void summary_add(file_summary *s, uint64_t sequence, uint64_t claim, uint64_t records) {
    if (!s->chunks || sequence < s->first_sequence) s->first_sequence = sequence;
    if (!s->chunks || sequence > s->last_sequence) s->last_sequence = sequence;
    if (!s->chunks || claim < s->first_claim) s->first_claim = claim;
    if (!s->chunks || claim > s->last_claim) s->last_claim = claim;
    s->chunks++;
    s->records += records;
}

/* The END frame of a complete file of `size` bytes: its last 80 bytes. */
static int read_end_frame(lb_archive_source *src, uint32_t chunk_size, file_summary *out) {
    memset(out, 0, sizeof *out);
    uint64_t size = src->size;
    if (size < LB_ARCHIVE_HEADER_SIZE + LB_ARCHIVE_END_FRAME_SIZE) return -1;
    uint64_t at = size - LB_ARCHIVE_END_FRAME_SIZE;
    lb_archive_frame_head head;
    lb_archive_end end;
    if (lb_archive_frame_read(src, at, chunk_size, &head) != LB_FRAME_OK ||
        head.kind != LB_ARCHIVE_FRAME_END ||
        lb_archive_source_read(src, &end, sizeof end, at + LB_ARCHIVE_FRAME_HEAD_SIZE) != (ssize_t)sizeof end ||
        lb_crc32c(0, &end, sizeof end) != head.body_crc || end.end_offset != at)
        return -1;
    *out = (file_summary){end.chunks, end.records, end.first_sequence, end.last_sequence,
                          end.first_claim, end.last_claim, 1};
    return 0;
}

/* Walks the frames of an archive file from its header on, stepping over damage (a frame head
 * fails its check: the next valid head is searched for). Calls `chunk` for each chunk frame whose
 * image header is valid. Returns the offset where the frames end, *problem the offset of the
 * first damage or incomplete frame (UINT64_MAX: none), *end_frame whether the file ends with an
 * END frame. */
typedef void (*chunk_frame_visitor)(void *context, uint64_t body_offset,
                                    const lb_archive_frame_head *head, const lb_chunk_header *chunk);

static uint64_t walk_frames(lb_archive_source *src, uint32_t chunk_size, uint32_t chunk_count,
                            chunk_frame_visitor chunk, void *context, uint64_t *problem,
                            int *end_frame) {
    uint64_t size = src->size;
    uint64_t offset = LB_ARCHIVE_HEADER_SIZE, valid_end = offset;
    *problem = UINT64_MAX;
    *end_frame = 0;
    while (offset < size) {
        lb_archive_frame_head head;
        lb_frame_status status = lb_archive_frame_read(src, offset, chunk_size, &head);
        uint64_t damaged_until = status != LB_FRAME_OK ? lb_archive_source_damaged_until(src, offset) : 0;
        if (damaged_until) {  /* a compressed file's data frame that cannot be read */
            if (*problem == UINT64_MAX) *problem = offset;
            offset = damaged_until;
            *end_frame = 0;
            continue;
        }
        if (status == LB_FRAME_END) {
            if (*problem == UINT64_MAX) *problem = offset;
            break;
        }
        if (status == LB_FRAME_INVALID) {
            if (*problem == UINT64_MAX) *problem = offset;
            offset = lb_archive_frame_resync(src, offset, chunk_size);
            *end_frame = 0;
            continue;
        }
        *end_frame = head.kind == LB_ARCHIVE_FRAME_END;
        if (head.kind == LB_ARCHIVE_FRAME_CHUNK && chunk) {
            lb_chunk_header ch;
            uint64_t body = offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
            if (lb_archive_source_read(src, &ch, sizeof ch, body) == (ssize_t)sizeof ch &&
                lb_chunk_header_check(&ch, (uint32_t)(ch.sequence % chunk_count), chunk_count) == 0)
                chunk(context, body, &head, &ch);
        }
        offset += lb_archive_frame_span(head.length);
        valid_end = offset;
    }
    return valid_end;
}

static void summarize_chunk(void *context, uint64_t body_offset, const lb_archive_frame_head *head,
                            const lb_chunk_header *ch) {
    (void)body_offset;
    (void)head;
    summary_add(context, ch->sequence, ch->claim, atomic_load(&ch->record_count));
}

/* The offset of the first frame whose head is not valid or whose body fails its CRC-32C, or
 * UINT64_MAX: in a bundle that syncs, where the last synced write of the file being written ends. */
static uint64_t first_unsound_frame(lb_archive_source *src, uint32_t chunk_size) {
    static const size_t piece = 64 << 10;
    uint8_t *buffer = malloc(piece);
    if (!buffer) return LB_ARCHIVE_HEADER_SIZE;
    uint64_t offset = LB_ARCHIVE_HEADER_SIZE, found = UINT64_MAX;
    while (offset < src->size) {
        lb_archive_frame_head head;
        if (lb_archive_frame_read(src, offset, chunk_size, &head) != LB_FRAME_OK) {
            found = offset;
            break;
        }
        uint32_t crc = 0;
        uint64_t body = offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
        for (uint64_t done = 0; done < head.length;) {
            size_t want = head.length - done < piece ? (size_t)(head.length - done) : piece;
            if (lb_archive_source_read(src, buffer, want, body + done) != (ssize_t)want) break;
            crc = lb_crc32c(crc, buffer, want);
            done += want;
        }
        if (crc != head.body_crc) {
            found = offset;
            break;
        }
        offset += lb_archive_frame_span(head.length);
    }
    free(buffer);
    return found;
}

/* ---- files ---- */
static lb_archive_name_kind file_kind(const complete_file *f) {
    return f->compressed ? LB_ARCHIVE_NAME_COMPRESSED
                         : f->unsynced ? LB_ARCHIVE_NAME_UNSYNCED : LB_ARCHIVE_NAME_COMPLETE;
}

/* Adds a complete file to the list (under files_lock once the compression thread runs). */
static complete_file *add_complete(archiver *a, uint64_t number, uint64_t bytes, int unsynced,
                                   const file_summary *summary) {
    if (grow((void **)&a->files, &a->file_capacity, a->file_count + 1, sizeof *a->files))
        return NULL;
    size_t at = a->file_count;
    while (at > 0 && a->files[at - 1].number > number) {
        a->files[at] = a->files[at - 1];
        at--;
    }
    a->files[at] = (complete_file){.number = number, .bytes = bytes, .unsynced = unsynced,
                                   .summary = *summary, .uncompressed_bytes = bytes};
    a->file_count++;
    return &a->files[at];
}

/* The directory's numbers for lb_archive_stats (files_lock held). */
static void publish_directory_stats_locked(archiver *a) {
    uint64_t bytes = a->cur.fd >= 0 ? a->cur.size : 0, pending = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        bytes += a->files[i].bytes;
        pending += a->files[i].pending || a->files[i].compressing;
    }
    pthread_mutex_lock(&a->lock);
    a->stats.files = a->file_count;
    a->stats.directory_bytes = bytes;
    a->stats.compression_pending = pending;
    pthread_mutex_unlock(&a->lock);
}

/* Opens archive file `name` of the directory for reading, plain or compressed: never through a
 * symlink, never blocking (a FIFO), only a regular file whose header is valid. 0 with the source
 * (its descriptor open: close both with close_source) and the header, or -1. */
static int open_archive_source(archiver *a, const char *name, lb_archive_file_header *h,
                               lb_archive_source *src) {
    int fd = lb_file_open_at(a->dir_fd, name, O_RDONLY, NULL);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 &&
        lb_archive_source_open(src, fd, (uint64_t)st.st_size, NULL, NULL, NULL) == 0) {
        if (lb_archive_source_read(src, h, sizeof *h, 0) == (ssize_t)sizeof *h &&
            !lb_archive_header_problem(h, src->size))
            return 0;
        lb_archive_source_close(src);
    }
    close(fd);
    return -1;
}

static void close_source(lb_archive_source *src) {
    int fd = src->fd;
    lb_archive_source_close(src);
    close(fd);
}

/* What a complete file without a readable END frame holds, from its frames (before retention
 * deletes it, so that the ring header can say what left). */
static void summarize_file(archiver *a, complete_file *f) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, f->number, file_kind(f));
    lb_archive_file_header h;
    lb_archive_source src;
    uint64_t problem;
    int end_frame;
    if (open_archive_source(a, name, &h, &src) != 0) return;
    memset(&f->summary, 0, sizeof f->summary);
    walk_frames(&src, h.chunk_size, h.chunk_count, summarize_chunk, &f->summary, &problem,
                &end_frame);
    f->summary.known = 1;
    close_source(&src);
}

/* Makes the ring header page durable: what it says about the archive must not be older, after a
 * power loss, than the directory it describes. */
static void sync_ring_header(archiver *a) {
    msync(a->b->ring, LB_RING_HEADER_SIZE, MS_SYNC);
}

/* Deletes the oldest complete files while there are more than max_files or all files together
 * exceed the quota (bytes on disk: a compressed file counts its compressed bytes, one waiting for
 * compression its full size). The file being written is never deleted. A file not announced yet
 * (waiting for compression, or being compressed) is announced first, uncompressed (on_roll links
 * it into an uploader's spool), then deleted, and the compression thread discards its copy: the
 * quota holds however far compression is behind. Before a file goes, the ring header says so
 * (first number kept, claims and records retired), made durable first: a reader must never take a
 * file retention deleted for one that went missing. Takes files_lock; runs on the archiver thread
 * (or the thread opening or closing the bundle). */
static void announce(archiver *a, const complete_file *f, const char *name);
static complete_file *find_file(archiver *a, uint64_t number);
static void enforce_retention_locked(archiver *a);
static void enforce_retention(archiver *a) {
    pthread_mutex_lock(&a->files_lock);
    enforce_retention_locked(a);
    pthread_mutex_unlock(&a->files_lock);
}

/* How many of the oldest files retention would delete now (stopping at one being announced). */
static size_t retention_doomed(archiver *a) {
    uint64_t left = a->cur.fd >= 0 ? a->cur.size : 0;
    for (size_t i = 0; i < a->file_count; i++) left += a->files[i].bytes;
    size_t doomed = 0;
    while (doomed < a->file_count && !a->files[doomed].announcing &&
           ((a->o.max_files && a->file_count - doomed > a->o.max_files) ||
            (a->o.quota && left > a->o.quota))) {
        left -= a->files[doomed].bytes;
        doomed++;
    }
    return doomed;
}

static void enforce_retention_locked(archiver *a) {
    size_t doomed = retention_doomed(a);
    /* Files that must go before they were announced: announced now, as they are. */
    for (size_t i = 0; i < doomed; i++) {
        complete_file *f = &a->files[i];
        if (f->announced) continue;
        f->pending = 0;
        f->announcing = 1;
        f->retired = 1;
        complete_file copy = *f;
        pthread_mutex_unlock(&a->files_lock);
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, copy.number, LB_ARCHIVE_NAME_COMPLETE);
        announce(a, &copy, name);
        pthread_mutex_lock(&a->files_lock);
        f = find_file(a, copy.number);
        f->announcing = 0;
        f->announced = 1;
        pthread_cond_broadcast(&a->compress_done);
        doomed = retention_doomed(a);  /* the list may have changed meanwhile */
        i = (size_t)-1;
    }
    if (!doomed) {
        publish_directory_stats_locked(a);
        return;
    }
    lb_ring_header *ring = a->b->ring;
    uint64_t retired_claim = atomic_load(&ring->archive_retired_claim);
    uint64_t retired_records = 0;
    for (size_t i = 0; i < doomed; i++) {
        if (!a->files[i].summary.known) summarize_file(a, &a->files[i]);
        const file_summary *s = &a->files[i].summary;
        if (s->known && s->chunks && s->last_claim + 1 > retired_claim) retired_claim = s->last_claim + 1;
        retired_records += s->records;
    }
    atomic_store(&ring->archive_retired_claim, retired_claim);
    atomic_fetch_add(&ring->archive_retired_records, retired_records);
    atomic_store(&ring->archive_first_number, a->files[doomed - 1].number + 1);
    sync_ring_header(a);
    size_t deleted = 0;
    for (; deleted < doomed; deleted++) {
        complete_file *f = &a->files[deleted];
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, f->number, file_kind(f));
        if (unlinkat(a->dir_fd, name, 0) != 0 && errno != ENOENT) {
            /* Still there: readers find it (older than the first number kept, it is no gap). */
            fail(a, "cannot delete", name, -errno);
            break;
        }
    }
    memmove(a->files, a->files + deleted, (a->file_count - deleted) * sizeof *a->files);
    a->file_count -= deleted;
    if (deleted) fsync_dir(a);
    pthread_mutex_lock(&a->lock);
    a->stats.files_deleted += deleted;
    pthread_mutex_unlock(&a->lock);
    publish_directory_stats_locked(a);
}

static void reset_current(archiver *a) {
    a->cur.fd = -1;
    a->cur.size = 0;
    memset(&a->cur.summary, 0, sizeof a->cur.summary);
    a->cur.session_count = 0;
}

/* The ring header's next file number: the highest number an archiver of this ring created, + 1. */
static void publish_next_number(archiver *a) {
    lb_ring_header *ring = a->b->ring;
    uint64_t next = atomic_load(&ring->archive_next_number);
    while (next < a->next_number &&
           !atomic_compare_exchange_weak(&ring->archive_next_number, &next, a->next_number)) {}
}

static int open_new_file(archiver *a) {
    uint64_t number = a->next_number;
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_WRITING);
    /* Exclusive: a number is never reused, so whatever has this name already is not ours. */
    int fd = openat(a->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return fail(a, "cannot create", name, -errno);
    lb_archive_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, LB_ARCHIVE_MAGIC, 8);
    h.format_version = LB_FORMAT_VERSION;
    h.header_size = LB_ARCHIVE_HEADER_SIZE;
    h.chunk_size = a->b->chunk_size;
    h.chunk_count = a->b->chunk_count;
    h.file_number = number;
    h.created_wall_ns = (uint64_t)now_ns(a);
    h.ring_created_wall_ns = a->b->ring->created_wall_ns;
    h.header_crc = lb_archive_header_crc(&h);
    int rc = lb_pwrite_full(fd, &h, sizeof h, 0);
    if (!rc) rc = fsync_dir(a);
    if (rc) {
        close(fd);
        unlinkat(a->dir_fd, name, 0);
        return fail(a, "cannot start", name, rc);
    }
    /* The number is used only once the file exists: numbers have no gaps. */
    a->next_number = number + 1;
    publish_next_number(a);
    reset_current(a);
    a->cur.fd = fd;
    a->cur.number = number;
    a->cur.size = sizeof h;
    a->cur.created_wall_ns = (int64_t)h.created_wall_ns;
    return 0;
}

/* Appends the END frame to the current file. */
static int write_end_frame(archiver *a) {
    struct {
        lb_archive_frame_head head;
        lb_archive_end end;
    } frame;
    const file_summary *s = &a->cur.summary;
    frame.end = (lb_archive_end){a->cur.number, s->chunks, s->records, s->first_sequence,
                                 s->last_sequence, s->first_claim, s->last_claim, a->cur.size};
    lb_archive_frame_head_make(&frame.head, sizeof frame.end, LB_ARCHIVE_FRAME_END,
                               lb_crc32c(0, &frame.end, sizeof frame.end));
    _Static_assert(sizeof frame == LB_ARCHIVE_END_FRAME_SIZE, "END frame");
    int rc = lb_pwrite_full(a->cur.fd, &frame, sizeof frame, a->cur.size);
    if (rc) {
        if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open cuts it */ }
        return rc;
    }
    a->cur.size += sizeof frame;
    return 0;
}

/* Completes the current file: END frame, fsync, rename, fsync of the directory, callback,
 * retention. A file whose fsync failed is not called complete (its data may be lost): it is
 * renamed ".lba.unsynced", still read by readers, never handed to on_roll. With `even_empty`
 * (close, recovery) a file without chunks is completed too; otherwise it is left as it is. */
static int finish_file(archiver *a, int even_empty, int write_end) {
    if (a->cur.fd < 0 || (a->cur.summary.chunks == 0 && !even_empty)) return 0;
    char from[LB_ARCHIVE_NAME_MAX], to[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(from, a->cur.number, LB_ARCHIVE_NAME_WRITING);
    int rc = write_end ? write_end_frame(a) : 0;
    if (rc) return fail(a, "cannot complete", from, rc);
    rc = fsync(a->cur.fd) == 0 ? 0 : -errno;
    int unsynced = rc != 0;
    if (unsynced) fail(a, "fsync failed for", from, rc);
    lb_archive_name_format(to, a->cur.number, unsynced ? LB_ARCHIVE_NAME_UNSYNCED : LB_ARCHIVE_NAME_COMPLETE);
    if (renameat(a->dir_fd, from, a->dir_fd, to) != 0) {
        int err = -errno;
        /* Not renamed: the END frame goes again, so that the next attempt appends a new one. */
        if (write_end) {
            a->cur.size -= LB_ARCHIVE_END_FRAME_SIZE;
            if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open completes it */ }
        }
        return fail(a, "cannot rename", from, err);
    }
    int dir_rc = fsync_dir(a);
    close(a->cur.fd);
    const file_summary *s = &a->cur.summary;
    lb_archive_file info = {NULL, a->cur.number, a->cur.size, s->chunks,
                            s->first_sequence, s->last_sequence, a->cur.created_wall_ns,
                            s->records, a->cur.size};
    file_summary summary = *s;
    summary.known = 1;
    /* With compression the file is announced (on_roll) once compressed: its final name. */
    int compress = a->compressor && !unsynced;
    pthread_mutex_lock(&a->files_lock);
    complete_file *added = add_complete(a, a->cur.number, a->cur.size, unsynced, &summary);
    if (added) {
        added->created_wall_ns = a->cur.created_wall_ns;
        added->announced = !(compress);  /* (announced just below, before retention runs) */
    }
    if (added && compress) {
        added->pending = 1;
        pthread_cond_signal(&a->compress_wake);
    }
    pthread_mutex_unlock(&a->files_lock);
    reset_current(a);
    pthread_mutex_lock(&a->lock);
    a->stats.files_rolled++;
    pthread_mutex_unlock(&a->lock);
    if (!(compress && added) && !unsynced && !dir_rc && a->o.on_roll) {
        char *path = lb_path_join(a->dir, to);
        info.path = path ? path : to;
        a->o.on_roll(a->o.on_roll_context, &info);
        free(path);
    }
    enforce_retention(a);
    if (dir_rc) return fail(a, "fsync failed for the directory of", to, dir_rc);
    return unsynced ? rc : 0;
}

static int complete_current(archiver *a, int even_empty) { return finish_file(a, even_empty, 1); }
static int roll_current(archiver *a) { return complete_current(a, 0); }

/* ---- archiving ---- */
static int compare_candidates(const void *x, const void *y) {
    const candidate *a = x, *b = y;
    return a->sequence < b->sequence ? -1 : a->sequence > b->sequence;
}

static void release_chunks(archiver *a, candidate *c, size_t n, uint32_t state) {
    for (size_t i = 0; i < n; i++) atomic_store_explicit(&c[i].chunk->state, state, memory_order_release);
    if (state == LB_CHUNK_ARCHIVED && n) lb_bundle_chunks_released(a->b);
}

/* Appends chunks c[0..n) (taken: state ARCHIVING) to the archive, rolling files as needed. On
 * failure the chunks not yet archived go back to SEALED. */
static int append_chunks(archiver *a, candidate *c, size_t n) {
    struct iovec iov[2 * BATCH_MAX + 1];
    write_op ops[BATCH_MAX + 1];
    lb_archive_frame_head heads[BATCH_MAX];
    uint32_t sessions[BATCH_MAX];
    size_t done = 0;
    while (done < n) {
        int rc = a->cur.fd < 0 ? open_new_file(a) : 0;
        if (rc) {
            release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
            return rc;
        }
        /* The sessions of the remaining chunks whose entries the file may lack. */
        size_t session_count = 0;
        for (size_t i = 0; i < a->cur.session_count && session_count < BATCH_MAX; i++)
            sessions[session_count++] = a->cur.sessions[i];
        for (size_t i = done; i < n; i++)
            if (!has_session(sessions, session_count, c[i].chunk->session) && session_count < BATCH_MAX)
                sessions[session_count++] = c[i].chunk->session;
        meta_refresh(a);
        size_t meta_span = build_meta_frame(a, sessions, session_count);
        /* As many chunks as fit under max_file_size (the END frame included); at least one in an
         * empty file. */
        uint64_t at = a->cur.size, end = at + meta_span;
        size_t take = 0;
        while (done + take < n) {
            uint64_t span = lb_archive_frame_span(c[done + take].length);
            if (end + span + LB_ARCHIVE_END_FRAME_SIZE > a->o.max_file_size &&
                (a->cur.summary.chunks > 0 || take > 0))
                break;
            end += span;
            take++;
        }
        if (take == 0) {
            unmark_meta(a, a->cur.number);
            rc = roll_current(a);
            if (rc) {
                release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
                return rc;
            }
            continue;
        }
        size_t op_count = 0, iov_count = 0;
        uint64_t offset = at;
        if (meta_span) {
            iov[iov_count] = (struct iovec){a->frame, meta_span};
            ops[op_count++] = (write_op){&iov[iov_count], 1, offset, meta_span};
            iov_count++;
            offset += meta_span;
        }
        for (size_t i = 0; i < take; i++) {
            candidate *k = &c[done + i];
            /* The image cannot change now: the chunk is ARCHIVING (no claimer touches it) and was
             * sealed (its owner is done with it). */
            lb_archive_frame_head_make(&heads[i], k->length, LB_ARCHIVE_FRAME_CHUNK,
                                       lb_crc32c(0, k->chunk, k->length));
            iov[iov_count] = (struct iovec){&heads[i], LB_ARCHIVE_FRAME_HEAD_SIZE};
            iov[iov_count + 1] = (struct iovec){k->chunk, k->length};
            ops[op_count++] = (write_op){&iov[iov_count], 2, offset, LB_ARCHIVE_FRAME_HEAD_SIZE + (uint64_t)k->length};
            iov_count += 2;
            offset += lb_archive_frame_span(k->length);
        }
        rc = write_ops(a, a->cur.fd, ops, op_count);
        /* A bundle that syncs (lb_bundle_sync, sync_interval_ms) must never let a chunk leave the
         * ring for a copy a power loss can take back: the slot of an archived chunk is reused. */
        if (!rc && atomic_load_explicit(&a->b->durability_wanted, memory_order_relaxed) &&
            fdatasync(a->cur.fd) != 0)
            rc = -errno;
        if (rc) {
            /* Cut whatever part of the batch landed, so the file ends at a frame boundary. */
            char name[LB_ARCHIVE_NAME_MAX];
            lb_archive_name_format(name, a->cur.number, LB_ARCHIVE_NAME_WRITING);
            if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open cuts it */ }
            unmark_meta(a, a->cur.number);
            release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
            return fail(a, "cannot write", name, rc);
        }
        uint64_t chunk_bytes = end - at - meta_span;
        a->cur.size = end;
        for (size_t i = 0; i < take; i++)
            summary_add(&a->cur.summary, c[done + i].sequence, c[done + i].claim, c[done + i].records);
        for (size_t i = 0; i < session_count; i++) {
            if (has_session(a->cur.sessions, a->cur.session_count, sessions[i])) continue;
            if (grow((void **)&a->cur.sessions, &a->cur.session_capacity, a->cur.session_count + 1,
                     sizeof *a->cur.sessions) == 0)
                a->cur.sessions[a->cur.session_count++] = sessions[i];
        }
        release_chunks(a, c + done, take, LB_CHUNK_ARCHIVED);
        atomic_fetch_add(&a->b->ring->archived_chunks, take);
        atomic_fetch_add(&a->b->ring->archived_bytes, chunk_bytes);
        pthread_mutex_lock(&a->lock);
        a->stats.chunks_archived += take;
        a->stats.bytes_archived += chunk_bytes;
        pthread_mutex_unlock(&a->lock);
        succeeded(a);
        done += take;
        if (a->o.quota) enforce_retention(a);
        if (a->cur.size + LB_ARCHIVE_END_FRAME_SIZE >= a->o.max_file_size) {
            rc = roll_current(a);
            if (rc) {
                release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
                return rc;
            }
        }
    }
    pthread_mutex_lock(&a->files_lock);
    publish_directory_stats_locked(a);
    pthread_mutex_unlock(&a->files_lock);
    return 0;
}

/* Archives the chunks that are sealed now, oldest first. Under the overwrite policy the archiver
 * takes at most half of the chunks no writer owns: new records must never be dropped because the
 * archiver holds chunks (a write in flight may take long on a slow disk); the oldest sealed chunks
 * are overwritten before they are archived instead, and counted (chunks_lost_unarchived,
 * records_overwritten). `*left`: the sealed chunks older than sequence `before` this pass left
 * (a sync or roll archives them in more passes; it takes at least one chunk per pass). */
static int archive_sealed(archiver *a, uint64_t before, size_t *left) {
    lb_bundle *b = a->b;
    *left = 0;
    size_t n = 0, active = 0;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
        if (state == LB_CHUNK_ACTIVE || state == LB_CHUNK_CLAIMING) active++;
        if (state != LB_CHUNK_SEALED) continue;
        /* Read before the chunk is taken: a claimer may be reusing it (then our CAS fails). */
        a->candidates[n++] = (candidate){__atomic_load_n(&h->sequence, __ATOMIC_RELAXED), 0, h, 0, 0};
    }
    if (!n) return 0;
    qsort(a->candidates, n, sizeof *a->candidates, compare_candidates);
    size_t limit = n;
    if (b->wrap_policy == LB_WRAP_OVERWRITE) {
        limit = (b->chunk_count - active) / 2;
        if (limit == 0 && a->candidates[0].sequence < before) limit = 1;
    }
    /* Up to `limit` chunks taken, in batches; a chunk a claimer reused meanwhile (its CAS fails)
     * or with a damaged header is passed over without counting. */
    size_t i = 0, taken = 0;
    while (i < n && taken < limit) {
        size_t take = 0;
        candidate batch[BATCH_MAX];
        for (; i < n && take < BATCH_MAX && taken + take < limit; i++) {
            candidate c = a->candidates[i];
            uint32_t expected = LB_CHUNK_SEALED;
            /* Taken for archiving: from here on no claimer reuses it until it is released. */
            if (!atomic_compare_exchange_strong(&c.chunk->state, &expected, LB_CHUNK_ARCHIVING))
                continue;
            uint32_t slot = (uint32_t)(((uint8_t *)c.chunk - b->chunks) / b->chunk_size);
            if (lb_chunk_header_check(c.chunk, slot, b->chunk_count) != 0) {
                /* A damaged header: never archivable; leave it sealed for readers to report. */
                atomic_store(&c.chunk->state, LB_CHUNK_SEALED);
                continue;
            }
            uint32_t committed = atomic_load(&c.chunk->committed);
            if (committed < LB_CHUNK_HEADER_SIZE || committed > b->chunk_size || (committed & 7u))
                committed = LB_CHUNK_HEADER_SIZE;
            c.sequence = c.chunk->sequence;
            c.claim = c.chunk->claim;
            c.length = committed;
            c.records = atomic_load(&c.chunk->record_count);
            batch[take++] = c;
        }
        int rc = append_chunks(a, batch, take);
        if (rc) return rc;
        taken += take;
    }
    for (; i < n && a->candidates[i].sequence < before; i++) (*left)++;
    return 0;
}

static int sync_current(archiver *a) {
    if (a->cur.fd < 0) return 0;
    if (fdatasync(a->cur.fd) != 0) {
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, a->cur.number, LB_ARCHIVE_NAME_WRITING);
        return fail(a, "fsync failed for", name, -errno);
    }
    return 0;
}

/* ---- recovery of the directory after a crash (or a clean close: the same path) ---- */

/* Opens writing file `number` and recovers it: a torn tail left by a crash (an incomplete last
 * frame, or zeros) is cut off; anything else that does not parse is damage, never cut: the file
 * is then completed as it is and readers report the damage. A file that already ends with its END
 * frame (a crash between the END and the rename) is completed. The newest sound file of this ring
 * becomes the current file. */
static int resume_file(archiver *a, uint64_t number, int newest, int *removed) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_WRITING);
    int fd = lb_file_open_at(a->dir_fd, name, O_RDWR, NULL);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        /* Not a file we can take over (a symlink, directory or FIFO put in its place, or
         * unreadable): left alone; its chunks are reconciled like those of a missing file. */
        const char *why = fd == -EINVAL ? "a FIFO, device or directory" : strerror(fd < 0 ? -fd : errno);
        if (fd >= 0) close(fd);
        fprintf(stderr, "logbook: archiver: %s/%s is not a regular file the archiver can resume "
                        "(%s): left alone; chunks the ring still holds are archived again\n",
                a->dir, name, why);
        return 0;
    }
    lb_archive_file_header h;
    uint64_t size = (uint64_t)st.st_size;
    ssize_t got = lb_pread_full(fd, &h, sizeof h, 0);
    const char *problem = got == (ssize_t)sizeof h ? lb_archive_header_problem(&h, size) : "short";
    if (problem) {
        close(fd);
        if (size <= sizeof h) {
            /* Cut short while being created: it holds nothing, and its number was never
             * published (that happens once its header is written), so it is used again. */
            unlinkat(a->dir_fd, name, 0);
            *removed = 1;
            return 0;
        }
        char to[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(to, number, LB_ARCHIVE_NAME_COMPLETE);
        file_summary none = {0};
        if (renameat(a->dir_fd, name, a->dir_fd, to) == 0)
            add_complete(a, number, size, 0, &none);  /* damaged: compression leaves it */
        return 0;
    }
    int same_ring = h.ring_created_wall_ns == a->b->ring->created_wall_ns &&
                    h.chunk_count == a->b->chunk_count && h.chunk_size == a->b->chunk_size;
    reset_current(a);
    a->cur.fd = fd;
    a->cur.number = number;
    a->cur.created_wall_ns = (int64_t)h.created_wall_ns;
    uint64_t damage;
    int ends_complete;
    lb_archive_source src;
    lb_archive_source_plain(&src, fd, size);
    uint64_t valid_end = walk_frames(&src, h.chunk_size, h.chunk_count, summarize_chunk,
                                     &a->cur.summary, &damage, &ends_complete);
    /* A bundle that syncs (it has a `durable` file) fdatasyncs every batch before it marks its
     * chunks archived: after a power loss, pages written since the last fdatasync can come back
     * from before (a hole with frames after it, or a frame whose body fails its CRC), and none of
     * their chunks was marked archived, so the ring still holds them. The file is cut where the
     * first unsound frame starts, and they are archived again. */
    struct stat durable;
    int syncs = fstatat(a->b->dir_fd, "durable", &durable, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(durable.st_mode);
    uint64_t unsound = syncs && !ends_complete ? first_unsound_frame(&src, h.chunk_size) : UINT64_MAX;
    int damaged = 0;
    if (unsound != UINT64_MAX) {
        memset(&a->cur.summary, 0, sizeof a->cur.summary);
        lb_archive_source_plain(&src, fd, unsound);
        walk_frames(&src, h.chunk_size, h.chunk_count, summarize_chunk, &a->cur.summary, &damage,
                    &ends_complete);
        if (ftruncate(fd, (off_t)unsound) != 0 || fsync(fd) != 0) {
            int err = -errno;
            close(fd);
            reset_current(a);
            return fail(a, "cannot cut the unsynced end of", name, err);
        }
        fprintf(stderr, "logbook: archiver: %s/%s is cut at offset %llu: what followed was written "
                        "after the bundle's last sync and torn (a power loss); chunks the ring "
                        "still holds are archived again\n", a->dir, name, (unsigned long long)unsound);
        size = unsound;
        damage = UINT64_MAX;
    }
    if (damage != UINT64_MAX) {
        /* A torn tail: nothing valid after it, and it is an incomplete last frame (its head is
         * valid, or not all there) or zeros. Writes to the file are serialized (pwritev from
         * this thread; io_uring runs buffered writes to one file in order), so a crash leaves a
         * prefix of what was being written. */
        lb_archive_frame_head head;
        lb_frame_status tail = lb_archive_frame_read(&src, damage, h.chunk_size, &head);
        int torn = valid_end == damage &&
                   (tail == LB_FRAME_END || lb_file_range_is_zero(fd, damage, size));
        if (torn) {
            if (ftruncate(fd, (off_t)damage) != 0 || fsync(fd) != 0) {
                int err = -errno;
                close(fd);
                reset_current(a);
                return fail(a, "cannot cut the incomplete end of", name, err);
            }
            size = damage;
        } else {
            damaged = 1;
            fprintf(stderr, "logbook: archiver: %s/%s is damaged at offset %llu: completed as it is "
                            "(readers report the damage); chunks the ring still holds are "
                            "archived again\n", a->dir, name, (unsigned long long)damage);
        }
    }
    /* Frames go on at an 8-byte boundary after whatever the file holds. */
    a->cur.size = (size + 7u) & ~(uint64_t)7u;
    if (ends_complete) {
        /* The END frame is there already (a crash before the rename): the file is completed as
         * it is. A damaged one keeps its END frame too: it says what the file should hold. */
        a->cur.size = size;
        return finish_file(a, 1, 0);
    }
    if (!same_ring || damaged || !newest) return complete_current(a, 1);
    return 0;
}

static int compare_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* ---- reconciliation: which chunks of the ring are safely in the archive ---- */
typedef struct ring_chunk {
    uint64_t sequence, claim;
    uint32_t slot, committed;
    int found;
} ring_chunk;

typedef struct reconcile_context {
    archiver *a;
    lb_archive_source *src;
    ring_chunk *chunks;
    size_t count, unresolved;
    uint8_t *buffer;
} reconcile_context;

static int compare_ring_chunks(const void *x, const void *y) {
    const ring_chunk *a = x, *b = y;
    return a->sequence < b->sequence ? -1 : a->sequence > b->sequence;
}

static ring_chunk *find_ring_chunk(reconcile_context *r, uint64_t sequence) {
    size_t lo = 0, hi = r->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->chunks[mid].sequence < sequence) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->count && r->chunks[lo].sequence == sequence ? &r->chunks[lo] : NULL;
}

/* A chunk frame: an intact copy (same claim, same length, body CRC right) resolves its chunk. */
static void reconcile_chunk(void *context, uint64_t body_offset, const lb_archive_frame_head *head,
                            const lb_chunk_header *ch) {
    reconcile_context *r = context;
    ring_chunk *k = find_ring_chunk(r, ch->sequence);
    if (!k || k->found || k->claim != ch->claim || k->committed != head->length) return;
    if (lb_archive_source_read(r->src, r->buffer, head->length, body_offset) != (ssize_t)head->length ||
        lb_crc32c(0, r->buffer, head->length) != head->body_crc)
        return;
    k->found = 1;
    r->unresolved--;
}

/* Whether any unresolved chunk's sequence lies in [first, last]. */
static int wants_range(const reconcile_context *r, uint64_t first, uint64_t last) {
    for (size_t i = 0; i < r->count; i++)
        if (!r->chunks[i].found && r->chunks[i].sequence >= first && r->chunks[i].sequence <= last)
            return 1;
    return 0;
}

static void reconcile_file(reconcile_context *r, uint64_t number, lb_archive_name_kind kind,
                           const file_summary *summary) {
    archiver *a = r->a;
    if (summary && summary->known &&
        (!summary->chunks || !wants_range(r, summary->first_sequence, summary->last_sequence)))
        return;
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, kind);
    lb_archive_file_header h;
    lb_archive_source src;
    uint64_t problem;
    int end_frame;
    if (open_archive_source(a, name, &h, &src) != 0) return;
    if (h.ring_created_wall_ns == a->b->ring->created_wall_ns && h.chunk_size == a->b->chunk_size &&
        h.chunk_count == a->b->chunk_count) {
        r->src = &src;
        walk_frames(&src, h.chunk_size, h.chunk_count, reconcile_chunk, r, &problem, &end_frame);
    }
    close_source(&src);
}

/* Every chunk the ring holds SEALED or ARCHIVED is looked for in the files, newest file first:
 * ARCHIVED if an intact copy is found (also a copy whose write completed just before a crash), or
 * if it was archived into a file retention has deleted since; SEALED otherwise, so that it is
 * archived (again) before its slot can be reused. */
static int reconcile_ring(archiver *a) {
    lb_bundle *b = a->b;
    /* The files' chunks are behind the ring's counters too (its header page can be older than
     * them after a power loss): a sequence or claim number is never handed out twice. */
    if (a->cur.fd >= 0 && a->cur.summary.chunks)
        lb_ring_counters_cover(b, a->cur.summary.last_sequence, a->cur.summary.last_claim, 0);
    for (size_t i = 0; i < a->file_count; i++)
        if (a->files[i].summary.known && a->files[i].summary.chunks)
            lb_ring_counters_cover(b, a->files[i].summary.last_sequence,
                                   a->files[i].summary.last_claim, 0);
    reconcile_context r = {a, NULL, calloc(b->chunk_count, sizeof(ring_chunk)), 0, 0,
                           malloc(b->chunk_size)};
    if (!r.chunks || !r.buffer) {
        free(r.chunks);
        free(r.buffer);
        return -ENOMEM;
    }
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load(&h->state);
        if ((state != LB_CHUNK_SEALED && state != LB_CHUNK_ARCHIVED) ||
            lb_chunk_header_check(h, slot, b->chunk_count) != 0)
            continue;
        r.chunks[r.count++] = (ring_chunk){h->sequence, h->claim, slot, atomic_load(&h->committed), 0};
    }
    if (r.count > 1) qsort(r.chunks, r.count, sizeof *r.chunks, compare_ring_chunks);
    r.unresolved = r.count;
    if (r.unresolved && a->cur.fd >= 0)
        reconcile_file(&r, a->cur.number, LB_ARCHIVE_NAME_WRITING, NULL);
    for (size_t i = a->file_count; i-- > 0 && r.unresolved;) {
        complete_file *f = &a->files[i];
        reconcile_file(&r, f->number, file_kind(f), &f->summary);
    }
    /* An archived chunk whose file retention deleted has no copy left, and needs none: its claim
     * is below the retired claim the ring header recorded before the deletion. */
    uint64_t retired_claim = atomic_load(&b->ring->archive_retired_claim);
    uint64_t reverted = 0;
    for (size_t i = 0; i < r.count; i++) {
        lb_chunk_header *h = lb_chunk_at(b, r.chunks[i].slot);
        int retired = !r.chunks[i].found && r.chunks[i].claim < retired_claim &&
                      atomic_load(&h->state) == LB_CHUNK_ARCHIVED;
        uint32_t want = r.chunks[i].found || retired ? LB_CHUNK_ARCHIVED : LB_CHUNK_SEALED;
        if (atomic_exchange(&h->state, want) == LB_CHUNK_ARCHIVED && want == LB_CHUNK_SEALED)
            reverted++;
    }
    free(r.chunks);
    free(r.buffer);
    if (reverted)
        fprintf(stderr, "logbook: archiver: %llu chunks marked archived have no intact copy in %s; "
                        "archiving them again\n", (unsigned long long)reverted, a->dir);
    lb_bundle_chunks_released(a->b);
    return 0;
}

static void note_damage(void *context, uint64_t offset, uint64_t length, const char *what) {
    (void)offset;
    (void)length;
    (void)what;
    *(int *)context = 1;
}

static int recover_directory(archiver *a) {
    int fd = dup(a->dir_fd);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    uint64_t *writing = NULL;
    size_t writing_count = 0, writing_capacity = 0;
    uint64_t highest = 0;
    unsigned foreign = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t number;
        lb_archive_name_kind kind = lb_archive_name_parse(e->d_name, &number);
        if (!kind) continue;
        if (kind == LB_ARCHIVE_NAME_COMPRESSING) {
            /* A compression a crash cut short: its .lba is still there. */
            unlinkat(a->dir_fd, e->d_name, 0);
            continue;
        }
        if (number > highest) highest = number;
        if (kind == LB_ARCHIVE_NAME_WRITING) {
            if (grow((void **)&writing, &writing_capacity, writing_count + 1, sizeof *writing) == 0)
                writing[writing_count++] = number;
            continue;
        }
        int file = lb_file_open_at(a->dir_fd, e->d_name, O_RDONLY, NULL);
        struct stat st;
        if (file < 0) continue;
        if (fstat(file, &st) != 0) {
            close(file);
            continue;
        }
        lb_archive_file_header h;
        lb_archive_source src;
        int damaged = 0;
        int opened = lb_archive_source_open(&src, file, (uint64_t)st.st_size, note_damage, &damaged,
                                            NULL) == 0;
        int header_ok = opened && lb_archive_source_read(&src, &h, sizeof h, 0) == (ssize_t)sizeof h &&
                        !lb_archive_header_problem(&h, src.size);
        if (header_ok && h.ring_created_wall_ns != a->b->ring->created_wall_ns) {
            /* Another bundle's file (a directory shared by mistake): never ours to delete. */
            if (!foreign++)
                fprintf(stderr, "logbook: archiver: %s/%s belongs to another bundle: left alone, "
                                "not counted for retention\n", a->dir, e->d_name);
        } else {
            file_summary summary;
            if (opened) read_end_frame(&src, a->b->chunk_size, &summary);
            else memset(&summary, 0, sizeof summary);
            complete_file *f = add_complete(a, number, (uint64_t)st.st_size,
                                            kind == LB_ARCHIVE_NAME_UNSYNCED, &summary);
            if (f) {
                f->compressed = kind == LB_ARCHIVE_NAME_COMPRESSED;
                f->created_wall_ns = header_ok ? (int64_t)h.created_wall_ns : 0;
                /* A compressed file with a sound seek table: the one kept when its .lba is there
                 * too (a crash between the rename and the delete). */
                f->sound_zst = f->compressed && !damaged;
            }
        }
        if (opened) lb_archive_source_close(&src);
        close(file);
    }
    /* The same number twice: a .lba and the .lba.zst made of it. A sound .zst was fsynced and
     * checked before its rename: the .lba goes. Otherwise the .zst goes, and the .lba is
     * compressed again. */
    size_t kept_files = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        complete_file *twin = i + 1 < a->file_count && a->files[i + 1].number == f->number
                                  ? &a->files[i + 1] : NULL;
        if (twin && twin->compressed != f->compressed) {
            complete_file *zst = f->compressed ? f : twin, *plain = f->compressed ? twin : f;
            complete_file *loser = zst->sound_zst ? plain : zst;
            char name[LB_ARCHIVE_NAME_MAX];
            lb_archive_name_format(name, loser->number, file_kind(loser));
            unlinkat(a->dir_fd, name, 0);
            a->files[kept_files++] = zst->sound_zst ? *zst : *plain;
            i++;
            continue;
        }
        a->files[kept_files++] = *f;
    }
    if (kept_files != a->file_count) fsync_dir(a);
    a->file_count = kept_files;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        /* Complete files of this ring not compressed yet (a crash came first, or an earlier run
         * did not compress) are compressed now, and announced then. A damaged one (no readable
         * END frame) is left as it is. The others were announced by the run that made them. */
        f->pending = a->compressor && !f->compressed && !f->unsynced && f->summary.known;
        f->announced = !f->pending;
    }
    closedir(d);
    if (writing_count > 1) qsort(writing, writing_count, sizeof *writing, compare_u64);
    /* Never reuse a number, not even one whose file went missing: readers would take the new
     * file for the old one (only a file removed below, that never had a header, gives its number
     * back). */
    a->next_number = highest + 1;
    int rc = 0;
    for (size_t i = 0; i < writing_count; i++) {
        int removed = 0;
        int resumed = resume_file(a, writing[i], i + 1 == writing_count, &removed);
        if (!rc) rc = resumed;
        if (removed && writing[i] == highest) {
            uint64_t below = 0;
            for (size_t k = 0; k < a->file_count; k++)
                if (a->files[k].number > below) below = a->files[k].number;
            for (size_t k = 0; k < i; k++)
                if (writing[k] > below) below = writing[k];
            a->next_number = below + 1;
        }
    }
    free(writing);
    uint64_t recorded = atomic_load(&a->b->ring->archive_next_number);
    if (recorded > a->next_number) a->next_number = recorded;
    if (a->cur.fd >= 0 && a->cur.number >= a->next_number) a->next_number = a->cur.number + 1;
    /* Files retention had already retired (the ring header says so) but a crash kept: they go
     * now, so that what the header counts and what the directory holds agree. */
    uint64_t first_kept = atomic_load(&a->b->ring->archive_first_number);
    size_t kept = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, f->number, file_kind(f));
        if (f->number < first_kept && unlinkat(a->dir_fd, name, 0) == 0) continue;
        a->files[kept++] = *f;
    }
    if (kept != a->file_count) fsync_dir(a);
    a->file_count = kept;
    if (!rc && a->cur.fd >= 0 && a->cur.size + LB_ARCHIVE_END_FRAME_SIZE >= a->o.max_file_size)
        rc = roll_current(a);
    /* Always, whatever failed above: a chunk is marked archived only with an intact copy. */
    int reconciled = reconcile_ring(a);
    if (!rc) rc = reconciled;
    enforce_retention(a);
    return rc;
}

/* ---- compression: a second thread, oldest file first ---- */
static void wake(archiver *a);

static complete_file *find_file(archiver *a, uint64_t number) {
    for (size_t i = 0; i < a->file_count; i++)
        if (a->files[i].number == number) return &a->files[i];
    return NULL;
}

static void announce(archiver *a, const complete_file *f, const char *name) {
    if (!a->o.on_roll) return;
    lb_archive_file info = {NULL, f->number, f->bytes, f->summary.chunks, f->summary.first_sequence,
                            f->summary.last_sequence, f->created_wall_ns, f->summary.records,
                            f->compressed ? f->uncompressed_bytes : f->bytes};
    char *path = lb_path_join(a->dir, name);
    info.path = path ? path : name;
    a->o.on_roll(a->o.on_roll_context, &info);
    free(path);
}

/* A file left uncompressed: said on stderr (once per streak of failures; a damaged file always),
 * counted in compression_failures. Archiving goes on: the .lba is whole, and announced. */
static int compress_failed(archiver *a, const char *name, const char *why, int rc) {
    int say = rc == -EPROTO || !a->compress_error_reported;
    a->compress_error_reported = 1;
    if (say)
        fprintf(stderr, "logbook: archiver: %s/%s stays uncompressed: %s%s%s (the next open tries "
                        "again)\n", a->dir, name, why ? why : "", why ? ": " : "", strerror(-rc));
    return rc;
}

/* Puts the compressed copy of file `number` in place (files_lock held, so that retention cannot
 * delete the file meanwhile): renamed, the directory fsynced, and only then the .lba deleted, so
 * that a crash at any moment leaves one complete file. 0 when the file is compressed now. */
static int commit_compressed(archiver *a, uint64_t number) {
    char plain[LB_ARCHIVE_NAME_MAX], partial[LB_ARCHIVE_NAME_MAX], final[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(plain, number, LB_ARCHIVE_NAME_COMPLETE);
    lb_archive_name_format(partial, number, LB_ARCHIVE_NAME_COMPRESSING);
    lb_archive_name_format(final, number, LB_ARCHIVE_NAME_COMPRESSED);
    if (renameat(a->dir_fd, partial, a->dir_fd, final) != 0) {
        int rc = -errno;
        unlinkat(a->dir_fd, partial, 0);
        return compress_failed(a, plain, "cannot rename the compressed copy", rc);
    }
    if (fsync_dir(a) != 0) {
        /* The rename may not last: the .lba stays too (the next open keeps one of the two). */
        compress_failed(a, final, "fsync of the directory failed", -errno);
        return 0;
    }
    /* Not fsynced again: should the delete not last, the next open finds both and deletes the
     * .lba then. */
    unlinkat(a->dir_fd, plain, 0);
    a->compress_error_reported = 0;
    return 0;
}

/* The compression thread runs at idle priority (SCHED_IDLE): only on a core nothing else wants, so
 * that it never preempts a logging thread (measured: with a normal priority the logging thread of
 * a 2-core machine was switched out 8x as often, and paid +21% per record against +14% for the
 * archiver alone). A compressor starved this way only delays compression: retention still holds
 * the quota (it announces and deletes files not compressed yet). Whoever waits for it (a roll, a
 * close) lends it a normal priority meanwhile. */
static void compression_priority(archiver *a, int urgent) {
    struct sched_param param = {0};
    pthread_setschedparam(a->compress_thread, urgent ? SCHED_OTHER : SCHED_IDLE, &param);
}

static void *compress_main(void *arg) {
    archiver *a = arg;
    pthread_mutex_lock(&a->files_lock);
    for (;;) {
        complete_file *f = NULL;
        for (size_t i = 0; i < a->file_count && !f; i++)
            if (a->files[i].pending) f = &a->files[i];
        if (!f) {
            if (a->compress_stop) break;
            pthread_cond_wait(&a->compress_wake, &a->files_lock);
            continue;
        }
        f->pending = 0;
        f->compressing = 1;
        uint64_t number = f->number;
        pthread_mutex_unlock(&a->files_lock);

        char plain[LB_ARCHIVE_NAME_MAX], partial[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(plain, number, LB_ARCHIVE_NAME_COMPLETE);
        lb_archive_name_format(partial, number, LB_ARCHIVE_NAME_COMPRESSING);
        lb_compress_result result;
        const char *why = NULL;
        int rc = lb_compressor_run(a->compressor, a->dir_fd, number, &result, &why);

        pthread_mutex_lock(&a->files_lock);
        f = find_file(a, number);  /* the list may have moved */
        if (!f || f->retired) {
            /* Retention needed the room first: it announced the .lba and deleted it (perhaps
             * before the compressor could open it). */
            if (!rc) unlinkat(a->dir_fd, partial, 0);
            if (f) f->compressing = 0;
            pthread_cond_broadcast(&a->compress_done);
            continue;
        }
        if (rc) compress_failed(a, plain, why, rc);
        if (!rc) rc = commit_compressed(a, number);
        f->compressing = 0;
        if (!rc) {
            f->compressed = 1;
            f->uncompressed_bytes = f->bytes;
            f->bytes = result.compressed_bytes;
        }
        f->announcing = 1;
        complete_file announced = *f;
        pthread_mutex_unlock(&a->files_lock);

        pthread_mutex_lock(&a->lock);
        if (!rc) {
            a->stats.files_compressed++;
            a->stats.bytes_before_compression += result.uncompressed_bytes;
            a->stats.bytes_after_compression += result.compressed_bytes;
        } else {
            a->stats.compression_failures++;
        }
        pthread_mutex_unlock(&a->lock);
        /* Announced by its final name: compressed, or (compression failed) the .lba. */
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, number, file_kind(&announced));
        announce(a, &announced, name);

        pthread_mutex_lock(&a->files_lock);
        f = find_file(a, number);
        f->announcing = 0;
        f->announced = 1;
        pthread_cond_broadcast(&a->compress_done);
        /* Retention runs on the archiver thread (it owns the file being written). */
        atomic_store(&a->retention_due, 1);
        wake(a);
    }
    pthread_mutex_unlock(&a->files_lock);
    return NULL;
}

/* Lets the compression thread finish what is pending, and joins it. */
static void stop_compression(archiver *a) {
    compression_priority(a, 1);
    pthread_mutex_lock(&a->files_lock);
    a->compress_stop = 1;
    pthread_cond_signal(&a->compress_wake);
    pthread_mutex_unlock(&a->files_lock);
    pthread_join(a->compress_thread, NULL);
    a->compress_started = 0;
}

/* Waits until the files complete now (the one a roll just completed and those before it) are
 * announced: lb_archive_roll returns after its file's on_roll. Files completed later (a writer
 * logging on) are not waited for: that wait could last as long as the writer does. */
static void wait_compressed(archiver *a) {
    if (!a->compress_started) return;
    pthread_mutex_lock(&a->files_lock);
    uint64_t newest = a->file_count ? a->files[a->file_count - 1].number : 0;
    if (!a->waiting_for_compression++) compression_priority(a, 1);
    for (;;) {
        int waiting = 0;
        for (size_t i = 0; i < a->file_count && !waiting && a->files[i].number <= newest; i++)
            waiting = !a->files[i].announced;
        if (!waiting) break;
        pthread_cond_wait(&a->compress_done, &a->files_lock);
    }
    if (!--a->waiting_for_compression) compression_priority(a, 0);
    pthread_mutex_unlock(&a->files_lock);
}

/* ---- the thread ---- */
static void complete_requests(archiver *a, uint64_t rolls, uint64_t syncs, int rc) {
    pthread_mutex_lock(&a->lock);
    if (rolls > a->roll_done) a->roll_done = rolls;
    if (syncs > a->sync_done) a->sync_done = syncs;
    a->request_result = rc;
    pthread_cond_broadcast(&a->done);
    pthread_mutex_unlock(&a->lock);
}

static uint32_t age_wait_ms(archiver *a) {
    if (!a->o.roll_interval_ms || a->cur.fd < 0 || a->cur.summary.chunks == 0) return IDLE_WAKE_MS;
    int64_t due = a->cur.created_wall_ns + (int64_t)a->o.roll_interval_ms * 1000000;
    int64_t left = (due - now_ns(a)) / 1000000;
    if (left < 1) return 1;
    return left < IDLE_WAKE_MS ? (uint32_t)left : IDLE_WAKE_MS;
}

static void *archiver_main(void *arg) {
    archiver *a = arg;
    lb_bundle *b = a->b;
    uint32_t backoff_ms = 0;
    for (;;) {
        uint32_t generation = atomic_load(&b->sealed_generation);
        atomic_store_explicit(&b->archiver_seen_generation, generation, memory_order_relaxed);
        uint32_t kick = atomic_load(&a->kick);
        int stopping = atomic_load(&a->stop);
        pthread_mutex_lock(&a->lock);
        uint64_t rolls = a->roll_requested, syncs = a->sync_requested;
        int requested = rolls > a->roll_done || syncs > a->sync_done;
        pthread_mutex_unlock(&a->lock);

        /* A sync or roll covers every record logged before it: the chunks flush sealed (older
         * than the next sequence to be claimed now) are archived, in as many passes as needed. */
        uint64_t before = requested ? atomic_load(&b->ring->next_sequence) : 0;
        size_t left = 0;
        int rc = archive_sealed(a, before, &left);
        while (!rc && left) rc = archive_sealed(a, before, &left);
        if (atomic_exchange(&a->retention_due, 0)) enforce_retention(a);
        if (!rc && rolls > a->roll_done) rc = roll_current(a);
        if (!rc && syncs > a->sync_done) rc = sync_current(a);
        if (requested) complete_requests(a, rolls, syncs, rc);
        if (!rc && a->o.roll_interval_ms && a->cur.fd >= 0 && a->cur.summary.chunks > 0 &&
            now_ns(a) - a->cur.created_wall_ns >= (int64_t)a->o.roll_interval_ms * 1000000)
            rc = roll_current(a);
        if (stopping) {
            /* A clean close completes the file being written (END, fsync, rename, on_roll), so
             * that an uploader gets every record of a process that ended cleanly. */
            int complete_rc = complete_current(a, 1);
            a->stop_result = rc ? rc : complete_rc;
            /* A request made after this pass gets -EBADF instead of a wait that never ends. */
            pthread_mutex_lock(&a->lock);
            a->ended = 1;
            uint64_t pending_rolls = a->roll_requested, pending_syncs = a->sync_requested;
            pthread_mutex_unlock(&a->lock);
            if (pending_rolls > a->roll_done || pending_syncs > a->sync_done)
                complete_requests(a, pending_rolls, pending_syncs, -EBADF);
            break;
        }
        if (rc) {
            /* Back off (the disk is full, say) instead of retrying on every sealed chunk. */
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 2000 ? 2000 : backoff_ms * 2) : 50;
            lb_futex_wait(&a->kick, kick, backoff_ms);
            continue;
        }
        backoff_ms = 0;
        atomic_store(&b->archiver_sleeping, 1);
        if (atomic_load(&b->sealed_generation) == generation && atomic_load(&a->kick) == kick)
            lb_futex_wait(&b->sealed_generation, generation, age_wait_ms(a));
        atomic_store(&b->archiver_sleeping, 0);
    }
    return NULL;
}

static void wake(archiver *a) {
    atomic_fetch_add(&a->kick, 1);
    lb_futex_wake_all(&a->kick);
    atomic_fetch_add(&a->b->sealed_generation, 1);
    lb_futex_wake_all(&a->b->sealed_generation);
}

/* Memory and descriptors only: in a forked child this is all that may be let go of (the thread,
 * its lock and condition variable belong to the parent). */
static void archiver_release(archiver *a) {
    if (a->cur.fd >= 0) close(a->cur.fd);
    if (a->dir_fd >= 0) close(a->dir_fd);
    if (a->uring_ready) io_uring_queue_exit(&a->uring);
    free(a->cur.sessions);
    free(a->files);
    free(a->meta);
    free(a->refs);
    free(a->candidates);
    free(a->frame);
    free(a->dir);
    lb_compressor_free(a->compressor);
    free(a);
}

static void archiver_free(archiver *a) {
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->done);
    pthread_mutex_destroy(&a->files_lock);
    pthread_cond_destroy(&a->compress_wake);
    pthread_cond_destroy(&a->compress_done);
    archiver_release(a);
}

static void archiver_forget(void *context) { archiver_release(context); }

/* Called by lb_bundle_shutdown once every chunk is sealed: archive them all, sync, stop. */
static int archiver_stop(void *context) {
    archiver *a = context;
    int rc = 0;
    if (a->thread_started) {
        atomic_store(&a->stop, 1);
        wake(a);
        pthread_join(a->thread, NULL);
        rc = a->stop_result;
    }
    if (a->compress_started) {
        /* The files completed by now (the last one at close) are compressed and announced
         * before close returns, then retention runs once more. */
        stop_compression(a);
        enforce_retention(a);
    }
    /* Anyone still waiting for a roll or a sync learns that the archiver is gone. */
    complete_requests(a, UINT64_MAX, UINT64_MAX, rc ? rc : -ECANCELED);
    archiver_free(a);
    return rc;
}

/* ---- public API ---- */
void lb_archive_options_init(lb_archive_options *o) {
    memset(o, 0, sizeof *o);
    o->max_file_size = 16u << 20;
    o->roll_interval_ms = 24ull * 3600 * 1000;
    o->max_files = 16;
    o->quota = 256u << 20;
    o->compression_level = 1;
}

/* "<bundle>/archive" is the directory, or a symlink to the custom one: made relative to the
 * bundle's (checked) directory. */
static int link_custom_directory(lb_bundle *b, const char *dir) {
    char *target = realpath(dir, NULL);
    if (!target) return -errno;
    int rc = 0;
    struct stat st;
    if (fstatat(b->dir_fd, "archive", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) {
            char old[4096];
            ssize_t n = readlinkat(b->dir_fd, "archive", old, sizeof old - 1);
            if (n >= 0) old[n] = 0;
            if (n < 0 || strcmp(old, target) != 0) {
                unlinkat(b->dir_fd, "archive", 0);
                if (symlinkat(target, b->dir_fd, "archive") != 0) rc = -errno;
            }
        }
        /* A real directory from an earlier default stays: readers keep finding its files. */
    } else if (symlinkat(target, b->dir_fd, "archive") != 0) {
        rc = -errno;
    }
    if (rc)
        lb_error_detail_set("cannot link '%s/archive' to archive directory '%s': %s", b->path, target,
                            strerror(-rc));
    free(target);
    return rc;
}

/* The archive directory, checked like the bundle's: the default one is made inside the bundle
 * directory (where "archive" may be this user's symlink to a custom directory of an earlier run). */
static int open_archive_directory(archiver *a, const char *custom) {
    lb_bundle *b = a->b;
    if (custom) {
        int fd = lb_dir_open_private(custom, "archive directory", 1);
        if (fd < 0) return fd;
        int rc = link_custom_directory(b, custom);
        if (rc) {
            close(fd);
            return rc;
        }
        return fd;
    }
    if (mkdirat(b->dir_fd, "archive", 0700) != 0 && errno != EEXIST) {
        int err = errno;
        lb_error_detail_set("cannot create archive directory '%s': %s", a->dir, strerror(err));
        return -err;
    }
    int fd = openat(b->dir_fd, "archive", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOTDIR) lb_error_detail_set("archive directory '%s' is not a directory", a->dir);
        else lb_error_detail_set("archive directory '%s': %s", a->dir, strerror(err));
        return -err;
    }
    int rc = lb_dir_check_private(fd, "archive directory", a->dir);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* 1 when the archive options are usable; otherwise 0 with a detail naming the option. */
static int valid_archive_options(const lb_archive_options *o) {
    if (o->max_file_size < 64u * 1024) {
        lb_error_detail_set("max file size %llu bytes is under the minimum of 65536 bytes (64 KiB)",
                            (unsigned long long)o->max_file_size);
        return 0;
    }
    if (o->quota && o->quota < o->max_file_size) {
        lb_error_detail_set("quota %llu bytes is under max file size %llu bytes: it must hold at least "
                            "one file (or be 0: no quota)", (unsigned long long)o->quota,
                            (unsigned long long)o->max_file_size);
        return 0;
    }
    if (!lb_compressor_level_valid(o->compression_level)) {
        lb_error_detail_set("compression level %d is not a zstd level of this libzstd (0: no "
                            "compression)", o->compression_level);
        return 0;
    }
    if (o->backend && o->backend != LB_ARCHIVE_BACKEND_IO_URING && o->backend != LB_ARCHIVE_BACKEND_PWRITE) {
        lb_error_detail_set("archive backend %u is neither io_uring (%u) nor pwrite (%u)", o->backend,
                            LB_ARCHIVE_BACKEND_IO_URING, LB_ARCHIVE_BACKEND_PWRITE);
        return 0;
    }
    return 1;
}

int lb_bundle_open_archived(const char *path, const lb_options *options,
                            const lb_archive_options *archive, lb_bundle **out) {
    lb_error_detail_clear();
    if (!path || !out) return -EINVAL;
    lb_archive_options o;
    if (archive) o = *archive;
    else lb_archive_options_init(&o);
    if (!valid_archive_options(&o)) return -EINVAL;
    lb_bundle *b;
    int rc = lb_bundle_open(path, options, &b);
    if (rc) return rc;

    archiver *a = calloc(1, sizeof *a);
    if (!a) {
        lb_bundle_close(b);
        return -ENOMEM;
    }
    a->b = b;
    a->o = o;
    a->dir_fd = -1;
    a->cur.fd = -1;
    a->meta_offset = sizeof(lb_meta_file_header);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->done, NULL);
    pthread_mutex_init(&a->files_lock, NULL);
    pthread_cond_init(&a->compress_wake, NULL);
    pthread_cond_init(&a->compress_done, NULL);
    if (o.compression_level) {
        a->compressor = lb_compressor_create(o.compression_level);
        if (!a->compressor) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    a->dir = o.directory ? strdup(o.directory) : lb_path_join(path, "archive");
    a->candidates = malloc((size_t)b->chunk_count * sizeof *a->candidates);
    a->o.directory = NULL;  /* the caller's string is not kept */
    if (!a->dir || !a->candidates) { rc = -ENOMEM; goto fail; }
    a->dir_fd = open_archive_directory(a, o.directory);
    if (a->dir_fd < 0) { rc = a->dir_fd; goto fail; }

    const char *env = getenv("LOGBOOK_ARCHIVE_BACKEND");
    int forced = o.backend == LB_ARCHIVE_BACKEND_PWRITE || (env && strcmp(env, "pwrite") == 0);
    a->backend = LB_ARCHIVE_BACKEND_PWRITE;
    if (!forced) {
        int urc = io_uring_queue_init(URING_ENTRIES, &a->uring, 0);
        if (urc == 0) {
            a->uring_ready = 1;
            a->backend = LB_ARCHIVE_BACKEND_IO_URING;
        } else {
            fprintf(stderr, "logbook: archiver: io_uring unavailable (%s); writing with pwritev\n",
                    strerror(-urc));
        }
    }
    a->stats.backend = a->backend;
    atomic_store(&b->ring->archive_backend, a->backend);

    rc = recover_directory(a);
    if (rc == -ENOMEM) goto fail;
    /* Records a crashed run left in the ring go to the archive before new ones are logged. A
     * failure here (a full disk) is not fatal: the thread keeps retrying, and stats report it. */
    size_t left;
    (void)archive_sealed(a, 0, &left);
    if (a->compressor) {
        if (pthread_create(&a->compress_thread, NULL, compress_main, a) != 0) {
            rc = -EAGAIN;
            goto fail;
        }
        a->compress_started = 1;
        compression_priority(a, 0);
    }
    /* Under the sync lock: the interval syncer, running since the bundle opened, reads these. */
    pthread_mutex_lock(&b->sync_lock);
    lb_bundle_attach_archiver(b, a, archiver_stop, archiver_forget);
    b->archiver_datasync = archiver_datasync;
    pthread_mutex_unlock(&b->sync_lock);
    if (pthread_create(&a->thread, NULL, archiver_main, a) != 0) {
        rc = -EAGAIN;
        pthread_mutex_lock(&b->sync_lock);
        b->archiver_stop = NULL;
        b->archiver_datasync = NULL;
        b->archiver = NULL;
        pthread_mutex_unlock(&b->sync_lock);
        goto fail;
    }
    a->thread_started = 1;
    *out = b;
    return 0;
fail:
    if (a->compress_started) stop_compression(a);
    archiver_free(a);
    lb_bundle_close(b);
    return rc;
}

/* lb_bundle_sync's part: the file being written is fdatasynced (after the chunks sealed before
 * the request are archived), so chunks whose slots were reused are durable. */
static int archiver_datasync(void *p) {
    archiver *a = p;
    pthread_mutex_lock(&a->lock);
    if (a->ended) {
        pthread_mutex_unlock(&a->lock);
        return -EBADF;
    }
    uint64_t target = ++a->sync_requested;
    pthread_mutex_unlock(&a->lock);
    wake(a);
    pthread_mutex_lock(&a->lock);
    int rc = wait_request(a, &a->sync_done, target, 0);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

static archiver *archiver_of(lb_bundle *b) {
    return b && b->archiving && !atomic_load(&b->closed) ? (archiver *)b->archiver : NULL;
}

/* Waits until the request numbered `target` of one kind is done. */
static int wait_request(archiver *a, uint64_t *done, uint64_t target, uint32_t timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    int rc = 0;
    while (*done < target) {
        int w = timeout_ms ? pthread_cond_timedwait(&a->done, &a->lock, &until)
                           : pthread_cond_wait(&a->done, &a->lock);
        if (w == ETIMEDOUT && *done < target) return -ETIMEDOUT;
    }
    rc = a->request_result;
    return rc;
}

int lb_archive_roll(lb_bundle *b) {
    if (b && atomic_load(&b->closed)) return -EBADF;
    archiver *a = archiver_of(b);
    if (!a) return -ENOTSUP;
    lb_bundle_flush(b);
    pthread_mutex_lock(&a->lock);
    uint64_t target = ++a->roll_requested;
    pthread_mutex_unlock(&a->lock);
    wake(a);
    pthread_mutex_lock(&a->lock);
    int rc = wait_request(a, &a->roll_done, target, 0);
    pthread_mutex_unlock(&a->lock);
    if (!rc) wait_compressed(a);
    return rc;
}

int lb_archive_sync(lb_bundle *b, uint32_t timeout_ms) {
    if (b && atomic_load(&b->closed)) return -EBADF;
    archiver *a = archiver_of(b);
    if (!a) return -ENOTSUP;
    lb_bundle_flush(b);
    pthread_mutex_lock(&a->lock);
    uint64_t target = ++a->sync_requested;
    pthread_mutex_unlock(&a->lock);
    wake(a);
    pthread_mutex_lock(&a->lock);
    int rc = wait_request(a, &a->sync_done, target, timeout_ms);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int lb_archive_stats_get(lb_bundle *b, lb_archive_stats *out) {
    archiver *a = archiver_of(b);
    if (!a || !out) return a ? -EINVAL : -ENOTSUP;
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
    out->lag_chunks = out->lag_bytes = 0;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load(&h->state);
        if (state != LB_CHUNK_SEALED && state != LB_CHUNK_ARCHIVING) continue;
        out->lag_chunks++;
        out->lag_bytes += atomic_load(&h->committed);
    }
    return 0;
}
