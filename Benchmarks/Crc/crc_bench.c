/* crc_bench.c — what a CRC-32C of a chunk costs: the core's lb_crc32c (SSE4.2 where the CPU has
 * it) over 64 KiB chunks, per chunk and per record (48-byte records, ~1,360 per chunk), against the
 * cost of writing those records. The number behind "archived frames carry a CRC, ring chunks do
 * not" in docs/FORMAT.md. Built and run by Benchmarks/crc.sh. */
#define _GNU_SOURCE
#include "logbook.h"
#include "../../CSources/CLogbook/src/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    enum { CHUNK = 64 * 1024, CHUNKS = 256, ROUNDS = 9 };
    uint8_t *ring = malloc((size_t)CHUNK * CHUNKS);
    for (size_t i = 0; i < (size_t)CHUNK * CHUNKS; i++) ring[i] = (uint8_t)(i * 2654435761u >> 13);
    volatile uint32_t sink = 0;
    double ns[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        double start = now();
        for (int repeat = 0; repeat < 8; repeat++)
            for (int c = 0; c < CHUNKS; c++) sink ^= lb_crc32c(0, ring + (size_t)c * CHUNK, CHUNK);
        ns[round] = (now() - start) * 1e9 / (8.0 * CHUNKS);
    }
    qsort(ns, ROUNDS, sizeof *ns, compare);
    double per_chunk = ns[ROUNDS / 2];
    printf("| CRC-32C of a 64 KiB chunk (median of %d rounds, %.0f-%.0f) | %.0f ns = %.1f GB/s |\n",
           ROUNDS, ns[0], ns[ROUNDS - 1], per_chunk, CHUNK / per_chunk);
    printf("| the same per 48-byte record (~1,360 per chunk), if computed when a chunk is sealed | %.1f ns |\n",
           per_chunk / (CHUNK / 48.0));
    (void)sink;
    free(ring);
    return 0;
}
