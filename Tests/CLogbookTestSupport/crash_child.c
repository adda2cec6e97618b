#define _GNU_SOURCE
#include "logbook_test_support.h"
#include "logbook.h"
#include "logbook_archive.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct child_thread {
    lb_logger *logger;
    int report_fd;
    uint32_t index, chunk_size;
    uint64_t sequence;
} child_thread;

static void *child_main(void *arg) {
    child_thread *t = arg;
    char *scratch = malloc(LB_TEST_SHAPE_TEXT_MAX);
    if (!scratch) _exit(8);
    for (;;) {
        uint64_t seq = t->sequence++;
        /* Shaped records vary in size (strings, metadata, chunk-sized and fragmented records), so
         * records move between chunks and chunks fill at every offset. */
        if (lb_test_log_shaped(t->logger, t->index, seq, t->chunk_size, scratch) != 0) continue;
        uint8_t report[16];
        uint32_t zero = 0;
        memcpy(report, &t->index, 4);
        memcpy(report + 4, &zero, 4);
        memcpy(report + 8, &seq, 8);
        if (write(t->report_fd, report, sizeof report) != (ssize_t)sizeof report) _exit(3);
    }
    return NULL;
}

pid_t lb_test_spawn_child(const char *bundle_path, int report_fd, int threads,
                          uint64_t first_sequence, uint32_t chunk_size, uint64_t capacity,
                          uint32_t wrap_policy, uint64_t archive_file_size) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid > 0) return pid;
    lb_options options;
    lb_options_init(&options);
    options.chunk_size = chunk_size;
    options.capacity = capacity;
    options.wrap_policy = wrap_policy;
    options.lossless_wait_ms = 60000;
    lb_bundle *bundle;
    if (archive_file_size) {
        lb_archive_options archive;
        lb_archive_options_init(&archive);
        archive.max_file_size = archive_file_size;
        archive.quota = 0;
        archive.max_files = 0;
        if (lb_bundle_open_archived(bundle_path, &options, &archive, &bundle) != 0) _exit(4);
    } else if (lb_bundle_open(bundle_path, &options, &bundle) != 0) {
        _exit(4);
    }
    lb_logger *logger;
    if (lb_logger_register(bundle, "crash", &logger) != 0) _exit(5);
    child_thread *t = calloc((size_t)threads, sizeof *t);
    if (!t) _exit(6);
    for (int i = 1; i < threads; i++) {
        t[i] = (child_thread){logger, report_fd, (uint32_t)i, chunk_size, first_sequence};
        pthread_t thread;
        if (pthread_create(&thread, NULL, child_main, &t[i]) != 0) _exit(7);
    }
    t[0] = (child_thread){logger, report_fd, 0, chunk_size, first_sequence};
    child_main(&t[0]);
    _exit(0);
}

pid_t lb_test_spawn_logging_child(const char *bundle_path, int report_fd, int threads,
                                  uint64_t first_sequence, uint32_t chunk_size, uint64_t capacity) {
    return lb_test_spawn_child(bundle_path, report_fd, threads, first_sequence, chunk_size, capacity,
                               LB_WRAP_OVERWRITE, 0);
}

pid_t lb_test_spawn_archiving_child(const char *bundle_path, int report_fd, int threads,
                                    uint64_t first_sequence, uint32_t chunk_size,
                                    uint64_t capacity, uint64_t max_file_size) {
    return lb_test_spawn_child(bundle_path, report_fd, threads, first_sequence, chunk_size, capacity,
                               LB_WRAP_LOSSLESS, max_file_size);
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
