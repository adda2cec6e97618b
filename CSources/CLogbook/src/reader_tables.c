/* reader_tables.c — the reader's bookkeeping, shared by its other files: growing arrays, issues,
 * the table of chunks already read (and what each walk of one found), chunk references, what the
 * durable mirror covers, and whether the bundle's writer is alive. */
#define _GNU_SOURCE
#include "reader_internal.h"

/* ---- small containers ---- */
lb_issue *lb_rd_add_issue(lb_reader *r, uint32_t kind, const char *file, uint64_t offset,
                           uint64_t length, const char *reason) {
    if (lb_array_grow((void **)&r->issues, &r->issue_capacity, r->issue_count + 1, sizeof(lb_issue)))
        return NULL;
    lb_issue *issue = &r->issues[r->issue_count++];
    *issue = (lb_issue){kind, file, offset, length, reason, 0};
    return issue;
}

/* A string the reader keeps until it is closed (issue reasons and file names with numbers). */
const char *lb_rd_keep_string(lb_reader *r, char *s) {
    if (!s) return NULL;
    if (lb_array_grow((void **)&r->owned, &r->owned_capacity, r->owned_count + 1, sizeof(char *))) {
        free(s);
        return NULL;
    }
    r->owned[r->owned_count++] = s;
    return s;
}

lb_issue *lb_rd_add_issuef(lb_reader *r, uint32_t kind, const char *file, uint64_t offset,
                            uint64_t length, uint64_t records, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *text = NULL;
    int n = vasprintf(&text, format, args);
    va_end(args);
    const char *reason = n >= 0 ? lb_rd_keep_string(r, text) : NULL;
    lb_issue *issue = lb_rd_add_issue(r, kind, file, offset, length, reason ? reason : format);
    if (issue) issue->records = records;
    return issue;
}

int lb_rd_chunk_buffer(lb_reader *r, uint32_t chunk_size) {
    if (chunk_size <= r->chunk_capacity) return 0;
    uint8_t *p = realloc(r->chunk, (size_t)chunk_size + COPY_SLACK);
    if (!p) return -ENOMEM;
    r->chunk = p;
    r->chunk_capacity = chunk_size;
    return 0;
}

/* ---- chunks already read ---- */
static seen_chunk *seen_slot(seen_chunk *table, size_t capacity, uint64_t sequence) {
    size_t i = (size_t)(sequence * 0x9E3779B97F4A7C15ull >> 20) & (capacity - 1);
    while (table[i].sequence != 0 && table[i].sequence != sequence) i = (i + 1) & (capacity - 1);
    return &table[i];
}

seen_chunk *lb_rd_seen_find(lb_reader *r, uint64_t sequence) {
    if (!r->seen_capacity) return NULL;
    seen_chunk *s = seen_slot(r->seen, r->seen_capacity, sequence);
    return s->sequence == sequence ? s : NULL;
}

/* The entry of `sequence`, made (nothing read yet) when there is none. NULL without memory (the
 * chunk may then be read again: duplicates, never a crash). The pointer is valid until the next
 * call. */
seen_chunk *lb_rd_seen_add(lb_reader *r, uint64_t sequence) {
    seen_chunk *s = lb_rd_seen_find(r, sequence);
    if (s) return s;
    if ((r->seen_count + 1) * 2 > r->seen_capacity) {
        size_t capacity = r->seen_capacity ? r->seen_capacity * 2 : 1024;
        seen_chunk *table = calloc(capacity, sizeof *table);
        if (!table) return NULL;
        for (size_t i = 0; i < r->seen_capacity; i++)
            if (r->seen[i].sequence) *seen_slot(table, capacity, r->seen[i].sequence) = r->seen[i];
        free(r->seen);
        r->seen = table;
        r->seen_capacity = capacity;
    }
    s = seen_slot(r->seen, r->seen_capacity, sequence);
    *s = (seen_chunk){.sequence = sequence, .offset = LB_CHUNK_HEADER_SIZE};
    r->seen_count++;
    return s;
}

void lb_rd_note_claim(lb_reader *r, uint64_t claim, uint64_t sequence) {
    if (lb_array_grow((void **)&r->claims, &r->claim_capacity, r->claim_count + 1, sizeof *r->claims) == 0)
        r->claims[r->claim_count++] = (noted_claim){claim, sequence};
}

/* What the last sync made durable of chunk `sequence`: its records end at or after this offset
 * (0: nothing, or no sync listed it). */
uint32_t lb_rd_durable_through(const lb_reader *r, uint64_t sequence) {
    const lb_durable_entry *e = lb_durable_find(r->durable, r->durable_count, sequence);
    return e ? e->committed : 0;
}

void lb_rd_push_ref(ref_list *list, chunk_ref ref) {
    if (lb_array_grow((void **)&list->refs, &list->capacity, list->count + 1, sizeof ref) == 0)
        list->refs[list->count++] = ref;
}

uint64_t lb_rd_chunk_floor(const chunk_start *start) {
    uint64_t word, ticks;
    memcpy(&word, start->first, 8);
    memcpy(&ticks, start->first + 8, 8);
    uint8_t kind = lb_record_word_kind(word);
    if (lb_record_word_check(word) == LB_RECORD_CHECK && (kind == LB_RECORD_FULL || kind == LB_RECORD_FIRST) &&
        ticks < start->h.tick_anchor)
        return ticks;
    return start->h.tick_anchor;
}

/* Oldest first, so that the fragments of a large record arrive in order; archived copies (in file
 * order) before the ring's copy of the same chunk. */
int lb_rd_compare_refs(const void *a, const void *b) {
    const chunk_ref *x = a, *y = b;
    if (x->sequence != y->sequence) return x->sequence < y->sequence ? -1 : 1;
    if ((x->source < 0) != (y->source < 0)) return (x->source < 0) - (y->source < 0);
    if (x->source < 0) return (x->source > y->source) - (x->source < y->source);
    return (x->file_number > y->file_number) - (x->file_number < y->file_number);
}

/* ---- walking a chunk image (ring, mirror or archive) ---- */
/* What a walk of chunk `sequence` found, kept for the next scans, verify and the follower's
 * account: where it stopped, the records it walked (all of them so far), the entries it made
 * (since entry_mark), what it could not show and why (tally), whether it broke off, whether the
 * copy came from an archive file, and whether the chunk was still active. */
void lb_rd_note_walk(lb_reader *r, uint64_t sequence, size_t entry_mark, uint32_t stop,
                      uint32_t records, int corrupt, const walk_tally *tally, int archived,
                      int active) {
    seen_chunk *seen = lb_rd_seen_add(r, sequence);
    if (!seen) return;
    uint32_t shown = r->run->found - (uint32_t)entry_mark;
    /* Records it could not show because the overwrite policy destroyed their beginning count as
     * overwritten; damaged ones (tally->unreadable) do not: issues account for them. A chunk whose
     * slot was reused already (its mirror copy read after) is all in the reuse's count: what was
     * read of it is taken off, as chunk_left_ring does. */
    if (seen->gone) {
        r->gone_read += shown + tally->unreadable;
        r->gone_beginnings += tally->beginnings_overwritten;
    } else {
        r->beginnings_overwritten += tally->beginnings_overwritten;
    }
    seen->beginnings_overwritten += tally->beginnings_overwritten;
    seen->unreadable += tally->unreadable;
    if (tally->trailing) seen->trailing = tally->trailing;
    seen->offset = stop;
    seen->records = records;
    seen->shown += shown;
    seen->broken = (uint8_t)corrupt;
    if (archived) seen->archived = 1;
    seen->active = (uint8_t)active;
}

/* Whether the bundle's writer holds its lock (a live writer may still change what is read). */
int lb_rd_writer_alive(lb_reader *r) {
    if (r->lock_fd < 0) return 0;
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(r->lock_fd, F_OFD_GETLK, &fl) != 0) return 0;
    return fl.l_type != F_UNLCK;
}
