/* Test support: code that must run in a forked child, where only async-signal-safe-ish C (no Swift
 * runtime) is safe; the shaped records of the integrity tests; helpers for damaging files. */
#ifndef LOGBOOK_TEST_SUPPORT_H
#define LOGBOOK_TEST_SUPPORT_H
#include <stdint.h>
#include <sys/types.h>

#include "logbook.h"

/* ---- shaped records (shaped_records.c) ----
 * Record `seq` of test thread `thread` is "thread {} seq {} text {}" with a u32, a u64 and a
 * string whose length and bytes follow from the pair; one in eight also carries metadata
 * {"k": i64, "t": string}. Lengths vary: most under 40 bytes, some up to 3 KB, about 1% nearly a
 * chunk and 0.5% longer than a chunk (written as fragments). */
#define LB_TEST_SHAPE_TEMPLATE "thread {} seq {} text {}"
#define LB_TEST_SHAPE_TEXT_MAX (900u << 10)

typedef struct lb_test_shape {
    uint32_t text_length;
    uint32_t metadata;             /* 1: carries the metadata pairs */
    uint32_t metadata_text_length;
    int64_t metadata_number;
} lb_test_shape;

void lb_test_record_shape(uint32_t thread, uint64_t seq, uint32_t chunk_size, lb_test_shape *out);
/* Writes the first `length` text bytes of record (thread, seq) into `buffer`; returns length. */
size_t lb_test_shape_text(uint32_t thread, uint64_t seq, uint32_t length, char *buffer);
/* Logs record (thread, seq) through `logger`; `scratch` holds LB_TEST_SHAPE_TEXT_MAX bytes.
 * Returns lb_record_commit's result: 0, or -errno when the record was dropped (and counted). */
int lb_test_log_shaped(lb_logger *logger, uint32_t thread, uint64_t seq, uint32_t chunk_size,
                       char *scratch);
/* 1 when the entry is exactly some record (thread, seq) as lb_test_log_shaped writes it (sets
 * both), 0 when any byte of it differs. */
int lb_test_check_shaped(const lb_entry *entry, uint32_t chunk_size, uint32_t *thread,
                         uint64_t *seq);

/* Logs records 0..per_thread-1 from `threads` threads at once (thread indices 0..threads-1).
 * `dropped` (threads * per_thread bytes, may be NULL) gets 1 for each record whose commit failed.
 * Returns the number of failed commits, or -errno when a thread could not start. */
long lb_test_log_shaped_threads(lb_logger *logger, uint32_t threads, uint64_t per_thread,
                                uint32_t chunk_size, uint8_t *dropped);

/* Reads `path` (a bundle, archive directory or file) with a fresh reader and checks it against
 * what the threads wrote: every entry must be a shaped record, none twice, and none of those
 * `dropped` marks. Counts the records of 0..per_thread-1 per thread that are absent. */
typedef struct lb_test_check {
    long entries;        /* entries read */
    long foreign;        /* entries that are not exactly a shaped record (altered, mixed) */
    long duplicates;     /* shaped records read more than once */
    long dropped_found;  /* records whose commit failed, found anyway */
    long missing;        /* records committed (not dropped) that were not read */
    long issues, failures;
    long scan_result;    /* lb_reader_scan's (or lb_reader_stream's) result */
    long out_of_order;   /* entries before the one read just before them (session, ticks) */
} lb_test_check;

int lb_test_check_shaped_bundle(const char *path, uint32_t chunk_size, uint32_t threads,
                                uint64_t per_thread, const uint8_t *dropped, lb_test_check *out);
/* The same check, reading with lb_reader_stream. */
int lb_test_check_shaped_stream(const char *path, uint32_t chunk_size, uint32_t threads,
                                uint64_t per_thread, const uint8_t *dropped, lb_test_check *out);

/* Streams `path` (lb_reader_stream) and verifies it: the identities (thread << 48 | seq) of the
 * entries that are exactly a shaped record, in the order read, in `ids`, and the sequence of the
 * chunk each is in, in `chunk_sequences` (both malloc'ed: free() them); the other entries counted
 * as foreign; failure issues (any kind but torn and overwritten) counted; the ring's next chunk
 * sequence and chunk count. Returns 0 or -errno (open, memory, verify, ring info). */
typedef struct lb_test_shaped_read {
    uint64_t *ids;
    uint64_t *chunk_sequences;
    size_t count;
    uint64_t next_sequence;
    uint32_t chunk_count;
    long foreign;
    long failures;
    long scan_result;
    lb_verify_summary summary;
} lb_test_shaped_read;

int lb_test_read_shaped(const char *path, uint32_t chunk_size, lb_test_shaped_read *out);

/* Logs "slow record {}" with a string of `length` bytes (`scratch` holds length + 1) that takes
 * `stall_ms` to evaluate, after the record's timestamp was taken: a record far older than the chunks
 * it is committed into. */
void lb_test_log_slow_record(lb_logger *logger, uint32_t stall_ms, uint32_t length, char *scratch);

/* ---- forked children ---- */

/* A forked child that opens a bundle and logs shaped records from several threads, for kill
 * loops. After each committed record a thread writes {uint32 thread index,
 * uint32 LB_TEST_REPORT_COMMITTED, uint64 sequence} to `report_fd`; the pipe's capacity bounds how
 * far the child runs ahead of a parent that reads the reports. */
typedef struct lb_test_child {
    const char *bundle_path;
    int report_fd;
    int threads;                 /* thread indices 0..threads-1 */
    uint64_t first_sequence;     /* every thread's sequences start here */
    uint32_t chunk_size;
    uint64_t capacity;
    uint32_t wrap_policy;        /* lb_wrap_policy; a lossless writer waits up to 60 s */
    uint64_t archive_file_size;  /* not 0: an archiver rolling files of this size (no count or
                                    quota limit) in the bundle's archive directory */
    uint64_t chunk_budget;       /* not 0: a thread stops logging once the bundle claimed this many
                                    chunks since the child opened it (each thread may finish the
                                    record it is in: at most 1 + its size / chunk size claims
                                    more), reports {index, LB_TEST_REPORT_STOPPED, its next
                                    sequence} and waits to be killed. What a cycle writes is then
                                    bounded by bytes, whatever the machine's speed. */
} lb_test_child;

enum { LB_TEST_REPORT_COMMITTED = 0, LB_TEST_REPORT_STOPPED = 1 };

/* A pipe for the reports, of the smallest capacity (one page: 256 reports), so that a child runs
 * at most that far ahead of what its parent read. Returns 0 or -errno. */
int lb_test_report_pipe(int fds[2]);

/* Forks the child; returns its pid, or -errno. Its exit status says where it failed to start: 4
 * open, 5 logger, 6/8 memory, 7 thread, 9 counters, 3 a report that could not be written. */
pid_t lb_test_spawn(const lb_test_child *child);

/* Forks while `logger` is open in this process. The child logs `count` records through the
 * inherited logger, closes the inherited bundle, and exits with 0 if every log call reported an
 * error (the inherited bundle must not be written by a child) and close succeeded, else 1.
 * Returns the child's exit status, or -errno. */
int lb_test_fork_and_log_inherited(void *logger, int count);

#endif
