/* format.c — small pieces of the byte format shared by the writer, the reader and the archiver:
 * the chunk header check and walk, drop reason names, archive file names, frame heads and file
 * headers; and the calling thread's error detail (lb_error_detail). CRC-32C is in crc.c. */
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

/* ---- drop reasons ---- */
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

/* The Swift façade's per-type logger cache (logbook.h). */
const void *_Atomic lb_type_cache[LB_TYPE_CACHE_SIZE];
_Atomic uint64_t lb_type_cache_generation;
