/* query_internal.h — what the files of the query library share (logbook_query.h is the API). */
#ifndef LOGBOOK_QUERY_INTERNAL_H
#define LOGBOOK_QUERY_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "logbook_query.h"

#include <pthread.h>

/* A call site as query_names.c numbers it. */
typedef struct lb_q_site {
    char *template_text, *file, *function;
    uint32_t line;
    uint32_t id;                 /* its number, from 1 */
    uint64_t hash;
} lb_q_site;

typedef struct lb_q_index {      /* open-addressed: index + 1 of a table's entry, 0 empty */
    uint32_t *slots;
    size_t slot_count;
} lb_q_index;

struct lb_query {
    sqlite3 *db;
    lb_query_host host;
    int follow;
    lb_reader **followed;        /* follow mode: each source's reader, kept between scans */
    uint8_t *followed_busy;      /* a scan of `records` is reading it now */
    uint64_t records_decoded;
    lb_reader *current_reader;   /* the `record` table's entry (lb_query_set_record) */
    const lb_entry *current_entry;
    /* query_names.c, behind names_lock: each at a stable address until lb_query_close */
    pthread_mutex_t names_lock;
    lb_q_site **sites;           /* by number - 1 */
    size_t site_count, site_capacity;
    lb_q_index site_index;
    char **loggers;
    size_t logger_count, logger_capacity;
    lb_q_index logger_index;
    int declaring;               /* a table is declaring its columns (sqlite3_declare_vtab) */
    sqlite3_stmt *json_extract;  /* SELECT json_extract(?1, ?2): what the fast path cannot say */
    const sqlite3_vtab *records_tables[2];   /* `records` and `record` while connected (query_levels.c
                                              * tells their scans by them in EXPLAIN) */
    char refusal[160];           /* what the authorizer refused last, for the error message */
};

/* The column of `records` and `record` that holds the level's name (query_records.c). */
enum { LB_Q_LEVEL_COLUMN = 2 };

/* ---- query_batches.c: a stream turned inside out. lb_reader_stream runs on a thread of its own
 * and hands entries out in batches (their arguments copied, their site and logger resolved to
 * shared names). Two batches: the stream fills one while the caller reads the other, except in
 * `alternate` mode (the caller asks the reader itself: a message to render), where the stream
 * waits while the caller uses its batch, so that the reader is used by one thread at a time. ---- */
typedef struct lb_q_entry {
    lb_entry entry;
    const lb_q_site *site;       /* NULL: unknown */
    const char *logger;          /* NULL: unknown */
} lb_q_entry;
typedef struct lb_q_batches lb_q_batches;
/* Starts streaming `reader` through `filter` (copied; its accept context must live until stop). */
int lb_q_batches_start(lb_query *query, lb_reader *reader, const lb_read_filter *filter, int alternate,
                       lb_q_batches **out);
/* The next entry (valid until the next call): 1, 0 at the end, or -errno of the stream. */
int lb_q_batches_next(lb_q_batches *batches, const lb_q_entry **out);
/* Stops the stream (it reads the rest without decoding, as lb_reader_stream does) and frees it.
 * Returns the entries the stream handed out. */
uint64_t lb_q_batches_stop(lb_q_batches *batches);

/* ---- query_names.c: sites (numbered across sessions and sources) and logger names, shared by
 * the threads of a query behind a lock, each at a stable address ---- */
/* The shared site of a reader's site (NULL for none, or no memory). */
const lb_q_site *lb_q_site_of(lb_query *query, const lb_site_info *site);
const lb_q_site *lb_q_site_numbered(lb_query *query, uint32_t id);
const char *lb_q_logger_name(lb_query *query, const char *name);
void lb_q_names_free(lb_query *query);
typedef struct lb_q_memo_slot {
    uint64_t key;                /* (session << 32 | id) + 1; 0 empty */
    const void *value;
} lb_q_memo_slot;
typedef struct lb_q_memo {       /* one reader's ids to shared names, without the lock */
    lb_q_memo_slot *slots;
    size_t count, capacity;
    uint64_t last_key;
    const void *last;
} lb_q_memo;
/* A `const lb_q_site *` (sites memo) or a `const char *` (loggers memo; one memo per kind). */
const void *lb_q_memo_site(lb_q_memo *memo, lb_query *query, lb_reader *reader, uint32_t session, uint32_t site_id);
const void *lb_q_memo_logger(lb_q_memo *memo, lb_query *query, lb_reader *reader, uint32_t session,
                             uint16_t logger_id);
void lb_q_memo_reset(lb_q_memo *memo);

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
/* Parses RFC 3339 ("2026-11-28T18:00:00.5Z", "+01:00", a space for the T) or a date: 0, -1 (not
 * such a time) or -2 (one outside 1677 to 2262, which int64 nanoseconds cannot hold). */
int lb_q_parse_time(const char *text, int64_t *wall_ns);
/* The record's arguments as a JSON array of values (stops before its metadata). */
void lb_q_args_json(const lb_entry *entry, lb_q_text *out);
/* The record's metadata as a JSON object ("{}" without), its error type and message (empty when
 * it has none; *has_error says), from the argument offset where its tail begins. */
void lb_q_tail(const lb_entry *entry, uint32_t tail_offset, lb_q_text *metadata, lb_q_text *error_type,
               lb_q_text *error_message, int *has_error);
/* Copies `length` bytes that should be UTF-8 into `out`, invalid sequences as U+FFFD. */
void lb_q_text_utf8(lb_q_text *out, const uint8_t *bytes, size_t length);
/* A member of a JSON object, as json_extract gives it for `$.key`: a string (without escapes), an
 * integer, a real, true and false as 1 and 0, or null. */
typedef struct lb_q_json_value {
    int type;                    /* SQLITE_TEXT, SQLITE_INTEGER, SQLITE_FLOAT or SQLITE_NULL */
    const char *text;            /* into the JSON */
    size_t length;
    int64_t integer;
    double real;
} lb_q_json_value;
/* Finds `key` among the members of the JSON object `json`: 1 (*out set), 0 (no such member), or
 * -1 when it cannot say as json_extract would (escapes, an object or array value, no object). */
int lb_q_json_member(const char *json, size_t length, const char *key, size_t key_length, lb_q_json_value *out);
/* A text column's value: NULL for NULL, the bytes when they are UTF-8, else a copy made valid in
 * `scratch` (SQLite's text must be UTF-8). */
void lb_q_result_text(sqlite3_context *ctx, const char *text, size_t length, lb_q_text *scratch);
/* Whether `length` bytes are valid UTF-8 (then SQLite may take them as they are). */
int lb_q_is_utf8(const uint8_t *bytes, size_t length);

#endif
