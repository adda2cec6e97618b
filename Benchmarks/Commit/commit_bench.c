/* commit_bench: nanoseconds per LB_INFO with three scalar arguments on one thread, a 64 MiB overwrite ring.
 * Usage: commit_bench DIR RECORDS (prints "N.NN ns/record"). Built by Benchmarks/commit-ab.sh. */
#define _GNU_SOURCE
#include "logbook.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long records = atol(argv[2]);
    lb_options o;
    lb_options_init(&o);
    o.capacity = 64 << 20;
    o.ignore_environment_filter = 1;
    lb_bundle *bundle;
    if (lb_bundle_open(argv[1], &o, &bundle) != 0) return 1;
    lb_logger *log;
    if (lb_logger_register(bundle, "bench", &log) != 0) return 1;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < records; i++)
        LB_INFO(log, "request {} took {} us, {} bytes", (int)i, 12.5, (unsigned long)i * 3);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("%.2f ns/record\n", ns / (double)records);
    return lb_bundle_close(bundle) == 0 ? 0 : 1;
}
