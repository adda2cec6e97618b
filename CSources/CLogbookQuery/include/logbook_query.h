/* logbook_query.h — SQL over typed records: SQLite virtual tables over the streaming reader.
 *
 * lb_query_open makes an in-memory SQLite database (Debian's libsqlite3, -lsqlite3) holding two
 * read-only tables over the sources the host names (bundles, archive directories, archive files):
 *
 *   records   one row per record, source after source, each source in time order (as
 *             lb_reader_stream hands them out): columns time (ns since the epoch, UTC),
 *             time_text (RFC 3339, 9 digits), level (its name, "trace" .. "critical", with the
 *             collation `level`, which orders names, in any case, and numbers by severity:
 *             `level >= 'warning'`, `level != 'INFO'`, `level > 4.5`, `ORDER BY level` and
 *             `max(level)` mean severity wherever SQLite evaluates them, against a name or number
 *             written in the statement; what a function, aggregate or CASE makes of the column
 *             has no collation: lb_query_check_levels refuses a statement that would compare it
 *             as text; against a column of numbers, SQLite compares numbers: use severity),
 *             severity (1 trace .. 7 critical), logger,
 *             message (rendered by the host, only when asked for), template, file, line,
 *             function, thread, pid, session, site (a number per call site, the same for its
 *             template, file, line and function in every session and source of the query: GROUP
 *             BY site groups by an integer), metadata (a JSON object), error_type,
 *             error_message, args (a JSON array), source (the host's name for it), and arg1 ..
 *             arg16: the typed arguments with SQLite's types (integers; an unsigned above
 *             INT64_MAX and floats, infinities included, as REAL; strings as TEXT; bytes as
 *             BLOB; a redacted value, a missing argument and a NaN, which SQLite cannot hold, as
 *             NULL: `args` tells them apart, with "nan", null, or no element).
 *   record    the same columns, one row: the entry lb_query_set_record names (a host that reads
 *             records itself tests each against a condition: SELECT 1 FROM record WHERE ...).
 *   sites     one row per call site and logger that records name: site, template, file, line,
 *             function, logger, count (the records of a full read).
 *
 * Pushed down into the reader's filter (lb_read_filter), so that a record they reject is never
 * decoded: time (=, <, <=, >, >=; a number of ns, text holding one, or RFC 3339 text there and in
 * time_ns()), level
 * and severity (the same), and equality on logger, site, template, file and function (with
 * SQLite's default BINARY collation; `COLLATE NOCASE` is left to SQLite). Every other condition is
 * evaluated by SQLite on the rows the reader hands out. A row's rowid is the record's identity,
 * the same in every scan (its source, chunk sequence and offset). Every scan reads its sources
 * whole: a condition saves decoding, not reading (a join on records is a full read per row of the
 * other side; materialize it first). At most 127 sources.
 *
 * Functions: level('warning') = 5, time_ns('2026-11-28T18:00:00Z') = nanoseconds.
 *
 * The database refuses anything but reading: no writes, no ATTACH, no PRAGMA, no temporary tables,
 * no load_extension (an authorizer, SQLITE_DBCONFIG_DEFENSIVE, no attached databases). Each scan of
 * a table reads its sources from their beginning with a fresh reader, except in follow mode
 * (lb_query_set_follow), where each scan of `records` reads what is new since the last one.
 *
 * Threads: a scan of `records` runs the reader on a thread of its own, which hands out entries in
 * batches and waits while the caller's thread uses them: the reader and the host's hooks are
 * never used by two threads at once. One lb_query is used by one thread at a time.
 */
#ifndef LOGBOOK_QUERY_H
#define LOGBOOK_QUERY_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "logbook.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the host provides: its sources, a reader for each, and the rendering of messages. */
typedef struct lb_query_host {
    void *context;
    size_t source_count;
    /* The name of source `index` (its path): the `source` column. */
    const char *(*source_name)(void *context, size_t index);
    /* Opens a new reader of source `index` (0, or -errno with lb_error_detail set). */
    int (*open_reader)(void *context, size_t index, lb_reader **out);
    /* Gives back a reader the query is done with (the host closes it, after taking its issues). */
    void (*close_reader)(void *context, size_t index, lb_reader *reader);
    /* The message of `entry`, read by `reader`: UTF-8 valid until the next call, its length in
     * *length; NULL when it cannot be rendered (the column is then NULL). */
    const char *(*message)(void *context, lb_reader *reader, const lb_entry *entry, size_t *length);
} lb_query_host;

typedef struct lb_query lb_query;

/* Opens the database over the host's sources (the host must outlive the query). Nothing is read
 * until a statement scans a table. Returns 0, -ENOMEM, or -EIO when SQLite could not be set up
 * (lb_error_detail says why). */
int lb_query_open(const lb_query_host *host, lb_query **out);

/* The database: prepare and step statements on it (one at a time per lb_query). */
sqlite3 *lb_query_database(lb_query *query);

/* Follow mode (nonzero): each scan of `records` continues each source's reader where the last scan
 * left it, so a statement run again returns only rows new since its last run. A statement that
 * scans `records` twice at once (a self-join) is refused in follow mode. */
void lb_query_set_follow(lb_query *query, int follow);

/* The entry the `record` table holds (read by `reader`; both must stay valid while statements
 * read it), or none (NULL). */
void lb_query_set_record(lb_query *query, lb_reader *reader, const lb_entry *entry);

/* Follow mode: gives back the reader kept for source `index`, so that the next scan reads the
 * source again from its beginning with a new one (a bundle removed and made again at its path).
 * 0, or -EBUSY while a statement reads it. */
int lb_query_refollow(lb_query *query, size_t index);

/* Records the readers handed out (decoded) since the query was opened: a record a pushed-down
 * condition rejected is not counted. */
uint64_t lb_query_records_decoded(const lb_query *query);

/* What the last statement refused was asked of it (a write, ATTACH, PRAGMA, load_extension),
 * when SQLite's error is "not authorized" or lb_query_check_reading refused; NULL when nothing
 * was refused. */
const char *lb_query_refusal(const lb_query *query);

/* Whether `sql` (one statement) only reads: its first word (after blanks, comments and EXPLAIN
 * [QUERY PLAN]) is SELECT, WITH or VALUES. The authorizer cannot tell alone: REINDEX, ANALYZE,
 * BEGIN and SAVEPOINT may touch nothing it is asked about (and sqlite3_stmt_readonly() is true for
 * some of them). 0; -EPERM for a statement known not to read (REINDEX, ANALYZE, VACUUM, PRAGMA,
 * ATTACH, DETACH, BEGIN, COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE: refuse it even when SQLite
 * rejects its SQL, "REINDEX (it rebuilds indexes: a write)" says more than SQLite's error);
 * -EINVAL for any other first word (refuse it once SQLite prepared it). Either way
 * lb_query_refusal() names the statement and why. Run it on every statement the host did not
 * write itself (LogQuery does). */
int lb_query_check_reading(lb_query *query, const char *sql);

/* Whether `sql` (one statement) compares, sorts and takes min()/max() of levels by severity
 * wherever it does so. SQLite keeps the level collation only on the column itself (and through
 * CAST, unary + and a subquery's column): the result of max(level), ifnull(level, ...), CASE and
 * other functions has none and would compare as text ('critical' < 'error'). This reads the
 * statement's bytecode (EXPLAIN) and follows every value taken from a `level` column into the
 * comparisons, sorts (ORDER BY, GROUP BY, windows), lookups (DISTINCT, IN) and min()/max() it
 * reaches: each that orders must use the level collation (COLLATE level written in the statement
 * is one); an equality as text passes when both sides are spelt as the column spells levels
 * (lowercase names) or name no level ('error', not 'ERROR' or 6). Run it before a
 * statement the host did not write itself (LogQuery does, for every statement). Returns 0,
 * -ENOTSUP when the statement would compare a level as text (lb_error_detail says how to write
 * it: severity, or COLLATE level), -EINVAL when SQLite rejects the SQL, or -ENOMEM. */
int lb_query_check_levels(lb_query *query, const char *sql);

/* Closes the database and gives back every reader (follow mode keeps them until here). */
void lb_query_close(lb_query *query);

/* The level (1..7) a name stands for ("trace" .. "critical", any case), or 0. */
int lb_query_level_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif
