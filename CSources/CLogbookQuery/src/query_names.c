/* query_names.c — the names a query shares between its threads, each kept once at a stable
 * address: call sites numbered across sessions and sources (a site is its template, file, line and
 * function, whichever process registered it under whichever per-session id, so that `GROUP BY site`
 * groups by an integer, which SQLite sorts several times faster than text, and gives what
 * `logbook stats` merges; numbers from 1 in order of first sight, the same for the life of the
 * lb_query), and logger names. A stream's thread resolves each entry's site and logger here while
 * the caller's thread reads rows, so both tables are behind one lock; a resolved pointer stays
 * valid until lb_query_close. */
#define _GNU_SOURCE
#include <pthread.h>
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

static int same_site(const lb_q_site *known, const lb_site_info *s) {
    return known->line == s->line && strcmp(known->template_text, s->template_text) == 0 &&
           strcmp(known->file, s->file) == 0 && strcmp(known->function, s->function) == 0;
}

/* An open-addressed index of a table's entries by hash: slots hold index + 1, 0 is empty. */
static int grow_index(lb_q_index *index, size_t entries, uint64_t (*hash_of)(const void *, size_t), const void *table) {
    size_t count = index->slot_count ? 2 * index->slot_count : 256;
    uint32_t *slots = calloc(count, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < entries; i++) {
        size_t at = (size_t)(hash_of(table, i) >> 32) & (count - 1);
        while (slots[at]) at = (at + 1) & (count - 1);
        slots[at] = (uint32_t)i + 1;
    }
    free(index->slots);
    index->slots = slots;
    index->slot_count = count;
    return 0;
}

static uint64_t site_hash_at(const void *table, size_t i) { return ((lb_q_site *const *)table)[i]->hash; }

static int push(void ***array, size_t *capacity, size_t count, void *item) {
    if (count == *capacity) {
        size_t bigger = *capacity ? 2 * *capacity : 64;
        void **grown = realloc(*array, bigger * sizeof *grown);
        if (!grown) return -1;
        *array = grown;
        *capacity = bigger;
    }
    (*array)[count] = item;
    return 0;
}

static const lb_q_site *site_locked(lb_query *q, const lb_site_info *s) {
    if ((q->site_count + 1) * 2 > q->site_index.slot_count &&
        grow_index(&q->site_index, q->site_count, site_hash_at, q->sites) != 0)
        return NULL;
    uint64_t hash = site_hash(s);
    size_t mask = q->site_index.slot_count - 1, at = (size_t)(hash >> 32) & mask;
    for (; q->site_index.slots[at]; at = (at + 1) & mask) {
        const lb_q_site *known = q->sites[q->site_index.slots[at] - 1];
        if (known->hash == hash && same_site(known, s)) return known;
    }
    lb_q_site *site = malloc(sizeof *site);
    if (!site) return NULL;
    *site = (lb_q_site){strdup(s->template_text), strdup(s->file), strdup(s->function), s->line,
                        (uint32_t)q->site_count + 1, hash};
    if (!site->template_text || !site->file || !site->function ||
        push((void ***)&q->sites, &q->site_capacity, q->site_count, site) != 0) {
        free(site->template_text);
        free(site->file);
        free(site->function);
        free(site);
        return NULL;
    }
    q->site_index.slots[at] = (uint32_t)++q->site_count;
    return site;
}

const lb_q_site *lb_q_site_of(lb_query *q, const lb_site_info *s) {
    if (!s) return NULL;
    pthread_mutex_lock(&q->names_lock);
    const lb_q_site *site = site_locked(q, s);
    pthread_mutex_unlock(&q->names_lock);
    return site;
}

const lb_q_site *lb_q_site_numbered(lb_query *q, uint32_t id) {
    pthread_mutex_lock(&q->names_lock);
    const lb_q_site *site = id >= 1 && id <= q->site_count ? q->sites[id - 1] : NULL;
    pthread_mutex_unlock(&q->names_lock);
    return site;
}

static uint64_t text_hash(const char *text) { return mix(0xCBF29CE484222325ull, text) * 0x9E3779B97F4A7C15ull; }
static uint64_t logger_hash_at(const void *table, size_t i) { return text_hash(((char *const *)table)[i]); }

const char *lb_q_logger_name(lb_query *q, const char *name) {
    if (!name) return NULL;
    pthread_mutex_lock(&q->names_lock);
    const char *kept = NULL;
    if ((q->logger_count + 1) * 2 <= q->logger_index.slot_count ||
        grow_index(&q->logger_index, q->logger_count, logger_hash_at, q->loggers) == 0) {
        size_t mask = q->logger_index.slot_count - 1, at = (size_t)(text_hash(name) >> 32) & mask;
        for (; q->logger_index.slots[at]; at = (at + 1) & mask) {
            if (strcmp(q->loggers[q->logger_index.slots[at] - 1], name) == 0) {
                kept = q->loggers[q->logger_index.slots[at] - 1];
                break;
            }
        }
        if (!kept) {
            char *copy = strdup(name);
            if (copy && push((void ***)&q->loggers, &q->logger_capacity, q->logger_count, copy) == 0) {
                q->logger_index.slots[at] = (uint32_t)++q->logger_count;
                kept = copy;
            } else {
                free(copy);
            }
        }
    }
    pthread_mutex_unlock(&q->names_lock);
    return kept;
}

void lb_q_names_free(lb_query *q) {
    for (size_t i = 0; i < q->site_count; i++) {
        free(q->sites[i]->template_text);
        free(q->sites[i]->file);
        free(q->sites[i]->function);
        free(q->sites[i]);
    }
    for (size_t i = 0; i < q->logger_count; i++) free(q->loggers[i]);
    free(q->sites);
    free(q->loggers);
    free(q->site_index.slots);
    free(q->logger_index.slots);
}

/* ---- a stream's memo: (session, per-session id) to the shared name, for one reader ---- */

void lb_q_memo_reset(lb_q_memo *m) {
    free(m->slots);
    *m = (lb_q_memo){0};
}

static lb_q_memo_slot *memo_slot(lb_q_memo *m, uint64_t key) {
    if ((m->count + 1) * 2 > m->capacity) {
        size_t capacity = m->capacity ? 2 * m->capacity : 64;
        lb_q_memo_slot *slots = calloc(capacity, sizeof *slots);
        if (!slots) return NULL;
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
    size_t at = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & (m->capacity - 1);
    while (m->slots[at].key && m->slots[at].key != key) at = (at + 1) & (m->capacity - 1);
    return &m->slots[at];
}

const void *lb_q_memo_site(lb_q_memo *m, lb_query *q, lb_reader *reader, uint32_t session, uint32_t site_id) {
    uint64_t key = ((uint64_t)session << 32 | site_id) + 1;
    if (m->last_key == key) return m->last;
    lb_q_memo_slot *slot = memo_slot(m, key);
    if (!slot) return lb_q_site_of(q, lb_reader_site(reader, session, site_id));
    if (!slot->key) {
        slot->key = key;
        slot->value = lb_q_site_of(q, lb_reader_site(reader, session, site_id));
        m->count++;
    }
    m->last_key = key;
    return m->last = slot->value;
}

const void *lb_q_memo_logger(lb_q_memo *m, lb_query *q, lb_reader *reader, uint32_t session, uint16_t logger_id) {
    uint64_t key = ((uint64_t)session << 32 | logger_id) + 1;
    if (m->last_key == key) return m->last;
    lb_q_memo_slot *slot = memo_slot(m, key);
    if (!slot) return lb_q_logger_name(q, lb_reader_logger_name(reader, session, logger_id));
    if (!slot->key) {
        slot->key = key;
        slot->value = lb_q_logger_name(q, lb_reader_logger_name(reader, session, logger_id));
        m->count++;
    }
    m->last_key = key;
    return m->last = slot->value;
}
