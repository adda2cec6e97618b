/* common.c — pieces shared by the writer and the reader: clock set-up, the error detail, the
 * chunk header check, meta entries, archive file names and headers, and lb_ticker. CRC-32C is in
 * crc.c, files and full I/O in files.c. */
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
