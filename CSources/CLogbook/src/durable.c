/* durable.c — power-loss durability: lb_bundle_sync, the interval syncer, and the two files that
 * hold what a sync made durable (layouts: logbook_format.h, "durable" and "mirror").
 *
 * A kill -9 loses nothing committed: the ring is a shared file mapping and the kernel keeps its
 * pages. A power loss or kernel crash is different: each page of each file can come from any
 * moment since it was last synced. Syncing the ring itself (msync) would cost every logging
 * thread a page fault per page it writes next (writeback write-protects the pages it cleans:
 * +66 % at full speed, x3.9 at 1 M records/s, measured), so the ring is never synced. A sync
 * copies what each chunk committed since the last sync into `mirror` (the same layout as the
 * ring's chunks), fdatasyncs it, and only then writes the snapshot to `durable`. Readers and the
 * next writer take a chunk's durable prefix from the mirror when the ring's copy is torn. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
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
        uint64_t sequence = __atomic_load_n(&h->sequence, __ATOMIC_ACQUIRE);
        uint64_t claim = __atomic_load_n(&h->claim, __ATOMIC_RELAXED);
        uint32_t records = atomic_load_explicit(&h->record_count, memory_order_acquire);
        uint32_t committed = atomic_load_explicit(&h->committed, memory_order_acquire);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&h->state, memory_order_relaxed) < LB_CHUNK_ACTIVE ||
            __atomic_load_n(&h->sequence, __ATOMIC_RELAXED) != sequence)
            continue;
        if (committed <= LB_CHUNK_HEADER_SIZE || committed > b->chunk_size) continue;
        out[n++] = (lb_durable_entry){sequence, claim, committed, records};
    }
    return n;
}

static int compare_entries(const void *x, const void *y);

/* The ring's count of overwritten records, once every claim that was under way during the
 * snapshot has finished: a claim reusing a sealed chunk adds its records to the count only after
 * its slot showed *claiming*, and the snapshot passes such a slot over, so reading the count
 * before the claim finished would leave those records neither listed nor counted. A claim still
 * under way after a bounded wait (its thread descheduled) is counted with the records the last
 * snapshot listed for its slot: at most an over-count, never records unaccounted for. */
static uint64_t overwritten_after_claims(lb_bundle *b) {
    uint64_t extra = 0;
    /* A lossless claim takes only archived chunks: it counts nothing overwritten. */
    for (uint32_t slot = 0; b->wrap_policy != LB_WRAP_LOSSLESS && slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        if (atomic_load(&h->state) != LB_CHUNK_CLAIMING) continue;
        for (int spin = 0; spin < 10000 && atomic_load(&h->state) == LB_CHUNK_CLAIMING; spin++)
            sched_yield();
        if (atomic_load(&h->state) != LB_CHUNK_CLAIMING) continue;
        for (uint32_t i = 0; i < b->durable_previous_count; i++)
            if (b->durable_previous[i].sequence % b->chunk_count == slot)
                extra += b->durable_previous[i].records;
    }
    return atomic_load(&b->ring->records_overwritten) + extra;
}

static int compare_entries(const void *x, const void *y) {
    const lb_durable_entry *a = x, *b = y;
    return (a->sequence > b->sequence) - (a->sequence < b->sequence);
}

const lb_durable_entry *lb_durable_find(const lb_durable_entry *entries, size_t count,
                                        uint64_t sequence) {
    lb_durable_entry key = {sequence, 0, 0, 0};
    return count ? bsearch(&key, entries, count, sizeof key, compare_entries) : NULL;
}

/* The mirror's bytes are allocated for real: a sync never meets a full disk halfway. */
static int open_mirror_file(lb_bundle *b) {
    if (b->mirror_fd >= 0) return 0;
    int fd = lb_file_open_own_at(b->dir_fd, "mirror", O_RDWR | O_CREAT, b->path);
    if (fd < 0) return fd;
    lb_bundle_set_mode(b, fd, 0);  /* a reader that cannot read it reads the ring alone */
    off_t length = (off_t)b->chunk_count * b->chunk_size;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : 0;
    if (!err && st.st_size != length) {
        if (st.st_size > length && ftruncate(fd, length) != 0) err = errno;
        else if (!err) err = posix_fallocate(fd, 0, length);
    }
    if (err) {
        close(fd);
        lb_error_detail_set("'%s/mirror' cannot be allocated (%lld bytes): %s", b->path,
                            (long long)length, strerror(err));
        return -err;
    }
    b->mirror_fd = fd;
    return 0;
}

/* Both files, created if need be; the directory is synced once they exist, so that after a power
 * loss a `durable` that names chunks never comes back without the `mirror` that holds them. */
static int open_durable_file(lb_bundle *b) {
    if (b->durable_fd >= 0) return 0;
    int rc = open_mirror_file(b);
    if (rc) return rc;
    int fd = lb_file_open_own_at(b->dir_fd, "durable", O_RDWR | O_CREAT, b->path);
    if (fd < 0) return fd;
    lb_bundle_set_mode(b, fd, 0);
    if (fsync(b->dir_fd) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* Go on from the generation an earlier session reached: readers take the higher one. */
    lb_durable_entry *entries = NULL;
    size_t count = 0;
    uint64_t generation = 0, claimed, overwritten;
    lb_durable_read(fd, b->ring->created_wall_ns, b->chunk_count, &entries, &count, &generation,
                    &claimed, &overwritten);
    free(entries);
    b->durable_generation = generation;
    b->durable_fd = fd;
    return 0;
}

/* Copies what chunk `e` committed since the last sync into the mirror: its bytes from where the
 * mirror's copy of it ends (written straight from the ring: committed bytes never change while
 * the chunk is in its slot), then, once the slot is seen to hold it still, its header with the
 * snapshot's committed end and count. Returns 1 when mirrored; 0 when the slot was reused
 * meanwhile: the entry is left out of the snapshot and the slot's copy is rewritten whole next
 * time (bytes past the mirror's old end may be the new chunk's: the old snapshot, which lists the
 * old chunk at most to that end, still holds); -errno when a write failed. */
static int mirror_chunk(lb_bundle *b, const lb_durable_entry *e) {
    uint32_t slot = (uint32_t)(e->sequence % b->chunk_count);
    lb_chunk_header *h = lb_chunk_at(b, slot);
    uint32_t from = b->mirrored[slot].sequence == e->sequence ? b->mirrored[slot].end : 0;
    if (from >= e->committed) return 1;
    if (from < LB_CHUNK_HEADER_SIZE) from = LB_CHUNK_HEADER_SIZE;
    uint64_t at = (uint64_t)slot * b->chunk_size;
    /* A slot that changed hands since the last sync loses its old copy here: that chunk left the
     * ring for good (overwritten, or archived and synced first). */
    b->mirrored[slot].sequence = 0;
    int rc = lb_pwrite_full(b->mirror_fd, (const uint8_t *)h + from, e->committed - from, at + from);
    if (rc) return rc;
    /* The header through the file (the same page): a claimer may be rewriting it. */
    lb_chunk_header image;
    if (lb_pread_full(b->ring_fd, &image, sizeof image, LB_RING_HEADER_SIZE + at) != (ssize_t)sizeof image)
        return -EIO;
    atomic_thread_fence(memory_order_acquire);
    if (image.sequence != e->sequence || __atomic_load_n(&h->sequence, __ATOMIC_RELAXED) != e->sequence ||
        atomic_load_explicit(&h->state, memory_order_relaxed) < LB_CHUNK_ACTIVE)
        return 0;
    atomic_store_explicit(&image.committed, e->committed, memory_order_relaxed);
    atomic_store_explicit(&image.record_count, e->records, memory_order_relaxed);
    rc = lb_pwrite_full(b->mirror_fd, &image, sizeof image, at);
    if (rc) return rc;
    b->mirrored[slot].sequence = e->sequence;
    b->mirrored[slot].end = e->committed;
    return 1;
}

/* Writes the snapshot into the older copy and makes it durable. */
static int write_table(lb_bundle *b, const lb_durable_entry *entries, uint32_t count, int64_t wall,
                       uint64_t claimed, uint64_t overwritten) {
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
    h->records_overwritten = overwritten;
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
    uint64_t overwritten = overwritten_after_claims(b);
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
    uint32_t kept = 0;
    for (uint32_t i = 0; i < count; i++) {
        rc = mirror_chunk(b, &b->durable_entries[i]);
        if (rc < 0) return rc;
        if (rc) b->durable_entries[kept++] = b->durable_entries[i];
        /* Reused since the snapshot, after the count was read: its records are counted here
         * (under the overwrite policy they are gone; under lossless, archived: an over-count). */
        else overwritten += b->durable_entries[i].records;
    }
    if (fdatasync(b->mirror_fd) != 0) return -errno;
    rc = write_table(b, b->durable_entries, kept, wall, claimed, overwritten);
    if (rc) return rc;
    memcpy(b->durable_previous, b->durable_entries, (size_t)kept * sizeof(lb_durable_entry));
    b->durable_previous_count = kept;
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

/* The interval syncer's tick. A failure is said once; the next interval tries again (a full disk
 * may free up). */
static void sync_interval(void *bundle) {
    lb_bundle *b = bundle;
    pthread_mutex_lock(&b->sync_lock);
    int rc = atomic_load(&b->closed) ? 0 : sync_locked(b);
    pthread_mutex_unlock(&b->sync_lock);
    if (rc && !b->sync_failure_said)
        fprintf(stderr, "logbook: the interval sync of %s failed (%s): records are not made "
                        "durable until a sync succeeds\n", b->path, strerror(-rc));
    b->sync_failure_said = rc != 0;
}

void lb_durable_init(lb_bundle *b) {
    b->durable_fd = b->mirror_fd = -1;
    pthread_mutex_init(&b->sync_lock, NULL);
    lb_ticker_init(&b->syncer);
}

int lb_durable_start(lb_bundle *b, const lb_options *options) {
    b->durable_entries = calloc(b->chunk_count, sizeof(lb_durable_entry));
    b->durable_previous = calloc(b->chunk_count, sizeof(lb_durable_entry));
    b->mirrored = calloc(b->chunk_count, sizeof *b->mirrored);
    if (!b->durable_entries || !b->durable_previous || !b->mirrored) return -ENOMEM;
    b->sync_interval_ms = options->sync_interval_ms;
    if (!b->sync_interval_ms) return 0;
    atomic_store(&b->durability_wanted, 1);
    int rc = open_durable_file(b);
    if (rc) return rc;
    return lb_ticker_start(&b->syncer, b->sync_interval_ms, sync_interval, b);
}

void lb_durable_stop(lb_bundle *b) { lb_ticker_stop(&b->syncer); }

int lb_durable_final(lb_bundle *b) {
    if (!atomic_load(&b->durability_wanted) || !b->durable_entries) return 0;
    pthread_mutex_lock(&b->sync_lock);
    int rc = sync_locked(b);
    pthread_mutex_unlock(&b->sync_lock);
    return rc;
}

void lb_durable_free(lb_bundle *b) {
    if (b->durable_fd >= 0) close(b->durable_fd);
    if (b->mirror_fd >= 0) close(b->mirror_fd);
    b->durable_fd = b->mirror_fd = -1;
    free(b->durable_entries);
    free(b->durable_previous);
    free(b->mirrored);
    b->mirrored = NULL;
    b->durable_entries = b->durable_previous = NULL;
    pthread_mutex_destroy(&b->sync_lock);
    lb_ticker_destroy(&b->syncer);
}

/* ---- a chunk's durable prefix: checked, and restored into the ring ---- */

typedef struct prefix_walk {
    uint32_t end, records, altered;
} prefix_walk;

static int prefix_visit(void *context, const lb_walk_record *r) {
    prefix_walk *w = context;
    if (r->offset >= w->end) return 1;
    if (r->kind == LB_RECORD_FULL || r->kind == LB_RECORD_LAST) w->records++;
    if (r->altered) w->altered++;
    return 0;
}

int lb_durable_prefix_holds(const uint8_t *chunk, uint32_t length, uint32_t end, uint32_t records) {
    if (end < LB_CHUNK_HEADER_SIZE || end > length) return 0;
    prefix_walk w = {end, 0, 0};
    lb_walk_end how;
    uint32_t stop = lb_chunk_walk(chunk, length, LB_CHUNK_HEADER_SIZE, prefix_visit, &w, &how);
    return stop >= end && w.records >= records && w.altered == 0 &&
           (how == LB_WALK_END_CLEAN || stop >= end);
}

static void trim_torn_chunks(lb_bundle *b, const lb_durable_entry *entries, size_t count);

/* The next writer, before recovery: a chunk the last sync made durable whose copy in the ring does
 * not hold its durable records (its pages came back from different moments after a power loss)
 * is put back from the mirror, through its durable end; what followed it in the ring was not
 * durable and is dropped. A slot that holds a newer chunk is left alone: the durable one left the
 * ring before (overwritten, or archived and synced first). */
int lb_durable_restore(lb_bundle *b) {
    int durable = lb_file_open_at(b->dir_fd, "durable", O_RDONLY, NULL);
    if (durable < 0) return durable == -ENOENT ? 0 : durable;
    int mirror = lb_file_open_at(b->dir_fd, "mirror", O_RDONLY, NULL);
    lb_durable_entry *entries = NULL;
    size_t count = 0;
    uint64_t generation = 0, claimed, overwritten;
    int rc = mirror < 0 ? 0 : lb_durable_read(durable, b->ring->created_wall_ns, b->chunk_count,
                                              &entries, &count, &generation, &claimed, &overwritten);
    uint8_t *image = count ? malloc(b->chunk_size) : NULL;
    uint32_t restored = 0;
    for (size_t i = 0; image && i < count; i++) {
        const lb_durable_entry *e = &entries[i];
        if (e->committed < LB_CHUNK_HEADER_SIZE || e->committed > b->chunk_size) continue;
        uint32_t slot = (uint32_t)(e->sequence % b->chunk_count);
        lb_chunk_header *h = lb_chunk_at(b, slot);
        lb_ring_counters_cover(b, e->sequence, e->claim, 0);
        int check = lb_chunk_header_check(h, slot, b->chunk_count);
        /* A newer chunk in the slot: the durable one was reused legitimately. (A slot whose header
         * a claim had cleared is ambiguous after a power loss, its page from any moment: the
         * durable chunk is put back rather than lost.) */
        if (h->magic == LB_CHUNK_MAGIC && h->sequence > e->sequence) continue;
        if (check == 0 && h->sequence == e->sequence &&
            lb_durable_prefix_holds((const uint8_t *)h, b->chunk_size, e->committed, e->records))
            continue;
        if (lb_pread_full(mirror, image, e->committed, (uint64_t)slot * b->chunk_size) !=
                (ssize_t)e->committed ||
            lb_chunk_header_check((lb_chunk_header *)(void *)image, slot, b->chunk_count) < 0 ||
            ((lb_chunk_header *)(void *)image)->sequence != e->sequence ||
            !lb_durable_prefix_holds(image, e->committed, e->committed, e->records))
            continue;  /* no sound copy: verify reports the durable records missing */
        lb_ring_counters_cover(b, e->sequence, e->claim, ((lb_chunk_header *)(void *)image)->session);
        memcpy(h, image, e->committed);
        if (e->committed + 8 <= b->chunk_size) memset((uint8_t *)h + e->committed, 0, 8);
        /* Its header may be from a sync that was under way: the snapshot's end and count hold. */
        atomic_store(&h->committed, e->committed);
        atomic_store(&h->record_count, e->records);
        /* Sealed as the walk finds it (recover_chunks), archived again if need be. */
        atomic_store(&h->state, LB_CHUNK_ACTIVE);
        restored++;
    }
    if (restored)
        fprintf(stderr, "logbook: %s: %u chunks whose pages a crash tore were restored from the "
                        "last sync's copy (`mirror`)\n", b->path, restored);
    if (generation > 0) {
        b->durable_claimed_at_open = claimed;
        trim_torn_chunks(b, entries, count);
    }
    free(image);
    free(entries);
    if (mirror >= 0) close(mirror);
    close(durable);
    return rc;
}

/* ---- trimming torn chunks ---- */

typedef struct sound_walk {
    uint32_t end, records;
    int altered;
} sound_walk;

static int sound_visit(void *context, const lb_walk_record *r) {
    sound_walk *w = context;
    if (r->altered) {
        w->altered = 1;
        return 1;
    }
    if (r->kind == LB_RECORD_FULL || r->kind == LB_RECORD_LAST) w->records++;
    w->end = r->next;
    return 0;
}

/* The next writer of a bundle that syncs, after the restore: a sealed or active chunk whose walk
 * stops before its committed end, or meets a record that fails its page check, was torn by a power
 * loss in what no sync covered (the restore put back what one did). It is cut after its last sound
 * record, so that the archiver never copies the tear into a file that would fail verify for good. */
static void trim_torn_chunks(lb_bundle *b, const lb_durable_entry *entries, size_t count) {
    uint32_t trimmed = 0;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load(&h->state);
        if ((state != LB_CHUNK_SEALED && state != LB_CHUNK_ACTIVE) ||
            lb_chunk_header_check(h, slot, b->chunk_count) != 0)
            continue;
        sound_walk w = {LB_CHUNK_HEADER_SIZE, 0, 0};
        lb_walk_end how;
        uint32_t stop = lb_chunk_walk((const uint8_t *)h, b->chunk_size, LB_CHUNK_HEADER_SIZE,
                                      sound_visit, &w, &how);
        uint32_t committed = atomic_load(&h->committed);
        int torn = w.altered || how == LB_WALK_END_INVALID ||
                   (state == LB_CHUNK_SEALED && stop < committed);
        if (!torn) continue;
        /* Damage before what a sync made durable (the mirror could not put it back) is left as
         * it is, for verify to report: cutting it would lose durable records in silence. */
        const lb_durable_entry *listed = lb_durable_find(entries, count, h->sequence);
        if (listed && w.end < listed->committed) continue;
        if (w.end + 8 <= b->chunk_size) memset((uint8_t *)h + w.end, 0, 8);
        if (state == LB_CHUNK_SEALED) {
            atomic_store(&h->committed, w.end);
            atomic_store(&h->record_count, w.records);
        }
        trimmed++;
    }
    if (trimmed)
        fprintf(stderr, "logbook: %s: %u chunks torn by a crash past the last sync were cut after "
                        "their last sound record\n", b->path, trimmed);
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
    /* A copy whose CRC holds but whose entries could not have been written is not trusted. */
    const lb_durable_entry *e = (const lb_durable_entry *)(const void *)(buffer + sizeof h);
    for (uint32_t i = 0; i < h.entry_count; i++)
        if (e[i].sequence == 0 || e[i].committed < LB_CHUNK_HEADER_SIZE ||
            e[i].committed > LB_CHUNK_SIZE_MAX || (e[i].committed & 7u) ||
            (uint64_t)e[i].records * 9u > e[i].committed)
            return 0;
    *out = h;
    return 1;
}

int lb_durable_read(int fd, uint64_t ring_created_wall_ns, uint32_t chunk_count,
                    lb_durable_entry **entries, size_t *count, uint64_t *generation,
                    uint64_t *chunks_claimed, uint64_t *records_overwritten) {
    *entries = NULL;
    *count = 0;
    *generation = 0;
    *chunks_claimed = 0;
    *records_overwritten = 0;
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
            *records_overwritten = heads[pick].records_overwritten;
        }
    }
    free(buffers[0]);
    free(buffers[1]);
    return 0;
}
