/* follow_test.c — readers of archived bundles against the archiver's file rolls.
 *
 * A live follower of a lossless, archived bundle sees every record exactly once,
 * with its values, while the archiver rolls a file every few dozen chunks. Four threads log records
 * of varying sizes (most fit a chunk, some are fragments over two or three chunks) into a ring of 16
 * chunks of 4 KiB whose archive files roll at 64 KiB; a fifth thread streams the bundle with one
 * reader, scan after scan, until the writers are done, then once more. Counted, never timed.
 *
 * It failed before the reader kept its references to archive files by number (a file a readdir
 * missed while the archiver renamed it was inserted before later ones next time, and references
 * read the wrong file), listed the directory again when its numbers had a hole, kept deferring a
 * fragment whose beginning left a lossless ring for an archive file not listed yet, and gave up
 * on a large record only when its writer was gone before the scan began: hundreds of records were
 * never handed out, without an issue.
 *
 * A reader of more archive files than the process may have descriptors open (RLIMIT_NOFILE
 * lowered to 64) reads them all: it kept every file of a pass open and lost what it could not
 * open ("Too many open files") when a directory held over 1,000 files. */
#define _GNU_SOURCE
#include "check.h"
#include "logbook.h"
#include "logbook_archive.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREADS 4
#define RECORDS 20000
#define CHUNK 4096u

static lb_logger *logger;
static int writers_done;
static uint8_t seen[THREADS][RECORDS];
static uint64_t handed_out, bad_values, duplicates;

/* Record i of thread t: a string of this length, each byte 'a' + (t + i) % 26. */
static uint32_t text_length(uint32_t t, uint32_t i) {
    uint32_t k = (i * 2654435761u + t * 40503u) % 100;
    if (k < 80) return k * 7 % 200;               /* small */
    if (k < 95) return 1500 + k * 37 % 2000;     /* most of a chunk */
    return CHUNK + 600 + k * 131 % (2 * CHUNK);   /* fragments over two or three chunks */
}

static void *writer(void *arg) {
    uint32_t t = (uint32_t)(uintptr_t)arg;
    char *text = malloc(3 * CHUNK + 1);
    for (uint32_t i = 0; i < RECORDS; i++) {
        uint32_t n = text_length(t, i);
        memset(text, 'a' + (int)((t + i) % 26), n);
        text[n] = 0;
        LB_INFO(logger, "thread {} record {} text {}", t, i, (const char *)text);
    }
    free(text);
    __atomic_fetch_add(&writers_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int visit(void *context, const lb_entry *e) {
    (void)context;
    lb_arg a[3];
    uint32_t at = 0;
    for (int k = 0; k < 3; k++)
        if (lb_arg_next(e->args, e->args_length, &at, &a[k]) != 1) {
            bad_values++;
            return 0;
        }
    uint64_t t = a[0].value.u, i = a[1].value.u;
    if (t >= THREADS || i >= RECORDS || a[2].type != LB_ARG_STRING ||
        a[2].length != text_length((uint32_t)t, (uint32_t)i)) {
        bad_values++;
        return 0;
    }
    for (uint32_t k = 0; k < a[2].length; k++)
        if (a[2].bytes[k] != 'a' + (t + i) % 26) {
            bad_values++;
            return 0;
        }
    if (seen[t][i]++) duplicates++;
    handed_out++;
    return 0;
}

static void *follower(void *arg) {
    lb_reader *r = arg;
    long scans = 0;
    for (;;) {
        int done = __atomic_load_n(&writers_done, __ATOMIC_ACQUIRE) == THREADS;
        CHECK(lb_reader_stream(r, NULL, visit, NULL) >= 0);
        scans++;
        if (done) break;  /* this scan began after every record was committed */
    }
    fprintf(stderr, "follower: %ld scans\n", scans);
    return NULL;
}

/* A lossless ring of 16 chunks of 4 KiB whose archive files roll at 64 KiB, kept without limit and
 * uncompressed. A stalled archiver would drop records: the callers count drops. */
static lb_bundle *open_rolling_lossless(const char *path) {
    lb_options o;
    lb_options_init(&o);
    o.capacity = 16 * CHUNK;
    o.chunk_size = CHUNK;
    o.wrap_policy = LB_WRAP_LOSSLESS;
    o.lossless_wait_ms = 60000;
    o.ignore_environment_filter = 1;
    lb_archive_options a;
    lb_archive_options_init(&a);
    a.max_file_size = 64 << 10;
    a.max_files = 0;
    a.quota = 0;
    a.compression_level = 0;
    lb_bundle *bundle = NULL;
    CHECK(lb_bundle_open_archived(path, &o, &a, &bundle) == 0);
    return bundle;
}

static int count_entry(void *context, const lb_entry *e) {
    (void)e;
    ++*(uint64_t *)context;
    return 0;
}

static void test_more_archive_files_than_descriptors(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/many.logbook", dir);
    lb_bundle *bundle = open_rolling_lossless(path);
    lb_logger *log;
    CHECK(lb_logger_register(bundle, "many", &log) == 0);
    /* About 150 files of 64 KiB: each record 200 bytes of text. */
    char text[201];
    memset(text, 'x', 200);
    text[200] = 0;
    const uint64_t records = 40000;
    for (uint64_t i = 0; i < records; i++) LB_INFO(log, "record {} {}", i, (const char *)text);
    CHECK(lb_bundle_close(bundle) == 0);
    struct rlimit saved, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    low = saved;
    low.rlim_cur = 64;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    lb_reader *r;
    CHECK(lb_reader_open(path, &r) == 0);
    uint64_t found = 0;
    CHECK(lb_reader_stream(r, NULL, count_entry, &found) >= 0);
    lb_verify_summary v;
    CHECK(lb_reader_verify(r, &v) == 0);
    fprintf(stderr, "many files: %" PRIu64 " of %" PRIu64 " records read, %zu issues\n", found, records,
            lb_reader_issue_count(r));
    CHECK(found == records);
    CHECK(lb_reader_issue_count(r) == 0);
    lb_reader_close(r);
    CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0);
}

int main(void) {
    setenv("LOGBOOK_CLOCK", "monotonic", 1);
    unsetenv("LOGBOOK_FILTER");
    char dir[] = "/tmp/logbook-follow-test-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    test_more_archive_files_than_descriptors(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/b.logbook", dir);
    lb_bundle *bundle = open_rolling_lossless(path);
    CHECK(lb_logger_register(bundle, "follow", &logger) == 0);
    lb_reader *reader;
    CHECK(lb_reader_open(path, &reader) == 0);
    pthread_t threads[THREADS], reading;
    pthread_create(&reading, NULL, follower, reader);
    for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, writer, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    pthread_join(reading, NULL);
    lb_counters counters;
    CHECK(lb_bundle_counters(bundle, &counters) == 0);
    uint64_t drops = 0;
    for (int k = 0; k < LB_DROP_REASON_COUNT; k++) drops += counters.drops[k];
    CHECK(drops == 0);
    CHECK(lb_bundle_close(bundle) == 0);

    uint64_t missing = 0;
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < RECORDS; i++) missing += seen[t][i] == 0;
    size_t issues = lb_reader_issue_count(reader);
    for (size_t k = 0; k < issues && k < 5; k++) {
        lb_issue issue;
        if (lb_reader_issue(reader, k, &issue) == 0)
            fprintf(stderr, "issue: %s at %" PRIu64 ": %s\n", issue.file, issue.offset, issue.reason);
    }
    fprintf(stderr, "handed out %" PRIu64 " of %d, missing %" PRIu64 ", duplicates %" PRIu64
                    ", bad values %" PRIu64 ", issues %zu\n",
            handed_out, THREADS * RECORDS, missing, duplicates, bad_values, issues);
    CHECK(missing == 0);
    CHECK(duplicates == 0);
    CHECK(bad_values == 0);
    CHECK(issues == 0);
    CHECK(handed_out == (uint64_t)THREADS * RECORDS);
    lb_reader_close(reader);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
