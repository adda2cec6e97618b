/* query_records.c — the `records` table: one row per record of the host's sources, read through
 * lb_reader_stream with the conditions SQLite lets it take (time, level, logger, site, template,
 * file, function) pushed into its lb_read_filter, and each row's columns made only when asked. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "query_internal.h"

enum column {
    C_TIME, C_TIME_TEXT, C_LEVEL, C_SEVERITY, C_LOGGER, C_MESSAGE, C_TEMPLATE, C_FILE, C_LINE,
    C_FUNCTION, C_THREAD, C_PID, C_SESSION, C_SITE, C_METADATA, C_ERROR_TYPE, C_ERROR_MESSAGE, C_ARGS,
    C_SOURCE, C_ARG1
};
enum { ARG_COLUMNS = 16, MAX_PUSHED = 32 };
_Static_assert(C_LEVEL == LB_Q_LEVEL_COLUMN, "query_levels.c finds the level column by its index");

static const char schema[] =
    "CREATE TABLE x(time INTEGER, time_text TEXT, level TEXT COLLATE level, severity INTEGER, logger TEXT, message TEXT, "
    "template TEXT, file TEXT, line INTEGER, function TEXT, thread INTEGER, pid INTEGER, session INTEGER, "
    "site INTEGER, metadata TEXT, error_type TEXT, error_message TEXT, args TEXT, source TEXT, "
    "arg1, arg2, arg3, arg4, arg5, arg6, arg7, arg8, arg9, arg10, arg11, arg12, arg13, arg14, arg15, arg16)";

/* A condition handed to xFilter: the column and the operator, one byte each in idxStr. */
enum op { OP_EQ = 'e', OP_GT = 'g', OP_GE = 'G', OP_LT = 'l', OP_LE = 'L' };

typedef struct pushed_match {
    enum column column;
    char *text;               /* logger, template, file, function */
    int64_t number;           /* site */
} pushed_match;

typedef struct records_table {
    sqlite3_vtab base;
    lb_query *query;
    int single;               /* the `record` table: the one entry lb_query_set_record names */
} records_table;

typedef struct records_cursor {
    sqlite3_vtab_cursor base;
    lb_query *query;
    int single;
    int alternate;            /* the statement asks for messages: the reader and SQL take turns */
    /* the scan */
    lb_read_filter filter;
    pushed_match matches[MAX_PUSHED];
    int match_count;
    size_t source;
    lb_reader *reader;
    lb_q_batches *batches;
    int eof;
    sqlite3_int64 rowid;
    /* the row */
    const lb_q_entry *row;
    const lb_entry *entry;    /* &row->entry */
    lb_q_entry single_row;    /* `record`'s, its names resolved here */
    int decoded;              /* args[] and tail_offset hold this row's */
    lb_arg args[ARG_COLUMNS];
    int arg_count;
    uint32_t tail_offset;
    int tail_made;
    int has_error;
    lb_q_text metadata, error_type, error_message, scratch;
} records_cursor;

static int connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out, char **error) {
    (void)error;
    lb_query *q = aux;
    q->declaring = 1;   /* the authorizer lets the table's own declaration through */
    int rc = sqlite3_declare_vtab(db, schema);
    q->declaring = 0;
    if (rc != SQLITE_OK) return rc;
    records_table *t = sqlite3_malloc(sizeof *t);
    if (!t) return SQLITE_NOMEM;
    memset(t, 0, sizeof *t);
    t->query = aux;
    t->single = argc > 0 && strcmp(argv[0], "record") == 0;
    q->records_tables[t->single] = &t->base;
    *out = &t->base;
    return SQLITE_OK;
}

static int disconnect(sqlite3_vtab *vtab) {
    records_table *t = (records_table *)vtab;
    if (t->query->records_tables[t->single] == vtab) t->query->records_tables[t->single] = NULL;
    sqlite3_free(vtab);
    return SQLITE_OK;
}

static char op_code(unsigned char op) {
    switch (op) {
    case SQLITE_INDEX_CONSTRAINT_EQ: return OP_EQ;
    case SQLITE_INDEX_CONSTRAINT_GT: return OP_GT;
    case SQLITE_INDEX_CONSTRAINT_GE: return OP_GE;
    case SQLITE_INDEX_CONSTRAINT_LT: return OP_LT;
    case SQLITE_INDEX_CONSTRAINT_LE: return OP_LE;
    default: return 0;
    }
}

/* Time and level take every comparison, evaluated here exactly (a level compared with a name
 * must not reach SQLite, which would compare a number with text); the others take equality and
 * SQLite checks them again (a record of an unknown site passes the filter). */
static int best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
    (void)vtab;
    char codes[2 * MAX_PUSHED + 1];
    int pushed = 0;
    double rows = 1e7;
    for (int i = 0; i < info->nConstraint && pushed < MAX_PUSHED; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        char op = op_code(c->op);
        if (!c->usable || !op) continue;
        int column = c->iColumn;
        /* Pushed down only where the reader's comparison is SQLite's: a level by the level
         * collation, a text by BINARY (`logger = 'NET' COLLATE NOCASE` is SQLite's to decide). */
        const char *collation = sqlite3_vtab_collation(info, i);
        int ranged = column == C_TIME || column == C_SEVERITY ||
                     (column == C_LEVEL && collation && strcasecmp(collation, "level") == 0);
        int text = column == C_LOGGER || column == C_TEMPLATE || column == C_FILE || column == C_FUNCTION;
        int matched = op == OP_EQ && (column == C_SITE || (text && (!collation || strcasecmp(collation, "BINARY") == 0)));
        if (!ranged && !matched) continue;
        codes[2 * pushed] = (char)('A' + column);
        codes[2 * pushed + 1] = op;
        info->aConstraintUsage[i].argvIndex = ++pushed;
        /* `severity` is an INTEGER: compared with text, SQLite's answer stands (checked again). */
        info->aConstraintUsage[i].omit = ranged && column != C_SEVERITY;
        rows /= op == OP_EQ ? 10 : 3;
    }
    codes[2 * pushed] = '\0';
    /* A message is rendered by the host from the reader: the stream waits while rows are read. */
    info->idxNum = (info->colUsed & ((sqlite3_uint64)1 << C_MESSAGE)) != 0;
    if (pushed > 0) {
        info->idxStr = sqlite3_mprintf("%s", codes);
        if (!info->idxStr) return SQLITE_NOMEM;
        info->needToFreeIdxStr = 1;
    }
    /* Every scan reads its sources whole (a pushed-down condition saves decoding, not reading):
     * the cost stays that of a full read, so SQLite never plans a scan per row of another table
     * as if it were an index lookup. */
    info->estimatedCost = 1e7 + rows;
    info->estimatedRows = (sqlite3_int64)rows;
    return SQLITE_OK;
}

static int open_cursor(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
    records_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->query = ((records_table *)vtab)->query;
    c->single = ((records_table *)vtab)->single;
    c->eof = 1;
    *out = &c->base;
    return SQLITE_OK;
}

/* Ends the reading of the current source: the stream stopped, the reader given back (kept in
 * follow mode). */
static void end_source(records_cursor *c) {
    lb_query *q = c->query;
    if (c->single) {
        c->reader = NULL;
        c->entry = NULL;
        return;
    }
    if (c->batches) q->records_decoded += lb_q_batches_stop(c->batches);
    c->batches = NULL;
    if (c->reader) {
        if (q->follow) {
            q->followed_busy[c->source] = 0;
        } else {
            q->host.close_reader(q->host.context, c->source, c->reader);
        }
    }
    c->reader = NULL;
    c->entry = NULL;
}

static void forget_matches(records_cursor *c) {
    for (int i = 0; i < c->match_count; i++) sqlite3_free(c->matches[i].text);
    c->match_count = 0;
}

static int close_cursor(sqlite3_vtab_cursor *cursor) {
    records_cursor *c = (records_cursor *)cursor;
    end_source(c);
    forget_matches(c);
    lb_q_text_free(&c->metadata);
    lb_q_text_free(&c->error_type);
    lb_q_text_free(&c->error_message);
    lb_q_text_free(&c->scratch);
    sqlite3_free(c);
    return SQLITE_OK;
}

static int fail(records_cursor *c, const char *format, const char *what, int rc) {
    sqlite3_vtab *vtab = c->base.pVtab;
    sqlite3_free(vtab->zErrMsg);
    vtab->zErrMsg = sqlite3_mprintf(format, what, strerror(rc < 0 ? -rc : rc));
    return SQLITE_ERROR;
}

/* Starts reading source c->source: a fresh reader, or in follow mode its kept one. */
static int begin_source(records_cursor *c) {
    lb_query *q = c->query;
    const char *name = q->host.source_name(q->host.context, c->source);
    int rc;
    if (q->follow) {
        if (q->followed_busy[c->source]) {
            sqlite3_free(c->base.pVtab->zErrMsg);
            c->base.pVtab->zErrMsg = sqlite3_mprintf("a followed query reads the records table once (%s)", name);
            return SQLITE_ERROR;
        }
        if (!q->followed[c->source]) {
            rc = q->host.open_reader(q->host.context, c->source, &q->followed[c->source]);
            if (rc < 0) return fail(c, "cannot read %s: %s", name, rc);
        }
        q->followed_busy[c->source] = 1;
        c->reader = q->followed[c->source];
    } else {
        rc = q->host.open_reader(q->host.context, c->source, &c->reader);
        if (rc < 0) {
            c->reader = NULL;
            return fail(c, "cannot read %s: %s", name, rc);
        }
    }
    rc = lb_q_batches_start(q, c->reader, &c->filter, c->alternate, &c->batches);
    if (rc < 0) return fail(c, "cannot read %s: %s", name, rc);
    return SQLITE_OK;
}

static int accept_site(void *context, const struct lb_site_info *site, const char *logger) {
    const records_cursor *c = context;
    for (int i = 0; i < c->match_count; i++) {
        const pushed_match *m = &c->matches[i];
        switch (m->column) {
        case C_LOGGER:
            if (!logger || strcmp(logger, m->text) != 0) return 0;
            break;
        case C_SITE:
            if (!site) return 0;
            const lb_q_site *numbered = lb_q_site_of(c->query, site);
            if (!numbered || (int64_t)numbered->id != m->number) return 0;
            break;
        case C_TEMPLATE:
            if (!site || strcmp(site->template_text, m->text) != 0) return 0;
            break;
        case C_FILE:
            if (!site || strcmp(site->file, m->text) != 0) return 0;
            break;
        case C_FUNCTION:
            if (!site || strcmp(site->function, m->text) != 0) return 0;
            break;
        default: break;
        }
    }
    return 1;
}

/* What the reader's filter decides, decided here for the `record` table's one entry. */
static int passes_filter(const records_cursor *c, lb_reader *reader, const lb_entry *e) {
    const lb_read_filter *f = &c->filter;
    if ((f->min_level && e->level < f->min_level) || (f->max_level && e->level > f->max_level)) return 0;
    if ((f->since_ns && e->wall_ns < f->since_ns) || (f->until_ns && e->wall_ns >= f->until_ns)) return 0;
    if (c->match_count == 0) return 1;
    return accept_site((void *)c, lb_reader_site(reader, e->session, e->site_id),
                       lb_reader_logger_name(reader, e->session, e->logger_id));
}

/* Moves to the next row: the next entry of this source, or the first of the next source. */
static int advance(records_cursor *c) {
    lb_query *q = c->query;
    if (c->single) {
        /* `record`: the host's current entry, once, if it passes what was pushed down. */
        c->eof = c->rowid > 0 || !q->current_entry || !q->current_reader ||
                 !passes_filter(c, q->current_reader, q->current_entry);
        c->reader = q->current_reader;
        if (!c->eof) {
            c->single_row.entry = *q->current_entry;
            c->single_row.site = lb_q_site_of(q, lb_reader_site(c->reader, q->current_entry->session,
                                                                q->current_entry->site_id));
            c->single_row.logger = lb_q_logger_name(q, lb_reader_logger_name(c->reader, q->current_entry->session,
                                                                             q->current_entry->logger_id));
            c->row = &c->single_row;
            c->entry = &c->single_row.entry;
        }
        c->rowid++;
        c->decoded = 0;
        c->tail_made = 0;
        return SQLITE_OK;
    }
    for (;;) {
        if (!c->batches) {
            if (c->source >= q->host.source_count) {
                c->eof = 1;
                return SQLITE_OK;
            }
            int rc = begin_source(c);
            if (rc != SQLITE_OK) {
                end_source(c);
                c->eof = 1;
                return rc;
            }
        }
        int rc = lb_q_batches_next(c->batches, &c->row);
        if (rc == 1) {
            c->entry = &c->row->entry;
            c->rowid++;
            c->decoded = 0;
            c->tail_made = 0;
            return SQLITE_OK;
        }
        end_source(c);
        if (rc < 0) {
            c->eof = 1;
            return fail(c, "cannot read %s: %s", q->host.source_name(q->host.context, c->source), rc);
        }
        c->source++;
    }
}

/* A bound of a range: [low, high] in integers, narrowed by `value <op> x`. 0, or 1 when nothing can
 * match (x NULL, or beyond what the column holds). */
typedef struct range {
    int64_t low, high;
} range;

static int narrow(range *r, char op, double x) {
    if (isnan(x)) return 1;
    /* In integers: a double beyond 2^53 is an integer already, and x - 1 there is x again. */
    if (x >= 9223372036854775808.0) return op == OP_LT || op == OP_LE ? 0 : 1;
    if (x < -9223372036854775808.0) return op == OP_GT || op == OP_GE ? 0 : 1;
    int integral = x == floor(x);
    int64_t low = r->low, high = r->high;
    switch (op) {
    case OP_EQ:
        if (!integral) return 1;
        low = high = (int64_t)x;
        break;
    case OP_GT:
        if (!integral) low = (int64_t)ceil(x);
        else if ((int64_t)x == INT64_MAX) return 1;
        else low = (int64_t)x + 1;
        break;
    case OP_GE: low = (int64_t)ceil(x); break;
    case OP_LT:
        if (!integral) high = (int64_t)floor(x);
        else if ((int64_t)x == INT64_MIN) return 1;
        else high = (int64_t)x - 1;
        break;
    case OP_LE: high = (int64_t)floor(x); break;
    }
    if (low > r->low) r->low = low;
    if (high < r->high) r->high = high;
    return r->low > r->high;
}

/* An operand as the statement wrote it, for an error message: 'text' (quotes doubled, as SQL
 * writes them) or x'0a1b' (a blob, its first 32 bytes). sqlite3_free() it. */
static char *operand_text(sqlite3_value *v) {
    if (sqlite3_value_type(v) != SQLITE_BLOB) return sqlite3_mprintf("%Q", (const char *)sqlite3_value_text(v));
    const unsigned char *bytes = sqlite3_value_blob(v);
    int length = sqlite3_value_bytes(v), shown = length < 32 ? length : 32;
    char hex[2 * 32 + 1] = "";
    for (int i = 0; i < shown; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
    return sqlite3_mprintf("x'%s'%s", hex, shown < length ? " (its first 32 bytes)" : "");
}

static int refuse_operand(records_cursor *c, const char *format, sqlite3_value *v) {
    char *operand = operand_text(v);
    sqlite3_free(c->base.pVtab->zErrMsg);
    c->base.pVtab->zErrMsg = operand ? sqlite3_mprintf(format, operand) : NULL;
    sqlite3_free(operand);
    return operand && c->base.pVtab->zErrMsg ? SQLITE_ERROR : SQLITE_NOMEM;
}

/* A time compared exactly in integers (ns). Text holding a number is that number, as SQLite
 * reads it against the INTEGER column (time = '1796675894679069049'); other text is RFC 3339. */
static int narrow_time(records_cursor *c, range *r, char op, sqlite3_value *v, int *empty) {
    int type = sqlite3_value_type(v), rc;
    int64_t x;
    if (type == SQLITE_NULL) return *empty = 1, SQLITE_OK;
    if (type == SQLITE_TEXT) type = sqlite3_value_numeric_type(v);
    if (type == SQLITE_FLOAT) {
        if (narrow(r, op, sqlite3_value_double(v))) *empty = 1;
        return SQLITE_OK;
    }
    if (type == SQLITE_INTEGER) {
        x = sqlite3_value_int64(v);
    } else if (type == SQLITE_BLOB || (rc = lb_q_parse_time((const char *)sqlite3_value_text(v), &x)) != 0) {
        return refuse_operand(c,
                              type != SQLITE_BLOB && rc == -2
                                  ? "time compared with %s, outside the times Logbook can name (1677 to 2262)"
                                  : "time compared with %s, which is neither nanoseconds nor RFC 3339 (2026-11-28T18:00:00Z)",
                              v);
    }
    switch (op) {
    case OP_EQ:
        if (x > r->low) r->low = x;
        if (x < r->high) r->high = x;
        break;
    case OP_GT:
        if (x == INT64_MAX) *empty = 1;
        else if (x + 1 > r->low) r->low = x + 1;
        break;
    case OP_GE: if (x > r->low) r->low = x; break;
    case OP_LT:
        if (x == INT64_MIN) *empty = 1;
        else if (x - 1 < r->high) r->high = x - 1;
        break;
    case OP_LE: if (x < r->high) r->high = x; break;
    }
    if (r->low > r->high) *empty = 1;
    return SQLITE_OK;
}

/* A level: a number, or a name read as its number. */
static int narrow_level(records_cursor *c, range *r, char op, sqlite3_value *v, int *empty) {
    int type = sqlite3_value_type(v);
    if (type == SQLITE_NULL) return *empty = 1, SQLITE_OK;
    double x;
    if (type == SQLITE_BLOB || (type == SQLITE_TEXT && sqlite3_value_numeric_type(v) == SQLITE_TEXT)) {
        int level = type == SQLITE_BLOB ? 0 : lb_query_level_from_name((const char *)sqlite3_value_text(v));
        if (level == 0)
            return refuse_operand(
                c, "level compared with %s, which is no level (trace, debug, info, notice, warning, error, critical)", v);
        x = level;
    } else {
        x = sqlite3_value_double(v);
    }
    if (narrow(r, op, x)) *empty = 1;
    return SQLITE_OK;
}

/* `severity` compared with a number (text is no number to SQLite: left to it). */
static void narrow_severity(range *r, char op, sqlite3_value *v, int *empty) {
    int type = sqlite3_value_type(v);
    if (type == SQLITE_NULL) *empty = 1;
    else if ((type == SQLITE_INTEGER || type == SQLITE_FLOAT) && narrow(r, op, sqlite3_value_double(v))) *empty = 1;
}

static int take_match(records_cursor *c, int column, sqlite3_value *v, int *empty) {
    if (sqlite3_value_type(v) == SQLITE_NULL) return *empty = 1, SQLITE_OK;
    pushed_match *m = &c->matches[c->match_count];
    m->column = (enum column)column;
    if (column == C_SITE) {
        if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER) return SQLITE_OK;   /* SQLite decides */
        m->number = sqlite3_value_int64(v);
        c->match_count++;
        return SQLITE_OK;
    }
    m->text = sqlite3_mprintf("%s", (const char *)sqlite3_value_text(v));
    if (!m->text) return SQLITE_NOMEM;
    c->match_count++;
    return SQLITE_OK;
}

static int filter(sqlite3_vtab_cursor *cursor, int idx_num, const char *idx_str, int argc, sqlite3_value **argv) {
    records_cursor *c = (records_cursor *)cursor;
    c->alternate = idx_num & 1;
    end_source(c);
    forget_matches(c);
    c->source = 0;
    c->rowid = 0;
    c->eof = 0;
    range time = {INT64_MIN, INT64_MAX}, level = {1, 7};
    int empty = 0, rc = SQLITE_OK;
    for (int i = 0; i < argc && idx_str && idx_str[2 * i] && rc == SQLITE_OK; i++) {
        int column = idx_str[2 * i] - 'A';
        char op = idx_str[2 * i + 1];
        if (column == C_TIME) rc = narrow_time(c, &time, op, argv[i], &empty);
        else if (column == C_LEVEL) rc = narrow_level(c, &level, op, argv[i], &empty);
        else if (column == C_SEVERITY) narrow_severity(&level, op, argv[i], &empty);
        else rc = take_match(c, column, argv[i], &empty);
    }
    if (rc != SQLITE_OK) {
        c->eof = 1;
        return rc;
    }
    if (level.low > 7 || level.high < 1 || time.high <= 0) empty = 1;
    if (empty) {
        c->eof = 1;
        return SQLITE_OK;
    }
    c->filter = (lb_read_filter){0};
    c->filter.min_level = level.low > 1 ? (uint8_t)level.low : 0;
    c->filter.max_level = level.high < 7 ? (uint8_t)level.high : 0;
    c->filter.since_ns = time.low > 0 ? time.low : 0;
    c->filter.until_ns = time.high < INT64_MAX ? time.high + 1 : 0;
    if (c->match_count > 0) {
        c->filter.accept = accept_site;
        c->filter.accept_context = c;
    }
    return advance(c);
}

static int next(sqlite3_vtab_cursor *cursor) { return advance((records_cursor *)cursor); }

static int eof(sqlite3_vtab_cursor *cursor) { return ((records_cursor *)cursor)->eof; }

/* A record's identity, the same in every scan (SQLite's OR plans merge scans by it): its source,
 * its chunk's sequence and its offset in the chunk (7, 32 and 24 bits). */
static int rowid(sqlite3_vtab_cursor *cursor, sqlite3_int64 *out) {
    const records_cursor *c = (const records_cursor *)cursor;
    /* `record`: its host reads one source, the first (show --where). */
    uint64_t source = c->single ? 0 : (uint64_t)c->source & 0x7F;
    *out = (sqlite3_int64)(source << 56 | (c->entry->chunk_sequence & 0xFFFFFFFFu) << 24 |
                           (c->entry->chunk_offset & 0xFFFFFFu));
    return SQLITE_OK;
}

/* The message arguments (up to ARG_COLUMNS) and where the tail (metadata, error) begins. */
static void decode_args(records_cursor *c) {
    if (c->decoded) return;
    c->decoded = 1;
    c->arg_count = 0;
    const lb_entry *e = c->entry;
    uint32_t offset = 0, before = 0;
    lb_arg a;
    c->tail_offset = e->args_length;
    while (lb_arg_next(e->args, e->args_length, &offset, &a) == 1) {
        if (a.type == LB_ARG_METADATA || a.type == LB_ARG_ERROR) {
            c->tail_offset = before;
            break;
        }
        if (c->arg_count < ARG_COLUMNS) c->args[c->arg_count++] = a;
        before = offset;
    }
}

static void make_tail(records_cursor *c) {
    if (c->tail_made) return;
    decode_args(c);
    lb_q_tail(c->entry, c->tail_offset, &c->metadata, &c->error_type, &c->error_message, &c->has_error);
    c->tail_made = 1;
}

static void result_text(sqlite3_context *ctx, records_cursor *c, const char *text, size_t length) {
    lb_q_result_text(ctx, text, length, &c->scratch);
}

static void result_owned(sqlite3_context *ctx, const lb_q_text *text) {
    if (text->failed) return sqlite3_result_error_nomem(ctx);
    sqlite3_result_text(ctx, text->bytes ? text->bytes : "", (int)text->length, SQLITE_TRANSIENT);
}

static void result_arg(sqlite3_context *ctx, records_cursor *c, int index) {
    decode_args(c);
    if (index >= c->arg_count) return sqlite3_result_null(ctx);
    const lb_arg *a = &c->args[index];
    switch (a->type) {
    case LB_ARG_BOOL: return sqlite3_result_int(ctx, a->value.b);
    case LB_ARG_I8: case LB_ARG_I16: case LB_ARG_I32: case LB_ARG_I64: case LB_ARG_INT:
        return sqlite3_result_int64(ctx, a->value.i);
    case LB_ARG_U8: case LB_ARG_U16: case LB_ARG_U32: case LB_ARG_U64: case LB_ARG_UINT:
        if (a->value.u > (uint64_t)INT64_MAX) return sqlite3_result_double(ctx, (double)a->value.u);
        return sqlite3_result_int64(ctx, (sqlite3_int64)a->value.u);
    case LB_ARG_F32: case LB_ARG_F64: return sqlite3_result_double(ctx, a->value.f);
    case LB_ARG_STRING: case LB_ARG_STATIC_STRING:
        return result_text(ctx, c, a->bytes ? (const char *)a->bytes : "", a->length);
    case LB_ARG_BYTES: return sqlite3_result_blob(ctx, a->bytes, (int)a->length, SQLITE_TRANSIENT);
    default: return sqlite3_result_null(ctx);
    }
}

static void result_site(sqlite3_context *ctx, records_cursor *c, int column) {
    const lb_q_site *s = c->row->site;
    if (!s) return sqlite3_result_null(ctx);
    switch (column) {
    case C_TEMPLATE: return result_text(ctx, c, s->template_text, strlen(s->template_text));
    case C_FILE: return result_text(ctx, c, s->file, strlen(s->file));
    case C_FUNCTION: return result_text(ctx, c, s->function, strlen(s->function));
    case C_SITE: return sqlite3_result_int64(ctx, s->id);
    default: return sqlite3_result_int64(ctx, s->line);
    }
}

static int column(sqlite3_vtab_cursor *cursor, sqlite3_context *ctx, int index) {
    records_cursor *c = (records_cursor *)cursor;
    const lb_entry *e = c->entry;
    lb_query *q = c->query;
    char text[96];
    size_t length;
    const char *s;
    switch (index) {
    case C_TIME: sqlite3_result_int64(ctx, e->wall_ns); break;
    case C_TIME_TEXT:
        lb_q_time_text(e->wall_ns, text);
        sqlite3_result_text(ctx, text, -1, SQLITE_TRANSIENT);
        break;
    case C_LEVEL:
        /* Its name; a level this version does not know, as its number (the level collation
         * orders both by severity). */
        s = lb_q_level_name(e->level);
        if (s) {
            sqlite3_result_text(ctx, s, -1, SQLITE_STATIC);
        } else {
            snprintf(text, sizeof text, "%u", e->level);
            sqlite3_result_text(ctx, text, -1, SQLITE_TRANSIENT);
        }
        break;
    case C_SEVERITY: sqlite3_result_int(ctx, e->level); break;
    case C_LOGGER:
        s = c->row->logger;
        result_text(ctx, c, s, s ? strlen(s) : 0);
        break;
    case C_MESSAGE:
        s = q->host.message(q->host.context, c->reader, e, &length);
        if (s) sqlite3_result_text(ctx, s, (int)length, SQLITE_TRANSIENT);
        else sqlite3_result_null(ctx);
        break;
    case C_TEMPLATE: case C_FILE: case C_LINE: case C_FUNCTION: case C_SITE: result_site(ctx, c, index); break;
    case C_THREAD: sqlite3_result_int64(ctx, e->thread_id); break;
    case C_PID: sqlite3_result_int64(ctx, e->pid); break;
    case C_SESSION: sqlite3_result_int64(ctx, e->session); break;
    case C_METADATA:
        make_tail(c);
        result_owned(ctx, &c->metadata);
        break;
    case C_ERROR_TYPE: case C_ERROR_MESSAGE:
        make_tail(c);
        if (!c->has_error) sqlite3_result_null(ctx);
        else result_owned(ctx, index == C_ERROR_TYPE ? &c->error_type : &c->error_message);
        break;
    case C_ARGS:
        lb_q_args_json(e, &c->scratch);
        result_owned(ctx, &c->scratch);
        break;
    case C_SOURCE:
        sqlite3_result_text(ctx, q->host.source_name(q->host.context, c->source), -1, SQLITE_TRANSIENT);
        break;
    default:
        if (index >= C_ARG1 && index < C_ARG1 + ARG_COLUMNS) result_arg(ctx, c, index - C_ARG1);
        else sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

/* json_extract(X, '$.key') with X a column of this table (SQLite asks xFindFunction): the member
 * found by a scan of the object, not a parse of all of it (a metadata filter's dearest step); any
 * other case by SQLite's own json_extract, through a statement kept for it. */
static void json_extract_member(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    lb_query *q = sqlite3_user_data(ctx);
    if (argc == 2 && sqlite3_value_type(argv[0]) == SQLITE_TEXT && sqlite3_value_type(argv[1]) == SQLITE_TEXT) {
        const char *path = (const char *)sqlite3_value_text(argv[1]);
        size_t key_length = 0;
        if (path[0] == '$' && path[1] == '.') {
            const char *k = path + 2;
            while ((k[key_length] >= 'a' && k[key_length] <= 'z') || (k[key_length] >= 'A' && k[key_length] <= 'Z') ||
                   (k[key_length] >= '0' && k[key_length] <= '9') || k[key_length] == '_')
                key_length++;
            if (k[key_length] != '\0') key_length = 0;
        }
        lb_q_json_value v;
        int found = key_length ? lb_q_json_member((const char *)sqlite3_value_text(argv[0]),
                                                  (size_t)sqlite3_value_bytes(argv[0]), path + 2, key_length, &v)
                               : -1;
        if (found == 0) return sqlite3_result_null(ctx);
        if (found == 1) {
            switch (v.type) {
            case SQLITE_TEXT: return sqlite3_result_text(ctx, v.text, (int)v.length, SQLITE_TRANSIENT);
            case SQLITE_INTEGER: return sqlite3_result_int64(ctx, v.integer);
            case SQLITE_FLOAT: return sqlite3_result_double(ctx, v.real);
            default: return sqlite3_result_null(ctx);
            }
        }
    }
    if (!q->json_extract &&
        sqlite3_prepare_v2(q->db, "SELECT json_extract(?1, ?2)", -1, &q->json_extract, NULL) != SQLITE_OK)
        return sqlite3_result_error(ctx, sqlite3_errmsg(q->db), -1);
    sqlite3_bind_value(q->json_extract, 1, argv[0]);
    sqlite3_bind_value(q->json_extract, 2, argv[1]);
    if (sqlite3_step(q->json_extract) == SQLITE_ROW) {
        sqlite3_result_value(ctx, sqlite3_column_value(q->json_extract, 0));
    } else {
        sqlite3_result_error(ctx, sqlite3_errmsg(q->db), -1);
    }
    sqlite3_reset(q->json_extract);
}

static int find_function(sqlite3_vtab *vtab, int argc, const char *name,
                         void (**function)(sqlite3_context *, int, sqlite3_value **), void **argument) {
    if (argc != 2 || strcasecmp(name, "json_extract") != 0) return 0;
    *function = json_extract_member;
    *argument = ((records_table *)vtab)->query;
    return 1;
}

const sqlite3_module lb_q_records_module = {
    .iVersion = 1,
    .xCreate = NULL,            /* eponymous only: `records` exists without CREATE */
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
    .xFindFunction = find_function,
};
