/* query_internal.h — what the files of the query library share (logbook_query.h is the API). */
#ifndef LOGBOOK_QUERY_INTERNAL_H
#define LOGBOOK_QUERY_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "logbook_query.h"

/* A call site as query_site_ids.c numbers it. */
typedef struct lb_q_site {
    char *template_text, *file, *function;
    uint32_t line;
    uint64_t hash;
} lb_q_site;

struct lb_query {
    sqlite3 *db;
    lb_query_host host;
    int follow;
    lb_reader **followed;        /* follow mode: each source's reader, kept between scans */
    uint8_t *followed_busy;      /* a scan of `records` is reading it now */
    uint64_t records_decoded;
    lb_reader *current_reader;   /* the `record` table's entry (lb_query_set_record) */
    const lb_entry *current_entry;
    lb_q_site *sites;            /* by number - 1 (query_site_ids.c) */
    size_t site_count, site_capacity;
    uint32_t *site_slots;        /* an open-addressed index of them: number, 0 empty */
    size_t site_slot_count;
    int declaring;               /* a table is declaring its columns (sqlite3_declare_vtab) */
    char refusal[160];           /* what the authorizer refused last, for the error message */
};

/* ---- query_tables.c: the two virtual tables ---- */
int lb_q_register_tables(lb_query *query);

/* ---- query_batches.c: a stream turned inside out. lb_reader_stream runs on a thread of its own
 * and hands entries (their arguments copied) out in batches; it waits while the caller uses a
 * batch, so the reader is used by one thread at a time. ---- */
typedef struct lb_q_batches lb_q_batches;
/* Starts streaming `reader` through `filter` (copied; its accept context must live until stop). */
int lb_q_batches_start(lb_reader *reader, const lb_read_filter *filter, lb_q_batches **out);
/* The next entry (valid until the next call): 1, 0 at the end, or -errno of the stream. */
int lb_q_batches_next(lb_q_batches *batches, const lb_entry **out);
/* Stops the stream (it reads the rest without decoding, as lb_reader_stream does) and frees it.
 * Returns the entries the stream handed out. */
uint64_t lb_q_batches_stop(lb_q_batches *batches);

/* ---- query_site_ids.c: one number per call site across sessions and sources ---- */
/* The number of a site (from 1), 0 for none (NULL, or no memory). */
uint32_t lb_q_site_id(lb_query *query, const lb_site_info *site);
void lb_q_site_ids_free(lb_query *query);
typedef struct lb_q_site_memo_slot {
    uint64_t key;                /* (session << 32 | site id) + 1; 0 empty */
    uint32_t id;
} lb_q_site_memo_slot;
typedef struct lb_q_site_memo {  /* a cursor's, for the reader it reads now */
    lb_q_site_memo_slot *slots;
    size_t count, capacity;
    uint64_t last_key;
    uint32_t last_id;
} lb_q_site_memo;
uint32_t lb_q_site_memo_get(lb_q_site_memo *memo, lb_query *query, lb_reader *reader, uint32_t session,
                            uint32_t site_id);
void lb_q_site_memo_reset(lb_q_site_memo *memo);

/* ---- query_values.c: the columns' values ---- */
typedef struct lb_q_text {
    char *bytes;
    size_t length, capacity;
    int failed;                  /* an allocation failed: the text is incomplete */
} lb_q_text;
void lb_q_text_free(lb_q_text *text);
const char *lb_q_level_name(int level);
/* RFC 3339 with 9 fraction digits and Z, as logbook show prints it: 30 bytes and a NUL. */
void lb_q_time_text(int64_t wall_ns, char out[96]);
/* Parses RFC 3339 ("2026-11-28T18:00:00.5Z", "+01:00", a space for the T) or a date: 0 or -1. */
int lb_q_parse_time(const char *text, int64_t *wall_ns);
/* The record's arguments as a JSON array of values (stops before its metadata). */
void lb_q_args_json(const lb_entry *entry, lb_q_text *out);
/* The record's metadata as a JSON object ("{}" without), its error type and message (empty when
 * it has none; *has_error says), from the argument offset where its tail begins. */
void lb_q_tail(const lb_entry *entry, uint32_t tail_offset, lb_q_text *metadata, lb_q_text *error_type,
               lb_q_text *error_message, int *has_error);
/* Copies `length` bytes that should be UTF-8 into `out`, invalid sequences as U+FFFD. */
void lb_q_text_utf8(lb_q_text *out, const uint8_t *bytes, size_t length);
/* Whether `length` bytes are valid UTF-8 (then SQLite may take them as they are). */
int lb_q_is_utf8(const uint8_t *bytes, size_t length);

#endif
