/* clock.c — time: the tick source (the TSC when it is invariant, else CLOCK_MONOTONIC) and its
 * calibration, wall time, and lb_ticker (a thread that calls back every period until stopped). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- clock ---- */
bool lb_clock_is_tsc = false;
static uint64_t clock_ticks_per_second = 1000000000ull;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t lb_wall_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The TSC is usable as a clock only when it runs at a constant rate in every power state. */
static int tsc_is_invariant(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (getenv("LOGBOOK_CLOCK") && strcmp(getenv("LOGBOOK_CLOCK"), "monotonic") == 0) return 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int constant = 0, nonstop = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(f);
    return constant && nonstop;
#else
    return 0;
#endif
}

static void clock_init(void) {
    if (!tsc_is_invariant()) return;
#if defined(__x86_64__) || defined(__i386__)
    /* Calibrate against CLOCK_MONOTONIC over 20 ms; readers refine nothing, so take the best of
     * two windows bracketed tightly. */
    uint64_t best = 0;
    for (int round = 0; round < 2; round++) {
        uint64_t m0 = mono_ns(), t0 = __rdtsc();
        struct timespec nap = {0, 10 * 1000 * 1000};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {}
        uint64_t t1 = __rdtsc(), m1 = mono_ns();
        if (m1 > m0 && t1 > t0) {
            uint64_t hz = (uint64_t)((__uint128_t)(t1 - t0) * 1000000000ull / (m1 - m0));
            if (hz > best) best = hz;
        }
    }
    if (best < 1000000ull) return;  /* implausible: keep CLOCK_MONOTONIC */
    clock_ticks_per_second = best;
    lb_clock_is_tsc = true;
#endif
}

uint64_t lb_clock_setup(void) {
    pthread_once(&clock_once, clock_init);
    return clock_ticks_per_second;
}

/* ---- lb_ticker ---- */

void lb_ticker_init(lb_ticker *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->wake, NULL);
}

static void *ticker_main(void *arg) {
    lb_ticker *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += t->period_ms / 1000;
        until.tv_nsec += (long)(t->period_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->wake, &t->lock, &until);
        if (t->stop) break;
        pthread_mutex_unlock(&t->lock);
        t->tick(t->context);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

int lb_ticker_start(lb_ticker *t, uint32_t period_ms, void (*tick)(void *context), void *context) {
    t->period_ms = period_ms ? period_ms : 1;
    t->tick = tick;
    t->context = context;
    t->stop = 0;
    int rc = pthread_create(&t->thread, NULL, ticker_main, t);
    if (rc) return -rc;
    t->running = 1;
    return 0;
}

void lb_ticker_stop(lb_ticker *t) {
    if (!t->running) return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    t->running = 0;
}

void lb_ticker_forked(lb_ticker *t) {
    t->running = 0;
    pthread_mutex_init(&t->lock, NULL);
    /* The parent's thread may have been waiting on it: destroying the inherited condition
     * variable would wait for that waiter forever (glibc), so the child gets a fresh one. */
    pthread_cond_init(&t->wake, NULL);
}

void lb_ticker_destroy(lb_ticker *t) {
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->wake);
}
