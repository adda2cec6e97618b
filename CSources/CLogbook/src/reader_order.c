/* reader_order.c — time order: the merge of sorted runs behind lb_reader_scan, and the read window
 * that hands a stream's entries out in order with memory bounded by the chunks it holds. */
#define _GNU_SOURCE
#include "reader_internal.h"

/* Time order: sessions one after another, within a session by clock ticks (the order the writers
 * really logged in; wall times are derived from them).
 *
 * New entries arrive chunk by chunk in sequence order, each chunk already in
 * tick order: a few long sorted runs. If they are not in order already, a k-way merge of the runs
 * (a binary heap of run cursors) writes the sorted order as an index, and entries stay where they
 * are. Ties keep arrival order (chunk sequence, then offset). */
static int entry_before(const lb_entry *a, size_t ia, const lb_entry *b, size_t ib) {
    if (a->session != b->session) return a->session < b->session;
    if (a->ticks != b->ticks) return a->ticks < b->ticks;
    return ia < ib;
}

typedef struct run_cursor {
    size_t next, end;
} run_cursor;

static int heap_before(const lb_entry *entries, const run_cursor *x, const run_cursor *y) {
    return entry_before(&entries[x->next], x->next, &entries[y->next], y->next);
}

static void cursor_heap_down(const lb_entry *entries, run_cursor *heap, size_t count, size_t at) {
    for (;;) {
        size_t smallest = at, left = 2 * at + 1, right = left + 1;
        if (left < count && heap_before(entries, &heap[left], &heap[smallest])) smallest = left;
        if (right < count && heap_before(entries, &heap[right], &heap[smallest])) smallest = right;
        if (smallest == at) return;
        run_cursor swap = heap[at];
        heap[at] = heap[smallest];
        heap[smallest] = swap;
        at = smallest;
    }
}

/* Fills order[first..count) with the indices of entries[first..count) in time order. */
int lb_rd_order_entries(const lb_entry *entries, uint32_t *order, size_t first, size_t count) {
    size_t runs = first < count ? 1 : 0;
    for (size_t i = first + 1; i < count; i++)
        if (entry_before(&entries[i], i, &entries[i - 1], i - 1)) runs++;
    if (runs <= 1) {
        for (size_t i = first; i < count; i++) order[i] = (uint32_t)i;
        return 0;
    }
    run_cursor *heap = malloc(runs * sizeof *heap);
    if (!heap) return -ENOMEM;
    size_t heap_count = 0, start = first;
    for (size_t i = first + 1; i <= count; i++) {
        if (i == count || entry_before(&entries[i], i, &entries[i - 1], i - 1)) {
            heap[heap_count++] = (run_cursor){start, i};
            start = i;
        }
    }
    for (size_t i = heap_count; i-- > 0;) cursor_heap_down(entries, heap, heap_count, i);
    for (size_t out = first; heap_count > 0; out++) {
        order[out] = (uint32_t)heap[0].next++;
        if (heap[0].next == heap[0].end) heap[0] = heap[--heap_count];
        cursor_heap_down(entries, heap, heap_count, 0);
    }
    free(heap);
    return 0;
}

/* ---- the read window (see window_run) ---- */
static int key_before(uint32_t session_a, uint64_t ticks_a, uint32_t session_b, uint64_t ticks_b) {
    return session_a != session_b ? session_a < session_b : ticks_a < ticks_b;
}

uint8_t *lb_rd_spill_copy(window_run *run, const uint8_t *bytes, size_t length) {
    if (lb_array_grow((void **)&run->spill, &run->spill_capacity, run->spill_count + 1, sizeof *run->spill))
        return NULL;
    uint8_t *copy = malloc(length + COPY_SLACK);
    if (!copy) return NULL;
    memcpy(copy, bytes, length);
    run->spill[run->spill_count++] = copy;
    return copy;
}

static void run_clear(window_run *run) {
    for (size_t i = 0; i < run->spill_count; i++) free(run->spill[i]);
    run->spill_count = 0;
    run->count = run->next = 0;
    run->found = 0;
}

void lb_rd_run_free(window_run *run) {
    if (!run) return;
    run_clear(run);
    free(run->spill);
    free(run->entries);
    free(run->image);
    free(run);
}

/* A run to fill, its image as large as the largest chunk met so far. */
window_run *lb_rd_run_acquire(lb_reader *r) {
    window_run *run = r->spare_count ? r->spare[--r->spare_count] : calloc(1, sizeof *run);
    if (!run) return NULL;
    if (run->image_capacity < r->chunk_capacity) {
        uint8_t *image = realloc(run->image, r->chunk_capacity + COPY_SLACK);
        if (!image) {
            lb_rd_run_free(run);
            return NULL;
        }
        run->image = image;
        run->image_capacity = r->chunk_capacity;
    }
    run->serial = ++r->run_serial;
    return run;
}

/* Up to 16 runs are kept for reuse: a window rarely holds more (one per thread writing at once). */
static void run_release(lb_reader *r, window_run *run) {
    run_clear(run);
    if (r->spare_count < 16 &&
        lb_array_grow((void **)&r->spare, &r->spare_capacity, r->spare_count + 1, sizeof *r->spare) == 0)
        r->spare[r->spare_count++] = run;
    else
        lb_rd_run_free(run);
}

static inline int run_before(const window_run *x, const window_run *y) {
    if (x->head_session != y->head_session) return x->head_session < y->head_session;
    if (x->head_ticks != y->head_ticks) return x->head_ticks < y->head_ticks;
    return x->serial < y->serial;
}

static inline void run_head(window_run *run) {
    run->head_ticks = run->entries[run->next].ticks;
    run->head_session = run->entries[run->next].session;
}

static void heap_down(window_run **heap, size_t count, size_t at) {
    for (;;) {
        size_t least = at, left = 2 * at + 1, right = left + 1;
        if (left < count && run_before(heap[left], heap[least])) least = left;
        if (right < count && run_before(heap[right], heap[least])) least = right;
        if (least == at) return;
        window_run *swap = heap[at];
        heap[at] = heap[least];
        heap[least] = swap;
        at = least;
    }
}

static int heap_push(lb_reader *r, window_run *run) {
    if (lb_array_grow((void **)&r->heap, &r->heap_capacity, r->heap_count + 1, sizeof *r->heap)) return -ENOMEM;
    run_head(run);
    size_t at = r->heap_count++;
    if (r->heap_count > r->window_peak) r->window_peak = r->heap_count;
    r->heap[at] = run;
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (!run_before(r->heap[at], r->heap[parent])) break;
        window_run *swap = r->heap[at];
        r->heap[at] = r->heap[parent];
        r->heap[parent] = swap;
        at = parent;
    }
    return 0;
}

/* The walk of r->run is over: when it counts, its entries join the window. */
void lb_rd_finish_run(lb_reader *r) {
    window_run *run = r->run;
    r->run = NULL;
    if (!run) return;
    if (r->run_counts) r->emitted += run->found;
    if (r->run_counts && run->count && heap_push(r, run) == 0) return;
    run_release(r, run);
}

/* Hands out, in time order, the entries held before `floor` (all of them when it is NULL). */
/* The most chunk images the window holds (WINDOW_MAX_BYTES of them, at least 64 chunks): past it,
 * the least entries go out although a record older than them may still come. That takes a record
 * whose timestamp is far older than the chunks it was committed into (a writer that took seconds
 * between lb_record_begin and commit while other threads filled thousands of chunks): keeping it
 * in order would hold all of them. */
#define WINDOW_MAX_BYTES (64u << 20)

void lb_rd_drain(lb_reader *r, const order_key *floor) {
    const lb_entry_visitor visit = r->visit;
    void *const context = r->visit_context;
    size_t most = WINDOW_MAX_BYTES / (r->chunk_capacity ? r->chunk_capacity : 1);
    if (most < 64) most = 64;
    while (r->heap_count) {
        window_run *top = r->heap[0];
        if (floor && !key_before(top->head_session, top->head_ticks, floor->session, floor->ticks) &&
            r->heap_count <= most)
            return;
        if (LB_LIKELY(!r->stopped)) {
            r->visited++;
            if (visit(context, &top->entries[top->next])) r->stopped = 1;
        }
        if (++top->next == top->count) {
            r->heap[0] = r->heap[--r->heap_count];
            run_release(r, top);
        } else {
            run_head(top);
        }
        if (r->heap_count > 1) heap_down(r->heap, r->heap_count, 0);
    }
}

/* floors[i] = the least (session, anchor) of refs[i..]; floors[count] is past every key. */
int lb_rd_compute_floors(lb_reader *r, const ref_list *refs) {
    if (lb_array_grow((void **)&r->floors, &r->floor_capacity, refs->count + 1, sizeof *r->floors))
        return -ENOMEM;
    order_key least = {UINT32_MAX, UINT64_MAX};
    r->floors[refs->count] = least;
    for (size_t i = refs->count; i-- > 0;) {
        const chunk_ref *ref = &refs->refs[i];
        if (key_before(ref->session, ref->anchor, least.session, least.ticks))
            least = (order_key){ref->session, ref->anchor};
        r->floors[i] = least;
    }
    return 0;
}

/* The watermark after refs[0..next) were read: the floor of the rest and of the large records
 * begun but not finished (their entries take the first fragment's ticks). */
order_key lb_rd_watermark(const lb_reader *r, size_t next) {
    order_key w = r->floors[next];
    for (size_t i = 0; i < r->pending_count; i++) {
        const pending_record *p = &r->pending[i];
        uint64_t ticks;
        if (p->consumed || p->orphaned || p->length < 8) continue;
        memcpy(&ticks, p->bytes, 8);
        if (key_before(p->session, ticks, w.session, w.ticks)) w = (order_key){p->session, ticks};
    }
    return w;
}
