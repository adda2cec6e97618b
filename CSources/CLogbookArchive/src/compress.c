/* compress.c — a complete archive file (.lba) compressed into .lba.zst.writing (the layout is in
 * logbook_format.h and docs/FORMAT.md). The archiver's compression thread calls this, then renames
 * the result and deletes the .lba (archiver.c).
 *
 * Only a sound file is compressed: every frame head valid, the last frame its END. A damaged file
 * stays as it is, for readers to report its damage. Each data frame is decompressed again and
 * compared before it is written: the .lba is deleted later only for a copy known to hold the same
 * bytes. */
#define _GNU_SOURCE
#include "../../CLogbook/src/internal.h"
#include "compress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

typedef struct slice {
    uint64_t start;
    uint32_t length;
} slice;

struct lb_compressor {
    int level;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    uint8_t *input, *output, *check, *listing;
    size_t input_capacity, output_capacity, check_capacity, listing_capacity, listing_length;
    slice *slices;
    size_t slice_count, slice_capacity;
    lb_zst_seek_entry *table;
    size_t table_capacity;
};

static int reserve(void **buffer, size_t *capacity, size_t need) {
    if (need <= *capacity) return 0;
    size_t grown = *capacity ? *capacity : 4096;
    while (grown < need) grown *= 2;
    void *p = realloc(*buffer, grown);
    if (!p) return -ENOMEM;
    *buffer = p;
    *capacity = grown;
    return 0;
}

int lb_compressor_level_valid(int level) {
    return level == 0 || (level >= ZSTD_minCLevel() && level <= ZSTD_maxCLevel());
}

lb_compressor *lb_compressor_create(int level) {
    lb_compressor *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->level = level;
    c->cctx = ZSTD_createCCtx();
    c->dctx = ZSTD_createDCtx();
    if (!c->cctx || !c->dctx ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, level)) ||
        /* No zstd content checksum: the seek table holds each data frame's CRC-32C, and every
         * archive frame inside has its own; checking XXH64 as well cost 10% of the reading rate. */
        ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1))) {
        lb_compressor_free(c);
        return NULL;
    }
    return c;
}

void lb_compressor_free(lb_compressor *c) {
    if (!c) return;
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeDCtx(c->dctx);
    free(c->input);
    free(c->output);
    free(c->check);
    free(c->listing);
    free(c->slices);
    free(c->table);
    free(c);
}

/* Appends a listing piece: u64 offset, u32 length, u32 0, the bytes, zeros to a multiple of 8. */
static int add_piece(lb_compressor *c, lb_archive_source *src, uint64_t offset, uint32_t length) {
    size_t padded = ((size_t)length + 7u) & ~(size_t)7u;
    if (reserve((void **)&c->listing, &c->listing_capacity, c->listing_length + 16 + padded))
        return -ENOMEM;
    uint8_t *at = c->listing + c->listing_length;
    uint32_t zero = 0;
    memcpy(at, &offset, 8);
    memcpy(at + 8, &length, 4);
    memcpy(at + 12, &zero, 4);
    if (lb_archive_source_read(src, at + 16, length, offset) != (ssize_t)length) return -EIO;
    memset(at + 16 + length, 0, padded - length);
    c->listing_length += 16 + padded;
    return 0;
}

static int add_slice(lb_compressor *c, uint64_t start, uint64_t end) {
    if (reserve((void **)&c->slices, &c->slice_capacity, (c->slice_count + 1) * sizeof *c->slices))
        return -ENOMEM;
    c->slices[c->slice_count++] = (slice){start, (uint32_t)(end - start)};
    return 0;
}

/* Walks the file's frames: the listing, and the slices (data frames) cut at frame boundaries.
 * -EPROTO when the file is not sound. */
static int plan(lb_compressor *c, lb_archive_source *src, uint32_t chunk_size, const char **why) {
    c->listing_length = 0;
    c->slice_count = 0;
    int rc = add_piece(c, src, 0, LB_ARCHIVE_HEADER_SIZE);
    if (rc) return rc;
    uint64_t offset = LB_ARCHIVE_HEADER_SIZE, slice_start = 0;
    int ends_with_end = 0;
    while (offset < src->size) {
        lb_archive_frame_head head;
        if (lb_archive_frame_read(src, offset, chunk_size, &head) != LB_FRAME_OK) {
            *why = "a frame is damaged or cut short: the file stays uncompressed";
            return -EPROTO;
        }
        uint64_t span = lb_archive_frame_span(head.length);
        if (span > LB_ZST_FRAME_MAX) {
            *why = "a frame is longer than a data frame may be: the file stays uncompressed";
            return -EPROTO;
        }
        if (offset + span - slice_start > LB_ZST_FRAME_TARGET && offset > slice_start) {
            if ((rc = add_slice(c, slice_start, offset))) return rc;
            slice_start = offset;
        }
        uint32_t keep = head.kind == LB_ARCHIVE_FRAME_CHUNK && head.length > 80 ? 80 : head.length;
        if ((rc = add_piece(c, src, offset, LB_ARCHIVE_FRAME_HEAD_SIZE + keep))) return rc;
        ends_with_end = head.kind == LB_ARCHIVE_FRAME_END;
        offset += span;
    }
    if (offset != src->size || !ends_with_end) {
        *why = "the file does not end with its END frame: it stays uncompressed";
        return -EPROTO;
    }
    return add_slice(c, slice_start, offset);
}

static int write_skippable(int fd, uint64_t *at, const void *bytes, uint32_t length) {
    uint32_t head[2] = {LB_ZST_SKIPPABLE_MAGIC, length};
    int rc = lb_pwrite_full(fd, head, sizeof head, *at);
    if (!rc && length) rc = lb_pwrite_full(fd, bytes, length, *at + sizeof head);
    if (!rc) *at += sizeof head + length;
    return rc;
}

/* Compresses each planned slice of `in` into a data frame written at *at of outfd, checked by
 * decompressing it, and its seek table entry. 0 or -errno (*why says what). */
static int write_data_frames(lb_compressor *c, int in, int outfd, uint64_t *at, lb_compress_result *out,
                             const char **why) {
    if (reserve((void **)&c->table, &c->table_capacity, c->slice_count * sizeof *c->table)) return -ENOMEM;
    for (size_t i = 0; i < c->slice_count; i++) {
        const slice *s = &c->slices[i];
        size_t bound = ZSTD_compressBound(s->length);
        if (reserve((void **)&c->input, &c->input_capacity, s->length) ||
            reserve((void **)&c->check, &c->check_capacity, s->length) ||
            reserve((void **)&c->output, &c->output_capacity, bound))
            return -ENOMEM;
        if (lb_pread_full(in, c->input, s->length, s->start) != (ssize_t)s->length) {
            *why = "the file changed while it was compressed";
            return -EIO;
        }
        size_t packed = ZSTD_compress2(c->cctx, c->output, bound, c->input, s->length);
        if (ZSTD_isError(packed)) {
            *why = ZSTD_getErrorName(packed);
            return -EIO;
        }
        /* The copy must give back the same bytes before the original may go. */
        size_t back = ZSTD_decompressDCtx(c->dctx, c->check, s->length, c->output, packed);
        if (ZSTD_isError(back) || back != s->length || memcmp(c->check, c->input, s->length) != 0) {
            *why = "a compressed frame does not decompress to the same bytes";
            return -EIO;
        }
        c->table[i] = (lb_zst_seek_entry){(uint32_t)packed, s->length, lb_crc32c(0, c->input, s->length),
                                          lb_crc32c(0, c->output, packed)};
        int rc = lb_pwrite_full(outfd, c->output, packed, *at);
        if (rc) return rc;
        *at += packed;
        out->uncompressed_bytes += s->length;
    }
    return 0;
}

/* After the data frames at *at: the listing (one zstd frame in a skippable frame), then the seek
 * table and the footer in another. 0 or -errno. */
static int write_listing_and_footer(lb_compressor *c, int outfd, uint64_t *at, const lb_compress_result *out) {
    lb_zst_footer footer;
    memset(&footer, 0, sizeof footer);
    size_t bound = ZSTD_compressBound(c->listing_length);
    if (reserve((void **)&c->output, &c->output_capacity, bound)) return -ENOMEM;
    size_t packed = ZSTD_compress2(c->cctx, c->output, bound, c->listing, c->listing_length);
    if (ZSTD_isError(packed)) return -EIO;
    footer.listing_offset = *at;
    footer.listing_length = (uint32_t)packed;
    footer.listing_crc = lb_crc32c(0, c->output, packed);
    int rc = write_skippable(outfd, at, c->output, (uint32_t)packed);
    if (rc) return rc;
    size_t table_bytes = c->slice_count * sizeof *c->table;
    footer.uncompressed_size = out->uncompressed_bytes;
    footer.frames_offset = LB_ZST_HEADER_FRAME_SIZE;
    footer.table_offset = *at + 8;
    footer.frame_count = (uint32_t)c->slice_count;
    footer.table_crc = lb_crc32c(0, c->table, table_bytes);
    memcpy(footer.magic, LB_ZST_FOOTER_MAGIC, 8);
    footer.compression_level = (uint32_t)c->level;
    footer.footer_crc = lb_crc32c(0, &footer, __builtin_offsetof(lb_zst_footer, footer_crc));
    uint32_t head[2] = {LB_ZST_SKIPPABLE_MAGIC, (uint32_t)(table_bytes + sizeof footer)};
    rc = lb_pwrite_full(outfd, head, sizeof head, *at);
    if (!rc) rc = lb_pwrite_full(outfd, c->table, table_bytes, *at + 8);
    if (!rc) rc = lb_pwrite_full(outfd, &footer, sizeof footer, *at + 8 + table_bytes);
    *at += 8 + table_bytes + sizeof footer;
    return rc;
}

/* Opens complete file `name` and checks its header into *header (st: its size). The descriptor, or
 * -errno (*why says what). */
static int open_to_compress(int dir_fd, const char *name, struct stat *st, lb_archive_file_header *header,
                            const char **why) {
    int in = lb_file_open_at(dir_fd, name, O_RDONLY, NULL);
    if (in < 0) {
        *why = "cannot open the file to compress";
        return in;
    }
    int rc = 0;
    if (fstat(in, st) != 0) rc = -errno;
    else if (lb_pread_full(in, header, sizeof *header, 0) != (ssize_t)sizeof *header ||
             lb_archive_header_problem(header, (uint64_t)st->st_size)) {
        *why = "its header is damaged: the file stays uncompressed";
        rc = -EPROTO;
    }
    if (rc) {
        close(in);
        return rc;
    }
    return in;
}

int lb_compressor_run(lb_compressor *c, int dir_fd, uint64_t number, lb_compress_result *out,
                      const char **why) {
    memset(out, 0, sizeof *out);
    *why = NULL;
    char name[LB_ARCHIVE_NAME_MAX], target[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_COMPLETE);
    lb_archive_name_format(target, number, LB_ARCHIVE_NAME_COMPRESSING);
    struct stat st;
    lb_archive_file_header header;
    int in = open_to_compress(dir_fd, name, &st, &header, why);
    if (in < 0) {
        if (!*why) *why = strerror(-in);
        return in;
    }
    lb_archive_source src;
    lb_archive_source_plain(&src, in, (uint64_t)st.st_size);
    int rc = plan(c, &src, header.chunk_size, why);
    int outfd = -1;
    if (!rc) {
        outfd = lb_file_create_at(dir_fd, target, NULL);
        if (outfd < 0) {
            rc = outfd;
            *why = "cannot create the compressed file";
        } else {
            lb_fd_set_mode(outfd, st.st_mode & 0777);  /* readable by whom the original was */
        }
    }
    uint64_t at = 0;
    if (!rc) rc = write_skippable(outfd, &at, &header, sizeof header);
    if (!rc) rc = write_data_frames(c, in, outfd, &at, out, why);
    if (!rc) rc = write_listing_and_footer(c, outfd, &at, out);
    if (!rc && out->uncompressed_bytes != (uint64_t)st.st_size) rc = -EIO;
    if (!rc && fsync(outfd) != 0) {
        rc = -errno;
        *why = "fsync of the compressed file failed";
    }
    if (outfd >= 0) close(outfd);
    close(in);
    if (rc) {
        if (outfd >= 0) unlinkat(dir_fd, target, 0);
        if (!*why) *why = strerror(-rc);
        return rc;
    }
    out->compressed_bytes = at;
    out->frames = c->slice_count;
    return 0;
}
