/* writer.c — per-thread writers: their slow paths (chunk change, records larger than a chunk,
 * drops), thread exit, and the steal protocol that lets flush, close and the idle sealer seal a
 * chunk another thread owns without a per-record atomic read-modify-write.
 *
 * Steal protocol (an asymmetric Dekker handshake):
 *   owner, per record:  building = 1; signal fence; if (steal) slow path;  ... commit: building = 0
 *   stealer:            steal = 1; membarrier(); lock;
 *                       if (steal && !building) { seal the chunk; stolen = 1 }  (steal stays set)
 *                       else steal = 0 (the idle sealer) or stays 1 (flush, close); unlock
 *   owner, slow path:   lock; if (stolen) { forget the chunk; stolen = 0; steal = 0 }
 *                       else if (steal) seal its own chunk (seals++);  unlock
 * Flush and close must seal every record committed before they were called, also of a thread that
 * logs without pause (it is in the middle of its next record at almost every instant): their
 * request stays set, and they wait until the owner sealed its chunk at its next record, or the
 * chunk could be taken between two records (`seals` tells them the first happened).
 * membarrier() runs a full barrier on every thread of the process, so either the owner's
 * `building = 1` is visible to the stealer, or the owner's later load sees `steal == 1` and goes to
 * the slow path, where it waits for the stealer's lock. The stealer touches only the chunk (shared
 * memory, atomics) and cold fields under the lock: the writer's hot fields have one writer, the
 * owner. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Thread_local lb_bundle *lb_tls_bundle;
_Thread_local lb_writer *lb_tls_writer;

typedef struct lb_writer_cold {
    lb_bundle *bundle;             /* NULL once detached (bundle closed); under the registry lock */
    lb_bundle *counted_in;         /* where drops are counted: the bundle, also once it is shut
                                      down (its memory lives until lb_bundle_close) */
    uint32_t orphan_reason;        /* why an orphan writer drops (LB_DROP_CLOSED, or NO_CHUNK
                                      when no writer could be allocated) */
    lb_writer *next_in_bundle;     /* under the registry lock */
    lb_writer *next_in_thread;     /* owner thread only */
    pthread_mutex_t lock;          /* owner's slow path and stealers */
    /* 1 while the owner claims a chunk, holding `lock` and no chunk: a claim in a full lossless
     * ring waits (up to lossless_wait_ms) for the archiver. Threads that hold the registry lock
     * do not wait for `lock` then (lock_unless_claiming): the idle sealer did, so no other chunk was
     * sealed and no exiting thread could seal its own, and the archiver had nothing to free. Close
     * does wait (lock_writer): it woke the claim, which then ends at once. */
    _Atomic uint32_t claiming;
    uint64_t prev_sequence;        /* sequence of this writer's previous chunk */
    uint32_t thread_id;
    uint32_t stolen;               /* the chunk was sealed by another thread; under `lock` */
    uint64_t seals;                /* chunks the owner sealed (or forgot); under `lock` */
    /* Flush and close, under the registry lock: `seals` when they asked, and whether they still
     * wait for this writer. */
    uint64_t seals_asked;
    uint32_t seal_pending;
    uint32_t counting_locked;      /* lb_writers_count_records holds `lock`; under the registry lock */
    uint32_t drop_reason;          /* for LB_WRITER_DISCARD */
    uint8_t *resume;               /* chunk position to return to after a discarded record */
    uint8_t *staging;
    size_t staging_capacity;
    /* A nested record (logged while building one) is discarded; the outer one is restored. */
    uint32_t depth;
    uint8_t *saved_cur, *saved_end, *saved_record, *saved_resume;
    uint32_t saved_reason;
    uint32_t saved_mode;
    void *saved_capture;  /* the outer record's call-site capture, hidden from nested records */
    uint8_t scratch[256];
} lb_writer_cold;

#define COLD(w) ((lb_writer_cold *)(void *)(w)->cold)

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static _Thread_local lb_writer *thread_writers;  /* every writer this thread made */

static lb_bundle *open_bundles;  /* under the registry lock */

void lb_registry_lock(void) { pthread_mutex_lock(&registry); }
void lb_registry_unlock(void) { pthread_mutex_unlock(&registry); }

/* ---- fork: a child inherits the mapping, the parent's chunks (shared memory!), its meta offset
 * and its writer lock's file description. It must not write to, seal or unlock any of it: in the
 * child every inherited bundle is closed, its writers detached, and closing it only frees memory. */
static void fork_prepare(void) { pthread_mutex_lock(&registry); }
static void fork_parent(void) { pthread_mutex_unlock(&registry); }

static void fork_child(void) {
    /* Only this thread exists now; locks another thread held at fork time are re-made. */
    pthread_mutex_init(&registry, NULL);
    for (lb_bundle *b = open_bundles; b; b = b->next_open) {
        b->forked = 1;
        atomic_store(&b->closed, 1);
        atomic_store(&b->meta_closed, 1);
        pthread_mutex_init(&b->lock, NULL);
        pthread_mutex_init(&b->detach_lock, NULL);
        pthread_mutex_init(&b->sync_lock, NULL);
        lb_ticker_forked(&b->sealer);  /* its thread was not copied, nor the interval syncer's */
        lb_ticker_forked(&b->syncer);
        for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
            lb_writer_cold *c = COLD(w);
            pthread_mutex_init(&c->lock, NULL);
            c->bundle = NULL;
            atomic_store(&w->steal, 1);
        }
        b->writers = NULL;
    }
    lb_tls_bundle = NULL;
    lb_tls_writer = NULL;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_init(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void lb_registry_add_bundle(lb_bundle *b) {
    pthread_once(&fork_once, fork_init);
    lb_registry_lock();
    b->next_open = open_bundles;
    open_bundles = b;
    lb_registry_unlock();
}

void lb_registry_remove_bundle(lb_bundle *b) {
    lb_registry_lock();
    lb_bundle **link = &open_bundles;
    while (*link && *link != b) link = &(*link)->next_open;
    if (*link) *link = b->next_open;
    lb_registry_unlock();
}

/* ---- membarrier ---- */
static int membarrier_state;  /* 0 unknown, 1 private expedited, 2 global, -1 none */
static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;

static void membarrier_init(void) {
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        membarrier_state = 1;
    else if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL))
        membarrier_state = 2;
    else
        membarrier_state = -1;
}

int lb_membarrier(void) {
    pthread_once(&membarrier_once, membarrier_init);
    if (membarrier_state == 1) return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -errno;
    if (membarrier_state == 2) return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0 ? 0 : -errno;
    return -ENOSYS;
}

/* ---- chunk ownership (owner thread, or a stealer holding cold->lock while !building) ---- */

/* Where a record built in the owned chunk must end: the chunk's last 8 bytes are kept for the page
 * check of a record that ends there, so that a record that fits always fits with its check. */
static inline uint8_t *chunk_limit(const lb_writer *w) {
    return w->chunk_end ? w->chunk_end - LB_RECORD_CHECK_SIZE : NULL;
}
static void writer_drop_chunk(lb_writer *w) {
    w->chunk = NULL;
    w->cur = w->end = w->chunk_end = w->record = NULL;
}

/* Owner only (or the owner's thread exit), holding the writer's lock. */
static void writer_seal(lb_writer *w, lb_bundle *b) {
    lb_writer_cold *c = COLD(w);
    if (w->chunk && !c->stolen) lb_chunk_seal(b, w->chunk);
    c->seals++;
    c->stolen = 0;
    /* Once close began the request stays: a writer that sealed its chunk to go on with a record
     * begun before (a large one, moved to fresh chunks) must meet `closed` at its next record, not
     * log on in the new chunk on its fast path (found by adversarial review). */
    if (!atomic_load(&b->closed)) atomic_store_explicit(&w->steal, 0, memory_order_relaxed);
    writer_drop_chunk(w);
}

/* Why a failed claim drops the record: a lossless ring waiting for its archiver, the writer
 * detached by close, or every chunk owned by a writer. */
static unsigned claim_drop_reason(int rc) {
    return rc == -ENOBUFS ? LB_DROP_RING_FULL : rc == -EBADF ? LB_DROP_CLOSED : LB_DROP_NO_CHUNK;
}

/* Called with `lock` held. */
static int writer_claim(lb_writer *w, lb_bundle *b) {
    lb_writer_cold *c = COLD(w);
    if (w->chunk) writer_seal(w, b);
    lb_chunk_header *h;
    atomic_store(&c->claiming, 1);
    int rc = lb_chunk_claim(b, c->prev_sequence, c->thread_id, &h);
    if (rc) {
        atomic_store(&c->claiming, 0);
        return rc;
    }
    c->prev_sequence = h->sequence;
    w->chunk = h;
    w->chunk_end = (uint8_t *)h + b->chunk_size;
    w->cur = (uint8_t *)h + LB_CHUNK_HEADER_SIZE;
    w->end = chunk_limit(w);
    w->tag_bits = LB_RECORD_HEADER(0, h->sequence, 0);
    atomic_store(&c->claiming, 0);
    return 0;
}

/* Locks another thread's writer for a thread holding the registry lock: 1 when locked, 0 when its
 * owner is claiming a chunk (it holds none then, so there is nothing to seal or count), however
 * long that claim waits for the archiver. Any other holder of `lock` lets go within a few
 * instructions of its slow path. */
static int lock_unless_claiming(lb_writer_cold *c) {
    for (unsigned tries = 0;; tries++) {
        if (pthread_mutex_trylock(&c->lock) == 0) return 1;
        if (atomic_load(&c->claiming)) return 0;
        if (tries < 64) {
            sched_yield();
        } else {
            struct timespec pause = {0, 50000};
            nanosleep(&pause, NULL);
        }
    }
}

/* Close locks a writer also while its owner claims a chunk: the claim may succeed after `closed`
 * was set, and the record in progress is then committed in the new chunk, which close must take
 * (skipped, it stayed unsealed and its record uncounted). Close woke every claim waiting for the
 * archiver, and a claim sees `closed` before it waits again, so this wait is short. */
static int lock_writer(lb_writer_cold *c, int through_claims) {
    if (!through_claims) return lock_unless_claiming(c);
    pthread_mutex_lock(&c->lock);
    return 1;
}

/* ---- thread exit: seal and free this thread's writers ---- */
static void thread_exit(void *unused) {
    (void)unused;
    lb_registry_lock();
    lb_writer *w = thread_writers;
    while (w) {
        lb_writer_cold *c = COLD(w);
        lb_writer *next = c->next_in_thread;
        lb_bundle *b = c->bundle;
        if (b) {
            pthread_mutex_lock(&c->lock);
            writer_seal(w, b);
            pthread_mutex_unlock(&c->lock);
            lb_writer **link = &b->writers;
            while (*link && *link != w) link = &COLD(*link)->next_in_bundle;
            if (*link) *link = c->next_in_bundle;
        }
        pthread_mutex_destroy(&c->lock);
        free(c->staging);
        free(w);
        w = next;
    }
    thread_writers = NULL;
    lb_tls_bundle = NULL;
    lb_tls_writer = NULL;
    lb_registry_unlock();
}

static void thread_key_init(void) { pthread_key_create(&thread_key, thread_exit); }

/* A writer that belongs to no bundle and drops everything: returned when none can be made. */
static _Thread_local _Alignas(64) uint8_t orphan[sizeof(lb_writer) + sizeof(lb_writer_cold)];

static lb_writer *orphan_writer(lb_bundle *b, unsigned reason) {
    lb_writer *w = (lb_writer *)(void *)orphan;
    COLD(w)->bundle = NULL;
    COLD(w)->counted_in = b;
    COLD(w)->orphan_reason = reason;
    return w;
}

/* This thread's writer for bundle `b`, freeing on the way the writers whose bundles were closed
 * (detached: no bundle lists them any more). */
static lb_writer *find_thread_writer(lb_bundle *b) {
    lb_writer *found = NULL;
    lb_writer **link = &thread_writers;
    while (*link) {
        lb_writer *w = *link;
        lb_writer_cold *c = COLD(w);
        pthread_mutex_lock(&c->lock);
        lb_bundle *owner = c->bundle;
        pthread_mutex_unlock(&c->lock);
        if (!owner && !atomic_load(&w->building)) {
            *link = c->next_in_thread;
            if (lb_tls_writer == w) {
                lb_tls_writer = NULL;
                lb_tls_bundle = NULL;
            }
            pthread_mutex_destroy(&c->lock);
            free(c->staging);
            free(w);
            continue;
        }
        if (owner == b) found = w;
        link = &c->next_in_thread;
    }
    return found;
}

lb_writer *lb_writer_get_slow(lb_bundle *b) {
    pthread_once(&thread_key_once, thread_key_init);
    lb_writer *w = find_thread_writer(b);
    if (!w) {
        w = aligned_alloc(64, (sizeof(lb_writer) + sizeof(lb_writer_cold) + 63) & ~(size_t)63);
        if (!w) return orphan_writer(b, LB_DROP_NO_CHUNK);
        memset(w, 0, sizeof(lb_writer) + sizeof(lb_writer_cold));
        lb_writer_cold *c = COLD(w);
        pthread_mutex_init(&c->lock, NULL);
        c->thread_id = (uint32_t)syscall(SYS_gettid);
        lb_registry_lock();
        if (atomic_load(&b->closed)) {
            lb_registry_unlock();
            pthread_mutex_destroy(&c->lock);
            free(w);
            return orphan_writer(b, LB_DROP_CLOSED);
        }
        c->bundle = b;
        c->counted_in = b;
        c->orphan_reason = LB_DROP_CLOSED;
        c->next_in_bundle = b->writers;
        b->writers = w;
        c->next_in_thread = thread_writers;
        thread_writers = w;
        lb_registry_unlock();
        pthread_setspecific(thread_key, w);  /* any non-NULL value arms the exit destructor */
    }
    lb_tls_bundle = b;
    lb_tls_writer = w;
    return w;
}

/* ---- discarding: the record is dropped, puts land in scratch ---- */
static void writer_discard(lb_writer *w, unsigned reason) {
    lb_writer_cold *c = COLD(w);
    if (w->mode == LB_WRITER_DIRECT) c->resume = w->record;
    w->mode = LB_WRITER_DISCARD;
    c->drop_reason = reason;
    w->record = c->scratch;
    w->cur = c->scratch + LB_RECORD_FIXED_SIZE;
    w->end = c->scratch + sizeof c->scratch;
}

void lb_record_discard(lb_writer *w, unsigned reason) {
    if (w->mode == LB_WRITER_DISCARD) return;
    /* A call site refused because the bundle was closing: the record is dropped for that. */
    lb_bundle *counted_in = COLD(w)->counted_in;
    if (reason == LB_DROP_META && counted_in && atomic_load(&counted_in->meta_closed))
        reason = LB_DROP_CLOSED;
    writer_discard(w, reason);
}

void lb_record_begin_slow(lb_writer *w, uint16_t logger, uint8_t level, int nested) {
    lb_writer_cold *c = COLD(w);
    uint32_t depth = atomic_load_explicit(&w->building, memory_order_relaxed);
    if (nested) {
        /* Logged from inside the building of another record (e.g. from a value's description):
         * keep the outer record intact and drop this one. */
        if (depth == 1) {
            c->saved_cur = w->cur;
            c->saved_end = w->end;
            c->saved_record = w->record;
            c->saved_mode = w->mode;
            c->saved_reason = c->drop_reason;
            /* The outer call site's text is being captured (its first record): a nested call's
             * literals and arguments must not land in it. */
            c->saved_capture = w->capture;
            w->capture = NULL;
        }
        atomic_store_explicit(&w->building, depth + 1, memory_order_relaxed);
        c->depth = depth + 1;
        if (depth == 1) c->saved_resume = c->resume;
        w->mode = LB_WRITER_DISCARD;  /* keep `resume` of the outer record */
        writer_discard(w, LB_DROP_REENTRANT);
        return;
    }
    atomic_store_explicit(&w->building, 1, memory_order_relaxed);
    c->depth = 1;
    pthread_mutex_lock(&c->lock);  /* waits out a stealer that is taking our chunk */
    lb_bundle *b = c->bundle;
    if (c->stolen) {
        /* Another thread sealed our chunk while we were idle: forget it. A writer close detached
         * keeps `steal` set for good (found by review: cleared here, a thread that took its writer
         * before close and began a record after it went on with `steal` clear). */
        c->stolen = 0;
        if (b && !atomic_load(&b->closed)) atomic_store_explicit(&w->steal, 0, memory_order_relaxed);
        writer_drop_chunk(w);
    }
    if (b && w->chunk && atomic_load_explicit(&w->steal, memory_order_relaxed)) {
        /* Flush or close asked for our chunk while we were building the previous record: seal it
         * (it holds every record committed before they asked) and go on in a new one. */
        writer_seal(w, b);
    }
    if (!b || atomic_load(&b->closed)) {
        /* The chunk this thread still holds has committed records: seal it, so that they are
         * counted and archived (shutdown's stealer waits on our lock and then finds no chunk; the
         * archiver is stopped only after every writer was detached). Dropping it unsealed lost up to
         * a chunk of records logged while close() ran (found by adversarial review). */
        if (b) writer_seal(w, b);
        else writer_drop_chunk(w);
        pthread_mutex_unlock(&c->lock);
        w->mode = LB_WRITER_DIRECT;
        writer_discard(w, b ? LB_DROP_CLOSED : c->orphan_reason);
        return;
    }
    w->mode = LB_WRITER_DIRECT;
    if (!w->chunk || (size_t)(w->end - w->cur) < LB_RECORD_FIXED_SIZE) {
        int rc = writer_claim(w, b);
        if (rc != 0) {
            pthread_mutex_unlock(&c->lock);
            writer_discard(w, claim_drop_reason(rc));
            return;
        }
    }
    pthread_mutex_unlock(&c->lock);
    uint8_t *r = w->cur;
    uint64_t t = lb_clock_ticks();
    atomic_store_explicit(&w->last_ticks, t, memory_order_relaxed);
    memcpy(r + 8, &t, 8);
    uint32_t who = (uint32_t)logger | (uint32_t)level << 16;
    memcpy(r + 20, &who, 4);
    w->record = r;
    w->cur = r + LB_RECORD_FIXED_SIZE;
}

static uint8_t *scratch_reserve(lb_writer *w, size_t size) {
    lb_writer_cold *c = COLD(w);
    if (size > sizeof c->scratch) return NULL;
    w->cur = c->scratch + size;
    w->end = c->scratch + sizeof c->scratch;
    return c->scratch;
}

static int staging_grow(lb_writer_cold *c, size_t need) {
    if (need <= c->staging_capacity) return 0;
    size_t cap = c->staging_capacity ? c->staging_capacity : 4096;
    while (cap < need) cap *= 2;
    if (cap > (size_t)LB_RECORD_MAX_SIZE + 64) cap = (size_t)LB_RECORD_MAX_SIZE + 64;
    if (cap < need) return -EMSGSIZE;
    uint8_t *p = realloc(c->staging, cap);
    if (!p) return -ENOMEM;
    c->staging = p;
    c->staging_capacity = cap;
    return 0;
}

uint8_t *lb_record_reserve_slow(lb_writer *w, size_t size) {
    lb_writer_cold *c = COLD(w);
    if (w->mode == LB_WRITER_DISCARD) return scratch_reserve(w, size);
    size_t partial = (size_t)(w->cur - w->record);
    size_t total = partial + size;
    if (total > LB_RECORD_MAX_SIZE) {
        writer_discard(w, LB_DROP_TOO_LARGE);
        return scratch_reserve(w, size);
    }
    pthread_mutex_lock(&c->lock);
    lb_bundle *b = c->bundle;
    uint32_t chunk_size = b ? b->chunk_size : 0;
    pthread_mutex_unlock(&c->lock);
    if (w->mode == LB_WRITER_DIRECT && b && total + 8 <= chunk_size - LB_CHUNK_HEADER_SIZE) {
        /* Move the record begun here to a fresh chunk; the old slot keeps its zero header. The
         * bytes built so far are copied out BEFORE the claim: claiming seals the old chunk, and
         * from then on the archiver may persist it and another writer reuse it (or, under the
         * overwrite policy, reuse it at once) while this thread still waits for its new chunk. */
        int rc = staging_grow(c, partial);
        if (rc) {
            writer_discard(w, LB_DROP_NO_CHUNK);
            return scratch_reserve(w, size);
        }
        memcpy(c->staging, w->record, partial);
        pthread_mutex_lock(&c->lock);
        rc = c->bundle ? writer_claim(w, c->bundle) : -EBADF;
        pthread_mutex_unlock(&c->lock);
        if (rc) {
            /* The old chunk is sealed and gone: nothing of it is referenced again. */
            writer_discard(w, claim_drop_reason(rc));
            return scratch_reserve(w, size);
        }
        memcpy(w->cur, c->staging, partial);
        w->record = w->cur;
        w->cur = w->record + partial + size;
        return w->record + partial;
    }
    /* Larger than a chunk: build it in the staging buffer, write it as fragments at commit. */
    if (w->mode == LB_WRITER_DIRECT) {
        uint8_t *old = w->record;
        int rc = staging_grow(c, total);
        if (rc) {
            writer_discard(w, rc == -EMSGSIZE ? LB_DROP_TOO_LARGE : LB_DROP_NO_CHUNK);
            return scratch_reserve(w, size);
        }
        memcpy(c->staging, old, partial);
        c->resume = old;
        w->mode = LB_WRITER_STAGING;
    } else {
        int rc = staging_grow(c, total);
        if (rc) {
            writer_discard(w, rc == -EMSGSIZE ? LB_DROP_TOO_LARGE : LB_DROP_NO_CHUNK);
            return scratch_reserve(w, size);
        }
    }
    w->record = c->staging;
    w->end = c->staging + c->staging_capacity;
    w->cur = w->record + total;
    return w->record + partial;
}

static int drop_errno(unsigned reason) {
    switch (reason) {
    case LB_DROP_TOO_LARGE: return -EMSGSIZE;
    case LB_DROP_NO_CHUNK: return -ENOSPC;
    case LB_DROP_RING_FULL: return -ENOBUFS;
    case LB_DROP_REENTRANT: return -EDEADLK;
    case LB_DROP_CLOSED: return -EBADF;
    default: return -EIO;
    }
}

/* Commits the record (or fragment) of `length` bytes at `r` in the owned chunk, whose body is in
 * place: writes its page check when it crosses a page, zeroes the header slot after it, then
 * release-stores the header and the chunk's committed end and count. */
static uint8_t *chunk_publish(lb_writer *w, uint8_t *r, uint32_t length, uint8_t kind) {
    lb_chunk_header *h = w->chunk;
    uint64_t word = (uint64_t)length | w->tag_bits | ((uint64_t)kind << 24);
    uint8_t *next = r + ((length + 7u) & ~7u);
    uint32_t offset = (uint32_t)(r - (uint8_t *)h);
    if (lb_record_crosses_page(offset, length)) {
        uint32_t check[2] = {lb_record_page_check(h->sequence, word, r, length), (uint32_t)h->sequence};
        memcpy(next, check, 8);
        next += LB_RECORD_CHECK_SIZE;
    }
    if ((size_t)(w->chunk_end - next) >= 8) memset(next, 0, 8);
    atomic_store_explicit((_Atomic uint64_t *)(void *)r, word, memory_order_release);
    atomic_store_explicit(&h->committed, (uint32_t)(next - (uint8_t *)h), memory_order_release);
    if (kind == LB_RECORD_FULL || kind == LB_RECORD_LAST)
        atomic_store_explicit(&h->record_count,
                              atomic_load_explicit(&h->record_count, memory_order_relaxed) + 1,
                              memory_order_release);
    return next;
}

/* Appends one record (or fragment) to the owned chunk, which must have room for it and its page
 * check. */
static void chunk_append(lb_writer *w, const uint8_t *body, size_t body_length, uint8_t kind) {
    uint8_t *r = w->cur;
    memcpy(r + 8, body, body_length);
    w->cur = chunk_publish(w, r, (uint32_t)(8 + body_length), kind);
    if (w->cur > w->end) w->end = w->cur;  /* a page check in the last 8 bytes: the chunk is full */
}

/* lb_record_commit of a record that crosses a page: the same steps, with its page check. */
int lb_record_commit_crossing(lb_writer *w, uint32_t site) {
    uint8_t *r = w->record;
    memcpy(r + 16, &site, 4);
    w->cur = chunk_publish(w, r, (uint32_t)(w->cur - r), LB_RECORD_FULL);
    if (w->cur > w->end) w->end = w->cur;  /* a page check in the last 8 bytes: the chunk is full */
    atomic_store_explicit(&w->building, 0, memory_order_release);
    if (LB_UNLIKELY(atomic_load_explicit(&w->steal, memory_order_acquire) != 0))
        return lb_record_commit_late(w, r);
    return 0;
}

static int commit_staged(lb_writer *w, uint32_t site) {
    lb_writer_cold *c = COLD(w);
    size_t length = (size_t)(w->cur - w->record);
    memcpy(c->staging + 16, &site, 4);
    const uint8_t *body = c->staging + 8;
    size_t body_length = length - 8;
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    lb_bundle *b = c->bundle;
    /* Restore the chunk cursor the record started from. */
    w->record = NULL;
    w->end = chunk_limit(w);
    w->cur = w->chunk ? c->resume : NULL;
    w->mode = LB_WRITER_DIRECT;
    /* A record begun before close is kept while its writer is attached, as one built in its chunk
     * is: dropping it for `closed` left a gap in the thread's records, with its smaller records
     * after it kept. Close waits for it before it detaches the writer. */
    if (!b) {
        rc = -EBADF;
        lb_bundle_count_drop(c->counted_in, LB_DROP_CLOSED);
        goto done;
    }
    /* Record bytes in an empty chunk, less the page check a record there may need: a record up to
     * `capacity` bytes is whole in a fresh chunk; one that ends at the chunk's end needs no zeroed
     * header slot after it. (Deciding with `length + 8` here once wrote a record of a few bytes less
     * than that as a FIRST fragment with no LAST: the reader never finished it.) */
    size_t capacity = b->chunk_size - LB_CHUNK_HEADER_SIZE - LB_RECORD_CHECK_SIZE;
    int fragmented = length > capacity;
    if (fragmented) atomic_fetch_add_explicit(&b->ring->large_records, 1, memory_order_relaxed);
    uint8_t kind = fragmented ? LB_RECORD_FIRST : LB_RECORD_FULL;
    size_t done_bytes = 0;
    while (done_bytes < body_length) {
        /* Every piece starts in a fresh chunk: a FIRST fragment must end its chunk and the next
         * piece must open the writer's next chunk. */
        rc = writer_claim(w, b);
        if (rc) {
            lb_bundle_count_drop(b, claim_drop_reason(rc));
            goto done;
        }
        size_t room = capacity - 8;  /* record header of the piece */
        size_t piece = body_length - done_bytes;
        if (piece > room) piece = room;  /* a FIRST or MIDDLE fills its chunk to the end */
        if (fragmented && done_bytes > 0)
            kind = done_bytes + piece == body_length ? LB_RECORD_LAST : LB_RECORD_MIDDLE;
        chunk_append(w, body + done_bytes, piece, kind);
        done_bytes += piece;
    }
done:
    pthread_mutex_unlock(&c->lock);
    if (c->staging_capacity > (256u << 10)) {  /* do not keep a huge buffer per thread */
        free(c->staging);
        c->staging = NULL;
        c->staging_capacity = 0;
    }
    return rc;
}

static void count_drop(lb_writer *w, unsigned reason) {
    lb_writer_cold *c = COLD(w);
    pthread_mutex_lock(&c->lock);
    /* A writer detached by close (or an orphan) counts in the bundle it was asked to log to: its
     * memory, the ring header included, stays until lb_bundle_close frees it, and logging to a
     * bundle after that is the caller's error (logbook.h). */
    lb_bundle_count_drop(c->bundle ? c->bundle : c->counted_in, reason);
    pthread_mutex_unlock(&c->lock);
}

int lb_record_commit_late(lb_writer *w, const uint8_t *record) {
    lb_writer_cold *c = COLD(w);
    pthread_mutex_lock(&c->lock);
    lb_bundle *b = c->bundle ? NULL : c->counted_in;  /* detached by close, or just asked */
    pthread_mutex_unlock(&c->lock);
    if (!b) return 0;
    /* The record is lost when its header word landed in the memory that replaced the ring: then
     * it is where the file's records of its chunk end (counted `closed` by lb_bundle_counters).
     * Stored before the remap, it reached the file, which detach_ring read it back from. */
    int lost = 0;
    pthread_mutex_lock(&b->detach_lock);
    if (b->ring_detached) {
        for (uint32_t i = 0; i < b->abandoned_count; i++) {
            const lb_abandoned_chunk *a = &b->abandoned[i];
            if ((const uint8_t *)a->chunk + a->end == record) lost = 1;
        }
    }
    pthread_mutex_unlock(&b->detach_lock);
    return lost ? -EBADF : 0;
}

int lb_record_commit_slow(lb_writer *w, uint32_t site) {
    lb_writer_cold *c = COLD(w);
    uint32_t depth = atomic_load_explicit(&w->building, memory_order_relaxed);
    if (depth > 1) {
        /* End of a nested record: it was discarded; return to the outer one. */
        count_drop(w, LB_DROP_REENTRANT);
        if (depth == 2) {
            w->cur = c->saved_cur;
            w->end = c->saved_end;
            w->record = c->saved_record;
            w->mode = c->saved_mode;
            w->capture = c->saved_capture;
            c->resume = c->saved_resume;
            c->drop_reason = c->saved_reason;
        } else {
            w->record = c->scratch;
            w->cur = c->scratch + LB_RECORD_FIXED_SIZE;
            w->end = c->scratch + sizeof c->scratch;
        }
        c->depth = depth - 1;
        atomic_store_explicit(&w->building, depth - 1, memory_order_relaxed);
        return -EDEADLK;
    }
    int rc;
    if (w->mode == LB_WRITER_STAGING) {
        rc = commit_staged(w, site);
    } else {
        rc = drop_errno(c->drop_reason);
        count_drop(w, c->drop_reason);
        w->mode = LB_WRITER_DIRECT;
        if (w->chunk) {
            w->cur = c->resume;
            w->end = chunk_limit(w);
        } else {
            /* No chunk (its claim failed): `chunk` is NULL already and is written only under the
             * lock, which the idle sealer reads it under. */
            w->cur = w->end = w->chunk_end = w->record = NULL;
        }
    }
    c->depth = 0;
    atomic_store_explicit(&w->building, 0, memory_order_release);
    return rc;
}

/* ---- stealing: seal another thread's chunk ---- */

/* Returns 1 when the chunk was sealed (or there was none), 0 when the owner was busy. A busy
 * owner's request is withdrawn, unless `keep_request`: the owner then seals at its next record. */
static int steal_chunk(lb_writer *w, lb_bundle *b, int keep_request, int detaching) {
    lb_writer_cold *c = COLD(w);
    if (!lock_writer(c, detaching)) return 1;  /* it sealed its chunk before claiming */
    int done = c->stolen || !w->chunk;
    pthread_mutex_unlock(&c->lock);
    if (done) return 1;
    atomic_store(&w->steal, 1);
    int fenced = lb_membarrier() == 0;
    if (!lock_writer(c, detaching)) {
        /* It sealed its chunk on its own since (a claim seals first). */
        if (!keep_request) atomic_store(&w->steal, 0);
        return 1;
    }
    int taken = 0;
    /* `steal` is still set: the owner did not seal on its own meanwhile. Its writer_seal clears
     * `steal` under this lock; taking the chunk after that would leave the owner on its fast path
     * (steal == 0) writing into a sealed chunk, which the archiver persists and a writer reuses. */
    if (fenced && atomic_load(&w->steal) && !atomic_load(&w->building)) {
        if (w->chunk && !c->stolen) lb_chunk_seal(b, w->chunk);
        c->stolen = 1;  /* `steal` stays set: the owner forgets the chunk on its slow path */
        taken = 1;
    } else if (!keep_request) {
        atomic_store(&w->steal, 0);
    }
    pthread_mutex_unlock(&c->lock);
    return taken;
}

static int is_own(lb_writer *w) {
    for (lb_writer *t = thread_writers; t; t = COLD(t)->next_in_thread)
        if (t == w) return 1;
    return 0;
}

/* Whether flush (or close, `detaching`) is done with writer `w`: its chunk was taken now, or it
 * holds none; for flush also when the owner sealed the chunk it had when flush asked. */
static int seal_done(lb_writer *w, lb_bundle *b, int detaching) {
    if (steal_chunk(w, b, 1, detaching)) return 1;
    if (detaching) return 0;
    lb_writer_cold *c = COLD(w);
    if (!lock_unless_claiming(c)) return 1;  /* sealed before claiming */
    int sealed = c->seals != c->seals_asked;
    pthread_mutex_unlock(&c->lock);
    return sealed;
}

/* Seals the chunk of every writer of `b`; the caller holds the registry lock.
 *
 * Another thread's chunk holds records committed before this call, and perhaps one in progress. It
 * is taken when the owner is between records; else the request stays and the owner seals at its
 * next record. Flush waits for either (a record takes nanoseconds, but its thread may be
 * descheduled). Close (`detaching`) waits until the chunk is taken or the owner holds none: the
 * record in progress may have moved to a new chunk when the owner sealed the old one, and it must
 * not be committed there once the writer is detached (uncounted in an unsealed chunk). The busy
 * writers are waited for together, for 2 s at most (a thread stuck inside a record, e.g. in a
 * description that blocks): such an owner seals at its next record. */
static void seal_writers(lb_bundle *b, int detaching) {
    unsigned pending = 0, own_busy = 0;
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
        lb_writer_cold *c = COLD(w);
        c->seal_pending = 0;
        if (is_own(w)) {
            if (atomic_load(&w->building) == 0) {
                pthread_mutex_lock(&c->lock);
                writer_seal(w, b);
                pthread_mutex_unlock(&c->lock);
            } else {
                own_busy++;  /* called from inside this thread's own record (a description) */
            }
            continue;
        }
        if (!lock_writer(c, detaching)) continue;  /* it holds no chunk: nothing to seal */
        c->seals_asked = c->seals;
        pthread_mutex_unlock(&c->lock);
        if (!steal_chunk(w, b, 1, detaching)) {
            c->seal_pending = 1;
            pending++;
        }
    }
    /* 2 s by the clock: counted in pauses, a loaded machine (and a membarrier per busy writer per
     * round) made it twice that (found by adversarial review). */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t deadline_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + 2000000000;
    for (int tries = 0; pending; tries++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec >= deadline_ns) break;
        if (tries < 16) {
            sched_yield();
        } else {
            struct timespec pause = {0, 500000};
            nanosleep(&pause, NULL);
        }
        for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
            lb_writer_cold *c = COLD(w);
            if (c->seal_pending && seal_done(w, b, detaching)) {
                c->seal_pending = 0;
                pending--;
            }
        }
    }
    /* This thread's writer in the middle of a record keeps its chunk like a stuck one. */
    if (detaching) b->writers_given_up = pending + own_busy;
}

void lb_writers_seal_all(lb_bundle *b) {
    lb_registry_lock();
    seal_writers(b, 0);
    lb_registry_unlock();
}

void lb_writers_stop_all(lb_bundle *b) {
    lb_registry_lock();
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) atomic_store(&w->steal, 1);
    lb_registry_unlock();
}

/* Adds a chunk's committed records and bytes (its header's counts) to a running total. */
static void add_chunk_counts(const lb_chunk_header *h, uint64_t *records, uint64_t *bytes) {
    *records += atomic_load(&h->record_count);
    *bytes += atomic_load(&h->committed) - LB_CHUNK_HEADER_SIZE;
}

void lb_writers_detach_all(lb_bundle *b) {
    lb_registry_lock();
    /* Closed is set: no writer begins a record from here (its slow path drops it), so once its
     * chunk is taken it stays without one until it is detached below. */
    seal_writers(b, 1);
    /* The chunks close gave up on (a writer that still holds one) leave the writers' list into
     * `abandoned`, under this lock: the counters go on counting their records from the chunks'
     * headers (a stuck record committed now reaches the file) until detach_ring reads them back. */
    uint32_t writers = 0;
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) writers++;
    if (b->writers_given_up) b->abandoned = calloc(writers, sizeof *b->abandoned);
    lb_writer *w = b->writers;
    while (w) {
        lb_writer_cold *c = COLD(w);
        lb_writer *next = c->next_in_bundle;
        /* The owner finds `bundle == NULL` on its next slow path; `steal` sends it there. */
        pthread_mutex_lock(&c->lock);
        if (w->chunk && !c->stolen) {
            if (b->abandoned) {
                b->abandoned[b->abandoned_count++] = (lb_abandoned_chunk){.chunk = w->chunk};
            } else {  /* no memory for the list: counted as the header says now */
                add_chunk_counts(w->chunk, &b->abandoned_records, &b->abandoned_bytes);
            }
        }
        c->bundle = NULL;
        c->next_in_bundle = NULL;
        atomic_store(&w->steal, 1);
        pthread_mutex_unlock(&c->lock);
        w = next;
    }
    b->writers = NULL;
    lb_registry_unlock();
    if (lb_tls_bundle == b) {
        lb_tls_bundle = NULL;
        lb_tls_writer = NULL;
    }
}

void lb_writers_seal_idle(lb_bundle *b, uint64_t idle_ticks) {
    uint64_t now = lb_clock_ticks();
    lb_registry_lock();
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
        lb_writer_cold *c = COLD(w);
        /* The owner changes `chunk` only under `lock`; one claiming a chunk is not idle. */
        if (!lock_unless_claiming(c)) continue;
        lb_chunk_header *h = c->stolen ? NULL : w->chunk;
        int idle = h && atomic_load_explicit(&h->record_count, memory_order_relaxed) > 0;
        pthread_mutex_unlock(&c->lock);
        uint64_t last = atomic_load_explicit(&w->last_ticks, memory_order_relaxed);
        if (idle && now > last && now - last >= idle_ticks) steal_chunk(w, b, 0, 0);
    }
    lb_registry_unlock();
}

void lb_writers_count_records(lb_bundle *b, uint64_t *records, uint64_t *bytes) {
    /* One moment for the whole count: every writer's lock is held while the ring's totals are read,
     * so a chunk's records are counted in its writer's chunk or in the totals, never both and never
     * neither (read one by one, a chunk sealed between the two reads was counted twice, and the
     * next call counted fewer records: found under ThreadSanitizer's slowdown). A writer claiming a
     * chunk holds none: it sealed its last one into the totals before claiming. */
    uint64_t active = 0, active_bytes = 0;
    lb_registry_lock();
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
        lb_writer_cold *c = COLD(w);
        c->counting_locked = (uint32_t)lock_unless_claiming(c);
        if (!c->counting_locked) continue;
        if (w->chunk && !c->stolen) add_chunk_counts(w->chunk, &active, &active_bytes);
    }
    /* The chunks close gave up on leave the writers' list under this lock, into `abandoned`:
     * counted live until the ring is detached, then as the file keeps them (detach_ring). */
    if (!b->ring_detached) {
        for (uint32_t i = 0; i < b->abandoned_count; i++)
            add_chunk_counts(b->abandoned[i].chunk, &active, &active_bytes);
    }
    *records = atomic_load(&b->ring->records) + active + b->abandoned_records;
    *bytes = atomic_load(&b->ring->bytes) + active_bytes + b->abandoned_bytes;
    for (lb_writer *w = b->writers; w; w = COLD(w)->next_in_bundle) {
        lb_writer_cold *c = COLD(w);
        if (c->counting_locked) pthread_mutex_unlock(&c->lock);
        c->counting_locked = 0;
    }
    lb_registry_unlock();
}
