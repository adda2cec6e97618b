/* core_test: the C core tested from C, through logbook.h only. Prints "N passed, N failed".
 *
 *   make -C CSources O=/tmp/lb       (the one C recipe; CProgramTests builds it so)
 *   cc -O2 -pthread -I CSources/CLogbook/include Tests/CTests/core_test.c \
 *      /tmp/lb/liblogbook-read.a /tmp/lb/liblogbook.a -lzstd
 */
#define _GNU_SOURCE
#include "logbook.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", dir, name); }

static void test_open_options(void) {
    char path[512];
    path_of(path, sizeof path, "options.logbook");
    lb_options o;
    lb_options_init(&o);
    o.chunk_size = 3000;
    lb_bundle *b = NULL;
    CHECK(lb_bundle_open(path, &o, &b) == -EINVAL);
    lb_options_init(&o);
    o.capacity = 4096;  /* one chunk is not a ring */
    CHECK(lb_bundle_open(path, &o, &b) == -EINVAL);
    CHECK(lb_bundle_open(NULL, NULL, &b) == -EINVAL);
    lb_options_init(&o);
    o.capacity = 1 << 20;
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    lb_bundle *second = NULL;
    CHECK(lb_bundle_open(path, &o, &second) == -EWOULDBLOCK);
    CHECK(lb_bundle_close(b) == 0);
}

typedef struct thread_arg {
    lb_logger *logger;
    uint32_t index;
} thread_arg;

static void *write_many(void *p) {
    thread_arg *a = p;
    for (uint32_t i = 0; i < 50000; i++) LB_INFO(a->logger, "t {} i {}", a->index, i);
    return NULL;
}

static void test_threads_and_reader(void) {
    char path[512];
    path_of(path, sizeof path, "threads.logbook");
    lb_options o;
    lb_options_init(&o);
    o.capacity = 16 << 20;
    o.chunk_size = 16 << 10;
    lb_bundle *b;
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    lb_logger *logger;
    CHECK(lb_logger_register(b, "c", &logger) == 0);
    lb_logger *same;
    CHECK(lb_logger_register(b, "c", &same) == 0 && same == logger);
    pthread_t t[4];
    thread_arg args[4];
    for (uint32_t i = 0; i < 4; i++) {
        args[i] = (thread_arg){logger, i};
        pthread_create(&t[i], NULL, write_many, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    lb_counters c;
    CHECK(lb_bundle_counters(b, &c) == 0 && c.records == 200000 && c.dropped == 0);
    /* The writer's view of the ring: the threads' chunks were sealed when they exited; the ring
     * did not wrap, so it holds every record byte plus a header per chunk used. */
    lb_ring_usage u;
    CHECK(lb_bundle_ring_usage(b, NULL) == -EINVAL);
    CHECK(lb_bundle_ring_usage(b, &u) == 0 && u.chunk_size == 16 << 10 && u.chunk_count == 1024);
    CHECK(u.chunks_active == 0 && u.chunks_archiving == 0 && u.chunks_archived == 0);
    CHECK(u.chunks_sealed == c.chunks_claimed && u.chunks_free + u.chunks_sealed == u.chunk_count);
    CHECK(u.bytes_in_use == u.chunks_sealed * 64 + c.bytes);
    CHECK(lb_bundle_close(b) == 0);

    lb_reader *r;
    CHECK(lb_reader_open(path, &r) == 0);
    CHECK(lb_reader_scan(r) == 200000);
    CHECK(lb_reader_issue_count(r) == 0);
    uint32_t next[4] = {0, 0, 0, 0};
    int in_order = 1;
    for (size_t i = 0; i < lb_reader_entry_count(r); i++) {
        lb_entry e;
        lb_reader_entry(r, i, &e);
        uint32_t off = 0;
        lb_arg thread, seq;
        if (lb_arg_next(e.args, e.args_length, &off, &thread) != 1 ||
            lb_arg_next(e.args, e.args_length, &off, &seq) != 1 || thread.type != LB_ARG_U32 ||
            thread.value.u >= 4 || seq.value.u != next[thread.value.u]++) {
            in_order = 0;
            break;
        }
    }
    CHECK(in_order);
    lb_entry e;
    lb_reader_entry(r, 0, &e);
    const lb_site_info *site = lb_reader_site(r, e.session, e.site_id);
    CHECK(site && strcmp(site->template_text, "t {} i {}") == 0 && strstr(site->file, "core_test.c"));
    CHECK(strcmp(lb_reader_logger_name(r, e.session, e.logger_id), "c") == 0);
    CHECK(lb_reader_scan(r) == 0);  /* nothing new */
    lb_reader_close(r);
}

static void test_arg_decoder_bounds(void) {
    uint8_t bytes[16] = {LB_ARG_STRING, 200, 0, 0, 0, 'a'};
    uint32_t off = 0;
    lb_arg a;
    CHECK(lb_arg_next(bytes, 6, &off, &a) == -EBADMSG);  /* length beyond the buffer */
    uint8_t unknown[2] = {99, 0};
    off = 0;
    CHECK(lb_arg_next(unknown, 2, &off, &a) == -EBADMSG);
    uint8_t short_int[4] = {LB_ARG_I64, 1, 2, 3};
    off = 0;
    CHECK(lb_arg_next(short_int, 4, &off, &a) == -EBADMSG);
    off = 0;
    CHECK(lb_arg_next(short_int, 0, &off, &a) == 0);
}

/* Regression (found by fuzzing under UBSan): a record timestamp far from its session's anchor
 * overflowed the signed wall-time arithmetic. Hostile ticks must give a clamped time, not UB. */
static void test_extreme_timestamps(void) {
    char path[512], ring[600];
    path_of(path, sizeof path, "ticks.logbook");
    lb_options o;
    lb_options_init(&o);
    o.capacity = 64 << 10;
    o.chunk_size = 4096;
    lb_bundle *b;
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    lb_logger *logger;
    CHECK(lb_logger_register(b, "t", &logger) == 0);
    for (int i = 0; i < 3; i++) LB_INFO(logger, "tick {}", i);
    CHECK(lb_bundle_close(b) == 0);
    /* Sequence 1 lives in slot 1; its first record's timestamp is at offset 64 + 8. */
    snprintf(ring, sizeof ring, "%s/ring", path);
    int fd = open(ring, O_RDWR);
    CHECK(fd >= 0);
    uint64_t hostile[2] = {0x8000000000000000ull, 0x7fffffffffffffffull};
    CHECK(pwrite(fd, &hostile[0], 8, 4096 + 4096 + 64 + 8) == 8);
    CHECK(pwrite(fd, &hostile[1], 8, 4096 + 4096 + 64 + 32 + 8) == 8);  /* records are 29 -> 32 bytes */
    close(fd);
    lb_reader *r;
    CHECK(lb_reader_open(path, &r) == 0);
    CHECK(lb_reader_scan(r) == 3);
    lb_entry e;
    CHECK(lb_reader_entry(r, 0, &e) == 0 && e.wall_ns != 0);
    lb_reader_close(r);
}

/* Filters from C: rules, errors, a logger registered after the filter, LOGBOOK_FILTER at open. */
static void test_filters(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/filter.logbook", dir);
    lb_options o;
    lb_options_init(&o);
    o.capacity = 1u << 20;
    o.chunk_size = 16u << 10;
    o.filter = "net=debug";
    setenv("LOGBOOK_FILTER", "db=off,net.http=error", 1);
    lb_bundle *b;
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    unsetenv("LOGBOOK_FILTER");
    CHECK(lb_bundle_filter_warning(b) == NULL);
    lb_logger *net, *http, *db, *other;
    CHECK(lb_logger_register(b, "net.tcp", &net) == 0 && lb_logger_min_level(net) == LB_LEVEL_DEBUG);
    CHECK(lb_logger_register(b, "net.http", &http) == 0 && lb_logger_min_level(http) == LB_LEVEL_ERROR);
    CHECK(lb_logger_register(b, "db", &db) == 0 && lb_logger_min_level(db) == LB_LEVEL_OFF);
    CHECK(lb_logger_register(b, "x", &other) == 0 && lb_logger_min_level(other) == LB_LEVEL_TRACE);
    char spec[128];
    CHECK(lb_bundle_filter(b, spec, sizeof spec) == strlen("net=debug,db=off,net.http=error"));
    CHECK(strcmp(spec, "net=debug,db=off,net.http=error") == 0);
    CHECK(lb_bundle_filter(b, spec, 4) == strlen("net=debug,db=off,net.http=error") && strlen(spec) == 3);
    lb_filter_error error;
    CHECK(lb_bundle_set_filter(b, "net=debug,x=noisy", &error) == -EINVAL && error.offset == 12);
    CHECK(lb_logger_min_level(db) == LB_LEVEL_OFF);  /* unchanged */
    CHECK(lb_bundle_set_filter(b, "warn", &error) == 0);
    CHECK(lb_logger_min_level(db) == LB_LEVEL_WARNING && lb_logger_min_level(http) == LB_LEVEL_WARNING);
    CHECK(lb_bundle_set_filter_rule(b, "net*", LB_LEVEL_TRACE) == 0);
    CHECK(lb_logger_min_level(http) == LB_LEVEL_TRACE && lb_logger_min_level(db) == LB_LEVEL_WARNING);
    CHECK(lb_bundle_set_filter_rule(b, "net*", 9) == -EINVAL);
    CHECK(lb_bundle_close(b) == 0);
    /* A malformed LOGBOOK_FILTER leaves the bundle usable and says why. */
    setenv("LOGBOOK_FILTER", "net=", 1);
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    unsetenv("LOGBOOK_FILTER");
    CHECK(lb_bundle_filter_warning(b) && strstr(lb_bundle_filter_warning(b), "unknown level ''"));
    CHECK(lb_bundle_close(b) == 0);
    o.filter = "net=debug,";
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    CHECK(lb_bundle_close(b) == 0);
    o.filter = "net=loud";
    CHECK(lb_bundle_open(path, &o, &b) == -EINVAL);
}

/* Loggers are found by name through a hash index that grows with them: every name keeps its
 * logger and id across growth, up to the 65535 the format's u16 ids allow. */
static void test_many_loggers(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/loggers.logbook", dir);
    lb_options o;
    lb_options_init(&o);
    o.capacity = 1u << 20;
    o.chunk_size = 16u << 10;
    o.filter = "svc.4321=off";
    o.ignore_environment_filter = true;
    lb_bundle *b;
    CHECK(lb_bundle_open(path, &o, &b) == 0);
    enum { COUNT = 65535 };
    lb_logger **loggers = calloc(COUNT, sizeof *loggers);
    char name[32];
    int registered = 1, ids_in_order = 1, found_again = 1;
    for (uint32_t i = 0; i < COUNT; i++) {
        snprintf(name, sizeof name, "svc.%u", i);
        if (lb_logger_register(b, name, &loggers[i]) != 0) registered = 0;
        else if (loggers[i]->id != i + 1 || strcmp(loggers[i]->name, name) != 0) ids_in_order = 0;
    }
    CHECK(registered && ids_in_order);
    for (uint32_t i = 0; i < COUNT; i += 7) {
        snprintf(name, sizeof name, "svc.%u", i);
        lb_logger *again = NULL;
        if (lb_logger_register(b, name, &again) != 0 || again != loggers[i]) found_again = 0;
    }
    CHECK(found_again);
    CHECK(lb_logger_min_level(loggers[4321]) == LB_LEVEL_OFF && lb_logger_min_level(loggers[4320]) == LB_LEVEL_TRACE);
    lb_logger *extra = NULL;
    CHECK(lb_logger_register(b, "one.too.many", &extra) == -ENOSPC && extra == NULL);
    CHECK(lb_logger_register(b, "svc.65534", &extra) == 0 && extra == loggers[65534]);
    free(loggers);
    CHECK(lb_bundle_close(b) == 0);
}

/* Two threads taking turns: each waits for the phase the other sets (no sleeps). */
typedef struct phases {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int phase;
} phases;

#define PHASES_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER}

static void phase_wait(phases *p, int phase) {
    pthread_mutex_lock(&p->lock);
    while (p->phase != phase) pthread_cond_wait(&p->changed, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void phase_set(phases *p, int phase) {
    pthread_mutex_lock(&p->lock);
    p->phase = phase;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* A thread stuck between lb_record_begin and lb_record_commit past shutdown's 2 s wait: its commit
 * lands in the memory that replaced the ring, so it must say the record was dropped (-EBADF), as
 * the counters do (`closed`), and the files keep only the record before it (commit returned 0:
 * found by adversarial review). */
typedef struct stuck_writer {
    lb_bundle *bundle;
    lb_logger *logger;
    uint32_t site;
    phases turn;
    int commit_rc;
} stuck_writer;

static void *write_stuck(void *p) {
    stuck_writer *s = p;
    lb_writer *w = lb_writer_get(s->bundle);
    lb_record_begin(w, s->logger->id, LB_LEVEL_INFO);
    lb_record_put_u32(w, 7);
    phase_set(&s->turn, 1);  /* inside the record */
    phase_wait(&s->turn, 2);  /* released after shutdown */
    lb_record_put_u32(w, 8);
    s->commit_rc = lb_record_commit(w, s->site);
    return NULL;
}

static void test_record_stuck_past_shutdown(void) {
    char path[512];
    path_of(path, sizeof path, "stuck.logbook");
    lb_options o;
    lb_options_init(&o);
    o.capacity = 1 << 20;
    o.chunk_size = 16 << 10;
    o.ignore_environment_filter = 1;
    stuck_writer s = {.turn = PHASES_INIT, .commit_rc = 99};
    CHECK(lb_bundle_open(path, &o, &s.bundle) == 0);
    CHECK(lb_logger_register(s.bundle, "stuck", &s.logger) == 0);
    s.site = lb_site_register_c(s.bundle, __FILE__, __LINE__, __func__, "a={} b={}");
    LB_INFO(s.logger, "before {}", 1);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, write_stuck, &s) == 0);
    phase_wait(&s.turn, 1);
    CHECK(lb_bundle_shutdown(s.bundle) == 0);
    lb_counters before, after;
    CHECK(lb_bundle_counters(s.bundle, &before) == 0);
    CHECK(before.records == 1 && before.dropped == 0);
    phase_set(&s.turn, 2);
    pthread_join(thread, NULL);
    CHECK(s.commit_rc == -EBADF);
    CHECK(lb_bundle_counters(s.bundle, &after) == 0);
    CHECK(after.records == 1 && after.drops[LB_DROP_CLOSED] == 1 && after.dropped == 1);
    CHECK(lb_bundle_close(s.bundle) == 0);
    lb_reader *r;
    CHECK(lb_reader_open(path, &r) == 0);
    CHECK(lb_reader_scan(r) == 1);
    CHECK(lb_reader_entry_count(r) == 1);
    lb_reader_close(r);
}

/* A thread that took its writer before shutdown and begins a record after it: the record is
 * dropped, and the writer keeps `steal` set, so that a bundle opened later (perhaps at the closed
 * one's address) gets a writer of its own (found by review: `steal` was cleared, and every record
 * the thread logged to the next bundle at that address was dropped as `closed`). */
typedef struct late_writer {
    lb_bundle *first, *second;
    lb_logger *first_logger, *second_logger;
    phases turn;
    int late_rc, kept;
    uint32_t steal_after;
} late_writer;

static int late_log(lb_bundle *b, lb_logger *l, lb_writer *w) {
    uint32_t site = lb_site_register_c(b, __FILE__, __LINE__, __func__, "x={}");
    lb_record_begin(w, l->id, LB_LEVEL_INFO);
    lb_record_put_u32(w, 7);
    return lb_record_commit(w, site);
}

static void *write_late(void *p) {
    late_writer *s = p;
    lb_writer *w = lb_writer_get(s->first);
    late_log(s->first, s->first_logger, w);
    phase_set(&s->turn, 1);
    phase_wait(&s->turn, 2);
    s->late_rc = late_log(s->first, s->first_logger, w);  /* its writer taken before shutdown */
    s->steal_after = atomic_load(&w->steal);
    phase_set(&s->turn, 3);
    phase_wait(&s->turn, 4);
    for (int i = 0; i < 100; i++)
        if (late_log(s->second, s->second_logger, lb_writer_get(s->second)) == 0) s->kept++;
    return NULL;
}

static void test_writer_taken_before_shutdown(void) {
    char first[512], second[512];
    path_of(first, sizeof first, "late-first.logbook");
    path_of(second, sizeof second, "late-second.logbook");
    lb_options o;
    lb_options_init(&o);
    o.capacity = 1 << 20;
    o.ignore_environment_filter = 1;
    late_writer s = {.turn = PHASES_INIT};
    CHECK(lb_bundle_open(first, &o, &s.first) == 0);
    CHECK(lb_logger_register(s.first, "late", &s.first_logger) == 0);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, write_late, &s) == 0);
    phase_wait(&s.turn, 1);
    CHECK(lb_bundle_shutdown(s.first) == 0);
    phase_set(&s.turn, 2);
    phase_wait(&s.turn, 3);
    CHECK(s.late_rc == -EBADF);
    CHECK(s.steal_after != 0);
    CHECK(lb_bundle_close(s.first) == 0);
    CHECK(lb_bundle_open(second, &o, &s.second) == 0);
    CHECK(lb_logger_register(s.second, "late", &s.second_logger) == 0);
    phase_set(&s.turn, 4);
    pthread_join(thread, NULL);
    CHECK(s.kept == 100);
    CHECK(lb_bundle_close(s.second) == 0);
}

int main(void) {
    /* The C test runs on the CLOCK_MONOTONIC fallback (the Swift tests cover the TSC): one
     * nanosecond per tick is also what makes extreme timestamps overflow naive arithmetic. */
    setenv("LOGBOOK_CLOCK", "monotonic", 1);
    snprintf(dir, sizeof dir, "/tmp/logbook-core-test-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    test_open_options();
    test_threads_and_reader();
    test_arg_decoder_bounds();
    test_extreme_timestamps();
    test_filters();
    test_many_loggers();
    test_record_stuck_past_shutdown();
    test_writer_taken_before_shutdown();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
