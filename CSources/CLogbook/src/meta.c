/* meta.c — the meta file's entries (sessions, loggers, call sites): encoding, reading them from
 * the file (full entries only: a torn tail is left for later), and parsing them from bytes. */
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
