/* archive_bench.c — what archiving costs the logging thread, and how fast the archiver persists.
 *
 *   hot path    1 thread logs 4,000,000 records of 3 scalars (48 bytes each) into a 256 MiB ring,
 *               which they fit, with the archiver off (overwrite) and on (lossless + archiver
 *               persisting the chunks on the other core as they fill). ns per record.
 *   sustained   1 thread logs 10,000,000 records (480 MB) through a 16 MiB lossless ring: the
 *               logger can only go as fast as the archiver persists; MB/s of chunk bytes.
 *
 * Usage: archive_bench DIR [io_uring|pwrite]. Each figure is the median of 5 runs. Built and run
 * by Benchmarks/archive.sh, which also times dd to the same directory. */
#define _GNU_SOURCE
#include "logbook.h"
#include "logbook_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct result {
    double seconds;
    uint64_t bytes, dropped;
} result;

static result run(const char *dir, int archive, uint64_t capacity, long records, uint32_t backend) {
    char path[4096], command[4200];
    snprintf(path, sizeof path, "%s/bench.logbook", dir);
    snprintf(command, sizeof command, "rm -rf '%s'", path);
    if (system(command) != 0) exit(1);
    lb_options options;
    lb_options_init(&options);
    options.capacity = capacity;
    options.idle_seal_ms = 0;
    lb_bundle *bundle;
    int rc;
    if (archive) {
        options.wrap_policy = LB_WRAP_LOSSLESS;
        options.lossless_wait_ms = 60000;
        lb_archive_options a;
        lb_archive_options_init(&a);
        a.quota = 0;
        a.max_files = 0;
        a.backend = backend;
        rc = lb_bundle_open_archived(path, &options, &a, &bundle);
    } else {
        rc = lb_bundle_open(path, &options, &bundle);
    }
    if (rc) {
        fprintf(stderr, "open: %s\n", strerror(-rc));
        exit(1);
    }
    lb_logger *log;
    lb_logger_register(bundle, "bench", &log);
    double start = now_s();
    for (long i = 0; i < records; i++) LB_INFO(log, "request {} took {} ms ok={}", i, 12.5, (bool)(i & 1));
    double seconds = now_s() - start;
    lb_counters counters;
    lb_bundle_counters(bundle, &counters);
    lb_bundle_close(bundle);
    return (result){seconds, counters.bytes, counters.dropped};
}

static result median(const char *dir, int archive, uint64_t capacity, long records, uint32_t backend) {
    result runs[5];
    double seconds[5];
    for (int i = 0; i < 5; i++) {
        runs[i] = run(dir, archive, capacity, records, backend);
        seconds[i] = runs[i].seconds;
    }
    qsort(seconds, 5, sizeof seconds[0], compare_doubles);
    result r = runs[0];
    r.seconds = seconds[2];
    for (int i = 0; i < 5; i++) r.dropped += runs[i].dropped - runs[0].dropped * (i == 0);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: archive_bench DIR [io_uring|pwrite]\n");
        return 2;
    }
    uint32_t backend = argc > 2 && strcmp(argv[2], "pwrite") == 0 ? LB_ARCHIVE_BACKEND_PWRITE : 0;
    const long hot = 4000000, sustained = 10000000;
    result off = median(argv[1], 0, 256u << 20, hot, backend);
    result on = median(argv[1], 1, 256u << 20, hot, backend);
    result flow = median(argv[1], 1, 16u << 20, sustained, backend);
    printf("| hot path, archiver off | %.2f ns/record | |\n", off.seconds * 1e9 / hot);
    printf("| hot path, archiver on (%s) | %.2f ns/record | %+.1f%% |\n",
           backend ? "pwritev" : "io_uring", on.seconds * 1e9 / hot,
           (on.seconds / off.seconds - 1) * 100);
    printf("| sustained lossless through a 16 MiB ring (%s) | %.0f MB/s (%.1f M records/s, %llu dropped) | |\n",
           backend ? "pwritev" : "io_uring", (double)flow.bytes / flow.seconds / 1e6,
           sustained / flow.seconds / 1e6, (unsigned long long)flow.dropped);
    return 0;
}
