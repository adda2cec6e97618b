/* query_site_ids.c — one number per call site across sessions and sources: a site is its template,
 * file, line and function, whichever process registered it under whichever per-session id, so that
 * `GROUP BY site` groups by an integer (SQLite sorts integers several times faster than text) and
 * gives what `logbook stats` merges. Numbers are given in order of first sight, from 1, and stay
 * the same for the life of the lb_query. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "query_internal.h"

static uint64_t mix(uint64_t h, const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 0x100000001B3ull;
    return (h ^ 0xFF) * 0x100000001B3ull;
}

static uint64_t site_hash(const lb_site_info *s) {
    uint64_t h = mix(mix(mix(0xCBF29CE484222325ull, s->template_text), s->file), s->function);
    return (h ^ s->line) * 0x9E3779B97F4A7C15ull;
}

static int same(const lb_q_site *known, const lb_site_info *s) {
    return known->line == s->line && strcmp(known->template_text, s->template_text) == 0 &&
           strcmp(known->file, s->file) == 0 && strcmp(known->function, s->function) == 0;
}

static int grow_slots(lb_query *q) {
    size_t count = q->site_slot_count ? 2 * q->site_slot_count : 256;
    uint32_t *slots = calloc(count, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < q->site_count; i++) {
        size_t at = (size_t)(q->sites[i].hash >> 32) & (count - 1);
        while (slots[at]) at = (at + 1) & (count - 1);
        slots[at] = (uint32_t)i + 1;
    }
    free(q->site_slots);
    q->site_slots = slots;
    q->site_slot_count = count;
    return 0;
}

uint32_t lb_q_site_id(lb_query *q, const lb_site_info *s) {
    if (!s) return 0;
    if ((q->site_count + 1) * 2 > q->site_slot_count && grow_slots(q) != 0) return 0;
    uint64_t hash = site_hash(s);
    size_t at = (size_t)(hash >> 32) & (q->site_slot_count - 1);
    for (; q->site_slots[at]; at = (at + 1) & (q->site_slot_count - 1)) {
        const lb_q_site *known = &q->sites[q->site_slots[at] - 1];
        if (known->hash == hash && same(known, s)) return q->site_slots[at];
    }
    if (q->site_count == q->site_capacity) {
        size_t capacity = q->site_capacity ? 2 * q->site_capacity : 64;
        lb_q_site *sites = realloc(q->sites, capacity * sizeof *sites);
        if (!sites) return 0;
        q->sites = sites;
        q->site_capacity = capacity;
    }
    lb_q_site *site = &q->sites[q->site_count];
    *site = (lb_q_site){strdup(s->template_text), strdup(s->file), strdup(s->function), s->line, hash};
    if (!site->template_text || !site->file || !site->function) {
        free(site->template_text);
        free(site->file);
        free(site->function);
        return 0;
    }
    q->site_slots[at] = (uint32_t)++q->site_count;
    return (uint32_t)q->site_count;
}

void lb_q_site_ids_free(lb_query *q) {
    for (size_t i = 0; i < q->site_count; i++) {
        free(q->sites[i].template_text);
        free(q->sites[i].file);
        free(q->sites[i].function);
    }
    free(q->sites);
    free(q->site_slots);
}

/* ---- a cursor's memo: (session, per-session site id) to the number, for one reader ---- */

void lb_q_site_memo_reset(lb_q_site_memo *m) {
    free(m->slots);
    *m = (lb_q_site_memo){0};
}

uint32_t lb_q_site_memo_get(lb_q_site_memo *m, lb_query *q, lb_reader *reader, uint32_t session, uint32_t site_id) {
    uint64_t key = (uint64_t)session << 32 | site_id;
    if (m->slots && m->last_key == key + 1) return m->last_id;
    if ((m->count + 1) * 2 > m->capacity) {
        size_t capacity = m->capacity ? 2 * m->capacity : 64;
        lb_q_site_memo_slot *slots = calloc(capacity, sizeof *slots);
        if (!slots) return lb_q_site_id(q, lb_reader_site(reader, session, site_id));
        for (size_t i = 0; i < m->capacity; i++) {
            if (!m->slots[i].key) continue;
            size_t at = (size_t)((m->slots[i].key * 0x9E3779B97F4A7C15ull) >> 40) & (capacity - 1);
            while (slots[at].key) at = (at + 1) & (capacity - 1);
            slots[at] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->capacity = capacity;
    }
    size_t at = (size_t)(((key + 1) * 0x9E3779B97F4A7C15ull) >> 40) & (m->capacity - 1);
    for (; m->slots[at].key; at = (at + 1) & (m->capacity - 1)) {
        if (m->slots[at].key == key + 1) {
            m->last_key = key + 1;
            return m->last_id = m->slots[at].id;
        }
    }
    uint32_t id = lb_q_site_id(q, lb_reader_site(reader, session, site_id));
    m->slots[at] = (lb_q_site_memo_slot){key + 1, id};
    m->count++;
    m->last_key = key + 1;
    return m->last_id = id;
}
