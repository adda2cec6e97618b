/* cache_append.c — appending messages (group commit for power durability), evicting the oldest
 * by count, age or space, syncing, removing what was delivered, statistics, close. */
#define _GNU_SOURCE
#include "cache_internal.h"

/* Removes the frame at the head (with c->lock held): its counters and the published head. A
 * damaged head moves on by 8 bytes (the next frame is searched as the reader does); a message's
 * sequence is believed only when its body passes its checksum, and the messages a damaged frame
 * head hid are known from the gap in sequences after it (they are contiguous) and counted in
 * damage_found. (Gaps alone prove nothing: a rebuild keeps only the intact messages.) */
static void evict_one(lb_cache *c, _Atomic uint64_t *reason) {
    lb_cache_header *h = c->h;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t offset = head % c->region_size, left = c->region_size - offset;
    if (left < FRAME_HEAD) {
        atomic_store_explicit(&h->head, head + left, memory_order_release);
        return;
    }
    lb_archive_frame_head f;
    memcpy(&f, c->region + offset, sizeof f);
    uint64_t next, first = atomic_load_explicit(&h->head_sequence, memory_order_relaxed);
    if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) {
        next = head + 8;
        c->stepping_over_damage = 1;
    } else if (f.kind == LB_CACHE_FRAME_WRAP) {
        next = head + left;
    } else {
        const uint8_t *body = c->region + offset + FRAME_HEAD;
        next = head + FRAME_HEAD + round8(f.length);
        uint64_t sequence = first, stored = 0;
        if (f.length >= MESSAGE_PREFIX) memcpy(&stored, body, 8);
        /* The expected sequence under an intact head is believed without its checksum (the common
         * case, on every append of a full cache); anything else must pass it. */
        int intact = f.length >= MESSAGE_PREFIX && (stored == first || lb_crc32c(0, body, f.length) == f.body_crc);
        if (intact) sequence = stored;
        if (intact && sequence < first) { /* stale: left from before a wrap, behind damage */
            atomic_store_explicit(&h->head, next, memory_order_release);
            return;
        }
        /* head first, the counters, head_sequence last (each store after the one before, also
         * for the compiler): a kill in between leaves the head frame at head_sequence + 1, which
         * the next open recognises and recounts (docs/FORMAT.md, "Cache"). */
        atomic_store_explicit(&h->head, next, memory_order_release);
        atomic_thread_fence(memory_order_release);
        if (c->stepping_over_damage && sequence > first) { /* the damaged heads hid these */
            subtract(&h->messages, sequence - first);
            add(&h->damage_found, sequence - first);
        }
        c->stepping_over_damage = 0;
        subtract(&h->messages, 1);
        subtract(&h->message_bytes, f.length >= MESSAGE_PREFIX ? f.length - MESSAGE_PREFIX : 0);
        if (!intact) add(&h->damage_found, 1);
        else if (reason) add(reason, 1);
        /* emptied: the next message is the first kept (the sequence may jump there: a rebuild's
         * sequence_floor, or a number a kill left unused) */
        uint64_t following = atomic_load_explicit(&h->next_sequence, memory_order_relaxed);
        if (next != atomic_load_explicit(&h->tail, memory_order_relaxed) || following < sequence + 1) following = sequence + 1;
        atomic_store_explicit(&h->head_sequence, following, memory_order_release);
        return;
    }
    atomic_store_explicit(&h->head, next, memory_order_release);
}

/* The frame at the head, if it is a message: its sequence and time. */
static int head_message(lb_cache *c, uint64_t *sequence, int64_t *wall_ns) {
    lb_cache_header *h = c->h;
    for (;;) {
        uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
        if (head >= tail) return 0;
        uint64_t offset = head % c->region_size, left = c->region_size - offset;
        lb_archive_frame_head f;
        if (left >= FRAME_HEAD) memcpy(&f, c->region + offset, sizeof f);
        if (left < FRAME_HEAD || !frame_head_valid(&f) || f.kind == LB_CACHE_FRAME_WRAP) {
            evict_one(c, NULL); /* padding, a wrap, or damage: nothing to count */
            continue;
        }
        const uint8_t *body = c->region + offset + FRAME_HEAD;
        if (f.length < MESSAGE_PREFIX || lb_crc32c(0, body, f.length) != f.body_crc) {
            evict_one(c, NULL); /* damaged: counted there */
            continue;
        }
        memcpy(sequence, body, 8);
        memcpy(wall_ns, body + 8, 8);
        if (*sequence < atomic_load_explicit(&h->head_sequence, memory_order_relaxed)) {
            evict_one(c, NULL); /* stale, behind damage */
            continue;
        }
        return 1;
    }
}

static void apply_limits(lb_cache *c, int64_t now) {
    uint64_t sequence;
    int64_t wall;
    while (c->o.maximum_count && atomic_load_explicit(&c->h->messages, memory_order_relaxed) >= c->o.maximum_count &&
           head_message(c, &sequence, &wall))
        evict_one(c, &c->h->evicted_count);
    /* unsigned: a limit past INT64_MAX is no limit, and a clock set back makes nothing old */
    while (c->o.maximum_age_ns && head_message(c, &sequence, &wall) && now > wall &&
           (uint64_t)now - (uint64_t)wall > c->o.maximum_age_ns)
        evict_one(c, &c->h->evicted_age);
}

static int64_t monotonic_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Makes the region and header durable up to at least `target` (c->lock held; released while
 * syncing). Group commit: one caller syncs for all, the others wait for it. A thread whose append
 * a sync covered comes back only after that sync, so a leader that synced at once would catch
 * about half of the appenders; instead, when the last sync covered a group, the leader first
 * lets as many appends arrive (waiting at most half the last sync's time), as databases do with a
 * commit delay. Alone, an appender never waits. */
static int sync_through(lb_cache *c, uint64_t target) {
    while (atomic_load(&c->h->durable_tail) < target) {
        if (c->syncing) {
            pthread_cond_wait(&c->synced, &c->lock);
            continue;
        }
        c->syncing = 1;
        if (c->last_group > 1) {
            uint64_t start = atomic_load_explicit(&c->h->next_sequence, memory_order_relaxed);
            int64_t begin = monotonic_now(), budget = c->last_sync_ns / 2 < 200000 ? c->last_sync_ns / 2 : 200000;
            pthread_mutex_unlock(&c->lock);
            while (atomic_load_explicit(&c->h->next_sequence, memory_order_relaxed) - start < c->last_group - 1 &&
                   monotonic_now() - begin < budget)
                sched_yield();
            pthread_mutex_lock(&c->lock);
        }
        uint64_t upto = atomic_load(&c->h->tail), group_end = atomic_load(&c->h->next_sequence);
        pthread_mutex_unlock(&c->lock);
        int64_t begin = monotonic_now();
        int rc = msync(c->map, c->map_size, MS_SYNC) == 0 ? 0 : -errno;
        int64_t took = monotonic_now() - begin;
        pthread_mutex_lock(&c->lock);
        c->syncing = 0;
        c->last_sync_ns = took;
        c->last_group = group_end - c->group_start;
        c->group_start = group_end;
        if (rc == 0 && upto > atomic_load(&c->h->durable_tail)) atomic_store(&c->h->durable_tail, upto);
        pthread_cond_broadcast(&c->synced);
        if (rc) return rc;
    }
    return 0;
}

int lb_cache_append(lb_cache *c, const void *bytes, size_t length, uint64_t *sequence_out) {
    if (!c || (!bytes && length)) return -EINVAL;
    if (c->forked) return -EBADF; /* a child of the writer: docs above */
    uint64_t need = frame_size(length);
    if (length > UINT32_MAX - MESSAGE_PREFIX || need > c->region_size) return -EMSGSIZE;
    int64_t now = wall_now();
    pthread_mutex_lock(&c->lock);
    lb_cache_header *h = c->h;
    atomic_store_explicit(&h->appending, 1, memory_order_relaxed); /* before any eviction's release store */
    apply_limits(c, now);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    uint64_t offset = tail % c->region_size, left = c->region_size - offset;
    uint64_t skip = need > left ? left : 0;
    for (;;) {
        uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
        if (c->region_size - (tail - head) >= skip + need) break;
        if (head == tail) { /* empty but the frame would straddle the end: start at the region's start */
            atomic_store_explicit(&h->head, tail + skip, memory_order_release);
            atomic_store_explicit(&h->tail, tail + skip, memory_order_release);
            tail += skip;
            skip = 0;
            continue;
        }
        if (!c->o.overwrite) {
            atomic_store_explicit(&h->appending, 0, memory_order_release);
            pthread_mutex_unlock(&c->lock);
            return -ENOSPC;
        }
        evict_one(c, &h->evicted_overwrite);
    }
    /* The head moved past what this append overwrites before a byte of it is written: a reader
     * that copied a frame and then found the head no further knows its copy is the frame. */
    atomic_thread_fence(memory_order_release);
    if (skip >= FRAME_HEAD) {
        lb_archive_frame_head wrap;
        frame_head_fill(&wrap, (uint32_t)(skip - FRAME_HEAD), LB_CACHE_FRAME_WRAP, 0);
        memcpy(c->region + offset, &wrap, sizeof wrap);
    }
    uint64_t at = (tail + skip) % c->region_size;
    uint64_t sequence = atomic_load_explicit(&h->next_sequence, memory_order_relaxed);
    uint8_t *frame = c->region + at;
    memcpy(frame + FRAME_HEAD, &sequence, 8);
    memcpy(frame + FRAME_HEAD + 8, &now, 8);
    if (length) memcpy(frame + FRAME_HEAD + MESSAGE_PREFIX, bytes, length);
    uint64_t body = MESSAGE_PREFIX + length;
    memset(frame + FRAME_HEAD + body, 0, round8(body) - body);
    lb_archive_frame_head head;
    frame_head_fill(&head, (uint32_t)body, LB_CACHE_FRAME_MESSAGE, lb_crc32c(0, frame + FRAME_HEAD, body));
    memcpy(frame, &head, sizeof head);
    uint64_t kept_from = atomic_load_explicit(&h->head, memory_order_relaxed);
    if (kept_from == tail || kept_from == tail + skip) /* empty (a WRAP frame first): by position, not by a counter */
        atomic_store_explicit(&h->head_sequence, sequence, memory_order_relaxed);
    atomic_store_explicit(&h->next_sequence, sequence + 1, memory_order_relaxed);
    add(&h->messages, 1);
    add(&h->message_bytes, length);
    uint64_t end = tail + skip + need;
    atomic_store_explicit(&h->last_frame, tail + skip, memory_order_release); /* after the counters */
    atomic_store_explicit(&h->tail, end, memory_order_release); /* published */
    atomic_store_explicit(&h->appending, 0, memory_order_release);
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER ? sync_through(c, end) : 0;
    pthread_mutex_unlock(&c->lock);
    if (rc == 0 && sequence_out) *sequence_out = sequence;
    return rc;
}

int lb_cache_sync(lb_cache *c) {
    if (!c) return -EINVAL;
    if (c->forked) return -EBADF;
    pthread_mutex_lock(&c->lock);
    int rc = sync_through(c, atomic_load(&c->h->tail));
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int lb_cache_remove_through(lb_cache *c, uint64_t through) {
    if (!c) return -EINVAL;
    if (c->forked) return -EBADF;
    pthread_mutex_lock(&c->lock);
    uint64_t sequence;
    int64_t wall;
    while (head_message(c, &sequence, &wall) && sequence <= through) evict_one(c, &c->h->removed);
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER ? sync_through(c, atomic_load(&c->h->tail)) : 0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int lb_cache_stats_get(lb_cache *c, lb_cache_stats *out) {
    if (!c || !out) return -EINVAL;
    const lb_cache_header *h = c->h;
    out->messages = atomic_load(&h->messages);
    out->message_bytes = atomic_load(&h->message_bytes);
    out->head_sequence = atomic_load(&h->head_sequence);
    out->next_sequence = atomic_load(&h->next_sequence);
    out->evicted_overwrite = atomic_load(&h->evicted_overwrite);
    out->evicted_count = atomic_load(&h->evicted_count);
    out->evicted_age = atomic_load(&h->evicted_age);
    out->removed = atomic_load(&h->removed);
    out->region_size = c->region_size;
    out->used_bytes = atomic_load(&h->tail) - atomic_load(&h->head);
    out->rebuilds = atomic_load(&h->rebuilds);
    out->damage_found = atomic_load(&h->damage_found);
    return 0;
}

int lb_cache_close(lb_cache *c) {
    if (!c) return -EINVAL;
    lb_cc_unregister_open(c);
    int rc = !c->forked && c->o.durability == LB_CACHE_DURABLE_POWER && msync(c->map, c->map_size, MS_SYNC) != 0 ? -errno : 0;
    munmap(c->map, c->map_size);
    close(c->fd); /* releases the lock (in a forked child, the parent's descriptor keeps it) */
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->synced);
    free(c);
    return rc;
}
