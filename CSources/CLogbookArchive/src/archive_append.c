/* archive_append.c — one archiving pass: sealed chunks taken, checksummed and appended to the
 * current file as frames after the META frames they need, written in one batch (io_uring, or
 * pwritev when io_uring is not available), marked archived only once every write completed. */
#define _GNU_SOURCE
#include "archiver_internal.h"

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
    if (lb_array_grow((void **)&a->meta, &a->meta_capacity, a->meta_length + total, 1) ||
        lb_array_grow((void **)&a->refs, &a->ref_capacity, a->ref_count + 1, sizeof *a->refs)) {
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
    if (lb_array_grow((void **)&a->frame, &a->frame_capacity, span, 1)) return 0;
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

/* ---- archiving ---- */
static int compare_candidates(const void *x, const void *y) {
    const candidate *a = x, *b = y;
    return a->sequence < b->sequence ? -1 : a->sequence > b->sequence;
}

static void release_chunks(archiver *a, candidate *c, size_t n, uint32_t state) {
    for (size_t i = 0; i < n; i++) atomic_store_explicit(&c[i].chunk->state, state, memory_order_release);
    if (state == LB_CHUNK_ARCHIVED && n) lb_bundle_chunks_released(a->b);
}

/* The sessions of the chunks c[0..n) whose meta entries the current file may lack, with those it
 * holds: at most BATCH_MAX. */
static size_t batch_sessions(const archiver *a, const candidate *c, size_t n, uint32_t *sessions) {
    size_t count = 0;
    for (size_t i = 0; i < a->cur.session_count && count < BATCH_MAX; i++)
        sessions[count++] = a->cur.sessions[i];
    for (size_t i = 0; i < n; i++)
        if (!has_session(sessions, count, c[i].chunk->session) && count < BATCH_MAX)
            sessions[count++] = c[i].chunk->session;
    return count;
}

/* How many of c[0..n) fit in the current file after `*end` under max_file_size (the END frame
 * included); at least one in an empty file. `*end` moves past them. */
static size_t chunks_that_fit(const archiver *a, const candidate *c, size_t n, uint64_t *end) {
    size_t take = 0;
    while (take < n) {
        uint64_t span = lb_archive_frame_span(c[take].length);
        if (*end + span + LB_ARCHIVE_END_FRAME_SIZE > a->o.max_file_size &&
            (a->cur.summary.chunks > 0 || take > 0))
            break;
        *end += span;
        take++;
    }
    return take;
}

/* Writes the META frame built (meta_span bytes) and c[0..take) as CHUNK frames at the current
 * file's end, in one batch; synced when the bundle syncs. 0 or -errno. */
static int write_batch(archiver *a, candidate *c, size_t take, size_t meta_span) {
    struct iovec iov[2 * BATCH_MAX + 1];
    write_op ops[BATCH_MAX + 1];
    lb_archive_frame_head heads[BATCH_MAX];
    size_t op_count = 0, iov_count = 0;
    uint64_t offset = a->cur.size;
    if (meta_span) {
        iov[iov_count] = (struct iovec){a->frame, meta_span};
        ops[op_count++] = (write_op){&iov[iov_count], 1, offset, meta_span};
        iov_count++;
        offset += meta_span;
    }
    for (size_t i = 0; i < take; i++) {
        candidate *k = &c[i];
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
    int rc = write_ops(a, a->cur.fd, ops, op_count);
    /* A bundle that syncs (lb_bundle_sync, sync_interval_ms) must never let a chunk leave the
     * ring for a copy a power loss can take back: the slot of an archived chunk is reused. */
    if (!rc && atomic_load_explicit(&a->b->durability_wanted, memory_order_relaxed) &&
        fdatasync(a->cur.fd) != 0)
        rc = -errno;
    return rc;
}

/* A batch is in the file (now `end` bytes): its chunks are ARCHIVED, counted, and their sessions
 * noted as held by the file. */
static void batch_written(archiver *a, candidate *c, size_t take, uint64_t end, uint64_t chunk_bytes,
                          const uint32_t *sessions, size_t session_count) {
    a->cur.size = end;
    for (size_t i = 0; i < take; i++)
        lb_ar_summary_add(&a->cur.summary, c[i].sequence, c[i].claim, c[i].records);
    for (size_t i = 0; i < session_count; i++) {
        if (has_session(a->cur.sessions, a->cur.session_count, sessions[i])) continue;
        if (lb_array_grow((void **)&a->cur.sessions, &a->cur.session_capacity, a->cur.session_count + 1,
                 sizeof *a->cur.sessions) == 0)
            a->cur.sessions[a->cur.session_count++] = sessions[i];
    }
    release_chunks(a, c, take, LB_CHUNK_ARCHIVED);
    atomic_fetch_add(&a->b->ring->archived_chunks, take);
    atomic_fetch_add(&a->b->ring->archived_bytes, chunk_bytes);
    pthread_mutex_lock(&a->lock);
    a->stats.chunks_archived += take;
    a->stats.bytes_archived += chunk_bytes;
    pthread_mutex_unlock(&a->lock);
    lb_ar_succeeded(a);
}

/* Appends c[0..n) (taken: ARCHIVING) to the current file, in batches, rolling files as they fill.
 * On failure the chunks not archived go back to SEALED. 0 or -errno. */
static int append_chunks(archiver *a, candidate *c, size_t n) {
    uint32_t sessions[BATCH_MAX];
    size_t done = 0;
    int rc = 0;
    while (done < n && rc == 0) {
        if (a->cur.fd < 0 && (rc = lb_ar_open_new_file(a)) != 0) break;
        size_t session_count = batch_sessions(a, c + done, n - done, sessions);
        meta_refresh(a);
        size_t meta_span = build_meta_frame(a, sessions, session_count);
        uint64_t at = a->cur.size, end = at + meta_span;
        size_t take = chunks_that_fit(a, c + done, n - done, &end);
        if (take == 0) {
            unmark_meta(a, a->cur.number);
            rc = lb_ar_roll_current(a);
            continue;
        }
        rc = write_batch(a, c + done, take, meta_span);
        if (rc) {
            /* Cut whatever part of the batch landed, so the file ends at a frame boundary. */
            char name[LB_ARCHIVE_NAME_MAX];
            lb_archive_name_format(name, a->cur.number, LB_ARCHIVE_NAME_WRITING);
            if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open cuts it */ }
            unmark_meta(a, a->cur.number);
            release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
            return lb_ar_fail(a, "cannot write", name, rc);
        }
        batch_written(a, c + done, take, end, end - at - meta_span, sessions, session_count);
        done += take;
        if (a->o.quota) lb_ar_enforce_retention(a);
        if (a->cur.size + LB_ARCHIVE_END_FRAME_SIZE >= a->o.max_file_size) rc = lb_ar_roll_current(a);
    }
    if (rc) {
        release_chunks(a, c + done, n - done, LB_CHUNK_SEALED);
        return rc;
    }
    pthread_mutex_lock(&a->files_lock);
    lb_ar_publish_directory_stats_locked(a);
    pthread_mutex_unlock(&a->files_lock);
    return 0;
}

/* Archives the chunks that are sealed now, oldest first. Under the overwrite policy the archiver
 * takes at most half of the chunks no writer owns: new records must never be dropped because the
 * archiver holds chunks (a write in flight may take long on a slow disk); the oldest sealed chunks
 * are overwritten before they are archived instead, and counted (chunks_lost_unarchived,
 * records_overwritten). `*left`: the sealed chunks older than sequence `before` this pass left
 * (a sync, a roll or a clean close archives them in more passes; it takes at least one chunk per
 * pass). */
int lb_ar_archive_sealed(archiver *a, uint64_t before, size_t *left) {
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

int lb_ar_sync_current(archiver *a) {
    if (a->cur.fd < 0) return 0;
    if (fdatasync(a->cur.fd) != 0) {
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, a->cur.number, LB_ARCHIVE_NAME_WRITING);
        return lb_ar_fail(a, "fsync failed for", name, -errno);
    }
    return 0;
}
