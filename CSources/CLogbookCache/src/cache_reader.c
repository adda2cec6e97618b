/* cache_reader.c — reading a cache, possibly while another process appends: a window copied and
 * checked against the head, a scan when the header cannot be trusted, overtaken messages counted. */
#define _GNU_SOURCE
#include "cache_internal.h"

/* ---- reader ---- */

/* The most a reader copies at once unless told (lb_cache_reader_set_window): a cache up to this
 * size is copied whole by its first read, so what it returns is what the cache held at one moment. */
#define READ_WINDOW (4u << 20)

typedef struct scanned_frame {
    uint64_t sequence, offset; /* offset in the region */
} scanned_frame;

struct lb_cache_reader {
    int fd;
    uint64_t region_size;
    uint64_t available;      /* bytes of the region the file holds (less when truncated) */
    uint64_t position, end;  /* logical, from the header */
    scanned_frame *scanned;  /* a damaged header: the frames a scan found, by sequence */
    size_t scanned_count, scanned_next;
    int scanning;
    uint64_t next_expected;  /* a frame of a lower sequence is stale: left from before a wrap */
    uint8_t *buffer;         /* a scanned message's body */
    size_t capacity;
    /* A copy of the region from window_start (logical), checked against the head after it was
     * made: every byte of it at or after that head was copied before the writer could reuse it. */
    uint8_t *window;
    size_t window_capacity;
    uint64_t window_start, window_length;
    /* Overtaken: the writer removed (overwrote) messages the reader had not reached yet. */
    uint64_t delivered, last_sequence;
    int gap_open;            /* a jump to the head; its messages are counted at the next message */
    uint64_t gap_from, gap_offset, gap_bytes;
    unsigned laps;           /* times the head passed the end and the end was read again */
    uint64_t window_limit;   /* the most one copy takes (lb_cache_reader_set_window) */
    lb_cache_issue *issues;
    size_t issue_count, issue_capacity;
};

static lb_cache_issue *push_issue(lb_cache_reader *r) {
    if (r->issue_count == r->issue_capacity) {
        size_t capacity = r->issue_capacity ? r->issue_capacity * 2 : 8;
        lb_cache_issue *grown = realloc(r->issues, capacity * sizeof *grown);
        if (!grown) return NULL;
        r->issues = grown;
        r->issue_capacity = capacity;
    }
    lb_cache_issue *issue = &r->issues[r->issue_count++];
    memset(issue, 0, sizeof *issue);
    return issue;
}

static void add_issue(lb_cache_reader *r, uint64_t offset, uint64_t length, const char *what) {
    lb_cache_issue *previous = r->issue_count ? &r->issues[r->issue_count - 1] : NULL;
    if (previous && previous->what == what && previous->offset + previous->length == offset) {
        previous->length += length; /* one damaged region, searched 8 bytes at a time */
        return;
    }
    lb_cache_issue *issue = push_issue(r);
    if (issue) *issue = (lb_cache_issue){.offset = offset, .length = length, .what = what, .kind = LB_CACHE_ISSUE_DAMAGE};
}

static int by_sequence(const void *a, const void *b) {
    const scanned_frame *x = a, *y = b;
    return x->sequence < y->sequence ? -1 : x->sequence > y->sequence;
}

/* The header cannot be trusted: every intact message in the region, by sequence; from
 * `first_kept` on when the header's head_sequence was confirmed by the head frame (else all:
 * messages already removed may come back). */
static int scan_region(lb_cache_reader *r, uint64_t first_kept) {
    uint8_t *data = malloc(r->available ? r->available : 1);
    if (!data) return -ENOMEM;
    uint64_t got = 0;
    while (got < r->available) {
        ssize_t n = pread(r->fd, data + got, r->available - got, (off_t)(LB_CACHE_HEADER_SIZE + got));
        if (n <= 0) break;
        got += (uint64_t)n;
    }
    size_t capacity = 0;
    uint64_t damaged_from = UINT64_MAX;
    for (uint64_t offset = 0; offset + FRAME_HEAD <= got;) {
        uint64_t sequence, size = lb_cc_intact_message(data, got, offset, &sequence);
        if (!size) {
            lb_archive_frame_head f;
            memcpy(&f, data + offset, sizeof f);
            int zero = 1;
            for (size_t i = 0; i < sizeof f && zero; i++) zero = data[offset + i] == 0;
            if (!zero && !(frame_head_valid(&f) && f.kind == LB_CACHE_FRAME_WRAP) && damaged_from == UINT64_MAX)
                damaged_from = offset;
            offset += 8;
            continue;
        }
        if (damaged_from != UINT64_MAX) {
            add_issue(r, LB_CACHE_HEADER_SIZE + damaged_from, offset - damaged_from, "no intact frame here");
            damaged_from = UINT64_MAX;
        }
        if (r->scanned_count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            scanned_frame *grown = realloc(r->scanned, capacity * sizeof *grown);
            if (!grown) { free(data); return -ENOMEM; }
            r->scanned = grown;
        }
        r->scanned[r->scanned_count++] = (scanned_frame){sequence, offset};
        offset += size;
    }
    free(data);
    size_t kept = 0;
    for (size_t i = 0; i < r->scanned_count; i++)
        if (r->scanned[i].sequence >= first_kept) r->scanned[kept++] = r->scanned[i];
    r->scanned_count = kept;
    if (r->scanned_count > 1) qsort(r->scanned, r->scanned_count, sizeof *r->scanned, by_sequence);
    size_t unique = 0; /* a sequence twice: keep one */
    for (size_t i = 0; i < r->scanned_count; i++)
        if (!unique || r->scanned[unique - 1].sequence != r->scanned[i].sequence) r->scanned[unique++] = r->scanned[i];
    r->scanned_count = unique;
    r->scanning = 1;
    return 0;
}

/* Whether another open file description holds the writer's lock on the file. */
static int writer_is_alive(int fd) {
    struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}


/* The positions of a cache a live writer holds, `head` equal to `tail`: empty, or not any more
 * (the tail read was older than the head: the writer removed the messages it published and
 * published more), or an append under way removed every message to make room for its own. The
 * positions are taken again (tail, then head) until they differ, or are the same twice with no
 * append under way: a bounded number of yields, as a writer killed in the middle of an append
 * leaves its flag set. */
static void wait_for_append(int fd, uint64_t *head, uint64_t *tail) {
    for (unsigned spin = 0; spin < (1u << 16) && *head == *tail; spin++) {
        uint64_t appending = 0, t, h;
        if (pread(fd, &appending, 8, offsetof(lb_cache_header, appending)) != 8 ||
            pread(fd, &t, 8, offsetof(lb_cache_header, tail)) != 8 || pread(fd, &h, 8, offsetof(lb_cache_header, head)) != 8)
            return;
        if (h > t) continue; /* moved between the two reads */
        int same = h == *head && t == *tail;
        *head = h;
        *tail = t;
        if (same && !appending) return; /* empty */
        if (same) sched_yield();
    }
}

int lb_cache_reader_open(const char *path, lb_cache_reader **out) { return lb_cc_reader_open(path, 1, out); }

/* `writer_may_be_alive` 0: the caller is the writer, rebuilding: the lock it holds is no sign of
 * a live writer keeping the header whole. */
/* The header of the cache file fd (`st`), into *h (*got bytes read). 0, or -errno when the file is
 * not a cache this library reads (said in the error detail). */
static int read_header_of(int fd, const char *path, struct stat *st, lb_cache_header *h, ssize_t *got) {
    memset(h, 0, sizeof *h);
    *got = 0;
    if (fstat(fd, st) != 0) return -errno;
    if (!S_ISREG(st->st_mode)) {
        lb_error_detail_set("'%s' is not a regular file", path);
        return -EINVAL;
    }
    if ((*got = pread(fd, h, sizeof *h, 0)) < 8 || memcmp(h->magic, LB_CACHE_MAGIC, 8) != 0) {
        lb_error_detail_set("'%s' is not a Logbook cache", path);
        return -EPROTO;
    }
    int sound = *got == (ssize_t)sizeof *h && h->fixed_crc == fixed_crc(h);
    if (sound && h->format_version != LB_CACHE_FORMAT_VERSION) {
        lb_error_detail_set("'%s' is a cache of format version %u; this library reads version %u", path,
                            h->format_version, LB_CACHE_FORMAT_VERSION);
        return -EPROTO;
    }
    if (sound && h->header_size != LB_CACHE_HEADER_SIZE) {
        lb_error_detail_set("'%s' has a header of %u bytes; a cache of format version %u has %u", path,
                            h->header_size, LB_CACHE_FORMAT_VERSION, LB_CACHE_HEADER_SIZE);
        return -EPROTO;
    }
    return 0;
}

/* Head and tail to read between, when they can be believed (1; 2 when the header shows an append
 * or eviction a kill cut short), with the first sequence kept; 0 when the region must be scanned.
 * A live writer's positions are read one at a time; a header that disagrees is read once more (a
 * writer may have been opening and repairing it). */
static int reader_positions(lb_cache_reader *r, int fd, lb_cache_header *h, int fixed_ok, int writer_may_be_alive,
                            uint64_t *head, uint64_t *tail, uint64_t *first_kept) {
    int agree = 0;
    *head = atomic_load(&h->head);
    *tail = atomic_load(&h->tail);
    *first_kept = 0;
    for (int look = 0; look < 2 && !agree; look++) {
        if (fixed_ok && writer_may_be_alive && writer_is_alive(fd)) {
            /* A writer holds the file: it checked the header when it opened it (rebuilding it if
             * need be) and keeps it whole, but a copy made while it appends mixes old and new
             * fields. So only the positions, read one at a time, tail first: the head read after
             * it is no older, so the pair is never more than the region apart. */
            for (int attempt = 0; attempt < 16 && !agree; attempt++) {
                if (pread(fd, tail, 8, offsetof(lb_cache_header, tail)) != 8 ||
                    pread(fd, head, 8, offsetof(lb_cache_header, head)) != 8)
                    break;
                agree = *head <= *tail && *tail - *head <= r->region_size;
            }
            if (agree) wait_for_append(fd, head, tail);
            *first_kept = atomic_load(&h->head_sequence);
            break;
        }
        if (r->region_size) agree = lb_cc_moving_fields_agree(fd, h, r->region_size, r->available, first_kept);
        /* Disagreeing, it may have been a writer opening (and repairing) the file meanwhile: look
         * again, once, with a fresh copy. */
        if (!agree && fixed_ok && look == 0 && pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h && h->fixed_crc == fixed_crc(h)) {
            *head = atomic_load(&h->head);
            *tail = atomic_load(&h->tail);
            continue;
        }
        break;
    }
    return agree;
}

int lb_cc_reader_open(const char *path, int writer_may_be_alive, lb_cache_reader **out) {
    if (!path || !out) return -EINVAL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    lb_cache_header h;
    ssize_t got;
    int rc = read_header_of(fd, path, &st, &h, &got);
    lb_cache_reader *r = NULL;
    if (rc == 0 && !(r = calloc(1, sizeof *r))) rc = -ENOMEM;
    if (rc) {
        close(fd);
        return rc;
    }
    r->fd = fd;
    uint64_t in_file = (uint64_t)st.st_size > LB_CACHE_HEADER_SIZE ? (uint64_t)st.st_size - LB_CACHE_HEADER_SIZE : 0;
    int fixed_ok = got == (ssize_t)sizeof h && h.fixed_crc == fixed_crc(&h) && h.region_size && h.region_size % 8 == 0;
    /* A cache file is its header and its region, to the byte but for up to 7: a region the header
     * says is smaller than the file holds is damage (a crafted or bit-flipped size with its
     * checksum made to match), never a reason to read less. The region is scanned whole. (A file
     * shorter than its region is a cut file: read as far as it goes, below.) */
    int geometry_lies = fixed_ok && h.region_size < (in_file & ~(uint64_t)7);
    if (geometry_lies) {
        add_issue(r, 16, 8, "the header's region size is smaller than the file's: the header is not "
                            "trusted, the region was scanned");
        fixed_ok = 0;
    }
    r->region_size = fixed_ok ? h.region_size : (in_file & ~(uint64_t)7);
    r->available = in_file < r->region_size ? in_file : r->region_size;
    if (fixed_ok && in_file < h.region_size)
        add_issue(r, (uint64_t)st.st_size, h.region_size - in_file, "the file is truncated: this part of the region is missing");
    uint64_t head, tail, first_kept;
    int agree = reader_positions(r, fd, &h, fixed_ok, writer_may_be_alive, &head, &tail, &first_kept);
    if (!fixed_ok || !agree) {
        add_issue(r, 0, sizeof h,
                  !fixed_ok ? "the header is damaged; the region was scanned (messages already removed may come back)"
                  : first_kept ? "the header's positions or counters disagree with its messages; the region was scanned"
                               : "the header's positions or counters disagree with its messages; the region was scanned "
                                 "(messages already removed may come back)");
        r->scanning = 1;
        if (r->region_size && (rc = scan_region(r, first_kept)) != 0) {
            lb_cache_reader_close(r);
            return rc;
        }
    }
    uint64_t last = atomic_load(&h.last_frame), sequence, end;
    if (agree == 2 && lb_cc_append_position(last, tail, r->region_size) &&
        lb_cc_message_at(fd, r->region_size, r->available, last, &sequence, &end) && sequence + 1 == atomic_load(&h.next_sequence) &&
        end - head <= r->region_size)
        tail = end; /* written whole, not yet published when the writer was killed: read it too */
    r->position = head;
    r->end = tail;
    r->next_expected = first_kept;
    r->window_limit = READ_WINDOW;
    *out = r;
    return 0;
}

/* A moving field of the header now, read until two reads agree (a pread is not promised to copy
 * 8 bytes at once); 0 when the file cannot be read. */
static uint64_t header_field_now(lb_cache_reader *r, size_t offset) {
    uint64_t value = 0, again = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        if (pread(r->fd, &value, 8, (off_t)offset) != 8 || pread(r->fd, &again, 8, (off_t)offset) != 8) return 0;
        if (value == again) break;
    }
    return value;
}

/* The header's head now: a frame before it may have been overwritten while it was read. */
static uint64_t current_head(lb_cache_reader *r) { return header_field_now(r, offsetof(lb_cache_header, head)); }

static int reserve(lb_cache_reader *r, size_t length) {
    if (length <= r->capacity) return 0;
    uint8_t *grown = realloc(r->buffer, length);
    if (!grown) return -ENOMEM;
    r->buffer = grown;
    r->capacity = length;
    return 0;
}

static void message_from_buffer(lb_cache_reader *r, uint32_t length, lb_cache_message *m) {
    memcpy(&m->sequence, r->buffer, 8);
    memcpy(&m->wall_ns, r->buffer + 8, 8);
    m->bytes = r->buffer + MESSAGE_PREFIX;
    m->length = length - MESSAGE_PREFIX;
}

/* A damaged header: the frames the scan found (checked again: the file may have changed). */
static int next_scanned(lb_cache_reader *r, lb_cache_message *m) {
    while (r->scanned_next < r->scanned_count) {
        uint64_t offset = r->scanned[r->scanned_next++].offset;
        lb_archive_frame_head f;
        if (pread(r->fd, &f, sizeof f, (off_t)(LB_CACHE_HEADER_SIZE + offset)) != (ssize_t)sizeof f) continue;
        if (!frame_head_valid(&f) || f.kind != LB_CACHE_FRAME_MESSAGE || f.length < MESSAGE_PREFIX ||
            FRAME_HEAD + round8(f.length) > r->available - offset)
            continue;
        int rc = reserve(r, f.length);
        if (rc) return rc;
        if (pread(r->fd, r->buffer, f.length, (off_t)(LB_CACHE_HEADER_SIZE + offset + FRAME_HEAD)) != (ssize_t)f.length ||
            lb_crc32c(0, r->buffer, f.length) != f.body_crc)
            continue;
        message_from_buffer(r, f.length, m);
        return 1;
    }
    return 0;
}

/* Laps a reader follows past the end it was opened with before it gives up (reported): the
 * writer overwrote everything it had not read yet, this many times over. */
#define READER_LAPS 4u

/* The writer's head passed the reader's position (at `head`): the frames between were removed or
 * overwritten before the reader copied them. Before any message was returned the reader simply
 * begins later (at the oldest message there is now); after, it goes on at the head and the
 * messages it missed become an issue at its next message (or at its end). When the head passed
 * the end, the end is read again, so a lapped reader still returns the newest messages. */
static void overtaken(lb_cache_reader *r, uint64_t head) {
    uint64_t tail = head;
    int stop = 0;
    while (head >= r->end) {
        /* tail first, then the head again (no older): a pair never more than the region apart,
         * unless the writer lapped the reader once more in between */
        tail = header_field_now(r, offsetof(lb_cache_header, tail));
        uint64_t now = current_head(r);
        if (now > head) head = now;
        if (head == tail) wait_for_append(r->fd, &head, &tail);
        if (head < tail && tail - head <= r->region_size) break;
        if ((stop = r->laps++ >= READER_LAPS || head == tail)) break; /* lapped too often, or emptied */
    }
    if (!r->gap_open) { /* also before the first message: it was kept when the reader was opened */
        r->gap_open = 1;
        r->gap_from = r->delivered ? r->last_sequence + 1 : r->next_expected;
        r->gap_offset = LB_CACHE_HEADER_SIZE + r->position % r->region_size;
        r->gap_bytes = 0;
    }
    if (r->gap_open) r->gap_bytes += head - r->position;
    r->position = head; /* the window's bytes from the head on are kept: copied before it got there */
    if (head >= r->end) r->end = stop ? head : tail; /* stopping: the gap closes with the head's sequence */
}

/* Closes an open gap: the messages from gap_from up to `next` (exclusive) were removed before
 * this reader reached them. */
static void close_gap(lb_cache_reader *r, uint64_t next) {
    if (!r->gap_open) return;
    r->gap_open = 0;
    uint64_t first = r->gap_from;
    if (next <= first) return; /* only padding, a wrap frame or stale frames were passed */
    lb_cache_issue *issue = push_issue(r);
    if (!issue)
        return;
    *issue = (lb_cache_issue){
        .offset = r->gap_offset,
        .length = r->gap_bytes,
        .what = "overtaken: the writer removed these messages (overwritten, or removed by a consumer) before this "
                "reader reached them",
        .kind = LB_CACHE_ISSUE_OVERTAKEN,
        .missed_first = first,
        .missed = next - first,
    };
}


int lb_cache_reader_set_window(lb_cache_reader *r, uint64_t bytes) {
    if (!r || bytes < 4096) return -EINVAL;
    r->window_limit = bytes;
    return 0;
}

/* Copies at least `want` bytes of the region from r->position into the window: up to READ_WINDOW
 * logical bytes (past the region's end on at its start: one copy holds a wrapped run whole), never
 * past the end or what the file holds. Then it checks the head: 1 when the bytes are there, 0
 * when fewer are (the window holds what there is), 2 when the writer overtook the position
 * (r->position moved to the head; what the window holds from there on is kept), -errno. */
static int fill_window(lb_cache_reader *r, uint64_t want) {
    uint64_t position = r->position;
    uint64_t size = r->window_limit > want ? r->window_limit : want;
    if (size > r->end - position) size = r->end - position;
    if (size > r->window_capacity) {
        uint8_t *grown = realloc(r->window, size);
        if (!grown) return -ENOMEM;
        r->window = grown;
        r->window_capacity = size;
    }
    uint64_t got = 0;
    while (got < size) {
        uint64_t offset = (position + got) % r->region_size;
        if (offset >= r->available) break; /* truncated away */
        uint64_t span = size - got;
        if (span > r->available - offset) span = r->available - offset;
        ssize_t n = pread(r->fd, r->window + got, span, (off_t)(LB_CACHE_HEADER_SIZE + offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) break; /* cut under the reader: what is left */
        got += (uint64_t)n;
    }
    r->window_start = position;
    r->window_length = got;
    /* The writer moves the head past a frame before it writes over it: a byte copied before the
     * head reached it is the byte that was published. */
    uint64_t head = current_head(r);
    if (head > position) {
        overtaken(r, head);
        return 2;
    }
    return got >= want ? 1 : 0;
}

/* The frame at r->position, copied whole into the window: 1, or 0 when it is not all there
 * (damage: its head claims more than the region, the file or the published end hold), 2 when the
 * reader was overtaken meanwhile, -errno. */
static int frame_in_window(lb_cache_reader *r, lb_archive_frame_head *f) {
    for (;;) {
        uint64_t at = r->position - r->window_start;
        if (!r->window_length || r->position < r->window_start || at + FRAME_HEAD > r->window_length) {
            int rc = fill_window(r, FRAME_HEAD);
            if (rc != 1) return rc;
            continue;
        }
        memcpy(f, r->window + at, sizeof *f);
        if (!frame_head_valid(f)) return 0;
        uint64_t size = FRAME_HEAD + round8(f->length);
        if (size > r->region_size - r->position % r->region_size) return 0;
        if (at + size <= r->window_length) return 1;
        int rc = fill_window(r, size);
        if (rc != 1) return rc;
    }
}

int lb_cache_reader_next(lb_cache_reader *r, lb_cache_message *m) {
    if (!r || !m) return -EINVAL;
    if (r->scanning) return next_scanned(r, m);
    while (r->position < r->end) {
        uint64_t position = r->position;
        uint64_t offset = position % r->region_size, left = r->region_size - offset;
        uint64_t file_offset = LB_CACHE_HEADER_SIZE + offset;
        if (offset >= r->available) { /* truncated away (reported at open) */
            r->position += left;
            continue;
        }
        if (left < FRAME_HEAD) {
            r->position += left;
            continue;
        }
        lb_archive_frame_head f;
        int rc = frame_in_window(r, &f);
        if (rc < 0) return rc;
        if (rc == 2) continue; /* overtaken: r->position moved on */
        if (rc == 0 || (f.kind == LB_CACHE_FRAME_MESSAGE && f.length < MESSAGE_PREFIX)) {
            add_issue(r, file_offset, 8, "a frame head fails its check; the next one is searched");
            r->position += 8;
            continue;
        }
        uint64_t size = FRAME_HEAD + round8(f.length);
        if (f.kind == LB_CACHE_FRAME_WRAP) {
            r->position += left;
            continue;
        }
        r->position += size;
        const uint8_t *body = r->window + (position - r->window_start) + FRAME_HEAD;
        if (lb_crc32c(0, body, f.length) != f.body_crc) {
            add_issue(r, file_offset, size, "a message fails its checksum");
            continue;
        }
        memcpy(&m->sequence, body, 8);
        memcpy(&m->wall_ns, body + 8, 8);
        if (m->sequence < r->next_expected) continue; /* stale: behind a damaged wrap frame */
        m->bytes = body + MESSAGE_PREFIX;
        m->length = f.length - MESSAGE_PREFIX;
        close_gap(r, m->sequence);
        r->next_expected = m->sequence + 1;
        r->last_sequence = m->sequence;
        r->delivered++;
        return 1;
    }
    if (r->gap_open) close_gap(r, header_field_now(r, offsetof(lb_cache_header, head_sequence)));
    return 0;
}

size_t lb_cache_reader_issue_count(const lb_cache_reader *r) { return r ? r->issue_count : 0; }

int lb_cache_reader_issue(const lb_cache_reader *r, size_t index, lb_cache_issue *out) {
    if (!r || !out || index >= r->issue_count) return -EINVAL;
    *out = r->issues[index];
    return 0;
}

int lb_cache_reader_close(lb_cache_reader *r) {
    if (!r) return -EINVAL;
    close(r->fd);
    free(r->buffer);
    free(r->window);
    free(r->issues);
    free(r->scanned);
    free(r);
    return 0;
}
