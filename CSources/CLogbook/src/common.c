/* common.c — pieces shared by the writer and the reader: CRC-32C, clock set-up, full I/O,
 * the chunk walker (the single place that decides what a committed record is) and meta entries. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- CRC-32C (Castagnoli): headers, meta entries and archived frames; never on the record hot
 * path. The SSE4.2 crc32 instruction where the CPU has it, a table otherwise. The instruction has
 * a latency of 3 cycles and a throughput of 1: the archiver, which checksums every chunk it
 * persists, runs three independent streams over three adjacent blocks and joins their CRCs with
 * the "shift by n zero bytes" operator (a linear map over GF(2), tabulated once for each block
 * size), which triples the speed on large buffers (Benchmarks/crc.sh). ---- */
#define CRC_POLY 0x82F63B78u   /* reflected Castagnoli polynomial */
#define CRC_LONG 8192u          /* block sizes of the three streams */
#define CRC_SHORT 256u

static uint32_t crc_table[256];
static uint32_t crc_shift_long[4][256], crc_shift_short[4][256];
static int crc_hardware;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* A 32x32 matrix over GF(2) (one column per bit) times a vector. */
static uint32_t gf2_times(const uint32_t *matrix, uint32_t vector) {
    uint32_t sum = 0;
    for (; vector; vector >>= 1, matrix++)
        if (vector & 1) sum ^= *matrix;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(matrix, matrix[n]);
}

/* The operator that appends `length` zero bytes to a CRC register, as four byte tables. */
static void crc_shift_table(uint32_t table[4][256], size_t length) {
    uint32_t odd[32], even[32];
    odd[0] = CRC_POLY;  /* one zero bit */
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    gf2_square(even, odd);  /* two zero bits */
    gf2_square(odd, even);  /* four */
    uint32_t *op = odd;     /* squared once more per halving of `length` (bytes: 8 bits) */
    for (;;) {
        gf2_square(even, odd);  /* 8 zero bits = 1 byte, then 2, 4, ... bytes */
        length >>= 1;
        if (!length) { op = even; break; }
        gf2_square(odd, even);
        length >>= 1;
        if (!length) { op = odd; break; }
    }
    for (uint32_t n = 0; n < 256; n++) {
        table[0][n] = gf2_times(op, n);
        table[1][n] = gf2_times(op, n << 8);
        table[2][n] = gf2_times(op, n << 16);
        table[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF] ^
           table[3][crc >> 24];
}

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_table[i] = c;
    }
    crc_shift_table(crc_shift_long, CRC_LONG);
    crc_shift_table(crc_shift_short, CRC_SHORT);
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
#include <nmmintrin.h>
/* Three streams over blocks A, B, C of `block` bytes: crc(A B C) = shift(shift(crcA) ^ crcB) ^ crcC,
 * where B's and C's registers start at 0 (the CRC is linear in its input). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                              size_t length) {
    uint64_t c0 = crc;
    while (length && ((uintptr_t)p & 7u)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        length--;
    }
    static const size_t blocks[2] = {CRC_LONG, CRC_SHORT};
    for (int size = 0; size < 2; size++) {
        size_t block = blocks[size];
        while (length >= 3 * block) {
            uint64_t c1 = 0, c2 = 0;
            const uint8_t *end = p + block;
            do {
                uint64_t a, b, d;
                memcpy(&a, p, 8);
                memcpy(&b, p + block, 8);
                memcpy(&d, p + 2 * block, 8);
                c0 = _mm_crc32_u64(c0, a);
                c1 = _mm_crc32_u64(c1, b);
                c2 = _mm_crc32_u64(c2, d);
                p += 8;
            } while (p < end);
            uint32_t (*shift)[256] = size == 0 ? crc_shift_long : crc_shift_short;
            c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;
            c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * block;
            length -= 3 * block;
        }
    }
    while (length >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c0 = _mm_crc32_u64(c0, v);
        p += 8;
        length -= 8;
    }
    while (length--) c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return (uint32_t)c0;
}
#endif

/* The table-driven CRC, also the reference the tests compare the fast path with. */
uint32_t lb_crc32c_portable(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    while (length--) crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t lb_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_hardware) return ~crc32c_sse42(~crc, data, length);
#endif
    return lb_crc32c_portable(crc, data, length);
}

uint32_t lb_ring_header_crc(const lb_ring_header *header) {
    return lb_crc32c(0, header, __builtin_offsetof(lb_ring_header, header_crc));
}

uint32_t lb_record_page_check(uint64_t sequence, uint64_t word, const uint8_t *record, uint32_t length) {
    uint64_t head[2] = {sequence, word};
    uint32_t crc = lb_crc32c(0, head, sizeof head);
    return lb_crc32c(crc, record + 8, length - 8);
}

uint32_t lb_chunk_crc(const lb_chunk_header *chunk) {
    uint32_t crc = lb_crc32c(0, &chunk->magic, 4);
    return lb_crc32c(crc, &chunk->sequence,
                     __builtin_offsetof(lb_chunk_header, header_crc) -
                         __builtin_offsetof(lb_chunk_header, sequence));
}

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

/* ---- I/O ---- */
char *lb_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* ---- what went wrong, in words: the open calls say which file, option or directory failed and
 * why, in a thread-local sentence (lb_error_detail), beside their -errno. ---- */
static _Thread_local char error_detail[512];

const char *lb_error_detail(void) { return error_detail; }

void lb_error_detail_clear(void) { error_detail[0] = 0; }

void lb_error_detail_set(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error_detail, sizeof error_detail, format, arguments);
    va_end(arguments);
}

/* ---- files Logbook writes: only in a directory this user owns and nobody else can write to, and
 * only relative to that directory's descriptor, never through a symlink, never blocking on a FIFO,
 * new files created exclusively. Once the directory is checked, nobody but this user (and root)
 * can plant anything in it. ---- */
static const char *file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

int lb_dir_check_private(int dir_fd, const char *role, const char *path) {
    struct stat st;
    if (fstat(dir_fd, &st) != 0) {
        int err = errno;
        lb_error_detail_set("%s '%s': %s", role, path, strerror(err));
        return -err;
    }
    if (!S_ISDIR(st.st_mode)) {
        lb_error_detail_set("%s '%s' is %s, not a directory", role, path, file_type_name(st.st_mode));
        return -ENOTDIR;
    }
    uid_t me = geteuid();
    if (st.st_uid != me) {
        lb_error_detail_set("%s '%s' is owned by uid %u, not by this user (uid %u): refusing to write "
                            "into a directory another user controls", role, path,
                            (unsigned)st.st_uid, (unsigned)me);
        return -EPERM;
    }
    /* Group-writable is accepted only for this user's own group (user private groups). */
    if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid())) {
        lb_error_detail_set("%s '%s' is writable by %s (mode %04o): another user could plant files in "
                            "it; chmod go-w it or choose another directory", role, path,
                            (st.st_mode & S_IWOTH) ? "every user" : "its group",
                            (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

/* Path resolution for the directories Logbook writes in, one component at a time (openat with
 * O_NOFOLLOW), so that a symlink anywhere on the way is followed only when this user or root made
 * it: one planted by someone else in /tmp or any directory others can write to must not redirect
 * where Logbook writes, however the path is spelled ("dir/link", "dir/link/", "dir/link/.",
 * "dir/link/sub/.."). */
typedef struct path_walk {
    const char *role;       /* "bundle directory" */
    const char *path;       /* as the caller gave it, for messages */
    int symlinks;           /* followed so far (at most 40, as the kernel) */
} path_walk;

static int walk_fail(path_walk *w, int at, int err, const char *what, const char *prefix, int length) {
    if (at >= 0) close(at);
    /* The component that failed ends the path as given: name the path once. */
    if (prefix == w->path && strspn(w->path + length, "/.") == strlen(w->path + length)) {
        if (what) lb_error_detail_set("%s '%s' %s", w->role, w->path, what);
        else if (err == ENOTDIR) lb_error_detail_set("%s '%s' is not a directory", w->role, w->path);
        else lb_error_detail_set("%s '%s': %s", w->role, w->path, strerror(err));
        return -err;
    }
    if (what)
        lb_error_detail_set("%s '%s': '%.*s' %s", w->role, w->path, length, prefix, what);
    else if (err == ENOTDIR)
        lb_error_detail_set("%s '%s': '%.*s' is not a directory", w->role, w->path, length, prefix);
    else
        lb_error_detail_set("%s '%s': '%.*s': %s", w->role, w->path, length, prefix, strerror(err));
    return -err;
}

/* Opens directory `rest` relative to `at` (consumed), creating its last component (0700) when
 * `create` and it is missing. `display` is the text `rest` lies in, for messages. */
static int walk_from(path_walk *w, int at, const char *display, const char *rest, int create) {
    char component[NAME_MAX + 1];
    for (;;) {
        while (*rest == '/') rest++;
        if (!*rest) return at;
        const char *end = strchr(rest, '/');
        if (!end) end = rest + strlen(rest);
        size_t length = (size_t)(end - rest);
        int prefix = (int)(end - display);
        if (length > NAME_MAX) return walk_fail(w, at, ENAMETOOLONG, NULL, display, prefix);
        memcpy(component, rest, length);
        component[length] = 0;
        rest = end;
        const char *after = rest;
        while (*after == '/') after++;
        int last = !*after;
        if (strcmp(component, ".") == 0) continue;
        int fd;
        do fd = openat(at, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0 && errno == ENOENT && last && create) {
            if (mkdirat(at, component, 0700) != 0 && errno != EEXIST)
                return walk_fail(w, at, errno, NULL, display, prefix);
            fd = openat(at, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            int err = errno;
            struct stat st;
            if (fstatat(at, component, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode))
                return walk_fail(w, at, err, NULL, display, prefix);
            if (st.st_uid != geteuid() && st.st_uid != 0)
                return walk_fail(w, at, ELOOP,
                                 "is a symbolic link that neither this user nor root owns: not followed",
                                 display, prefix);
            if (++w->symlinks > 40) return walk_fail(w, at, ELOOP, NULL, display, prefix);
            char target[PATH_MAX];
            ssize_t n = readlinkat(at, component, target, sizeof target - 1);
            if (n < 0) return walk_fail(w, at, errno, NULL, display, prefix);
            target[n] = 0;
            int start = target[0] == '/' ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                         : fcntl(at, F_DUPFD_CLOEXEC, 0);
            if (start < 0) return walk_fail(w, at, errno, NULL, display, prefix);
            fd = walk_from(w, start, target, target, 0);  /* a dangling link is not created */
            if (fd < 0) {
                close(at);
                return fd;
            }
        } else if (fd < 0) {
            return walk_fail(w, at, errno, NULL, display, prefix);
        }
        close(at);
        at = fd;
    }
}

int lb_dir_open_private(const char *path, const char *role, int create) {
    path_walk w = {role, path, 0};
    if (!*path) {
        lb_error_detail_set("%s: the path is empty", role);
        return -ENOENT;
    }
    int start = open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (start < 0) {
        int err = errno;
        lb_error_detail_set("%s '%s': %s", role, path, strerror(err));
        return -err;
    }
    int fd = walk_from(&w, start, path, path, create);
    if (fd < 0) return fd;
    int rc = lb_dir_check_private(fd, role, path);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int lb_file_open_at(int dir_fd, const char *name, int flags, const char *dir_path) {
    int fd;
    do fd = openat(dir_fd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        if (err == EISDIR || err == ENXIO) {
            /* A directory opened for writing, or a socket: not a regular file either. */
            if (dir_path)
                lb_error_detail_set("'%s/%s' is %s, not a regular file", dir_path, name,
                                    err == EISDIR ? "a directory" : "a socket or device without a reader");
            return -EINVAL;
        }
        if (dir_path && err == ELOOP)
            lb_error_detail_set("'%s/%s' is a symbolic link: not followed", dir_path, name);
        else if (dir_path && err != ENOENT)
            lb_error_detail_set("'%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (dir_path)
            lb_error_detail_set("'%s/%s' is %s, not a regular file", dir_path, name,
                                file_type_name(st.st_mode));
        close(fd);
        return -EINVAL;
    }
    if (flags & O_NONBLOCK) return fd;
    /* O_NONBLOCK means nothing for a regular file, but it stays off the caller's descriptor. */
    int status = fcntl(fd, F_GETFL);
    if (status >= 0) fcntl(fd, F_SETFL, status & ~O_NONBLOCK);
    return fd;
}

int lb_file_lock_exclusive(int fd) {
    struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &region) == 0) return 0;
    return (errno == EAGAIN || errno == EACCES) ? -EWOULDBLOCK : -errno;
}

int lb_file_attribute_set(int fd, const char *name, const void *value, size_t length) {
    return fsetxattr(fd, name, value, length, 0) == 0 ? 0 : -errno;
}

ssize_t lb_file_attribute_get(int fd, const char *name, void *value, size_t capacity) {
    ssize_t n = fgetxattr(fd, name, value, capacity);
    return n >= 0 ? n : -errno;
}

int lb_file_replace_at(int dir_fd, const char *name, const void *bytes, size_t length,
                       const char *dir_path) {
    char temporary[NAME_MAX + 1];
    if (snprintf(temporary, sizeof temporary, "%s.new", name) >= (int)sizeof temporary) {
        lb_error_detail_set("'%s/%s': the name is too long", dir_path, name);
        return -ENAMETOOLONG;
    }
    int fd = lb_file_create_at(dir_fd, temporary, dir_path);
    if (fd < 0) return fd;
    int rc = lb_pwrite_full(fd, bytes, length, 0);
    if (!rc && fsync(fd) != 0) rc = -errno;
    close(fd);
    if (!rc && renameat(dir_fd, temporary, dir_fd, name) != 0) rc = -errno;
    if (rc) {
        lb_error_detail_set("cannot replace '%s/%s': %s", dir_path, name, strerror(-rc));
        unlinkat(dir_fd, temporary, 0);
        return rc;
    }
    if (fsync(dir_fd) != 0) {
        rc = -errno;
        lb_error_detail_set("cannot sync the directory of '%s/%s': %s", dir_path, name, strerror(-rc));
    }
    return rc;
}

int lb_file_create_at(int dir_fd, const char *name, const char *dir_path) {
    /* A leftover of a crash (or anything else under this name) goes first; unlinkat removes a
     * symlink itself, never its target. */
    if (unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT && errno != EISDIR) {
        int err = errno;
        lb_error_detail_set("cannot remove '%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    int fd;
    do fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        lb_error_detail_set("cannot create '%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    return fd;
}

ssize_t lb_pread_full(int fd, void *buffer, size_t length, uint64_t offset) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = pread(fd, (uint8_t *)buffer + done, length - done, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int lb_pwrite_full(int fd, const void *buffer, size_t length, uint64_t offset) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = pwrite(fd, (const uint8_t *)buffer + done, length - done, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        done += (size_t)n;
    }
    return 0;
}

/* ---- chunks ---- */
int lb_chunk_header_check(const lb_chunk_header *h, uint32_t slot, uint32_t chunk_count) {
    uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
    if (h->magic == 0 && state == LB_CHUNK_FREE && h->sequence == 0) return 1;
    if (state == LB_CHUNK_CLAIMING) return 2;
    if (h->magic != LB_CHUNK_MAGIC) return -1;
    if (state < LB_CHUNK_ACTIVE || state > LB_CHUNK_ARCHIVING) return -1;
    if (h->header_crc != lb_chunk_crc(h)) return -1;
    if (h->sequence == 0 || h->sequence % chunk_count != slot) return -1;
    if (h->prev_delta >= h->sequence) return -1;
    return 0;
}

uint32_t lb_chunk_walk(const uint8_t *chunk, uint32_t chunk_size, uint32_t start,
                       lb_walk_visitor visit, void *context, lb_walk_end *end) {
    return lb_chunk_walk_inline(chunk, chunk_size, start, visit, context, end);
}

/* ---- meta entry encoding ---- */
static void meta_reserve(lb_meta_buffer *b, size_t more) {
    if (b->failed) return;
    if (b->length + more <= b->capacity) return;
    size_t cap = b->capacity ? b->capacity : 256;
    while (cap < b->length + more) cap *= 2;
    uint8_t *p = realloc(b->bytes, cap);
    if (!p) {
        b->failed = 1;
        return;
    }
    b->bytes = p;
    b->capacity = cap;
}

static void meta_put(lb_meta_buffer *b, const void *v, size_t n) {
    meta_reserve(b, n);
    if (b->failed) return;
    memcpy(b->bytes + b->length, v, n);
    b->length += n;
}

void lb_meta_put_u16(lb_meta_buffer *b, uint16_t v) { meta_put(b, &v, 2); }
void lb_meta_put_u32(lb_meta_buffer *b, uint32_t v) { meta_put(b, &v, 4); }
void lb_meta_put_u64(lb_meta_buffer *b, uint64_t v) { meta_put(b, &v, 8); }
void lb_meta_put_string(lb_meta_buffer *b, const char *s, size_t length) {
    if (length > LB_META_ENTRY_MAX_SIZE / 4) length = LB_META_ENTRY_MAX_SIZE / 4;
    lb_meta_put_u32(b, (uint32_t)length);
    meta_put(b, s, length);
}

static int meta_get(lb_meta_cursor *c, void *out, size_t n) {
    if (c->failed || c->length - c->offset < n || c->offset > c->length) {
        c->failed = 1;
        memset(out, 0, n);
        return -1;
    }
    memcpy(out, c->bytes + c->offset, n);
    c->offset += n;
    return 0;
}

uint16_t lb_meta_get_u16(lb_meta_cursor *c) { uint16_t v; meta_get(c, &v, 2); return v; }
uint32_t lb_meta_get_u32(lb_meta_cursor *c) { uint32_t v; meta_get(c, &v, 4); return v; }
uint64_t lb_meta_get_u64(lb_meta_cursor *c) { uint64_t v; meta_get(c, &v, 8); return v; }

char *lb_meta_get_string(lb_meta_cursor *c) {
    uint32_t n = lb_meta_get_u32(c);
    if (c->failed || n > c->length - c->offset) {
        c->failed = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        c->failed = 1;
        return NULL;
    }
    memcpy(s, c->bytes + c->offset, n);
    s[n] = 0;
    c->offset += n;
    return s;
}

int lb_meta_read_entries(int fd, uint64_t *offset, lb_meta_visitor visit, void *context) {
    uint8_t head[LB_META_ENTRY_HEAD_SIZE];
    uint8_t *body = NULL;
    size_t body_capacity = 0;
    int result = 0;
    for (;;) {
        ssize_t n = lb_pread_full(fd, head, sizeof head, *offset);
        if (n < 0) { result = (int)n; break; }
        if (n == 0) break;
        if ((size_t)n < sizeof head) { result = 1; break; }
        uint32_t length, crc;
        uint16_t kind;
        memcpy(&length, head, 4);
        memcpy(&crc, head + 4, 4);
        memcpy(&kind, head + 8, 2);
        if (length > LB_META_ENTRY_MAX_SIZE || kind == 0) { result = -1; break; }
        if (length > body_capacity) {
            uint8_t *p = realloc(body, length ? length : 1);
            if (!p) { result = -ENOMEM; break; }
            body = p;
            body_capacity = length;
        }
        n = lb_pread_full(fd, body, length, *offset + sizeof head);
        if (n < 0) { result = (int)n; break; }
        if ((size_t)n < length) { result = 1; break; }
        if (lb_crc32c(0, body, length) != crc) {
            /* A bad CRC on the very last entry is a torn write; anywhere else it is corruption. */
            uint8_t probe;
            ssize_t more = lb_pread_full(fd, &probe, 1, *offset + sizeof head + length);
            result = more == 0 ? 1 : -1;
            break;
        }
        if (visit) visit(context, kind, body, length);
        *offset += sizeof head + length;
    }
    free(body);
    return result;
}

int lb_meta_parse_entries(const uint8_t *bytes, size_t length, lb_meta_visitor visit,
                          void *context) {
    size_t at = 0;
    while (at < length) {
        if (length - at < LB_META_ENTRY_HEAD_SIZE) return -1;
        uint32_t body_length, crc;
        uint16_t kind;
        memcpy(&body_length, bytes + at, 4);
        memcpy(&crc, bytes + at + 4, 4);
        memcpy(&kind, bytes + at + 8, 2);
        at += LB_META_ENTRY_HEAD_SIZE;
        if (kind == 0 || body_length > LB_META_ENTRY_MAX_SIZE || body_length > length - at ||
            lb_crc32c(0, bytes + at, body_length) != crc)
            return -1;
        if (visit) visit(context, kind, bytes + at, body_length);
        at += body_length;
    }
    return 0;
}

const char *lb_drop_reason_name(unsigned reason) {
    static const char *const names[LB_DROP_REASON_COUNT] = {"too_large", "no_chunk", "reentrant",
                                                            "closed", "meta", "ring_full"};
    return reason < LB_DROP_REASON_COUNT ? names[reason] : NULL;
}

/* ---- archive files ---- */
lb_archive_name_kind lb_archive_name_parse(const char *name, uint64_t *number) {
    if (strncmp(name, "archive-", 8) != 0) return LB_ARCHIVE_NAME_NONE;
    uint64_t n = 0;
    const char *p = name + 8;
    for (int i = 0; i < 10; i++, p++) {
        if (*p < '0' || *p > '9') return LB_ARCHIVE_NAME_NONE;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    if (number) *number = n;
    if (strcmp(p, ".lba") == 0) return LB_ARCHIVE_NAME_COMPLETE;
    if (strcmp(p, ".lba.writing") == 0) return LB_ARCHIVE_NAME_WRITING;
    if (strcmp(p, ".lba.unsynced") == 0) return LB_ARCHIVE_NAME_UNSYNCED;
    if (strcmp(p, ".lba.zst") == 0) return LB_ARCHIVE_NAME_COMPRESSED;
    if (strcmp(p, ".lba.zst.writing") == 0) return LB_ARCHIVE_NAME_COMPRESSING;
    return LB_ARCHIVE_NAME_NONE;
}

void lb_archive_name_format(char out[LB_ARCHIVE_NAME_MAX], uint64_t number, lb_archive_name_kind kind) {
    static const char *const suffixes[] = {"", "", ".writing", ".unsynced", ".zst", ".zst.writing"};
    snprintf(out, LB_ARCHIVE_NAME_MAX, "archive-%010llu.lba%s",
             (unsigned long long)(number % 10000000000ull), suffixes[kind <= 5 ? kind : 0]);
}

void lb_archive_frame_head_make(lb_archive_frame_head *head, uint32_t length, uint16_t kind,
                                uint32_t body_crc) {
    head->length = length;
    head->kind = kind;
    head->reserved = 0;
    head->body_crc = body_crc;
    head->head_crc = lb_crc32c(0, head, __builtin_offsetof(lb_archive_frame_head, head_crc));
}

uint32_t lb_archive_header_crc(const lb_archive_file_header *h) {
    return lb_crc32c(0, h, __builtin_offsetof(lb_archive_file_header, header_crc));
}

const char *lb_archive_header_problem(const lb_archive_file_header *h, uint64_t file_size) {
    if (file_size < sizeof *h) return "archive file is shorter than its header";
    if (memcmp(h->magic, LB_ARCHIVE_MAGIC, 8) != 0) return "archive file has no Logbook magic";
    if (h->format_version != LB_FORMAT_VERSION) return "archive file has an unknown format version";
    if (h->header_crc != lb_archive_header_crc(h)) return "archive header fails its checksum";
    if (h->header_size != LB_ARCHIVE_HEADER_SIZE || h->chunk_size < LB_CHUNK_SIZE_MIN ||
        h->chunk_size > LB_CHUNK_SIZE_MAX || (h->chunk_size & (h->chunk_size - 1)) ||
        h->chunk_count < 2 || h->chunk_count > LB_CHUNK_COUNT_MAX)
        return "archive header has an impossible geometry";
    return NULL;
}

int lb_file_range_is_zero(int fd, uint64_t from, uint64_t to) {
    uint8_t block[4096];
    while (from < to) {
        size_t want = to - from < sizeof block ? (size_t)(to - from) : sizeof block;
        ssize_t n = lb_pread_full(fd, block, want, from);
        if (n <= 0) return n == 0;  /* the file ended: nothing more to look at */
        for (ssize_t i = 0; i < n; i++)
            if (block[i]) return 0;
        from += (uint64_t)n;
    }
    return 1;
}

/* The Swift façade's per-type logger cache (logbook.h). */
const void *_Atomic lb_type_cache[LB_TYPE_CACHE_SIZE];
_Atomic uint64_t lb_type_cache_generation;

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
