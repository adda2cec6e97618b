/* query.c — the database of lb_query_open: in memory, read-only by construction (an authorizer
 * that lets a statement read and call functions, nothing else), with the `records`, `record` and
 * `sites` tables, the `level` collation and the level() and time_ns() functions. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "logbook_files.h"
#include "query_internal.h"

extern const sqlite3_module lb_q_records_module;
extern const sqlite3_module lb_q_sites_module;

/* Functions a query may not call: they reach outside the database. */
static const char *const refused_functions[] = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"};

static int refuse(lb_query *q, const char *what) {
    snprintf(q->refusal, sizeof q->refusal, "%s", what);
    return SQLITE_DENY;
}

static int authorize(void *context, int action, const char *a, const char *b, const char *database, const char *view) {
    (void)b, (void)database, (void)view;
    lb_query *q = context;
    if (q->declaring) return SQLITE_OK;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    case SQLITE_FUNCTION:
        for (size_t i = 0; i < sizeof refused_functions / sizeof *refused_functions; i++) {
            if (b && strcasecmp(b, refused_functions[i]) == 0) {
                char what[96];
                snprintf(what, sizeof what, "the function %s (it reaches outside the records)", b);
                return refuse(q, what);
            }
        }
        return SQLITE_OK;
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
        return refuse(q, "ATTACH and DETACH (a query reads only its sources)");
    case SQLITE_PRAGMA:
        return refuse(q, "PRAGMA");
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
        return refuse(q, "writing (the records are read-only)");
    default:
        (void)a;
        return refuse(q, "anything but reading (SELECT, WITH, VALUES)");
    }
}

/* ---- the statement's first word ----
 * The authorizer sees what a statement touches, not what it is: REINDEX and ANALYZE of a database
 * without indexes or tables touch nothing it is asked about, and sqlite3_stmt_readonly() is true
 * for BEGIN, SAVEPOINT and a REINDEX with nothing to do. So the statement itself is named: its
 * first word (after blanks and comments, and after EXPLAIN [QUERY PLAN]) must be one that reads. */

/* Skips blanks and SQL comments (-- to the end of the line, C-style, unterminated ones too). */
static const char *skip_blanks(const char *s) {
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
        if (s[0] == '-' && s[1] == '-') {
            while (*s && *s != '\n') s++;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *end = strstr(s + 2, "*/");
            s = end ? end + 2 : s + strlen(s);
        } else {
            return s;
        }
    }
}

/* The keyword at `s` (letters only, up to `size` - 1 of them, uppercased) into `word`; returns
 * what follows it. An empty word when `s` starts with anything else. */
static const char *next_word(const char *s, char *word, size_t size) {
    s = skip_blanks(s);
    size_t n = 0;
    while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_') {
        if (n + 1 < size) word[n++] = (char)(*s & ~0x20);
        s++;
    }
    word[n] = '\0';
    return s;
}

/* Why a statement that starts with `word` does not only read. */
static const char *why_not_reading(const char *word) {
    static const struct { const char *word, *why; } known[] = {
        {"REINDEX", "REINDEX (it rebuilds indexes: a write)"},
        {"ANALYZE", "ANALYZE (it writes statistics tables)"},
        {"VACUUM", "VACUUM (it rewrites the database or writes a copy)"},
        {"PRAGMA", "PRAGMA"},
        {"ATTACH", "ATTACH and DETACH (a query reads only its sources)"},
        {"DETACH", "ATTACH and DETACH (a query reads only its sources)"},
        {"BEGIN", "BEGIN (a query holds no transaction)"},
        {"COMMIT", "COMMIT (a query holds no transaction)"},
        {"END", "END (a query holds no transaction)"},
        {"ROLLBACK", "ROLLBACK (a query holds no transaction)"},
        {"SAVEPOINT", "SAVEPOINT (a query holds no transaction)"},
        {"RELEASE", "RELEASE (a query holds no transaction)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(word, known[i].word) == 0) return known[i].why;
    return NULL;
}

int lb_query_check_reading(lb_query *q, const char *sql) {
    char word[16];
    const char *rest = next_word(sql, word, sizeof word);
    if (strcmp(word, "EXPLAIN") == 0) {
        rest = next_word(rest, word, sizeof word);
        if (strcmp(word, "QUERY") == 0) {
            rest = next_word(rest, word, sizeof word);
            if (strcmp(word, "PLAN") == 0) next_word(rest, word, sizeof word);
        }
    }
    if (strcmp(word, "SELECT") == 0 || strcmp(word, "WITH") == 0 || strcmp(word, "VALUES") == 0) return 0;
    const char *why = why_not_reading(word);
    if (why) {
        refuse(q, why);
        return -EPERM;
    }
    char what[sizeof q->refusal];
    snprintf(what, sizeof what, "%s%s(anything but reading: SELECT, WITH, VALUES)", word, word[0] ? " " : "");
    refuse(q, what);
    return -EINVAL;
}

/* level('warning') = 5: a level name as its number, for comparisons SQLite makes itself. */
static void level_function(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) return sqlite3_result_value(ctx, argv[0]);
    int level = lb_query_level_from_name((const char *)sqlite3_value_text(argv[0]));
    if (level == 0) return sqlite3_result_error(ctx, "level(): no such level (trace .. critical)", -1);
    sqlite3_result_int(ctx, level);
}

/* The `level` collation: level names (any case) and numbers by severity, trace 1 .. critical 7;
 * anything else after them, in byte order. So `level >= 'warning'`, `level != 'info'`,
 * `ORDER BY level` and `max(level)` mean severity wherever SQLite evaluates them on the column;
 * where SQLite drops it (a function's or an aggregate's result), query_levels.c refuses. */
static double severity(const char *text, int length) {
    char name[64];
    if (length > 0 && length < (int)sizeof name) {
        memcpy(name, text, (size_t)length);
        name[length] = '\0';
        int level = lb_query_level_from_name(name);
        if (level) return level;
        /* A number as SQLite writes one as text: 5, 5.0, 4.5, 3e0. */
        char *end;
        double number = strtod(name, &end);
        if (end == name + length && number == number && (name[0] == '-' || name[0] == '+' || name[0] == '.' ||
                                                          (name[0] >= '0' && name[0] <= '9')))
            return number;
    }
    return HUGE_VAL;
}

static int compare_levels(void *context, int a_length, const void *a, int b_length, const void *b) {
    (void)context;
    double x = severity(a, a_length), y = severity(b, b_length);
    if (x != y) return x < y ? -1 : 1;
    if (x != HUGE_VAL) return 0;
    int common = memcmp(a, b, (size_t)(a_length < b_length ? a_length : b_length));
    return common ? common : (a_length > b_length) - (a_length < b_length);
}

/* time_ns('2026-11-28T18:00:00Z') = nanoseconds since the epoch: RFC 3339 as a number, for
 * comparisons SQLite makes itself (`time > time_ns('...') OR ...`). */
static void time_ns_function(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    int64_t ns;
    int rc = lb_q_parse_time((const char *)sqlite3_value_text(argv[0]), &ns);
    if (rc == -2) return sqlite3_result_error(ctx, "time_ns(): a time outside 1677 to 2262", -1);
    if (rc != 0) return sqlite3_result_error(ctx, "time_ns(): not RFC 3339 (2026-11-28T18:00:00Z)", -1);
    sqlite3_result_int64(ctx, ns);
}

static int set_up(lb_query *q) {
    sqlite3 *db = q->db;
    int on = 1, off = 0;
    if (sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, NULL) != SQLITE_OK ||
        sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, off, NULL) != SQLITE_OK ||
        sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, off, NULL) != SQLITE_OK)
        return -1;
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
    sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
    if (sqlite3_create_module_v2(db, "records", &lb_q_records_module, q, NULL) != SQLITE_OK ||
        sqlite3_create_module_v2(db, "record", &lb_q_records_module, q, NULL) != SQLITE_OK ||
        sqlite3_create_module_v2(db, "sites", &lb_q_sites_module, q, NULL) != SQLITE_OK ||
        sqlite3_create_collation_v2(db, "level", SQLITE_UTF8, NULL, compare_levels, NULL) != SQLITE_OK ||
        sqlite3_create_function_v2(db, "time_ns", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                   time_ns_function, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function_v2(db, "level", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                   level_function, NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    return sqlite3_set_authorizer(db, authorize, q) == SQLITE_OK ? 0 : -1;
}

int lb_query_open(const lb_query_host *host, lb_query **out) {
    lb_error_detail_clear();
    lb_query *q = calloc(1, sizeof *q);
    if (!q) return -ENOMEM;
    q->host = *host;
    pthread_mutex_init(&q->names_lock, NULL);
    if (host->source_count > 0) {
        q->followed = calloc(host->source_count, sizeof *q->followed);
        q->followed_busy = calloc(host->source_count, 1);
        if (!q->followed || !q->followed_busy) {
            lb_query_close(q);
            return -ENOMEM;
        }
    }
    int rc = sqlite3_open_v2(":memory:", &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK || set_up(q) != 0) {
        lb_error_detail_set("SQLite could not be set up: %s", q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
        lb_query_close(q);
        return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
    }
    *out = q;
    return 0;
}

sqlite3 *lb_query_database(lb_query *q) { return q->db; }

void lb_query_set_follow(lb_query *q, int follow) { q->follow = follow != 0; }

void lb_query_set_record(lb_query *q, lb_reader *reader, const lb_entry *entry) {
    q->current_reader = reader;
    q->current_entry = entry;
}

int lb_query_refollow(lb_query *q, size_t index) {
    if (index >= q->host.source_count || !q->followed) return -EINVAL;
    if (q->followed_busy[index]) return -EBUSY;
    if (q->followed[index]) q->host.close_reader(q->host.context, index, q->followed[index]);
    q->followed[index] = NULL;
    return 0;
}

uint64_t lb_query_records_decoded(const lb_query *q) { return q->records_decoded; }

const char *lb_query_refusal(const lb_query *q) { return q->refusal[0] ? q->refusal : NULL; }

void lb_query_close(lb_query *q) {
    if (!q) return;
    sqlite3_finalize(q->json_extract);
    if (q->db) sqlite3_close_v2(q->db);
    for (size_t i = 0; q->followed && i < q->host.source_count; i++)
        if (q->followed[i]) q->host.close_reader(q->host.context, i, q->followed[i]);
    free(q->followed);
    free(q->followed_busy);
    lb_q_names_free(q);
    pthread_mutex_destroy(&q->names_lock);
    free(q);
}
