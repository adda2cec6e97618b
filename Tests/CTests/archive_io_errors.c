/* archive_io_errors.c — the archiver under injected I/O errors (run with io_error_shim.so
 * preloaded, by CProgramTests):
 *   - a failed fsync at roll is never called success: the roll reports -EIO, the file is named
 *     .lba.unsynced (still readable), the failure is counted;
 *   - a failed write reports -EIO to lb_archive_sync, keeps the chunks in the ring (lag > 0) and
 *     leaves no partial frame; once writes work again the next sync archives them;
 *   - afterwards every record is in the archive exactly once and the reader finds no issue. */
#define _GNU_SOURCE
#include "logbook.h"
#include "logbook_archive.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"

static int exists(const char *dir, const char *name) {
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char bundle_path[2048], archive[4096];
    snprintf(bundle_path, sizeof bundle_path, "%s/io.logbook", argv[1]);
    snprintf(archive, sizeof archive, "%s/archive", bundle_path);
    lb_options options;
    lb_options_init(&options);
    options.capacity = 64u << 10;
    options.chunk_size = 4096;
    options.wrap_policy = LB_WRAP_LOSSLESS;
    options.lossless_wait_ms = 0;
    /* No idle sealing: the last chunk is sealed by the sync below, after writes start failing,
     * never by the sealer during a pause of the test (a second, on a loaded machine). */
    options.idle_seal_ms = 0;
    lb_archive_options a;
    lb_archive_options_init(&a);
    a.backend = LB_ARCHIVE_BACKEND_PWRITE;  /* io_uring writes happen in the kernel: no shim */
    a.max_file_size = 64u << 10;
    a.max_files = 0;
    a.quota = 0;
    lb_bundle *b;
    if (lb_bundle_open_archived(bundle_path, &options, &a, &b) != 0) return 3;
    lb_logger *log;
    lb_logger_register(b, "io", &log);

    for (int i = 0; i < 500; i++) LB_INFO(log, "record {}", i);
    CHECK(lb_archive_sync(b, 60000) == 0);  /* the records are in the file; only its fsync fails */
    setenv("LOGBOOK_SHIM_FAIL_FSYNC", "1", 1);
    CHECK(lb_archive_roll(b) == -EIO);
    unsetenv("LOGBOOK_SHIM_FAIL_FSYNC");
    CHECK(exists(archive, "archive-0000000001.lba.unsynced"));
    CHECK(!exists(archive, "archive-0000000001.lba"));
    lb_archive_stats stats;
    lb_archive_stats_get(b, &stats);
    CHECK(stats.failures >= 1 && stats.last_error == -EIO);
    CHECK(stats.files_rolled == 1);

    for (int i = 500; i < 1000; i++) LB_INFO(log, "record {}", i);
    setenv("LOGBOOK_SHIM_FAIL_WRITE", "1", 1);
    CHECK(lb_archive_sync(b, 60000) == -EIO);
    lb_archive_stats_get(b, &stats);
    CHECK(stats.lag_chunks > 0);
    unsetenv("LOGBOOK_SHIM_FAIL_WRITE");
    CHECK(lb_archive_sync(b, 60000) == 0);
    lb_archive_stats_get(b, &stats);
    CHECK(stats.lag_chunks == 0 && stats.last_error == 0);
    CHECK(lb_bundle_close(b) == 0);

    lb_reader *r;
    CHECK(lb_reader_open(archive, &r) == 0);
    CHECK(lb_reader_scan(r) == 1000);
    CHECK(lb_reader_issue_count(r) == 0);
    char *seen = calloc(1000, 1);
    int duplicates = 0;
    for (size_t i = 0; i < lb_reader_entry_count(r); i++) {
        lb_entry e;
        lb_reader_entry(r, i, &e);
        uint32_t offset = 0;
        lb_arg arg;
        if (lb_arg_next(e.args, e.args_length, &offset, &arg) == 1 && arg.value.i >= 0 && arg.value.i < 1000) {
            if (seen[arg.value.i]) duplicates++;
            seen[arg.value.i] = 1;
        }
    }
    int missing = 0;
    for (int i = 0; i < 1000; i++) missing += !seen[i];
    CHECK(duplicates == 0 && missing == 0);
    free(seen);
    lb_reader_close(r);
    printf("archive io errors: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
