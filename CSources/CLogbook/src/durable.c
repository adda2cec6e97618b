/* durable.c — power-loss durability: lb_bundle_sync, the interval syncer, and the `durable` file
 * that records what the last sync made durable (layout: logbook_format.h, lb_durable_head).
 *
 * A kill -9 loses nothing committed: the ring is a shared file mapping and the kernel keeps its
 * pages. A power loss or kernel crash is different: each page of each file can come from any
 * moment since it was last synced. A sync snapshots every chunk the ring holds, then syncs meta,
 * the archive file being written and the ring, and only then writes the snapshot: what the
 * snapshot lists is on disk, and readers hold verify to it. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static size_t copy_size(uint32_t chunk_count) {
    size_t bytes = sizeof(lb_durable_head) + (size_t)chunk_count * sizeof(lb_durable_entry);
    return (bytes + LB_PAGE_SIZE - 1) & ~(size_t)(LB_PAGE_SIZE - 1);
}

static uint32_t head_crc(const lb_durable_head *h) {
    return lb_crc32c(0, h, __builtin_offsetof(lb_durable_head, head_crc));
}

/* Every chunk the ring holds now: its records through `committed` were committed before the
 * snapshot. record_count is read before committed (the writer stores them in the other order),
 * and the sequence before and after, so that a slot reused meanwhile is left out. */
static uint32_t snapshot(lb_bundle *b, lb_durable_entry *out) {
    uint32_t n = 0;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
        if (state < LB_CHUNK_ACTIVE || state > LB_CHUNK_ARCHIVING) continue;
        uint64_t sequence = atomic_load_explicit((_Atomic uint64_t *)(void *)&h->sequence,
                                                 memory_order_acquire);
        uint64_t claim = h->claim;
        uint32_t records = atomic_load_explicit(&h->record_count, memory_order_acquire);
        uint32_t committed = atomic_load_explicit(&h->committed, memory_order_acquire);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&h->state, memory_order_relaxed) < LB_CHUNK_ACTIVE ||
            atomic_load_explicit((_Atomic uint64_t *)(void *)&h->sequence, memory_order_relaxed) != sequence)
            continue;
        if (committed <= LB_CHUNK_HEADER_SIZE || committed > b->chunk_size) continue;
        out[n++] = (lb_durable_entry){sequence, claim, committed, records};
    }
    return n;
}

static int compare_entries(const void *x, const void *y) {
    const lb_durable_entry *a = x, *b = y;
    return (a->sequence > b->sequence) - (a->sequence < b->sequence);
}

static int open_durable_file(lb_bundle *b) {
    if (b->durable_fd >= 0) return 0;
    int fd = lb_file_open_at(b->dir_fd, "durable", O_RDWR | O_CREAT, b->path);
    if (fd < 0) return fd;
    /* Go on from the generation an earlier session reached: readers take the higher one. */
    lb_durable_entry *entries = NULL;
    size_t count = 0;
    uint64_t generation = 0, claimed;
    lb_durable_read(fd, b->ring->created_wall_ns, b->chunk_count, &entries, &count, &generation,
                    &claimed);
    free(entries);
    b->durable_generation = generation;
    b->durable_fd = fd;
    return 0;
}

/* Writes the snapshot into the older copy and makes it durable. */
static int write_table(lb_bundle *b, const lb_durable_entry *entries, uint32_t count, int64_t wall,
                       uint64_t claimed) {
    size_t size = copy_size(b->chunk_count);
    uint8_t *copy = calloc(1, size);
    if (!copy) return -ENOMEM;
    lb_durable_head *h = (lb_durable_head *)(void *)copy;
    memcpy(h->magic, LB_DURABLE_MAGIC, 8);
    h->format_version = LB_FORMAT_VERSION;
    h->chunk_count = b->chunk_count;
    h->ring_created_wall_ns = b->ring->created_wall_ns;
    h->generation = b->durable_generation + 1;
    h->sync_wall_ns = wall;
    h->chunks_claimed = claimed;
    h->entry_count = count;
    memcpy(copy + sizeof *h, entries, (size_t)count * sizeof *entries);
    h->entries_crc = lb_crc32c(0, entries, (size_t)count * sizeof *entries);
    h->head_crc = head_crc(h);
    off_t at = (off_t)((h->generation % 2) * size);
    ssize_t n = lb_pwrite_full(b->durable_fd, copy, size, at);
    free(copy);
    if (n < 0) return (int)n;
    if (fdatasync(b->durable_fd) != 0) return -errno;
    b->durable_generation++;
    return 0;
}

/* One sync; the caller holds sync_lock. */
static int sync_locked(lb_bundle *b) {
    atomic_store(&b->durability_wanted, 1);
    int rc = open_durable_file(b);
    if (rc) return rc;
    int64_t wall = lb_wall_now_ns();
    uint64_t claimed = atomic_load(&b->ring->chunks_claimed);
    uint32_t count = snapshot(b, b->durable_entries);
    /* Nothing changed since the last sync (an idle program): no write at all. */
    if (b->durable_generation > 0 && count == b->durable_previous_count &&
        memcmp(b->durable_entries, b->durable_previous, (size_t)count * sizeof(lb_durable_entry)) == 0)
        return 0;
    /* Sites and loggers reach meta before a record names them; archived chunks left the ring. */
    if (fdatasync(b->meta_fd) != 0) return -errno;
    if (b->archiver_datasync && b->archiver) {
        rc = b->archiver_datasync(b->archiver);
        if (rc) return rc;
    }
    if (msync(b->ring, b->map_length, MS_SYNC) != 0) return -errno;
    rc = write_table(b, b->durable_entries, count, wall, claimed);
    if (rc) return rc;
    memcpy(b->durable_previous, b->durable_entries, (size_t)count * sizeof(lb_durable_entry));
    b->durable_previous_count = count;
    return 0;
}

int lb_bundle_sync(lb_bundle *b) {
    if (!b) return -EINVAL;
    if (b->forked) return -EBADF;
    pthread_mutex_lock(&b->sync_lock);
    int rc = atomic_load(&b->closed) ? -EBADF : sync_locked(b);
    pthread_mutex_unlock(&b->sync_lock);
    return rc;
}

static void *syncer_main(void *arg) {
    lb_bundle *b = arg;
    uint32_t period_ms = b->sync_interval_ms;
    int reported = 0;
    pthread_mutex_lock(&b->syncer_lock);
    while (!b->syncer_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += period_ms / 1000;
        until.tv_nsec += (long)(period_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&b->syncer_wake, &b->syncer_lock, &until);
        if (b->syncer_stop) break;
        pthread_mutex_unlock(&b->syncer_lock);
        pthread_mutex_lock(&b->sync_lock);
        int rc = atomic_load(&b->closed) ? 0 : sync_locked(b);
        pthread_mutex_unlock(&b->sync_lock);
        if (rc && !reported) {
            /* Said once; the next interval tries again (a full disk may free up). */
            fprintf(stderr, "logbook: the interval sync of %s failed (%s): records are not made "
                            "durable until a sync succeeds\n", b->path, strerror(-rc));
            reported = 1;
        } else if (!rc) {
            reported = 0;
        }
        pthread_mutex_lock(&b->syncer_lock);
    }
    pthread_mutex_unlock(&b->syncer_lock);
    return NULL;
}

void lb_durable_init(lb_bundle *b) {
    b->durable_fd = -1;
    pthread_mutex_init(&b->sync_lock, NULL);
    pthread_mutex_init(&b->syncer_lock, NULL);
    pthread_cond_init(&b->syncer_wake, NULL);
}

int lb_durable_start(lb_bundle *b, const lb_options *options) {
    b->durable_entries = calloc(b->chunk_count, sizeof(lb_durable_entry));
    b->durable_previous = calloc(b->chunk_count, sizeof(lb_durable_entry));
    if (!b->durable_entries || !b->durable_previous) return -ENOMEM;
    b->sync_interval_ms = options->sync_interval_ms;
    if (!b->sync_interval_ms) return 0;
    atomic_store(&b->durability_wanted, 1);
    int rc = open_durable_file(b);
    if (rc) return rc;
    rc = pthread_create(&b->syncer, NULL, syncer_main, b);
    if (rc) return -rc;
    b->syncer_running = 1;
    return 0;
}

void lb_durable_stop(lb_bundle *b) {
    if (!b->syncer_running) return;
    pthread_mutex_lock(&b->syncer_lock);
    b->syncer_stop = 1;
    pthread_cond_signal(&b->syncer_wake);
    pthread_mutex_unlock(&b->syncer_lock);
    pthread_join(b->syncer, NULL);
    b->syncer_running = 0;
}

int lb_durable_final(lb_bundle *b) {
    if (!atomic_load(&b->durability_wanted) || !b->durable_entries) return 0;
    pthread_mutex_lock(&b->sync_lock);
    int rc = sync_locked(b);
    pthread_mutex_unlock(&b->sync_lock);
    return rc;
}

void lb_durable_free(lb_bundle *b) {
    if (b->durable_fd >= 0) close(b->durable_fd);
    b->durable_fd = -1;
    free(b->durable_entries);
    free(b->durable_previous);
    b->durable_entries = b->durable_previous = NULL;
    pthread_mutex_destroy(&b->sync_lock);
    pthread_mutex_destroy(&b->syncer_lock);
    pthread_cond_destroy(&b->syncer_wake);
}

/* ---- reading ---- */

static int read_copy(int fd, size_t size, uint64_t at, uint64_t ring_created, uint32_t chunk_count,
                     uint8_t *buffer, lb_durable_head *out) {
    ssize_t n = lb_pread_full(fd, buffer, size, at);
    if (n < (ssize_t)sizeof(lb_durable_head)) return 0;
    lb_durable_head h;
    memcpy(&h, buffer, sizeof h);
    if (memcmp(h.magic, LB_DURABLE_MAGIC, 8) != 0 || h.head_crc != head_crc(&h) ||
        h.format_version != LB_FORMAT_VERSION || h.chunk_count != chunk_count ||
        h.ring_created_wall_ns != ring_created || h.entry_count > chunk_count || h.generation == 0 ||
        sizeof h + (size_t)h.entry_count * sizeof(lb_durable_entry) > (size_t)n ||
        h.entries_crc != lb_crc32c(0, buffer + sizeof h, (size_t)h.entry_count * sizeof(lb_durable_entry)))
        return 0;
    *out = h;
    return 1;
}

int lb_durable_read(int fd, uint64_t ring_created_wall_ns, uint32_t chunk_count,
                    lb_durable_entry **entries, size_t *count, uint64_t *generation,
                    uint64_t *chunks_claimed) {
    *entries = NULL;
    *count = 0;
    *generation = 0;
    *chunks_claimed = 0;
    if (chunk_count == 0 || chunk_count > LB_CHUNK_COUNT_MAX) return 0;
    size_t size = copy_size(chunk_count);
    uint8_t *buffers[2] = {malloc(size), malloc(size)};
    lb_durable_head heads[2];
    int valid[2] = {0, 0};
    if (!buffers[0] || !buffers[1]) {
        free(buffers[0]);
        free(buffers[1]);
        return -ENOMEM;
    }
    for (int k = 0; k < 2; k++)
        valid[k] = read_copy(fd, size, (uint64_t)k * size, ring_created_wall_ns, chunk_count,
                             buffers[k], &heads[k]);
    int pick = valid[0] && valid[1] ? (heads[1].generation > heads[0].generation) : valid[1] ? 1 : 0;
    if (valid[pick]) {
        size_t n = heads[pick].entry_count;
        *entries = malloc(n ? n * sizeof(lb_durable_entry) : 1);
        if (*entries) {
            memcpy(*entries, buffers[pick] + sizeof(lb_durable_head), n * sizeof(lb_durable_entry));
            qsort(*entries, n, sizeof(lb_durable_entry), compare_entries);
            *count = n;
            *generation = heads[pick].generation;
            *chunks_claimed = heads[pick].chunks_claimed;
        }
    }
    free(buffers[0]);
    free(buffers[1]);
    return 0;
}
