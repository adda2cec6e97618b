/* archive_stalls.c — the archiver falling behind or failing, with io_error_shim.so preloaded (run
 * by CProgramTests), and what the logging threads see:
 *   - lossless, the archive disk failing: after one wait of lossless_wait_ms the writers fail fast
 *     (dropped, counted as ring_full) instead of waiting again for every record, and once the
 *     archiver writes again they log again; every record committed is read back once;
 *   - overwrite, the archive disk slow (each write sleeps): no record is dropped to protect old
 *     ones (no no_chunk drop); the oldest chunks are overwritten before they are archived, and
 *     counted: records read + records overwritten (+ those the reader's issues account for) ==
 *     records written, exactly;
 *   - lossless, every chunk held by a thread that went quiet: a writer waiting for a chunk does not
 *     keep the idle sealer from sealing the quiet threads' chunks, so it gets one within the idle
 *     time and drops nothing (the sealer waited for the waiting writer's lock while holding the
 *     registry lock, so no chunk was sealed and the writer waited out lossless_wait_ms);
 *   - (argument `clean-close`, a test of its own) overwrite, the archive disk failing until close:
 *     a clean close archives every chunk the ring holds, so the archive files alone hold every
 *     record the bundle shows (close made one pass, which takes at most half of the chunks no
 *     writer owns, and returned 0 with the other half sealed, never archived: `archive lag: 32
 *     chunks`, found by an outside test). */
#define _GNU_SOURCE
#include "logbook.h"
#include "logbook_archive.h"
#include "logbook_test_support.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A ring of `chunks` chunks of 4 KiB under `policy`, archived with pwritev (io_uring writes
 * happen in the kernel, out of the shim's reach), no count or quota limit; NULL on failure. */
static lb_bundle *open_bundle(const char *path, uint32_t chunks, uint32_t policy, uint32_t wait_ms,
                              uint32_t idle_seal_ms) {
    lb_options o;
    lb_options_init(&o);
    o.capacity = chunks * 4096u;
    o.chunk_size = 4096;
    o.wrap_policy = policy;
    o.lossless_wait_ms = wait_ms;
    o.idle_seal_ms = idle_seal_ms;
    lb_archive_options a;
    lb_archive_options_init(&a);
    a.backend = LB_ARCHIVE_BACKEND_PWRITE;
    a.max_files = 0;
    a.quota = 0;
    lb_bundle *b;
    return lb_bundle_open_archived(path, &o, &a, &b) == 0 ? b : NULL;
}

static void lossless_fails_fast(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/stalled.logbook", dir);
    lb_bundle *b = open_bundle(path, 16, LB_WRAP_LOSSLESS, 200, 1000);
    if (!b) { CHECK(0); return; }
    lb_logger *log;
    lb_logger_register(b, "stalled", &log);
    enum { THREADS = 2, PER_THREAD = 20000 };
    uint8_t *dropped = calloc(THREADS * (PER_THREAD + 200), 1);
    setenv("LOGBOOK_SHIM_FAIL_WRITE", "1", 1);
    double start = seconds();
    long failures = lb_test_log_shaped_threads(log, THREADS, PER_THREAD, 4096, dropped);
    double elapsed = seconds() - start;
    printf("disk failing: %ld of %d records dropped in %.2f s\n", failures, THREADS * PER_THREAD, elapsed);
    /* Waiting 200 ms per record would take hours; a few waits per thread are allowed (60 s: far
     * from both, on a loaded machine too). */
    CHECK(elapsed < 60.0);
    CHECK(failures > THREADS * PER_THREAD / 2);
    lb_counters c;
    lb_bundle_counters(b, &c);
    CHECK(c.drops[LB_DROP_RING_FULL] == (uint64_t)failures);
    CHECK(c.drops[LB_DROP_NO_CHUNK] == 0);

    /* The disk works again: the archiver catches up and the writers log again. */
    unsetenv("LOGBOOK_SHIM_FAIL_WRITE");
    CHECK(lb_archive_sync(b, 60000) == 0);
    lb_logger *after;
    lb_logger_register(b, "after", &after);
    int after_failures = 0;
    for (int i = 0; i < 2000; i++) {
        lb_writer *w = lb_writer_get(b);
        lb_record_begin(w, after->id, LB_LEVEL_INFO);
        lb_record_put_i32(w, i);
        if (lb_record_commit(w, lb_site_register_c(b, "stalls", 1, "after", "after {}")) != 0)
            after_failures++;
    }
    printf("disk working again: %d of 2000 records dropped\n", after_failures);
    CHECK(after_failures == 0);
    CHECK(lb_bundle_close(b) == 0);

    lb_test_check k;
    CHECK(lb_test_check_shaped_bundle(path, 4096, THREADS, PER_THREAD, dropped, &k) == 0);
    printf("read back: %ld entries, %ld foreign, %ld duplicates, %ld missing, %ld dropped found, %ld failures\n",
           k.entries, k.foreign, k.duplicates, k.missing, k.dropped_found, k.failures);
    CHECK(k.foreign == 2000);  /* the "after" records */
    CHECK(k.duplicates == 0 && k.missing == 0 && k.dropped_found == 0 && k.failures == 0);
    free(dropped);
}

static void overwrite_never_drops_for_a_slow_archiver(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/slow.logbook", dir);
    lb_bundle *b = open_bundle(path, 16, LB_WRAP_OVERWRITE, 0, 1000);
    if (!b) { CHECK(0); return; }
    lb_logger *log;
    lb_logger_register(b, "slow", &log);
    enum { THREADS = 4, PER_THREAD = 20000 };
    uint8_t *dropped = calloc(THREADS * PER_THREAD, 1);
    /* 20 ms per chunk written: the archiver needs 80 s for what the writers log in well under
     * one, so it falls behind unless they were starved below 200 KB/s. */
    setenv("LOGBOOK_SHIM_DELAY_WRITE_US", "20000", 1);
    long failures = lb_test_log_shaped_threads(log, THREADS, PER_THREAD, 4096, dropped);
    unsetenv("LOGBOOK_SHIM_DELAY_WRITE_US");
    lb_counters c;
    lb_bundle_counters(b, &c);
    CHECK(lb_bundle_close(b) == 0);
    CHECK(failures == 0);
    CHECK(c.drops[LB_DROP_NO_CHUNK] == 0);

    lb_reader *r;
    CHECK(lb_reader_open(path, &r) == 0);
    CHECK(lb_reader_scan(r) >= 0);
    lb_verify_summary v;
    CHECK(lb_reader_verify(r, &v) == 0);
    lb_ring_info info;
    CHECK(lb_reader_ring_info(r, &info) == 0);
    uint64_t accounted = 0;
    for (size_t i = 0; i < lb_reader_issue_count(r); i++) {
        lb_issue issue;
        lb_reader_issue(r, i, &issue);
        if (issue.kind == LB_ISSUE_OVERWRITTEN) continue;
        accounted += issue.records;
        if (issue.kind != LB_ISSUE_TORN) fprintf(stderr, "unexpected issue: %s\n", issue.reason);
        CHECK(issue.kind == LB_ISSUE_TORN);  /* a record whose beginning was overwritten is an
                                                overwritten issue, counted in v.records_overwritten */
    }
    printf("slow archive disk: %llu chunks overwritten before they were archived; %llu records read + "
           "%llu overwritten + %llu accounted by issues = %d written\n",
           (unsigned long long)info.chunks_lost_unarchived, (unsigned long long)v.records_found,
           (unsigned long long)v.records_overwritten, (unsigned long long)accounted,
           THREADS * PER_THREAD);
    CHECK(info.chunks_lost_unarchived > 0);  /* the archiver did fall behind */
    CHECK(v.records_found + v.records_overwritten + accounted == (uint64_t)(THREADS * PER_THREAD));
    CHECK(v.records_lost == 0);
    lb_reader_close(r);

    lb_test_check k;
    CHECK(lb_test_check_shaped_bundle(path, 4096, THREADS, PER_THREAD, dropped, &k) == 0);
    CHECK(k.foreign == 0 && k.duplicates == 0);
    free(dropped);
}

typedef struct quiet_thread {
    lb_logger *log;
    int index;
    sem_t logged, finish;
} quiet_thread;

static void *log_once_then_wait(void *arg) {
    quiet_thread *t = arg;
    LB_INFO(t->log, "quiet thread {} logged once", t->index);
    sem_post(&t->logged);
    sem_wait(&t->finish);
    return NULL;
}

static void waiting_writer_lets_the_sealer_free_chunks(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/quiet.logbook", dir);
    /* Four chunks: one per quiet thread. */
    lb_bundle *b = open_bundle(path, 4, LB_WRAP_LOSSLESS, 20000, 500);
    if (!b) { CHECK(0); return; }
    lb_logger *log;
    lb_logger_register(b, "quiet", &log);
    quiet_thread quiet[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        quiet[i].log = log;
        quiet[i].index = i;
        sem_init(&quiet[i].logged, 0, 0);
        sem_init(&quiet[i].finish, 0, 0);
        pthread_create(&threads[i], NULL, log_once_then_wait, &quiet[i]);
        sem_wait(&quiet[i].logged);
    }
    /* Every chunk is active now, each with one record: this thread's record (its writer is the
     * newest, the first the sealer meets) waits for the archiver, which waits for the sealer. */
    lb_writer *w = lb_writer_get(b);
    lb_record_begin(w, log->id, LB_LEVEL_INFO);
    lb_record_put_i32(w, 4);
    int rc = lb_record_commit(w, lb_site_register_c(b, "stalls", 1, "waiting", "waiting writer {}"));
    CHECK(rc == 0);
    lb_counters c;
    lb_bundle_counters(b, &c);
    CHECK(c.drops[LB_DROP_RING_FULL] == 0);
    printf("a writer waiting on a full lossless ring of quiet threads: %s\n", rc == 0 ? "committed" : "dropped");
    for (int i = 0; i < 4; i++) {
        sem_post(&quiet[i].finish);
        pthread_join(threads[i], NULL);
    }
    CHECK(lb_bundle_close(b) == 0);
    lb_test_check k;
    CHECK(lb_test_check_shaped_bundle(path, 4096, 1, 1, NULL, &k) == 0);
    CHECK(k.entries == 5 && k.failures == 0);
}

static int compare_ids(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void clean_close_archives_every_chunk_after_a_failing_disk(const char *dir) {
    enum { ROUNDS = 3, CHUNKS = 64, THREADS = 2, PER_THREAD = 3000 };
    for (int round = 0; round < ROUNDS; round++) {
        char path[4096], archive[4200];
        snprintf(path, sizeof path, "%s/close-%d.logbook", dir, round);
        snprintf(archive, sizeof archive, "%s/archive", path);
        lb_bundle *b = open_bundle(path, CHUNKS, LB_WRAP_OVERWRITE, 0, 1000);
        if (!b) { CHECK(0); return; }
        lb_logger *log;
        lb_logger_register(b, "closing", &log);
        /* Every archiving pass fails while the threads log several laps of the ring: at the end
         * every chunk is sealed (the threads sealed their last ones as they exited), none
         * archived. Each failed sync is a failed pass, after which the archiver backs off longer,
         * up to 2 s: so close, right after the disk works again, meets an archiver that has not
         * made a pass since, and it is close's own passes that must archive the whole ring (a
         * pass made before, after the threads were done, took half of it, and close's one pass
         * the other half). */
        setenv("LOGBOOK_SHIM_FAIL_WRITE", "1", 1);
        long failures = lb_test_log_shaped_threads(log, THREADS, PER_THREAD, 4096, NULL);
        for (int sync = 0; sync < 8; sync++) CHECK(lb_archive_sync(b, 60000) == -EIO);
        lb_reader *r;
        lb_ring_info before;
        memset(&before, 0, sizeof before);
        CHECK(lb_reader_open(path, &r) == 0 && lb_reader_ring_info(r, &before) == 0);
        lb_reader_close(r);
        unsetenv("LOGBOOK_SHIM_FAIL_WRITE");
        CHECK(failures == 0);
        CHECK(before.chunks_sealed == CHUNKS && before.chunks_archived == 0);

        int closed = lb_bundle_close(b);
        CHECK(closed == 0);
        lb_ring_info after;
        memset(&after, 0, sizeof after);
        CHECK(lb_reader_open(path, &r) == 0 && lb_reader_ring_info(r, &after) == 0);
        lb_reader_close(r);
        lb_test_shaped_read shown, archived;
        CHECK(lb_test_read_shaped(path, 4096, &shown) == 0);
        int archive_rc = lb_test_read_shaped(archive, 4096, &archived);
        CHECK(archive_rc == 0 || archive_rc == -ENOTSUP);  /* no ring info in an archive directory */
        qsort(shown.ids, shown.count, sizeof *shown.ids, compare_ids);
        qsort(archived.ids, archived.count, sizeof *archived.ids, compare_ids);
        int same = shown.count == archived.count &&
                   (shown.count == 0 || memcmp(shown.ids, archived.ids, shown.count * sizeof *shown.ids) == 0);
        printf("clean close %d after a failing archive disk: close %d, %llu sealed before it, %llu sealed and "
               "%llu archiving after it; bundle shows %zu records, archive files hold %zu\n",
               round, closed, (unsigned long long)before.chunks_sealed,
               (unsigned long long)after.chunks_sealed, (unsigned long long)after.chunks_archiving,
               shown.count, archived.count);
        CHECK(after.chunks_sealed + after.chunks_archiving == 0);  /* `archive lag: 0 chunks` */
        CHECK(shown.count > 0 && same);
        CHECK(shown.foreign == 0 && shown.failures == 0 && archived.failures == 0);
        free(shown.ids);
        free(shown.chunk_sequences);
        free(archived.ids);
        free(archived.chunk_sequences);
    }
}

/* usage: archive-stalls DIR [clean-close]: the stalls, or (with `clean-close`) the clean close. */
int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) return 2;
    if (argc == 3 && strcmp(argv[2], "clean-close") == 0) {
        clean_close_archives_every_chunk_after_a_failing_disk(argv[1]);
    } else if (argc == 2) {
        lossless_fails_fast(argv[1]);
        overwrite_never_drops_for_a_slow_archiver(argv[1]);
        waiting_writer_lets_the_sealer_free_chunks(argv[1]);
    } else {
        return 2;
    }
    printf("archive stalls: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
