/* read_bench: nanoseconds per record of the C reader streaming a whole bundle (every record
 * decoded and handed to a visitor that counts it), best of 3 passes with a new reader each.
 * Usage: read_bench DIR (prints "N.NN ns/record R records"). Built by Benchmarks/commit-ab.sh. */
#define _GNU_SOURCE
#include "logbook.h"

#include <stdio.h>
#include <time.h>

static int count(void *context, const lb_entry *entry) {
    (void)entry;
    ++*(long *)context;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    double best = 0;
    long records = 0;
    for (int pass = 0; pass < 3; pass++) {
        lb_reader *r;
        if (lb_reader_open(argv[1], &r) != 0) return 1;
        long n = 0;
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        long rc = lb_reader_stream(r, NULL, count, &n);
        clock_gettime(CLOCK_MONOTONIC, &end);
        lb_reader_close(r);
        if (rc < 0 || n == 0) return 1;
        double ns = ((double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec)) / (double)n;
        if (pass == 0 || ns < best) best = ns;
        records = n;
    }
    printf("%.2f ns/record %ld records\n", best, records);
    return 0;
}
