/* query_sites.c — the `sites` table: one row per call site (as query_site_ids.c numbers it, across
 * sessions and sources) and logger that records name, with the count of its records, from one full
 * read of each source when a statement scans it. Memory: one row per (session, site, logger). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query_internal.h"

enum { S_SITE, S_TEMPLATE, S_FILE, S_LINE, S_FUNCTION, S_LOGGER, S_COUNT };

static const char schema[] =
    "CREATE TABLE x(site INTEGER, template TEXT, file TEXT, line INTEGER, function TEXT, logger TEXT, "
    "count INTEGER)";

typedef struct site_row {
    uint64_t key;             /* session << 32 | site, while counting a source */
    uint16_t logger_id;
    uint64_t count;
    uint32_t site;            /* its number (query_site_ids.c), 0: unknown */
    char *logger;             /* NULL: unknown */
} site_row;

typedef struct sites_table {
    sqlite3_vtab base;
    lb_query *query;
} sites_table;

typedef struct sites_cursor {
    sqlite3_vtab_cursor base;
    lb_query *query;
    site_row *rows;
    size_t count, capacity, at;
    /* while counting one source: an open-addressed index of rows by (key, logger) */
    size_t *slots;
    size_t slot_count, first_of_source;
} sites_cursor;

static int connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out, char **error) {
    (void)argc, (void)argv, (void)error;
    lb_query *q = aux;
    q->declaring = 1;   /* the authorizer lets the table's own declaration through */
    int rc = sqlite3_declare_vtab(db, schema);
    q->declaring = 0;
    if (rc != SQLITE_OK) return rc;
    sites_table *t = sqlite3_malloc(sizeof *t);
    if (!t) return SQLITE_NOMEM;
    memset(t, 0, sizeof *t);
    t->query = aux;
    *out = &t->base;
    return SQLITE_OK;
}

static int disconnect(sqlite3_vtab *vtab) {
    sqlite3_free(vtab);
    return SQLITE_OK;
}

static int best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
    (void)vtab;
    info->estimatedCost = 1e7;
    info->estimatedRows = 100;
    return SQLITE_OK;
}

static int open_cursor(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
    sites_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->query = ((sites_table *)vtab)->query;
    *out = &c->base;
    return SQLITE_OK;
}

static void forget_rows(sites_cursor *c) {
    for (size_t i = 0; i < c->count; i++) free(c->rows[i].logger);
    free(c->rows);
    free(c->slots);
    c->rows = NULL;
    c->slots = NULL;
    c->count = c->capacity = c->at = c->slot_count = 0;
}

static int close_cursor(sqlite3_vtab_cursor *cursor) {
    sites_cursor *c = (sites_cursor *)cursor;
    forget_rows(c);
    sqlite3_free(c);
    return SQLITE_OK;
}

static size_t slot_of(uint64_t key, uint16_t logger, size_t slot_count) {
    uint64_t h = (key ^ ((uint64_t)logger << 48)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (slot_count - 1);
}

/* Doubles the index (slots hold row index + 1; 0 is empty). */
static int grow_slots(sites_cursor *c) {
    size_t count = c->slot_count ? 2 * c->slot_count : 1024;
    size_t *slots = calloc(count, sizeof *slots);
    if (!slots) return -ENOMEM;
    for (size_t i = c->first_of_source; i < c->count; i++) {
        size_t s = slot_of(c->rows[i].key, c->rows[i].logger_id, count);
        while (slots[s]) s = (s + 1) & (count - 1);
        slots[s] = i + 1;
    }
    free(c->slots);
    c->slots = slots;
    c->slot_count = count;
    return 0;
}

typedef struct counting {
    sites_cursor *cursor;
    int failed;
} counting;

static int count_entry(void *context, const lb_entry *e) {
    counting *k = context;
    sites_cursor *c = k->cursor;
    uint64_t key = (uint64_t)e->session << 32 | e->site_id;
    if ((c->count - c->first_of_source + 1) * 2 > c->slot_count && grow_slots(c) != 0) return k->failed = 1;
    size_t s = slot_of(key, e->logger_id, c->slot_count);
    for (; c->slots[s]; s = (s + 1) & (c->slot_count - 1)) {
        site_row *row = &c->rows[c->slots[s] - 1];
        if (row->key == key && row->logger_id == e->logger_id) {
            row->count++;
            return 0;
        }
    }
    if (c->count == c->capacity) {
        size_t capacity = c->capacity ? 2 * c->capacity : 64;
        site_row *rows = realloc(c->rows, capacity * sizeof *rows);
        if (!rows) return k->failed = 1;
        c->rows = rows;
        c->capacity = capacity;
    }
    c->rows[c->count] = (site_row){.key = key, .logger_id = e->logger_id, .count = 1};
    c->slots[s] = ++c->count;
    return 0;
}

static char *copy(const char *text) { return text ? strdup(text) : NULL; }

/* Counts the records of one source by (session, site, logger), then names each. */
static int count_source(sites_cursor *c, size_t source) {
    lb_query *q = c->query;
    lb_reader *reader;
    int rc = q->host.open_reader(q->host.context, source, &reader);
    if (rc < 0) return rc;
    c->first_of_source = c->count;
    free(c->slots);
    c->slots = NULL;
    c->slot_count = 0;
    counting k = {c, 0};
    lb_read_filter none = {0};
    long read = grow_slots(c) == 0 ? lb_reader_stream(reader, &none, count_entry, &k) : -ENOMEM;
    if (read >= 0 && k.failed) read = -ENOMEM;
    if (read >= 0) q->records_decoded += (uint64_t)read;
    for (size_t i = c->first_of_source; i < c->count && read >= 0; i++) {
        site_row *row = &c->rows[i];
        uint32_t session = (uint32_t)(row->key >> 32);
        const lb_q_site *site = lb_q_site_of(q, lb_reader_site(reader, session, (uint32_t)row->key));
        row->site = site ? site->id : 0;
        row->logger = copy(lb_reader_logger_name(reader, session, row->logger_id));
    }
    q->host.close_reader(q->host.context, source, reader);
    return read < 0 ? (int)read : 0;
}

static int by_site_and_logger(const void *a, const void *b) {
    const site_row *x = a, *y = b;
    if (x->site != y->site) return x->site < y->site ? -1 : 1;
    if (!x->logger || !y->logger) return (x->logger != NULL) - (y->logger != NULL);
    return strcmp(x->logger, y->logger);
}

/* Rows of the same site and logger from several sessions and sources: one, their counts added. */
static void merge_rows(sites_cursor *c) {
    if (c->count > 1) qsort(c->rows, c->count, sizeof *c->rows, by_site_and_logger);
    size_t kept = 0;
    for (size_t i = 0; i < c->count; i++) {
        if (kept > 0 && by_site_and_logger(&c->rows[kept - 1], &c->rows[i]) == 0) {
            c->rows[kept - 1].count += c->rows[i].count;
            free(c->rows[i].logger);
        } else {
            c->rows[kept++] = c->rows[i];
        }
    }
    c->count = kept;
}

static int filter(sqlite3_vtab_cursor *cursor, int idx_num, const char *idx_str, int argc, sqlite3_value **argv) {
    (void)idx_num, (void)idx_str, (void)argc, (void)argv;
    sites_cursor *c = (sites_cursor *)cursor;
    lb_query *q = c->query;
    forget_rows(c);
    if (q->follow) {
        sqlite3_free(cursor->pVtab->zErrMsg);
        cursor->pVtab->zErrMsg = sqlite3_mprintf("sites counts whole reads: a followed query reads records");
        return SQLITE_ERROR;
    }
    for (size_t source = 0; source < q->host.source_count; source++) {
        int rc = count_source(c, source);
        if (rc < 0) {
            sqlite3_free(cursor->pVtab->zErrMsg);
            cursor->pVtab->zErrMsg = sqlite3_mprintf("cannot read %s: %s", q->host.source_name(q->host.context, source),
                                                     strerror(-rc));
            forget_rows(c);
            return SQLITE_ERROR;
        }
    }
    merge_rows(c);
    return SQLITE_OK;
}

static int next(sqlite3_vtab_cursor *cursor) {
    ((sites_cursor *)cursor)->at++;
    return SQLITE_OK;
}

static int eof(sqlite3_vtab_cursor *cursor) {
    sites_cursor *c = (sites_cursor *)cursor;
    return c->at >= c->count;
}

static int rowid(sqlite3_vtab_cursor *cursor, sqlite3_int64 *out) {
    *out = (sqlite3_int64)((sites_cursor *)cursor)->at + 1;
    return SQLITE_OK;
}

static void result_text(sqlite3_context *ctx, const char *text) {
    lb_q_text scratch = {0};
    lb_q_result_text(ctx, text, text ? strlen(text) : 0, &scratch);
    lb_q_text_free(&scratch);
}

static int column(sqlite3_vtab_cursor *cursor, sqlite3_context *ctx, int index) {
    sites_cursor *c = (sites_cursor *)cursor;
    const site_row *row = &c->rows[c->at];
    const lb_q_site *site = lb_q_site_numbered(c->query, row->site);
    if (!site && index != S_LOGGER && index != S_COUNT) {
        sqlite3_result_null(ctx);
        return SQLITE_OK;
    }
    switch (index) {
    case S_SITE: sqlite3_result_int64(ctx, row->site); break;
    case S_TEMPLATE: result_text(ctx, site->template_text); break;
    case S_FILE: result_text(ctx, site->file); break;
    case S_LINE: sqlite3_result_int64(ctx, site->line); break;
    case S_FUNCTION: result_text(ctx, site->function); break;
    case S_LOGGER: result_text(ctx, row->logger); break;
    default: sqlite3_result_int64(ctx, (sqlite3_int64)row->count); break;
    }
    return SQLITE_OK;
}

const sqlite3_module lb_q_sites_module = {
    .iVersion = 1,
    .xCreate = NULL,
    .xConnect = connect,
    .xBestIndex = best_index,
    .xDisconnect = disconnect,
    .xDestroy = disconnect,
    .xOpen = open_cursor,
    .xClose = close_cursor,
    .xFilter = filter,
    .xNext = next,
    .xEof = eof,
    .xColumn = column,
    .xRowid = rowid,
};
