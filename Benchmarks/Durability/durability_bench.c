/* durability_bench: what the bounded-loss mode (lb_options.sync_interval_ms) costs the logging
 * thread, and what it writes to disk. One thread logs RECORDS 3-scalar records (LB_INFO with an
 * int, a double and a u64) into a 64 MiB overwrite ring of 64 KiB chunks, either as fast as it can
 * (RATE 0) or paced at RATE records per second (a busy wait on the clock between batches of 100,
 * not counted). Prints "N.NN ns/record B bytes-written": the time inside the log calls per record,
 * and the bytes the block device under DIR wrote meanwhile (/sys/block/DEV/stat; -1 when unknown).
 * Usage: durability_bench DIR RECORDS INTERVAL_MS RATE. Run by Benchmarks/durability.sh. */
#define _GNU_SOURCE
#include "logbook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Sectors written by the whole disk that holds `path` (a partition's parent), or -1. */
static long long sectors_written(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    char link[256], target[512];
    snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    if (!realpath(link, target)) return -1;
    char stat_path[600];
    snprintf(stat_path, sizeof stat_path, "%s/stat", target);
    FILE *f = fopen(stat_path, "r");
    if (!f) return -1;
    long long v[7] = {0};
    int n = fscanf(f, "%lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
    fclose(f);
    return n == 7 ? v[6] : -1;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    long records = atol(argv[2]);
    lb_options o;
    lb_options_init(&o);
    o.capacity = 64 << 20;
    o.ignore_environment_filter = 1;
    o.sync_interval_ms = (uint32_t)atol(argv[3]);
    double rate = atof(argv[4]);
    lb_bundle *bundle;
    if (lb_bundle_open(argv[1], &o, &bundle) != 0) return 1;
    lb_logger *log;
    if (lb_logger_register(bundle, "bench", &log) != 0) return 1;
    long long sectors_before = sectors_written(argv[1]);
    double inside = 0, start = now_ns();
    for (long i = 0; i < records; i += 100) {
        if (rate > 0) {
            double due = start + (double)i / rate * 1e9;
            while (now_ns() < due) {}
        }
        double t0 = now_ns();
        for (long k = i; k < i + 100 && k < records; k++)
            LB_INFO(log, "request {} took {} us, {} bytes", (int)k, 12.5, (unsigned long)k * 3);
        inside += now_ns() - t0;
    }
    long long sectors_after = sectors_written(argv[1]);
    if (lb_bundle_close(bundle) != 0) return 1;
    long long bytes = sectors_before >= 0 && sectors_after >= 0 ? (sectors_after - sectors_before) * 512 : -1;
    printf("%.2f ns/record %lld bytes-written\n", inside / (double)records, bytes);
    return 0;
}
