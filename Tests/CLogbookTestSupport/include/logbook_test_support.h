/* Test support: code that must run in a forked child, where only async-signal-safe-ish C (no Swift
 * runtime) is safe, and helpers for damaging files. */
#ifndef LOGBOOK_TEST_SUPPORT_H
#define LOGBOOK_TEST_SUPPORT_H
#include <stdint.h>
#include <sys/types.h>

/* Forks a child that opens `bundle_path` and logs from `threads` threads forever. After each
 * committed record it writes {uint32 thread index, uint32 0, uint64 sequence} to `report_fd`.
 * Sequences continue from `first_sequence`. Returns the child's pid, or -errno. */
pid_t lb_test_spawn_logging_child(const char *bundle_path, int report_fd, int threads,
                                  uint64_t first_sequence, uint32_t chunk_size, uint64_t capacity);

/* As lb_test_spawn_logging_child, with a lossless ring and an archiver rolling files of
 * `max_file_size` bytes (no count or quota limit) in the bundle's archive directory. */
pid_t lb_test_spawn_archiving_child(const char *bundle_path, int report_fd, int threads,
                                    uint64_t first_sequence, uint32_t chunk_size,
                                    uint64_t capacity, uint64_t max_file_size);

/* Forks while `logger` is open in this process. The child logs `count` records through the
 * inherited logger, closes the inherited bundle, and exits with 0 if every log call reported an
 * error (the inherited bundle must not be written by a child) and close succeeded, else 1.
 * Returns the child's exit status, or -errno. */
int lb_test_fork_and_log_inherited(void *logger, int count);

#endif
