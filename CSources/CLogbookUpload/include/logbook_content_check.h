/*
 * Whether bytes are the content their key names, checked as they stream: the uploader sends an
 * item under its key (Idempotency-Key, the URL's {id}) and a receiver keeps the first body it gets
 * for a key, so a body must never go out under a key that is not its own.
 *
 *   LB_CONTENT_CHECK_SIZE     the length only (a caller's own id names no content)
 *   LB_CONTENT_CHECK_SHA256   the SHA-256 of all the bytes (ids of 64 hex digits)
 *   LB_CONTENT_CHECK_ARCHIVE  a Logbook archive file (ids lba-RING-NUMBER), docs/FORMAT.md:
 *       .lba      the header (equal to the one the key was read from, its CRC), then every frame
 *                 walked: head CRC, body CRC-32C, zero padding, and the END frame last, at its
 *                 end_offset, ending the content;
 *       .lba.zst  the header frame (equal, CRC), the footer, seek table and listing (their
 *                 CRC-32Cs), the file's layout ending with the footer, and every data frame: the
 *                 CRC-32C of its bytes as stored (the seek entry's compressed_crc), or, in a file
 *                 written before that was recorded, what it decompresses to (its length and
 *                 CRC-32C), decompressed as it streams.
 *
 *     lb_content_check check;
 *     lb_content_check_init(&check, LB_CONTENT_CHECK_SHA256, length, digest, NULL, 0, fd);
 *     lb_content_check_update(&check, bytes, n);     // in order, every byte once
 *     lb_content_check_finish(&check);               // 0: the content is what its key names
 *
 * -EBADMSG when it is not, with the reason in lb_content_check_reason().
 */
#ifndef LOGBOOK_CONTENT_CHECK_H
#define LOGBOOK_CONTENT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "logbook_sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

enum lb_content_check_kind {
    LB_CONTENT_CHECK_SIZE = 0,
    LB_CONTENT_CHECK_SHA256 = 1,
    LB_CONTENT_CHECK_ARCHIVE = 2,
};

typedef struct lb_content_check {
    int kind;
    int failed;
    uint64_t length;               /* the content's size */
    uint64_t position;             /* bytes checked so far */
    lb_sha256 hash;
    uint8_t digest[32];
    uint8_t prefix[72];            /* the archive header (frame) the key was read from */
    uint32_t prefix_length;
    /* .lba walk */
    int state;
    uint8_t head[16];
    uint32_t head_have;
    uint64_t body_left;
    uint32_t pad_left;
    uint32_t crc;
    uint32_t body_crc;
    int end_seen;
    /* .lba.zst: the regions checked (read from the file's end before the first byte) */
    uint8_t *tail;                 /* the seek table's skippable frame and the footer, as read */
    uint64_t tail_offset;
    uint64_t tail_length;
    uint64_t *frame_offsets;       /* where each data frame starts (frame_count + 1: the end) */
    uint32_t frame_count;
    uint32_t frame;                /* the data frame the next byte belongs to */
    uint32_t frame_running;        /* CRC-32C of its bytes so far (as stored, or decompressed) */
    uint64_t frame_produced;       /* bytes it decompressed to so far */
    void *dctx;                    /* a ZSTD_DCtx, for frames without compressed_crc */
    uint8_t *scratch;              /* where they decompress to, a piece at a time */
    uint8_t listing_head[8];       /* the listing's skippable head */
    uint64_t listing_offset;       /* the listing's bytes (after its skippable head) */
    uint32_t listing_length;
    uint32_t listing_crc;
    uint32_t listing_running;
    char reason[200];
} lb_content_check;

/* `digest` for SHA256; `prefix` for ARCHIVE (the 64-byte header, or the 72-byte header frame of a
 * .lba.zst); `fd` for ARCHIVE (a .lba.zst's footer and table are read with pread). -EBADMSG when
 * what can be checked before any byte already fails, -ENOMEM. */
int lb_content_check_init(lb_content_check *check, int kind, uint64_t length, const uint8_t digest[32],
                          const void *prefix, size_t prefix_length, int fd);
int lb_content_check_update(lb_content_check *check, const void *bytes, size_t length);
/* After the last byte: 0 when all of it passed. */
int lb_content_check_finish(lb_content_check *check);
const char *lb_content_check_reason(const lb_content_check *check);
void lb_content_check_free(lb_content_check *check);

#ifdef __cplusplus
}
#endif

#endif
