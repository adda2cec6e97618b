/* archive_source.c — reading archive files, plain or compressed (.lba.zst), at offsets of the
 * uncompressed file. The layout of a compressed file is in logbook_format.h and docs/FORMAT.md.
 *
 * A compressed file is opened from its end: the footer (checked), the seek table (checked: the
 * data frames must tile the file between the header frame and the listing, and their lengths add
 * up to the uncompressed size), the listing (one zstd frame of pieces copied from the plain file).
 * When the footer or the table fails, the data frames are found by walking zstd's own frame and
 * block headers instead; the CRCs of the archive frames inside them then guard the content.
 *
 * A read inside one listing piece is a copy. Any other read decompresses the data frame that holds
 * it (checked against its CRC-32C) into `current`, kept until another frame is needed. Reading a
 * file in order (the reader's chunks come in sequence order) decompresses each frame once, and a
 * second thread decompresses the next frame into `ahead` meanwhile, so that decompression and
 * decoding overlap on two cores. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <zstd.h>

typedef struct zst_frame {
    uint64_t offset;         /* in the compressed file */
    uint64_t start;          /* in the uncompressed file */
    uint32_t compressed_length, length, crc;
    uint8_t has_crc;         /* 0: found by walking (zstd's checksum guards it) */
    uint8_t damaged;         /* failed to decompress or its CRC: reported once, never retried */
} zst_frame;

typedef struct listing_piece {
    uint64_t offset;         /* in the uncompressed file */
    uint32_t length;
    uint32_t at;             /* in `listing` */
} listing_piece;

typedef struct frame_buffer {
    uint8_t *bytes;
    size_t capacity;
    size_t frame;            /* the frame it holds, or SIZE_MAX */
} frame_buffer;

struct lb_zst_reader {
    zst_frame *frames;
    size_t frame_count;
    uint8_t *listing;
    listing_piece *pieces;
    size_t piece_count, piece_cursor;
    ZSTD_DCtx *dctx;
    uint8_t *input;          /* compressed bytes of one frame */
    size_t input_capacity;
    frame_buffer current;
    /* read-ahead: `ahead` belongs to the helper thread while `ahead_busy` */
    frame_buffer ahead;
    pthread_t helper;
    int helper_started;
    pid_t helper_pid;        /* a forked child has no helper: it decompresses itself */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t ahead_wanted;     /* SIZE_MAX: nothing */
    int ahead_busy, ahead_ok, stopping;
    ZSTD_DCtx *ahead_dctx;
    uint8_t *ahead_input;
    size_t ahead_input_capacity;
    int fd;
};

int lb_archive_bytes_compressed(const uint8_t *start, size_t length) {
    if (length < 4) return 0;
    uint32_t magic;
    memcpy(&magic, start, 4);
    return magic == LB_ZST_SKIPPABLE_MAGIC;
}

static void report(lb_archive_source *s, uint64_t offset, uint64_t length, const char *what) {
    if (s->report) s->report(s->report_context, offset, length, what);
}

static int ensure_capacity(uint8_t **buffer, size_t *capacity, size_t need) {
    if (need <= *capacity) return 0;
    uint8_t *grown = realloc(*buffer, need);
    if (!grown) return -1;
    *buffer = grown;
    *capacity = need;
    return 0;
}

/* The seek table and footer, checked: 0 and frames filled, or -1. */
static int read_seek_table(lb_archive_source *s, int fd, uint64_t file_size, lb_zst_footer *footer) {
    lb_zst_reader *z = s->zst;
    if (file_size < LB_ZST_HEADER_FRAME_SIZE + sizeof *footer) return -1;
    if (lb_pread_full(fd, footer, sizeof *footer, file_size - sizeof *footer) != (ssize_t)sizeof *footer)
        return -1;
    if (memcmp(footer->magic, LB_ZST_FOOTER_MAGIC, 8) != 0 ||
        footer->footer_crc != lb_crc32c(0, footer, __builtin_offsetof(lb_zst_footer, footer_crc)))
        return -1;
    uint64_t count = footer->frame_count;
    /* Every offset inside the file before any sum is formed: a crafted footer must not wrap a sum
     * around to pass, nor size an allocation by a count the file cannot hold. */
    if (footer->table_offset > file_size - sizeof *footer ||
        count > (file_size - sizeof *footer - footer->table_offset) / sizeof(lb_zst_seek_entry) ||
        footer->listing_offset > footer->table_offset ||
        footer->listing_length > footer->table_offset - footer->listing_offset)
        return -1;
    if (footer->frames_offset != LB_ZST_HEADER_FRAME_SIZE ||
        footer->table_offset + count * sizeof(lb_zst_seek_entry) + sizeof *footer != file_size ||
        footer->listing_offset + 8 + footer->listing_length + 8 != footer->table_offset ||
        footer->listing_offset < footer->frames_offset)
        return -1;
    lb_zst_seek_entry *table = malloc(count ? count * sizeof *table : 1);
    z->frames = calloc(count ? count : 1, sizeof *z->frames);
    if (!table || !z->frames) {
        free(table);
        return -1;
    }
    int ok = lb_pread_full(fd, table, count * sizeof *table, footer->table_offset) ==
                 (ssize_t)(count * sizeof *table) &&
             lb_crc32c(0, table, count * sizeof *table) == footer->table_crc;
    uint64_t at = footer->frames_offset, start = 0;
    for (uint64_t i = 0; ok && i < count; i++) {
        if (table[i].uncompressed_length > LB_ZST_FRAME_MAX || table[i].compressed_length == 0) {
            ok = 0;
            break;
        }
        z->frames[i] = (zst_frame){at, start, table[i].compressed_length,
                                   table[i].uncompressed_length, table[i].crc, 1, 0};
        at += table[i].compressed_length;
        start += table[i].uncompressed_length;
    }
    free(table);
    if (!ok || at != footer->listing_offset || start != footer->uncompressed_size) {
        free(z->frames);
        z->frames = NULL;
        return -1;
    }
    z->frame_count = count;
    s->size = start;
    return 0;
}

/* Without a usable seek table: the data frames from zstd's own headers (frame header, then block
 * headers: 3 bytes each, last-block bit, type, size; then a 4-byte checksum when one is flagged),
 * up to the first skippable frame or anything that is not a zstd frame. */
static int walk_zstd_frames(lb_archive_source *s, int fd, uint64_t file_size) {
    lb_zst_reader *z = s->zst;
    size_t capacity = 0;
    uint64_t at = LB_ZST_HEADER_FRAME_SIZE, start = 0;
    for (;;) {
        uint8_t head[18];  /* the longest zstd frame header */
        ssize_t n = lb_pread_full(fd, head, sizeof head, at);
        if (n < 6) break;
        uint32_t magic;
        memcpy(&magic, head, 4);
        if (magic != 0xFD2FB528u) break;  /* a skippable frame (the listing), or damage */
        /* The frame header (RFC 8878, 3.1.1.1): descriptor, window, dictionary id, content size. */
        uint8_t descriptor = head[4];
        unsigned single_segment = (descriptor >> 5) & 1u, checksum = (descriptor >> 2) & 1u;
        static const unsigned dictionary_sizes[4] = {0, 1, 2, 4}, content_sizes[4] = {0, 2, 4, 8};
        unsigned content_field = content_sizes[descriptor >> 6];
        if ((descriptor >> 6) == 0 && single_segment) content_field = 1;
        size_t header_size = 5 + !single_segment + dictionary_sizes[descriptor & 3u] + content_field;
        unsigned long long content =
            (size_t)n >= header_size ? ZSTD_getFrameContentSize(head, header_size) : ZSTD_CONTENTSIZE_ERROR;
        if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
            content > LB_ZST_FRAME_MAX)
            break;
        uint64_t pos = at + header_size;
        int last = 0, broken = 0;
        while (!last) {
            uint8_t b[3];
            if (pos + 3 > file_size || lb_pread_full(fd, b, 3, pos) != 3) {
                broken = 1;
                break;
            }
            uint32_t block = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
            last = block & 1u;
            uint32_t type = (block >> 1) & 3u, size = block >> 3;
            if (type == 3) {
                broken = 1;
                break;
            }
            pos += 3 + (type == 1 ? 1u : size);
        }
        if (checksum) pos += 4;
        if (broken || pos > file_size) break;
        if (z->frame_count == capacity) {
            size_t grown = capacity ? capacity * 2 : 64;
            zst_frame *frames = realloc(z->frames, grown * sizeof *frames);
            if (!frames) return -ENOMEM;
            z->frames = frames;
            capacity = grown;
        }
        z->frames[z->frame_count++] = (zst_frame){at, start, (uint32_t)(pos - at),
                                                  (uint32_t)content, 0, 0, 0};
        start += content;
        at = pos;
    }
    s->size = start;
    return z->frame_count ? 0 : -EPROTO;
}

/* The listing: pieces { u64 offset, u32 length, u32 0, bytes, zeros to 8 }, in offset order. */
static void read_listing(lb_archive_source *s, int fd, const lb_zst_footer *footer) {
    lb_zst_reader *z = s->zst;
    uint32_t length = footer->listing_length;
    uint8_t *packed = malloc(length ? length : 1);
    int ok = packed && lb_pread_full(fd, packed, length, footer->listing_offset + 8) == (ssize_t)length &&
             lb_crc32c(0, packed, length) == footer->listing_crc;
    unsigned long long content = ok ? ZSTD_getFrameContentSize(packed, length) : 0;
    ok = ok && content != ZSTD_CONTENTSIZE_ERROR && content != ZSTD_CONTENTSIZE_UNKNOWN &&
         content <= LB_ZST_FRAME_MAX;
    uint8_t *listing = ok ? malloc(content ? content : 1) : NULL;
    ok = listing && ZSTD_decompress(listing, content, packed, length) == content;
    free(packed);
    size_t count = 0, capacity = 0;
    listing_piece *pieces = NULL;
    uint64_t previous_end = 0;
    for (size_t at = 0; ok && at < content;) {
        if (content - at < 16) { ok = 0; break; }
        uint64_t offset;
        uint32_t piece_length;
        memcpy(&offset, listing + at, 8);
        memcpy(&piece_length, listing + at + 8, 4);
        if (piece_length > content - at - 16 || offset < previous_end ||
            offset + piece_length > s->size) {
            ok = 0;
            break;
        }
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 256;
            listing_piece *grown = realloc(pieces, capacity * sizeof *pieces);
            if (!grown) { ok = 0; break; }
            pieces = grown;
        }
        pieces[count++] = (listing_piece){offset, piece_length, (uint32_t)(at + 16)};
        previous_end = offset + piece_length;
        at += 16 + (((size_t)piece_length + 7u) & ~(size_t)7u);
    }
    if (!ok) {
        free(listing);
        free(pieces);
        report(s, 0, 0, "the listing of a compressed archive file fails its checksum or does not "
                        "parse: its frames are listed from the data frames instead");
        return;
    }
    z->listing = listing;
    z->pieces = pieces;
    z->piece_count = count;
}

/* The parts readers do not need to read the records are checked too, so that any damage to the
 * file is reported (and `zstd -d` would fail on it): the header frame (its length, and the archive
 * header copy, which identifies the file, against its CRC and against the header in data frame 0)
 * and the heads of the listing's and the seek table's skippable frames. */
static void check_frame_heads(lb_archive_source *s, int fd, const lb_zst_footer *footer) {
    uint32_t head[2];
    lb_archive_file_header copy, real;
    int ok = lb_pread_full(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
             head[1] == LB_ARCHIVE_HEADER_SIZE &&
             lb_pread_full(fd, &copy, sizeof copy, 8) == (ssize_t)sizeof copy &&
             copy.header_crc == lb_archive_header_crc(&copy) &&
             lb_archive_source_read(s, &real, sizeof real, 0) == (ssize_t)sizeof real &&
             memcmp(&copy, &real, sizeof copy) == 0;
    if (!ok)
        report(s, 0, LB_ZST_HEADER_FRAME_SIZE, "the header frame of a compressed archive file is "
                                               "damaged (the file is no longer a valid zstd stream)");
    uint32_t table_length = footer->frame_count * (uint32_t)sizeof(lb_zst_seek_entry) +
                            (uint32_t)sizeof *footer;
    ok = lb_pread_full(fd, head, sizeof head, footer->listing_offset) == (ssize_t)sizeof head &&
         head[0] == LB_ZST_SKIPPABLE_MAGIC && head[1] == footer->listing_length &&
         lb_pread_full(fd, head, sizeof head, footer->table_offset - 8) == (ssize_t)sizeof head &&
         head[0] == LB_ZST_SKIPPABLE_MAGIC && head[1] == table_length;
    if (!ok)
        report(s, footer->listing_offset, 8, "a skippable frame head of a compressed archive file "
                                             "is damaged (the file is no longer a valid zstd stream)");
}

int lb_archive_source_open(lb_archive_source *s, int fd, uint64_t file_size,
                           lb_archive_damage_report report_damage, void *report_context,
                           const char **problem) {
    lb_archive_source_plain(s, fd, file_size);
    s->report = report_damage;
    s->report_context = report_context;
    uint8_t start[4];
    if (file_size < 4 || lb_pread_full(fd, start, 4, 0) != 4 || !lb_archive_bytes_compressed(start, 4))
        return 0;
    lb_zst_reader *z = calloc(1, sizeof *z);
    if (!z) return -ENOMEM;
    z->fd = fd;
    z->current.frame = z->ahead.frame = SIZE_MAX;
    z->ahead_wanted = SIZE_MAX;
    z->dctx = ZSTD_createDCtx();
    pthread_mutex_init(&z->lock, NULL);
    pthread_cond_init(&z->changed, NULL);
    s->zst = z;
    if (!z->dctx) {
        lb_archive_source_close(s);
        return -ENOMEM;
    }
    lb_zst_footer footer;
    if (read_seek_table(s, fd, file_size, &footer) == 0) {
        read_listing(s, fd, &footer);
        check_frame_heads(s, fd, &footer);
        return 0;
    }
    report(s, 0, 0, "the seek table of a compressed archive file is damaged or cut short: its "
                    "data frames are found by walking them");
    int rc = walk_zstd_frames(s, fd, file_size);
    if (rc) {
        if (problem) *problem = "compressed archive file: no data frame can be found";
        lb_archive_source_close(s);
        lb_archive_source_plain(s, fd, file_size);
        return rc;
    }
    return 0;
}

/* Decompresses frame `index` into `out` with `dctx`: 0, or -1 (damaged). */
static int decompress_frame(lb_zst_reader *z, size_t index, ZSTD_DCtx *dctx, uint8_t **input,
                            size_t *input_capacity, frame_buffer *out) {
    const zst_frame *f = &z->frames[index];
    if (ensure_capacity(input, input_capacity, f->compressed_length) ||
        ensure_capacity(&out->bytes, &out->capacity, f->length ? f->length : 1))
        return -1;
    out->frame = SIZE_MAX;
    if (lb_pread_full(z->fd, *input, f->compressed_length, f->offset) != (ssize_t)f->compressed_length)
        return -1;
    size_t got = ZSTD_decompressDCtx(dctx, out->bytes, f->length, *input, f->compressed_length);
    if (ZSTD_isError(got) || got != f->length) return -1;
    if (f->has_crc && lb_crc32c(0, out->bytes, f->length) != f->crc) return -1;
    out->frame = index;
    return 0;
}

static void *read_ahead(void *context) {
    lb_zst_reader *z = context;
    pthread_mutex_lock(&z->lock);
    for (;;) {
        while (!z->stopping && z->ahead_wanted == SIZE_MAX) pthread_cond_wait(&z->changed, &z->lock);
        if (z->stopping) break;
        size_t index = z->ahead_wanted;
        z->ahead_wanted = SIZE_MAX;
        z->ahead_busy = 1;
        pthread_mutex_unlock(&z->lock);
        int ok = decompress_frame(z, index, z->ahead_dctx, &z->ahead_input,
                                  &z->ahead_input_capacity, &z->ahead) == 0;
        pthread_mutex_lock(&z->lock);
        z->ahead_busy = 0;
        z->ahead_ok = ok;
        pthread_cond_broadcast(&z->changed);
    }
    pthread_mutex_unlock(&z->lock);
    return NULL;
}

/* Asks the helper for frame `index` (starting it on first use). */
static void want_ahead(lb_zst_reader *z, size_t index) {
    if (index >= z->frame_count || z->frames[index].damaged) return;
    if (z->helper_started && z->helper_pid != getpid()) return;  /* a forked child's copy */
    if (!z->helper_started) {
        z->ahead_dctx = ZSTD_createDCtx();
        if (!z->ahead_dctx) return;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);  /* the helper takes no signals */
        int rc = pthread_create(&z->helper, NULL, read_ahead, z);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) return;
        z->helper_started = 1;
        z->helper_pid = getpid();
    }
    pthread_mutex_lock(&z->lock);
    if (!z->ahead_busy && z->ahead.frame != index) {
        z->ahead_wanted = index;
        pthread_cond_signal(&z->changed);
    }
    pthread_mutex_unlock(&z->lock);
}

/* Makes `current` hold frame `index`: from the helper when it has it (or is making it), else
 * decompressed here. 0, or -1 (damaged: reported once). */
static int load_frame(lb_archive_source *s, size_t index) {
    lb_zst_reader *z = s->zst;
    if (z->current.frame == index) return 0;
    zst_frame *f = &z->frames[index];
    if (f->damaged) return -1;
    int helper = z->helper_started && z->helper_pid == getpid();
    int ok = 0, taken = 0;
    if (helper) {
        pthread_mutex_lock(&z->lock);
        while (z->ahead_busy || z->ahead_wanted != SIZE_MAX) {
            if (z->ahead_wanted != SIZE_MAX && z->ahead_wanted != index && !z->ahead_busy) {
                z->ahead_wanted = SIZE_MAX;  /* not started, not needed */
                break;
            }
            pthread_cond_wait(&z->changed, &z->lock);
        }
        if (z->ahead.frame == index) {
            frame_buffer swap = z->current;
            z->current = z->ahead;
            z->ahead = swap;
            z->ahead.frame = SIZE_MAX;
            taken = 1;
            ok = z->ahead_ok;
        }
        pthread_mutex_unlock(&z->lock);
    }
    if (!taken) ok = decompress_frame(z, index, z->dctx, &z->input, &z->input_capacity, &z->current) == 0;
    if (!ok) {
        z->current.frame = SIZE_MAX;
        f->damaged = 1;
        char what[160];
        snprintf(what, sizeof what,
                 "data frame %zu of a compressed archive file fails to decompress or its checksum: "
                 "the archive frames in it are lost", index);
        report(s, f->start, f->length, what);
        return -1;
    }
    if (z->frame_count > 1) want_ahead(z, index + 1);
    return 0;
}

static size_t frame_holding(const lb_zst_reader *z, uint64_t offset) {
    size_t lo = 0, hi = z->frame_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->frames[mid].start + z->frames[mid].length <= offset) lo = mid + 1;
        else hi = mid;
    }
    return lo;  /* frame_count when past the end */
}

/* A listing piece that holds [offset, offset + length) whole, or NULL. Reads come in offset
 * order while a file is listed, so the search starts at the last piece found. */
static const listing_piece *piece_holding(lb_zst_reader *z, uint64_t offset, size_t length) {
    if (!z->piece_count) return NULL;
    size_t i = z->piece_cursor < z->piece_count ? z->piece_cursor : 0;
    if (z->pieces[i].offset > offset) i = 0;
    for (int steps = 0; i < z->piece_count && z->pieces[i].offset <= offset; i++, steps++) {
        const listing_piece *p = &z->pieces[i];
        if (offset + length <= p->offset + p->length) {
            z->piece_cursor = i;
            return p;
        }
        if (steps > 4) {
            /* Far from the cursor: binary search for the last piece starting at or before. */
            size_t lo = 0, hi = z->piece_count;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (z->pieces[mid].offset <= offset) lo = mid + 1;
                else hi = mid;
            }
            if (!lo) return NULL;
            p = &z->pieces[lo - 1];
            if (offset + length <= p->offset + p->length) {
                z->piece_cursor = lo - 1;
                return p;
            }
            return NULL;
        }
    }
    return NULL;
}

ssize_t lb_archive_source_read(lb_archive_source *s, void *buffer, size_t length, uint64_t offset) {
    lb_zst_reader *z = s->zst;
    if (!z) return lb_pread_full(s->fd, buffer, length, offset);
    if (offset >= s->size) return 0;
    if (length > s->size - offset) length = (size_t)(s->size - offset);
    const listing_piece *p = piece_holding(z, offset, length);
    if (p) {
        memcpy(buffer, z->listing + p->at + (offset - p->offset), length);
        return (ssize_t)length;
    }
    size_t done = 0;
    while (done < length) {
        uint64_t at = offset + done;
        size_t index = z->current.frame != SIZE_MAX &&
                               at >= z->frames[z->current.frame].start &&
                               at < z->frames[z->current.frame].start + z->frames[z->current.frame].length
                           ? z->current.frame
                           : frame_holding(z, at);
        if (index >= z->frame_count || load_frame(s, index) != 0) break;
        const zst_frame *f = &z->frames[index];
        size_t from = (size_t)(at - f->start);
        size_t take = f->length - from < length - done ? f->length - from : length - done;
        memcpy((uint8_t *)buffer + done, z->current.bytes + from, take);
        done += take;
    }
    return (ssize_t)done;
}

uint64_t lb_archive_source_damaged_until(lb_archive_source *s, uint64_t offset) {
    lb_zst_reader *z = s->zst;
    if (!z) return 0;
    size_t index = frame_holding(z, offset);
    if (index >= z->frame_count) return 0;
    if (!z->frames[index].damaged && load_frame(s, index) == 0) return 0;
    return z->frames[index].start + z->frames[index].length;
}

/* Stops the read-ahead helper (joined); its buffers stay. */
static void stop_helper(lb_zst_reader *z) {
    if (!z->helper_started || z->helper_pid != getpid()) return;
    pthread_mutex_lock(&z->lock);
    z->stopping = 1;
    pthread_cond_broadcast(&z->changed);
    pthread_mutex_unlock(&z->lock);
    pthread_join(z->helper, NULL);
}

void lb_archive_source_rest(lb_archive_source *s) {
    lb_zst_reader *z = s->zst;
    if (!z || (z->helper_started && z->helper_pid != getpid())) return;  /* a forked child's copy */
    stop_helper(z);
    z->helper_started = 0;
    z->stopping = 0;
    z->ahead_busy = 0;
    z->ahead_wanted = SIZE_MAX;
    ZSTD_freeDCtx(z->ahead_dctx);
    z->ahead_dctx = NULL;
    free(z->input);
    free(z->ahead_input);
    free(z->current.bytes);
    free(z->ahead.bytes);
    z->input = z->ahead_input = NULL;
    z->input_capacity = z->ahead_input_capacity = 0;
    z->current = z->ahead = (frame_buffer){.frame = SIZE_MAX};
}

void lb_archive_source_close(lb_archive_source *s) {
    lb_zst_reader *z = s->zst;
    if (!z) return;
    stop_helper(z);   /* (In a forked child the helper is the parent's: nothing of it is touched.) */
    if (!z->helper_started || z->helper_pid == getpid()) {
        pthread_mutex_destroy(&z->lock);
        pthread_cond_destroy(&z->changed);
    }
    ZSTD_freeDCtx(z->dctx);
    ZSTD_freeDCtx(z->ahead_dctx);
    free(z->frames);
    free(z->listing);
    free(z->pieces);
    free(z->input);
    free(z->ahead_input);
    free(z->current.bytes);
    free(z->ahead.bytes);
    free(z);
    s->zst = NULL;
}

/* ---- Archive frames over a source (the reader's and the archiver's recovery walk) ---- */

/* Whether 16 bytes are a plausible frame head: its CRC matches and its length is possible. */
static int frame_head_valid(const lb_archive_frame_head *h, uint32_t chunk_size) {
    if (h->head_crc != lb_crc32c(0, h, __builtin_offsetof(lb_archive_frame_head, head_crc)))
        return 0;
    if (h->length > LB_ARCHIVE_FRAME_MAX || h->kind == 0) return 0;
    if (h->kind == LB_ARCHIVE_FRAME_CHUNK &&
        (h->length < LB_CHUNK_HEADER_SIZE || h->length > chunk_size || (h->length & 7u)))
        return 0;
    if (h->kind == LB_ARCHIVE_FRAME_END && h->length != sizeof(lb_archive_end)) return 0;
    return 1;
}

lb_frame_status lb_archive_frame_read(lb_archive_source *source, uint64_t offset,
                                      uint32_t chunk_size, lb_archive_frame_head *out) {
    uint64_t file_size = source->size;
    if (offset + LB_ARCHIVE_FRAME_HEAD_SIZE > file_size) return LB_FRAME_END;
    if (lb_archive_source_read(source, out, sizeof *out, offset) != (ssize_t)sizeof *out)
        return LB_FRAME_END;
    if (!frame_head_valid(out, chunk_size)) return LB_FRAME_INVALID;
    if (offset + lb_archive_frame_span(out->length) > file_size) return LB_FRAME_END;
    return LB_FRAME_OK;
}

uint64_t lb_archive_frame_resync(lb_archive_source *source, uint64_t from, uint32_t chunk_size) {
    enum { BLOCK = 64 * 1024 };
    uint64_t file_size = source->size;
    uint8_t *block = malloc(BLOCK + LB_ARCHIVE_FRAME_HEAD_SIZE);
    if (!block) return file_size;
    uint64_t at = (from + 8u) & ~(uint64_t)7u;
    while (at + LB_ARCHIVE_FRAME_HEAD_SIZE <= file_size) {
        ssize_t n = lb_archive_source_read(source, block, BLOCK + LB_ARCHIVE_FRAME_HEAD_SIZE, at);
        if (n < (ssize_t)LB_ARCHIVE_FRAME_HEAD_SIZE) {
            /* A compressed file's damaged data frame: go on after it. */
            uint64_t next = lb_archive_source_damaged_until(source, at + (n > 0 ? (uint64_t)n : 0));
            if (!next) break;
            at = next;
            continue;
        }
        for (size_t i = 0; i + LB_ARCHIVE_FRAME_HEAD_SIZE <= (size_t)n && i < BLOCK; i += 8) {
            lb_archive_frame_head h;
            memcpy(&h, block + i, sizeof h);
            if (frame_head_valid(&h, chunk_size) &&
                at + i + lb_archive_frame_span(h.length) <= file_size) {
                free(block);
                return at + i;
            }
        }
        /* Past what was scanned: a short read stopped at a damaged data frame or the end. */
        uint64_t scanned = (((uint64_t)n - LB_ARCHIVE_FRAME_HEAD_SIZE) & ~(uint64_t)7u) + 8u;
        at += scanned < BLOCK ? scanned : BLOCK;
    }
    free(block);
    return file_size;
}
