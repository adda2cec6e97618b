#define _GNU_SOURCE
#include "logbook_test_support.h"
#include "logbook.h"
#include "logbook_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct child_thread {
    lb_logger *logger;
    int report_fd;
    uint32_t index, chunk_size;
    uint64_t sequence;
    uint64_t claims_at_open, chunk_budget;
} child_thread;

static void report(int fd, uint32_t thread, uint32_t kind, uint64_t seq) {
    uint8_t bytes[16];
    memcpy(bytes, &thread, 4);
    memcpy(bytes + 4, &kind, 4);
    memcpy(bytes + 8, &seq, 8);
    if (write(fd, bytes, sizeof bytes) != (ssize_t)sizeof bytes) _exit(3);
}

/* 1 once the bundle has claimed `chunk_budget` chunks since the child opened it. */
static int budget_spent(const child_thread *t) {
    if (!t->chunk_budget) return 0;
    lb_counters counters;
    if (lb_bundle_counters(t->logger->bundle, &counters) != 0) _exit(9);
    return counters.chunks_claimed - t->claims_at_open >= t->chunk_budget;
}

static void *child_main(void *arg) {
    child_thread *t = arg;
    char *scratch = malloc(LB_TEST_SHAPE_TEXT_MAX);
    if (!scratch) _exit(8);
    for (;;) {
        uint64_t seq = t->sequence++;
        /* Shaped records vary in size (strings, metadata, chunk-sized and fragmented records), so
         * records move between chunks and chunks fill at every offset. */
        int rc = lb_test_log_shaped(t->logger, t->index, seq, t->chunk_size, scratch);
        if (rc == 0) report(t->report_fd, t->index, LB_TEST_REPORT_COMMITTED, seq);
        if (budget_spent(t)) break;
    }
    /* Done: say so, then wait for the parent's SIGKILL with every record committed. */
    report(t->report_fd, t->index, LB_TEST_REPORT_STOPPED, t->sequence);
    for (;;) pause();
    return NULL;
}

int lb_test_report_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
    if (fcntl(fds[0], F_SETPIPE_SZ, 4096) < 0) {
        int error = errno;
        close(fds[0]);
        close(fds[1]);
        return -error;
    }
    return 0;
}

pid_t lb_test_spawn(const lb_test_child *child) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid > 0) return pid;
    lb_options options;
    lb_options_init(&options);
    options.chunk_size = child->chunk_size;
    options.capacity = child->capacity;
    options.wrap_policy = child->wrap_policy;
    options.lossless_wait_ms = 60000;
    lb_bundle *bundle;
    if (child->archive_file_size) {
        lb_archive_options archive;
        lb_archive_options_init(&archive);
        archive.max_file_size = child->archive_file_size;
        archive.quota = 0;
        archive.max_files = 0;
        if (lb_bundle_open_archived(child->bundle_path, &options, &archive, &bundle) != 0) _exit(4);
    } else if (lb_bundle_open(child->bundle_path, &options, &bundle) != 0) {
        _exit(4);
    }
    lb_logger *logger;
    if (lb_logger_register(bundle, "crash", &logger) != 0) _exit(5);
    lb_counters counters;
    if (lb_bundle_counters(bundle, &counters) != 0) _exit(9);
    int threads = child->threads;
    child_thread *t = calloc((size_t)threads, sizeof *t);
    if (!t) _exit(6);
    for (int i = 0; i < threads; i++)
        t[i] = (child_thread){logger, child->report_fd, (uint32_t)i, child->chunk_size,
                              child->first_sequence, counters.chunks_claimed, child->chunk_budget};
    for (int i = 1; i < threads; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, child_main, &t[i]) != 0) _exit(7);
    }
    child_main(&t[0]);
    _exit(0);
}

int lb_test_fork_and_log_inherited(void *opaque_logger, int count) {
    lb_logger *logger = opaque_logger;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        int refused = 0;
        for (int i = 0; i < count; i++) {
            lb_writer *w = lb_writer_get(logger->bundle);
            lb_record_begin(w, logger->id, LB_LEVEL_INFO);
            lb_record_put_i32(w, i);
            if (lb_record_commit(w, 1) != 0) refused++;
        }
        int closed = lb_bundle_close(logger->bundle);
        _exit(refused == count && closed == 0 ? 0 : 1);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
