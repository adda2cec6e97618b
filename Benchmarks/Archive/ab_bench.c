/* ab_bench.c — one run of one scenario, for Benchmarks/archive-ab.sh (which builds it against two
 * revisions and interleaves them) and Benchmarks/compress.sh: logs RECORDS records of 3 scalars
 * into a ring of RING_MIB MiB, with (1: lossless + archiver, io_uring) or without (0: overwrite)
 * the archiver, archive files compressed at LEVEL (0: not; default: the archiver's default), and
 * prints "ns/record MB/s minor-faults involuntary-switches" (the last two of the logging thread
 * while it logged). Usage: ab_bench DIR ARCHIVE RECORDS RING_MIB [LEVEL] */
#define _GNU_SOURCE
#include "logbook.h"
#include "logbook_archive.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
static double now_s(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    char path[4096], command[4200];
    snprintf(path, sizeof path, "%s/bench.logbook", argv[1]);
    snprintf(command, sizeof command, "rm -rf '%s'", path);
    if (system(command) != 0) return 1;
    int archive = atoi(argv[2]); long records = atol(argv[3]); uint64_t capacity = (uint64_t)atol(argv[4]) << 20;
    lb_options options; lb_options_init(&options); options.capacity = capacity; options.idle_seal_ms = 0;
    lb_bundle *bundle; int rc;
    if (archive) {
        options.wrap_policy = LB_WRAP_LOSSLESS; options.lossless_wait_ms = 60000;
        lb_archive_options a; lb_archive_options_init(&a); a.quota = 0; a.max_files = 0;
#ifdef LB_ZST_SKIPPABLE_MAGIC  /* (revisions before compressed archives have no level) */
        if (argc > 5) a.compression_level = atoi(argv[5]);
#endif
        rc = lb_bundle_open_archived(path, &options, &a, &bundle);
    } else rc = lb_bundle_open(path, &options, &bundle);
    if (rc) return 1;
    lb_logger *log; lb_logger_register(bundle, "bench", &log);
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    double start = now_s();
    for (long i = 0; i < records; i++) LB_INFO(log, "request {} took {} ms ok={}", i, 12.5, (bool)(i & 1));
    double seconds = now_s() - start;
    getrusage(RUSAGE_THREAD, &after);
    lb_counters c; lb_bundle_counters(bundle, &c);
    lb_bundle_close(bundle);
    printf("%.3f %.1f %ld %ld\n", seconds * 1e9 / records, (double)c.bytes / seconds / 1e6,
           after.ru_minflt - before.ru_minflt, after.ru_nivcsw - before.ru_nivcsw);
    return 0;
}
