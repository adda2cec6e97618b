/* chunk.c — the commit protocol's chunk half: a writer claims a chunk of the ring (overwrite or
 * lossless, waiting for the archiver), fills it (writer.c), and seals it; the archiver is woken by
 * sealed chunks and wakes lossless writers with the chunks it frees. The ring header's counters
 * are kept here, and raised after recovery (lb_ring_counters_cover). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void atomic_raise(_Atomic uint64_t *value, uint64_t at_least) {
    uint64_t now = atomic_load(value);
    while (now < at_least && !atomic_compare_exchange_weak(value, &now, at_least)) {}
}

void lb_ring_counters_cover(lb_bundle *b, uint64_t sequence, uint64_t claim, uint32_t session) {
    if (sequence) atomic_raise(&b->ring->next_sequence, sequence + 1);
    atomic_raise(&b->ring->chunks_claimed, claim + 1);
    uint32_t sessions = atomic_load(&b->ring->session_count);
    while (sessions <= session &&
           !atomic_compare_exchange_weak(&b->ring->session_count, &sessions, session + 1)) {}
}


/* One attempt over two laps of the ring. A slot still owned by another writer, being archived,
 * or (under lossless) not yet archived is passed over: its sequence number is simply never used.
 *
 * The order of the stores matters for a crash (SIGKILL stops a thread between any two of them;
 * the compiler must not reorder them either, hence the signal fences): the records of a reused
 * chunk are counted before a byte of it is destroyed, the old header is invalidated before the
 * claim number is taken, and the chunk becomes ACTIVE only once its new header is complete.
 * Recovery (recover_chunks) reads what a claim cut short left behind in that light. */
static int claim_once(lb_bundle *b, uint64_t prev_sequence, uint32_t thread_id,
                      lb_chunk_header **out) {
    lb_ring_header *ring = b->ring;
    for (uint32_t attempt = 0; attempt < 2 * b->chunk_count; attempt++) {
        uint64_t seq = atomic_fetch_add_explicit(&ring->next_sequence, 1, memory_order_relaxed);
        lb_chunk_header *h = lb_chunk_at(b, (uint32_t)(seq % b->chunk_count));
        uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
        if (state == LB_CHUNK_ACTIVE || state == LB_CHUNK_CLAIMING || state == LB_CHUNK_ARCHIVING)
            continue;
        if (b->wrap_policy == LB_WRAP_LOSSLESS && state == LB_CHUNK_SEALED) continue;
        if (!atomic_compare_exchange_strong(&h->state, &state, LB_CHUNK_CLAIMING)) continue;
        if (state == LB_CHUNK_SEALED || state == LB_CHUNK_ARCHIVED)
            atomic_fetch_add_explicit(&ring->chunks_reused, 1, memory_order_relaxed);
        if (state == LB_CHUNK_SEALED) {
            /* Overwrite policy: these records have no archived copy; they are gone for good. */
            atomic_fetch_add_explicit(&ring->records_overwritten,
                                      atomic_load_explicit(&h->record_count, memory_order_relaxed),
                                      memory_order_relaxed);
            if (b->archiving)
                atomic_fetch_add_explicit(&ring->chunks_lost_unarchived, 1, memory_order_relaxed);
        }
        h->magic = 0;
        atomic_signal_fence(memory_order_seq_cst);
        uint64_t claim = atomic_fetch_add_explicit(&ring->chunks_claimed, 1, memory_order_relaxed);
        /* The archiver reads `sequence` of chunks it sees sealed before it takes them (to pick the
         * oldest), and a sync's snapshot reads `sequence` and `claim` of every slot: atomic, as
         * those reads may race with this claim (they check the sequence again after). */
        __atomic_store_n(&h->sequence, seq, __ATOMIC_RELAXED);
        __atomic_store_n(&h->claim, claim, __ATOMIC_RELAXED);
        h->prev_delta = prev_sequence && prev_sequence < seq && seq - prev_sequence <= UINT32_MAX
                            ? (uint32_t)(seq - prev_sequence)
                            : 0;
        /* Bracket the wall clock reading with two tick readings to pair them tightly. */
        uint64_t before = lb_clock_ticks();
        h->wall_anchor_ns = (uint64_t)lb_wall_now_ns();
        h->tick_anchor = before + (lb_clock_ticks() - before) / 2;
        h->thread_id = thread_id;
        h->session = b->session;
        atomic_store_explicit(&h->committed, LB_CHUNK_HEADER_SIZE, memory_order_relaxed);
        atomic_store_explicit(&h->record_count, 0, memory_order_relaxed);
        memset((uint8_t *)h + LB_CHUNK_HEADER_SIZE, 0, 8);  /* the first header slot */
        atomic_signal_fence(memory_order_seq_cst);
        h->magic = LB_CHUNK_MAGIC;
        h->header_crc = lb_chunk_crc(h);
        atomic_store_explicit(&h->state, LB_CHUNK_ACTIVE, memory_order_release);
        *out = h;
        return 0;
    }
    return b->wrap_policy == LB_WRAP_LOSSLESS ? -ENOBUFS : -ENOSPC;
}

static uint64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Returns -ENOBUFS when a lossless ring has no archived chunk (after waiting up to
 * lossless_wait_ms for the archiver), -ENOSPC when every chunk is owned by a writer.
 *
 * A wait that ends without the archiver freeing a chunk (a full or stalled archive disk) marks the
 * ring stalled: later claims fail at once, without waiting, until the archiver frees a chunk
 * again. A stall then costs the logging threads one wait, not one wait per record. */
int lb_chunk_claim(lb_bundle *b, uint64_t prev_sequence, uint32_t thread_id,
                   lb_chunk_header **out) {
    int rc = claim_once(b, prev_sequence, thread_id, out);
    if (rc != -ENOBUFS || !b->archiving || b->lossless_wait_ms == 0) return rc;
    uint32_t stalled = atomic_load_explicit(&b->lossless_stalled, memory_order_relaxed);
    if (stalled && stalled - 1 == atomic_load(&b->archived_generation)) return rc;
    /* Wait for the archiver. Announce the wait, then read the generation, then retry: a release
     * that happens after the retry changes the generation, so the futex wait returns at once. */
    uint64_t deadline = monotonic_ms() + b->lossless_wait_ms;
    atomic_fetch_add(&b->writers_waiting, 1);
    if (atomic_load(&b->archiver_sleeping)) {
        atomic_fetch_add(&b->sealed_generation, 1);
        lb_futex_wake_all(&b->sealed_generation);
    }
    for (;;) {
        uint32_t generation = atomic_load(&b->archived_generation);
        rc = claim_once(b, prev_sequence, thread_id, out);
        if (rc != -ENOBUFS || atomic_load(&b->closed)) break;
        uint64_t now = monotonic_ms();
        if (now >= deadline) {
            atomic_store_explicit(&b->lossless_stalled, generation + 1, memory_order_relaxed);
            break;
        }
        lb_futex_wait(&b->archived_generation, generation, (uint32_t)(deadline - now));
    }
    atomic_fetch_sub(&b->writers_waiting, 1);
    return rc;
}

void lb_chunk_seal(lb_bundle *b, lb_chunk_header *h) {
    uint32_t records = atomic_load_explicit(&h->record_count, memory_order_relaxed);
    uint32_t committed = atomic_load_explicit(&h->committed, memory_order_relaxed);
    /* Sealed first, counted after: a crash in between leaves the counters short by this chunk
     * (verify then never reports records missing that are there); the other order would make
     * recovery seal and count the chunk a second time. */
    atomic_store_explicit(&h->state, LB_CHUNK_SEALED, memory_order_release);
    atomic_fetch_add_explicit(&b->ring->records, records, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->ring->bytes, committed - LB_CHUNK_HEADER_SIZE,
                              memory_order_relaxed);
    if (b->archiving) {
        /* Wake a sleeping archiver once a batch of chunks is waiting (a wake costs a syscall on
         * the logging thread), or at once when a lossless writer waits; stragglers are picked up
         * by its periodic pass. */
        uint32_t generation = atomic_fetch_add(&b->sealed_generation, 1) + 1;
        if (atomic_load(&b->archiver_sleeping) &&
            (generation - atomic_load_explicit(&b->archiver_seen_generation, memory_order_relaxed) >=
                 b->archiver_wake_batch ||
             atomic_load(&b->writers_waiting)))
            lb_futex_wake_all(&b->sealed_generation);
    }
}

void lb_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint32_t timeout_ms) {
    struct timespec t = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, timeout_ms ? &t : NULL,
            NULL, 0);
}

void lb_futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void lb_bundle_chunks_released(lb_bundle *b) {
    atomic_fetch_add(&b->archived_generation, 1);
    if (atomic_load(&b->writers_waiting)) lb_futex_wake_all(&b->archived_generation);
}

void lb_bundle_count_drop(lb_bundle *b, unsigned reason) {
    /* A forked child never writes to the parent's ring, not even a counter. */
    if (b && b->ring && !b->forked && reason < LB_DROP_REASON_COUNT)
        atomic_fetch_add_explicit(&b->ring->drops[reason], 1, memory_order_relaxed);
}

