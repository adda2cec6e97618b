/* cache_check.c — what a cache file holds, read with pread: the message frame at a position, the
 * first intact one after damage, and whether the header's moving fields agree with the frames. */
#define _GNU_SOURCE
#include "cache_internal.h"


/* A frame at `offset` of `data` (the region, `available` bytes): its whole size if it is an intact
 * message (head and body checked), else 0. */
uint64_t lb_cc_intact_message(const uint8_t *data, uint64_t available, uint64_t offset, uint64_t *sequence) {
    if (available - offset < FRAME_HEAD) return 0;
    lb_archive_frame_head f;
    memcpy(&f, data + offset, sizeof f);
    uint64_t size = FRAME_HEAD + round8(f.length);
    if (!frame_head_valid(&f) || f.kind != LB_CACHE_FRAME_MESSAGE || f.length < MESSAGE_PREFIX ||
        size > available - offset || lb_crc32c(0, data + offset + FRAME_HEAD, f.length) != f.body_crc)
        return 0;
    memcpy(sequence, data + offset + FRAME_HEAD, 8);
    return size;
}

/* The MESSAGE frame at logical `position` (past padding and a WRAP frame at the region's end),
 * read with pread: 1 with its sequence and the position after it; 0 when it is damaged or not
 * in the file (damage in the region, which proves nothing about the header). */
int lb_cc_message_at(int fd, uint64_t region, uint64_t available, uint64_t position, uint64_t *sequence, uint64_t *end) {
    for (int hop = 0; hop < 2; hop++) {
        uint64_t offset = position % region, left = region - offset;
        if (left < FRAME_HEAD) {
            position += left;
            continue;
        }
        lb_archive_frame_head f;
        if (offset + FRAME_HEAD > available ||
            pread(fd, &f, sizeof f, (off_t)(LB_CACHE_HEADER_SIZE + offset)) != (ssize_t)sizeof f)
            return 0;
        if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) return 0;
        if (f.kind == LB_CACHE_FRAME_WRAP) {
            position += left;
            continue;
        }
        if (f.length < MESSAGE_PREFIX || offset + FRAME_HEAD + f.length > available) return 0;
        uint8_t *body = malloc(f.length);
        int intact = body && pread(fd, body, f.length, (off_t)(LB_CACHE_HEADER_SIZE + offset + FRAME_HEAD)) == (ssize_t)f.length &&
                     lb_crc32c(0, body, f.length) == f.body_crc;
        if (intact) memcpy(sequence, body, 8);
        free(body);
        *end = position + FRAME_HEAD + round8(f.length);
        return intact;
    }
    return 0;
}


/* The sequence of the first intact message at or after logical `position` and before `tail`,
 * searched in 8-byte steps (at most 1 MiB on each side of the region's end): 1 if one is found. */
static int first_intact_after(int fd, uint64_t region, uint64_t available, uint64_t position, uint64_t tail, uint64_t *sequence) {
    for (int lap = 0; lap < 2 && position < tail; lap++) {
        uint64_t offset = position % region, span = region - offset;
        if (span > tail - position) span = tail - position;
        if (span > (1u << 20)) span = 1u << 20;
        if (offset >= available) return 0;
        if (span > available - offset) span = available - offset;
        uint8_t *data = malloc(span ? span : 1);
        if (!data) return 0;
        int found = 0;
        if (pread(fd, data, span, (off_t)(LB_CACHE_HEADER_SIZE + offset)) == (ssize_t)span)
            for (uint64_t at = 0; at + FRAME_HEAD <= span && !found; at += 8) found = lb_cc_intact_message(data, span, at, sequence) != 0;
        free(data);
        if (found) return 1;
        position += region - offset; /* on at the region's start */
    }
    return 0;
}

/* Whether `last` is where an append starting at `tail` put its frame: at the tail, or at the
 * region's start when the frame did not fit before its end. */
int lb_cc_append_position(uint64_t last, uint64_t tail, uint64_t region) {
    return last == tail || (last > tail && last % region == 0 && last - tail == region - tail % region);
}

/* Intact frames around physical offset `at` of the region (searched up to 64 KiB before it):
 * 1 if one straddles it (starts before, ends after), 2 if one ends exactly there (its sequence
 * in `sequence`), else 0. Frames never straddle the region's end. */
static int frame_around(int fd, uint64_t region, uint64_t available, uint64_t at, uint64_t *sequence) {
    if (at > available) return 0;
    uint64_t lo = at > (1u << 16) ? at - (1u << 16) : 0, hi = at + (1u << 16) < available ? at + (1u << 16) : available;
    uint8_t *data = malloc(hi - lo ? hi - lo : 1);
    if (!data) return 0;
    int found = 0;
    if (pread(fd, data, hi - lo, (off_t)(LB_CACHE_HEADER_SIZE + lo)) == (ssize_t)(hi - lo)) {
        for (uint64_t offset = 0; lo + offset < at && !found;) {
            uint64_t size = lb_cc_intact_message(data, hi - lo, offset, sequence);
            if (!size) {
                offset += 8;
                continue;
            }
            if (lo + offset + size > at) found = 1;
            else if (lo + offset + size == at) found = 2;
            offset += size;
        }
    }
    (void)region;
    free(data);
    return found;
}

/* Whether next_sequence fits the newest intact message's `sequence`: 1 when it is the one after
 * it, or the floor a rebuild set above it (docs/FORMAT.md, "Cache"); 2 when it is one more (an
 * append a kill cut short after storing it); else 0. */
static int next_fits(uint64_t sequence, uint64_t next, uint64_t floor) {
    if (next == sequence + 1) return 1;
    if (next == sequence + 2) return 2;
    if (floor > sequence + 1 && next == floor) return 1;
    if (floor > sequence + 1 && next == floor + 1) return 2;
    return 0;
}

/* Whether the header's moving fields (which no checksum covers) agree with each other and with
 * the frames they point at (docs/FORMAT.md, "Cache"). 0: they disagree (damage); 1: they agree;
 * 2: they agree but for one append or eviction a kill cut short, which the writer repairs by
 * recounting. The writer's stores are ordered so that a cut-short state is recognisable: an
 * eviction stores head, the counters, then head_sequence (so the head frame carries
 * head_sequence + 1 until it is done); an append stores next_sequence, the counters, last_frame,
 * then tail. `first_kept`: the lowest sequence a scan of the region should keep (the head frame's,
 * when one is found there), or 0 when nothing says. Damaged frames confirm nothing and contradict
 * nothing, but a position inside an intact frame is a contradiction. */
int lb_cc_moving_fields_agree(int fd, const lb_cache_header *h, uint64_t region, uint64_t available, uint64_t *first_kept) {
    uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail), last = atomic_load(&h->last_frame);
    uint64_t first = atomic_load(&h->head_sequence), next = atomic_load(&h->next_sequence);
    uint64_t messages = atomic_load(&h->messages), bytes = atomic_load(&h->message_bytes), sequence, end;
    int verdict = 1;
    *first_kept = 0;
    if (head > tail || tail - head > region || (head | tail | last) % 8) return 0; /* frames are 8-aligned */
    if (first > next) return 0;
    /* The counters decide nothing a reader reads: counters that cannot be (more bytes than the
     * frames between head and tail could carry) are recounted by the writer, not damage. */
    int counters_off = messages > next - first || messages > (tail - head) / (FRAME_HEAD + MESSAGE_PREFIX) ||
                       bytes > (tail - head) - messages * (FRAME_HEAD + MESSAGE_PREFIX);
    if (head == tail) {
        *first_kept = first;
        if (first == next) return messages == 0 && bytes == 0 ? 1 : 2;
        return next - first == 1 ? 2 : 0; /* an append into an empty cache cut short */
    }
    /* When they disagree, a scan keeps from the lower of head_sequence and what is found at head:
     * one of the two moved, and keeping a removed message beats losing a kept one. */
    if (lb_cc_message_at(fd, region, available, head, &sequence, &end)) {
        *first_kept = sequence < first ? sequence : first;
        if (sequence == first + 1) verdict = 2; /* an eviction cut short */
        else if (sequence != first) return 0;
        *first_kept = sequence;
    } else if (frame_around(fd, region, available, head % region, &sequence) == 1) {
        *first_kept = sequence < first ? sequence : first; /* head moved into an intact frame */
        return 0;
    } else if (first_intact_after(fd, region, available, head, tail, &sequence)) {
        /* The head frame is damaged (then the next carries head_sequence + 1), or head moved. */
        *first_kept = sequence < first ? sequence : first;
        if (sequence != first + 1) return 0;
    }
    if (last >= head && last < tail) {
        int fits;
        if (lb_cc_message_at(fd, region, available, last, &sequence, &end)) {
            if (end != tail || !(fits = next_fits(sequence, next, h->sequence_floor))) return 0;
            if (fits == 2) verdict = 2; /* an append cut short after next_sequence */
        } else {
            /* last_frame names no intact frame: the frame before the tail speaks instead */
            uint64_t at = tail % region ? tail % region : region;
            int around = frame_around(fd, region, available, at, &sequence);
            if (around != 2 || !(fits = next_fits(sequence, next, h->sequence_floor))) return 0; /* no intact frame ends at the tail */
            if (fits == 2) verdict = 2; /* recounted: next_sequence from the frames */
        }
    } else if (lb_cc_append_position(last, tail, region)) {
        /* an append cut short before its tail: its frame (after a wrap, at the region's start) */
        if (lb_cc_message_at(fd, region, available, last, &sequence, &end) && (sequence + 1 != next || end - head > region)) return 0;
        verdict = 2;
    } else {
        return 0;
    }
    return counters_off && verdict == 1 ? 2 : verdict;
}
