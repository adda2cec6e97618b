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
#include "archiver_internal.h"


static int archiver_datasync(void *archiver_state);
static int wait_request(archiver *a, uint64_t *done, uint64_t target, uint32_t timeout_ms);


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
         * than the next sequence to be claimed now) are archived, in as many passes as needed.
         * So does a clean close, which detached every writer and sealed their chunks before it
         * set `stop`: nothing is claimed any more, and every sealed chunk is older than the next
         * sequence. One pass was not enough there: under the overwrite policy it takes at most
         * half of the chunks no writer owns, and close returned 0 with up to half the ring
         * sealed, never archived (found by an outside test, issue 42). */
        uint64_t before = requested || stopping ? atomic_load(&b->ring->next_sequence) : 0;
        size_t left = 0;
        int rc = lb_ar_archive_sealed(a, before, &left);
        while (!rc && left) rc = lb_ar_archive_sealed(a, before, &left);
        if (atomic_exchange(&a->retention_due, 0)) lb_ar_enforce_retention(a);
        if (!rc && rolls > a->roll_done) rc = lb_ar_roll_current(a);
        if (!rc && syncs > a->sync_done) rc = lb_ar_sync_current(a);
        if (requested) complete_requests(a, rolls, syncs, rc);
        if (!rc && a->o.roll_interval_ms && a->cur.fd >= 0 && a->cur.summary.chunks > 0 &&
            now_ns(a) - a->cur.created_wall_ns >= (int64_t)a->o.roll_interval_ms * 1000000)
            rc = lb_ar_roll_current(a);
        if (stopping) {
            /* A clean close completes the file being written (END, fsync, rename, on_roll), so
             * that an uploader gets every record of a process that ended cleanly. */
            int complete_rc = lb_ar_complete_current(a, 1);
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
        lb_ar_stop_compression(a);
        lb_ar_enforce_retention(a);
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
        int fd = lb_dir_open_private_mode(custom, "archive directory", 1, 0, LB_DIR_MODE(b));
        if (fd < 0) return fd;
        lb_bundle_set_mode(b, fd, 1);
        int rc = link_custom_directory(b, custom);
        if (rc) {
            close(fd);
            return rc;
        }
        return fd;
    }
    if (mkdirat(b->dir_fd, "archive", (mode_t)LB_DIR_MODE(b)) != 0 && errno != EEXIST) {
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
    if (!rc) rc = lb_bundle_set_mode(b, fd, 1);
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

    rc = lb_ar_recover_directory(a);
    if (rc == -ENOMEM) goto fail;
    /* Records a crashed run left in the ring go to the archive before new ones are logged. A
     * failure here (a full disk) is not fatal: the thread keeps retrying, and stats report it. */
    size_t left;
    (void)lb_ar_archive_sealed(a, 0, &left);
    if (a->compressor) {
        if (pthread_create(&a->compress_thread, NULL, lb_ar_compress_main, a) != 0) {
            rc = -EAGAIN;
            goto fail;
        }
        a->compress_started = 1;
        lb_ar_compression_priority(a, 0);
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
    if (a->compress_started) lb_ar_stop_compression(a);
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
    if (!rc) lb_ar_wait_compressed(a);
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
