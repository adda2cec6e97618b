#define _GNU_SOURCE
#include "bench_support.h"

#include <pthread.h>
#include <time.h>

void bench_c_log(lb_logger *logger, uint64_t count) {
    for (uint64_t i = 0; i < count; i++)
        LB_INFO(logger, "request {} took {} ms ok={}", (int64_t)i, (double)i * 0.25, (_Bool)(i & 1));
}

void bench_c_log_disabled(lb_logger *logger, uint64_t count) {
    for (uint64_t i = 0; i < count; i++) {
        LB_DEBUG(logger, "request {} took {} ms ok={}", (int64_t)i, (double)i * 0.25, (_Bool)(i & 1));
        __asm__ volatile("" ::: "memory");  /* keep the loop: one check per iteration */
    }
}

typedef struct job {
    lb_logger *logger;
    uint64_t count;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    bench_c_log(j->logger, j->count);
    return NULL;
}

uint64_t bench_c_log_two_threads(lb_logger *logger, uint64_t count_per_thread) {
    struct timespec a, b;
    job j = {logger, count_per_thread};
    pthread_t t[2];
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run_job, &j);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000ull + (uint64_t)(b.tv_nsec - a.tv_nsec);
}
