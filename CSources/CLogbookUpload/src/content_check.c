/* Streaming checks that bytes are the content their key names (logbook_content_check.h). */
#define _GNU_SOURCE
#include "logbook_content_check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "logbook_files.h"
#include "logbook_format.h"

enum { WALK_HEADER, WALK_HEAD, WALK_BODY, WALK_PAD, WALK_DONE };
enum { LARGEST_FRAME_BODY = 64u << 20, SCRATCH = 128u << 10 };

static int fail(lb_content_check *check, const char *format, ...) {
    if (!check->failed) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(check->reason, sizeof check->reason, format, arguments);
        va_end(arguments);
        check->failed = 1;
    }
    return -EBADMSG;
}

static int read_exactly(int fd, void *buffer, size_t length, uint64_t offset) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = pread(fd, (uint8_t *)buffer + done, length - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static int header_is_sound(const uint8_t *bytes) {
    lb_archive_file_header header;
    memcpy(&header, bytes, sizeof header);
    return memcmp(header.magic, LB_ARCHIVE_MAGIC, 8) == 0 &&
           lb_crc32c(0, &header, offsetof(lb_archive_file_header, header_crc)) == header.header_crc;
}

/* A .lba.zst: its footer and seek table read and checked now; the data frames' offsets and the
 * listing's place taken from them, checked as the bytes stream. */
static int init_compressed(lb_content_check *check, int fd) {
    uint64_t length = check->length;
    lb_zst_footer footer;
    if (length < LB_ZST_HEADER_FRAME_SIZE + sizeof footer || fd < 0 ||
        read_exactly(fd, &footer, sizeof footer, length - sizeof footer)) {
        return fail(check, "a compressed archive file too short for its footer (%llu bytes)", (unsigned long long)length);
    }
    if (memcmp(footer.magic, LB_ZST_FOOTER_MAGIC, 8) ||
        lb_crc32c(0, &footer, offsetof(lb_zst_footer, footer_crc)) != footer.footer_crc) {
        return fail(check, "the compressed archive file's footer fails its check");
    }
    uint64_t table_bytes = (uint64_t)footer.frame_count * sizeof(lb_zst_seek_entry);
    if (footer.frames_offset != LB_ZST_HEADER_FRAME_SIZE || table_bytes > length ||
        footer.table_offset != length - sizeof footer - table_bytes ||
        footer.listing_offset < footer.frames_offset || footer.table_offset < 8 ||
        footer.listing_offset + 8 + footer.listing_length != footer.table_offset - 8) {
        return fail(check, "the compressed archive file's footer does not describe its layout");
    }
    /* The tail: the seek table's skippable head, the table, the footer. */
    check->tail_offset = footer.table_offset - 8;
    check->tail_length = 8 + table_bytes + sizeof footer;
    check->tail = malloc(check->tail_length);
    check->frame_offsets = malloc(((uint64_t)footer.frame_count + 1) * sizeof(uint64_t));
    if (!check->tail || !check->frame_offsets) return -ENOMEM;
    if (read_exactly(fd, check->tail, check->tail_length, check->tail_offset)) {
        return fail(check, "the compressed archive file's seek table cannot be read");
    }
    uint32_t table_head[2] = { LB_ZST_SKIPPABLE_MAGIC, (uint32_t)(table_bytes + sizeof footer) };
    if (memcmp(check->tail, table_head, 8) || lb_crc32c(0, check->tail + 8, table_bytes) != footer.table_crc) {
        return fail(check, "the compressed archive file's seek table fails its check");
    }
    uint32_t listing_head[2] = { LB_ZST_SKIPPABLE_MAGIC, footer.listing_length };
    memcpy(check->listing_head, listing_head, 8);
    uint64_t at = footer.frames_offset;
    for (uint32_t i = 0; i < footer.frame_count; i++) {
        lb_zst_seek_entry entry;
        memcpy(&entry, check->tail + 8 + (uint64_t)i * sizeof entry, sizeof entry);
        check->frame_offsets[i] = at;
        at += entry.compressed_length;
    }
    check->frame_offsets[footer.frame_count] = at;
    if (at != footer.listing_offset) {
        return fail(check, "the compressed archive file's data frames do not end where its listing starts");
    }
    check->frame_count = footer.frame_count;
    check->listing_offset = footer.listing_offset + 8;
    check->listing_length = footer.listing_length;
    check->listing_crc = footer.listing_crc;
    return 0;
}

int lb_content_check_init(lb_content_check *check, int kind, uint64_t length, const uint8_t digest[32],
                          const void *prefix, size_t prefix_length, int fd) {
    memset(check, 0, sizeof *check);
    check->kind = kind;
    check->length = length;
    if (kind == LB_CONTENT_CHECK_SHA256) {
        lb_sha256_init(&check->hash);
        memcpy(check->digest, digest, 32);
    } else if (kind == LB_CONTENT_CHECK_ARCHIVE) {
        if (!prefix || (prefix_length != LB_ARCHIVE_HEADER_SIZE && prefix_length != LB_ZST_HEADER_FRAME_SIZE)) {
            return fail(check, "no archive header to check the content against");
        }
        memcpy(check->prefix, prefix, prefix_length);
        check->prefix_length = (uint32_t)prefix_length;
        if (!header_is_sound(check->prefix + prefix_length - LB_ARCHIVE_HEADER_SIZE)) {
            return fail(check, "the archive header fails its check");
        }
        if (prefix_length == LB_ZST_HEADER_FRAME_SIZE) return init_compressed(check, fd);
    }
    return 0;
}

/* .lba: the frame walk, one byte range at a time. */
static int walk(lb_content_check *check, const uint8_t *bytes, size_t length) {
    while (length > 0) {
        uint64_t at = check->position;
        size_t take;
        switch (check->state) {
        case WALK_HEADER:
            take = (size_t)(LB_ARCHIVE_HEADER_SIZE - at) < length ? (size_t)(LB_ARCHIVE_HEADER_SIZE - at) : length;
            if (memcmp(bytes, check->prefix + at, take)) return fail(check, "the archive header is not the one its key was read from");
            if (at + take == LB_ARCHIVE_HEADER_SIZE) check->state = WALK_HEAD;
            break;
        case WALK_HEAD: {
            take = 16 - check->head_have < length ? 16 - check->head_have : length;
            memcpy(check->head + check->head_have, bytes, take);
            check->head_have += (uint32_t)take;
            if (check->head_have < 16) break;
            check->head_have = 0;
            lb_archive_frame_head head;
            memcpy(&head, check->head, sizeof head);
            uint64_t frame_start = at + take - 16;
            uint64_t padded = ((uint64_t)head.length + 7) & ~(uint64_t)7;
            if (lb_crc32c(0, &head, offsetof(lb_archive_frame_head, head_crc)) != head.head_crc) {
                return fail(check, "the archive frame at byte %llu fails its head check", (unsigned long long)frame_start);
            }
            if (head.length > LARGEST_FRAME_BODY || frame_start + 16 + padded > check->length) {
                return fail(check, "the archive frame at byte %llu runs past the content (%u bytes)",
                            (unsigned long long)frame_start, head.length);
            }
            if (head.kind == LB_ARCHIVE_FRAME_END) {
                if (head.length != sizeof(lb_archive_end) || frame_start + 16 + padded != check->length) {
                    return fail(check, "the archive file's END frame at byte %llu is not its last bytes", (unsigned long long)frame_start);
                }
                check->end_seen = 1;
            }
            check->body_left = head.length;
            check->pad_left = (uint32_t)(padded - head.length);
            check->body_crc = head.body_crc;
            check->crc = 0;
            check->state = head.length ? WALK_BODY : WALK_PAD;
            if (!head.length && check->pad_left == 0) check->state = check->end_seen ? WALK_DONE : WALK_HEAD;
            break;
        }
        case WALK_BODY:
            take = check->body_left < length ? (size_t)check->body_left : length;
            check->crc = lb_crc32c(check->crc, bytes, take);
            check->body_left -= take;
            if (check->body_left > 0) break;
            if (check->crc != check->body_crc) {
                return fail(check, "the archive frame ending at byte %llu fails its body CRC", (unsigned long long)(at + take));
            }
            check->state = check->pad_left ? WALK_PAD : (check->end_seen ? WALK_DONE : WALK_HEAD);
            break;
        case WALK_PAD:
            take = check->pad_left < length ? check->pad_left : length;
            for (size_t i = 0; i < take; i++) {
                if (bytes[i]) return fail(check, "the archive frame padding at byte %llu is not zero", (unsigned long long)(at + i));
            }
            check->pad_left -= (uint32_t)take;
            if (check->pad_left == 0) check->state = check->end_seen ? WALK_DONE : WALK_HEAD;
            break;
        default:
            return fail(check, "the archive file goes on past its END frame (byte %llu)", (unsigned long long)at);
        }
        check->position += take;
        bytes += take;
        length -= take;
    }
    return 0;
}

/* The part of [position, position + length) that falls in [start, start + size): offsets into
 * the bytes and into the region, and the overlap (0: none). */
static size_t overlap(uint64_t position, size_t length, uint64_t start, uint64_t size, size_t *in_bytes, uint64_t *in_region) {
    uint64_t from = position > start ? position : start;
    uint64_t to = position + length < start + size ? position + length : start + size;
    if (from >= to) return 0;
    *in_bytes = (size_t)(from - position);
    *in_region = from - start;
    return (size_t)(to - from);
}

static const lb_zst_seek_entry *entry(const lb_content_check *check, uint32_t frame) {
    return (const lb_zst_seek_entry *)(check->tail + 8 + (uint64_t)frame * sizeof(lb_zst_seek_entry));
}

/* A data frame without compressed_crc: decompressed as it streams, what it gives checked. */
static int decompress(lb_content_check *check, const uint8_t *bytes, size_t length, int last) {
    if (!check->dctx) {
        check->dctx = ZSTD_createDCtx();
        check->scratch = malloc(SCRATCH);
        if (!check->dctx || !check->scratch) return -ENOMEM;
        ZSTD_DCtx_setParameter(check->dctx, ZSTD_d_windowLogMax, 27);
    }
    ZSTD_inBuffer in = { bytes, length, 0 };
    const lb_zst_seek_entry *e = entry(check, check->frame);
    size_t left;
    do {
        ZSTD_outBuffer out = { check->scratch, SCRATCH, 0 };
        left = ZSTD_decompressStream(check->dctx, &out, &in);
        if (ZSTD_isError(left)) return fail(check, "data frame %u does not decompress (%s)", check->frame, ZSTD_getErrorName(left));
        check->frame_running = lb_crc32c(check->frame_running, check->scratch, out.pos);
        check->frame_produced += out.pos;
        if (check->frame_produced > e->uncompressed_length) {
            return fail(check, "data frame %u decompresses to more than the %u bytes its seek entry says", check->frame, e->uncompressed_length);
        }
        if (out.pos < SCRATCH && in.pos == in.size) break;
    } while (1);
    /* Its bytes must end where its zstd frame ends: a block header that claims less than the
     * block holds can leave the output unchanged, yet zstd then reads the rest as a block. */
    if (last && left != 0) return fail(check, "data frame %u ends inside its zstd frame", check->frame);
    if (last && (check->frame_produced != e->uncompressed_length || check->frame_running != e->crc)) {
        return fail(check, "data frame %u does not decompress to the bytes its seek entry names", check->frame);
    }
    return 0;
}

/* The data frames' bytes (from file offset `at`), frame by frame. */
static int check_frames(lb_content_check *check, const uint8_t *bytes, size_t length, uint64_t at) {
    while (length > 0) {
        uint64_t end = check->frame_offsets[check->frame + 1];
        size_t take = end - at < length ? (size_t)(end - at) : length;
        int last = at + take == end;
        const lb_zst_seek_entry *e = entry(check, check->frame);
        if (e->compressed_crc) {
            check->frame_running = lb_crc32c(check->frame_running, bytes, take);
            if (last && check->frame_running != e->compressed_crc) {
                return fail(check, "data frame %u (bytes %llu to %llu) fails its CRC", check->frame,
                            (unsigned long long)check->frame_offsets[check->frame], (unsigned long long)end);
            }
        } else {
            int rc = decompress(check, bytes, take, last);
            if (rc) return rc;
        }
        if (last) {
            if (check->dctx) ZSTD_DCtx_reset(check->dctx, ZSTD_reset_session_only);
            check->frame++;
            check->frame_running = 0;
            check->frame_produced = 0;
        }
        bytes += take;
        length -= take;
        at += take;
    }
    return 0;
}

/* .lba.zst: the regions whose bytes are known, compared as they pass. */
static int check_compressed(lb_content_check *check, const uint8_t *bytes, size_t length) {
    uint64_t position = check->position;
    size_t in_bytes, n;
    uint64_t in_region;
    if ((n = overlap(position, length, 0, LB_ZST_HEADER_FRAME_SIZE, &in_bytes, &in_region)) &&
        memcmp(bytes + in_bytes, check->prefix + in_region, n)) {
        return fail(check, "the compressed archive file's header frame is not the one its key was read from");
    }
    if ((n = overlap(position, length, check->frame_offsets[0], check->frame_offsets[check->frame_count] - check->frame_offsets[0],
                     &in_bytes, &in_region))) {
        int rc = check_frames(check, bytes + in_bytes, n, position + in_bytes);
        if (rc) return rc;
    }
    if ((n = overlap(position, length, check->listing_offset - 8, 8, &in_bytes, &in_region)) &&
        memcmp(bytes + in_bytes, check->listing_head + in_region, n)) {
        return fail(check, "the compressed archive file's listing frame has another head");
    }
    if ((n = overlap(position, length, check->listing_offset, check->listing_length, &in_bytes, &in_region))) {
        check->listing_running = lb_crc32c(check->listing_running, bytes + in_bytes, n);
        if (in_region + n == check->listing_length && check->listing_running != check->listing_crc) {
            return fail(check, "the compressed archive file's listing fails its check");
        }
    }
    if ((n = overlap(position, length, check->tail_offset, check->tail_length, &in_bytes, &in_region)) &&
        memcmp(bytes + in_bytes, check->tail + in_region, n)) {
        return fail(check, "the compressed archive file's seek table or footer is not the one read before it was sent");
    }
    check->position += length;
    return 0;
}

int lb_content_check_update(lb_content_check *check, const void *bytes, size_t length) {
    if (check->failed) return -EBADMSG;
    if (check->position + length > check->length) {
        return fail(check, "more bytes than the %llu its key names", (unsigned long long)check->length);
    }
    switch (check->kind) {
    case LB_CONTENT_CHECK_SHA256:
        lb_sha256_update(&check->hash, bytes, length);
        check->position += length;
        return 0;
    case LB_CONTENT_CHECK_ARCHIVE:
        return check->prefix_length == LB_ZST_HEADER_FRAME_SIZE ? check_compressed(check, bytes, length)
                                                                 : walk(check, bytes, length);
    default:
        check->position += length;
        return 0;
    }
}

int lb_content_check_finish(lb_content_check *check) {
    if (check->failed) return -EBADMSG;
    if (check->position != check->length) {
        return fail(check, "%llu bytes, not the %llu its key names", (unsigned long long)check->position,
                    (unsigned long long)check->length);
    }
    if (check->kind == LB_CONTENT_CHECK_SHA256) {
        uint8_t digest[32];
        lb_sha256_final(&check->hash, digest);
        if (memcmp(digest, check->digest, 32)) return fail(check, "another SHA-256 than its key");
    } else if (check->kind == LB_CONTENT_CHECK_ARCHIVE) {
        if (check->prefix_length == LB_ARCHIVE_HEADER_SIZE && check->state != WALK_DONE) {
            return fail(check, "the archive file ends without its END frame");
        }
        if (check->prefix_length == LB_ZST_HEADER_FRAME_SIZE && check->frame != check->frame_count) {
            return fail(check, "the compressed archive file ends before its data frames");
        }
    }
    return 0;
}

const char *lb_content_check_reason(const lb_content_check *check) { return check->reason; }

void lb_content_check_free(lb_content_check *check) {
    free(check->tail);
    free(check->frame_offsets);
    free(check->scratch);
    ZSTD_freeDCtx(check->dctx);
    check->tail = NULL;
    check->frame_offsets = NULL;
    check->scratch = NULL;
    check->dctx = NULL;
}
