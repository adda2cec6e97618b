/* io_error_shim.c — an LD_PRELOAD library that makes writes and syncs fail with EIO, or writes
 * slow, while an environment variable says so, for archive_io_errors.c and archive_stalls.c:
 *   LOGBOOK_SHIM_FAIL_FSYNC=1      fsync and fdatasync fail
 *   LOGBOOK_SHIM_FAIL_WRITE=1      pwritev fails (the archiver's pwritev back-end)
 *   LOGBOOK_SHIM_DELAY_WRITE_US=N  each pwritev first sleeps N microseconds (a slow disk) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

int fsync(int fd) {
    static int (*real)(int);
    if (getenv("LOGBOOK_SHIM_FAIL_FSYNC")) { errno = EIO; return -1; }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (getenv("LOGBOOK_SHIM_FAIL_FSYNC")) { errno = EIO; return -1; }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    static ssize_t (*real)(int, const struct iovec *, int, off_t);
    if (getenv("LOGBOOK_SHIM_FAIL_WRITE")) { errno = EIO; return -1; }
    const char *delay = getenv("LOGBOOK_SHIM_DELAY_WRITE_US");
    if (delay) usleep((useconds_t)atoi(delay));
    if (!real) real = (ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    return real(fd, iov, count, offset);
}
