/* The message cache (logbook_cache.h): one file, a mapped header and a circular region of frames
 * published by atomic stores of the header's tail. */
#define _GNU_SOURCE
#include "logbook_cache.h"
#include "logbook_files.h"
#include "logbook_format.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(offsetof(lb_cache_header, fixed_crc) == 60, "the fixed part is 64 bytes");
_Static_assert(sizeof(lb_cache_header) <= LB_CACHE_HEADER_SIZE, "the header fits its page");
/* docs/FORMAT.md, "Cache", draws these offsets */
_Static_assert(offsetof(lb_cache_header, head) == 64 && offsetof(lb_cache_header, next_sequence) == 88 &&
                   offsetof(lb_cache_header, removed) == 136 && offsetof(lb_cache_header, damage_found) == 160 &&
                   offsetof(lb_cache_header, last_frame) == 168 && offsetof(lb_cache_header, appending) == 176 &&
                   sizeof(lb_cache_header) == 184,
               "the header's moving fields are where docs/FORMAT.md says");

#define FRAME_HEAD ((uint64_t)sizeof(lb_archive_frame_head))
#define MESSAGE_PREFIX 16u /* u64 sequence, i64 wall ns */

struct lb_cache {
    int fd;
    uint8_t *map;
    size_t map_size;
    lb_cache_header *h;
    uint8_t *region;
    uint64_t region_size;
    lb_cache_options o;
    pthread_mutex_t lock;
    pthread_cond_t synced;
    int syncing;
    int stepping_over_damage; /* eviction is searching past a damaged frame head */
    int forked;                       /* in a child of the process that opened it: refuse to write */
    lb_cache *next_open;              /* the registry of open caches (for fork) */
    int64_t last_sync_ns;             /* group commit: how long the last sync took, */
    uint64_t last_group, group_start; /* how many appends it covered, and where the next group starts */
};

/* Counters change only with c->lock held: a load and a store, not a locked read-modify-write
 * (readers in other processes load them whole). */
static void add(_Atomic uint64_t *counter, uint64_t amount) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + amount, memory_order_relaxed);
}

static void subtract(_Atomic uint64_t *counter, uint64_t amount) {
    uint64_t value = atomic_load_explicit(counter, memory_order_relaxed);
    atomic_store_explicit(counter, value >= amount ? value - amount : 0, memory_order_relaxed);
}

static uint64_t round8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static uint64_t frame_size(uint64_t length) { return FRAME_HEAD + round8(MESSAGE_PREFIX + length); }

static int64_t wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint32_t fixed_crc(const lb_cache_header *h) {
    return lb_crc32c(0, h, offsetof(lb_cache_header, fixed_crc));
}

static void frame_head_fill(lb_archive_frame_head *head, uint32_t length, uint16_t kind, uint32_t body_crc) {
    head->length = length;
    head->kind = kind;
    head->reserved = 0;
    head->body_crc = body_crc;
    head->head_crc = lb_crc32c(0, head, offsetof(lb_archive_frame_head, head_crc));
}

static int frame_head_valid(const lb_archive_frame_head *head) {
    return head->reserved == 0 &&
           head->head_crc == lb_crc32c(0, head, offsetof(lb_archive_frame_head, head_crc)) &&
           (head->kind == LB_CACHE_FRAME_MESSAGE || head->kind == LB_CACHE_FRAME_WRAP);
}

void lb_cache_options_init(lb_cache_options *o) {
    memset(o, 0, sizeof *o);
    o->maximum_bytes = 1u << 20;
    o->overwrite = 1;
    o->durability = LB_CACHE_DURABLE_PROCESS;
}

/* "dir/name" into the directory (opened private) and the name. */
static int open_parent(const char *path, char dir[PATH_MAX], char *name, size_t name_size) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || strlen(base) >= name_size) return -EINVAL;
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/name" */
        if (n >= PATH_MAX) return -ENAMETOOLONG;
        memcpy(dir, path, n);
        dir[n] = 0;
    } else {
        strcpy(dir, ".");
    }
    strcpy(name, base);
    return lb_dir_open_private(dir, "cache directory", 0);
}

/* Creates NAME.new and locks it: its creator holds the lock until it is renamed. One that exists
 * and is locked is another process's creation under way (-EWOULDBLOCK); one that is not is a
 * creation killed midway, which lb_file_create_at replaces. The descriptor, or -errno. */
static int create_temporary(int dir_fd, const char *temporary, const char *dir_path) {
    int existing = lb_file_open_at(dir_fd, temporary, O_RDWR, dir_path);
    if (existing >= 0) {
        int rc = lb_file_lock_exclusive(existing);
        close(existing);
        if (rc == -EWOULDBLOCK) {
            lb_error_detail_set("another process is creating a cache as '%s/%s'", dir_path, temporary);
            return rc;
        }
    }
    int fd = lb_file_create_at(dir_fd, temporary, dir_path);
    if (fd < 0) return fd;
    int rc = lb_file_lock_exclusive(fd);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

static int create_file(int dir_fd, const char *name, const char *dir_path, uint64_t size) {
    char temporary[NAME_MAX + 1];
    if (snprintf(temporary, sizeof temporary, "%s.new", name) >= (int)sizeof temporary) return -ENAMETOOLONG;
    int fd = create_temporary(dir_fd, temporary, dir_path);
    if (fd < 0) return fd;
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc) lb_error_detail_set("cannot allocate %llu bytes for the cache '%s/%s': %s", (unsigned long long)size, dir_path,
                                name, strerror(rc));
    if (rc == 0) {
        lb_cache_header h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, LB_CACHE_MAGIC, 8);
        h.format_version = LB_CACHE_FORMAT_VERSION;
        h.header_size = LB_CACHE_HEADER_SIZE;
        h.region_size = (size - LB_CACHE_HEADER_SIZE) & ~(uint64_t)7;
        h.created_wall_ns = (uint64_t)wall_now();
        h.fixed_crc = fixed_crc(&h);
        ssize_t written = pwrite(fd, &h, sizeof h, 0);
        rc = written == (ssize_t)sizeof h ? 0 : (written < 0 ? errno : EIO);
    }
    if (rc == 0 && fsync(fd) != 0) rc = errno;
    if (rc == 0 && renameat(dir_fd, temporary, dir_fd, name) != 0) rc = errno;
    if (rc == 0 && fsync(dir_fd) != 0) rc = errno;
    if (rc) unlinkat(dir_fd, temporary, 0);
    close(fd); /* the lock goes once the file has its name */
    return -rc;
}

/* The MESSAGE frame at logical `position` (past padding and a WRAP frame at the region's end),
 * read with pread: 1 with its sequence and the position after it; 0 when it is damaged or not
 * in the file (damage in the region, which proves nothing about the header). */
static int message_at(int fd, uint64_t region, uint64_t available, uint64_t position, uint64_t *sequence, uint64_t *end) {
    for (int hop = 0; hop < 2; hop++) {
        uint64_t offset = position % region, left = region - offset;
        if (left < FRAME_HEAD) {
            position += left;
            continue;
        }
        lb_archive_frame_head f;
        if (offset + FRAME_HEAD > available ||
            pread(fd, &f, sizeof f, (off_t)(LB_CACHE_HEADER_SIZE + offset)) != (ssize_t)sizeof f)
            return 0;
        if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) return 0;
        if (f.kind == LB_CACHE_FRAME_WRAP) {
            position += left;
            continue;
        }
        if (f.length < MESSAGE_PREFIX || offset + FRAME_HEAD + f.length > available) return 0;
        uint8_t *body = malloc(f.length);
        int intact = body && pread(fd, body, f.length, (off_t)(LB_CACHE_HEADER_SIZE + offset + FRAME_HEAD)) == (ssize_t)f.length &&
                     lb_crc32c(0, body, f.length) == f.body_crc;
        if (intact) memcpy(sequence, body, 8);
        free(body);
        *end = position + FRAME_HEAD + round8(f.length);
        return intact;
    }
    return 0;
}

static uint64_t intact_message(const uint8_t *data, uint64_t available, uint64_t offset, uint64_t *sequence);

/* The sequence of the first intact message at or after logical `position` and before `tail`,
 * searched in 8-byte steps (at most 1 MiB on each side of the region's end): 1 if one is found. */
static int first_intact_after(int fd, uint64_t region, uint64_t available, uint64_t position, uint64_t tail, uint64_t *sequence) {
    for (int lap = 0; lap < 2 && position < tail; lap++) {
        uint64_t offset = position % region, span = region - offset;
        if (span > tail - position) span = tail - position;
        if (span > (1u << 20)) span = 1u << 20;
        if (offset >= available) return 0;
        if (span > available - offset) span = available - offset;
        uint8_t *data = malloc(span ? span : 1);
        if (!data) return 0;
        int found = 0;
        if (pread(fd, data, span, (off_t)(LB_CACHE_HEADER_SIZE + offset)) == (ssize_t)span)
            for (uint64_t at = 0; at + FRAME_HEAD <= span && !found; at += 8) found = intact_message(data, span, at, sequence) != 0;
        free(data);
        if (found) return 1;
        position += region - offset; /* on at the region's start */
    }
    return 0;
}

/* Whether `last` is where an append starting at `tail` put its frame: at the tail, or at the
 * region's start when the frame did not fit before its end. */
static int append_position(uint64_t last, uint64_t tail, uint64_t region) {
    return last == tail || (last > tail && last % region == 0 && last - tail == region - tail % region);
}

/* Intact frames around physical offset `at` of the region (searched up to 64 KiB before it):
 * 1 if one straddles it (starts before, ends after), 2 if one ends exactly there (its sequence
 * in `sequence`), else 0. Frames never straddle the region's end. */
static int frame_around(int fd, uint64_t region, uint64_t available, uint64_t at, uint64_t *sequence) {
    if (at > available) return 0;
    uint64_t lo = at > (1u << 16) ? at - (1u << 16) : 0, hi = at + (1u << 16) < available ? at + (1u << 16) : available;
    uint8_t *data = malloc(hi - lo ? hi - lo : 1);
    if (!data) return 0;
    int found = 0;
    if (pread(fd, data, hi - lo, (off_t)(LB_CACHE_HEADER_SIZE + lo)) == (ssize_t)(hi - lo)) {
        for (uint64_t offset = 0; lo + offset < at && !found;) {
            uint64_t size = intact_message(data, hi - lo, offset, sequence);
            if (!size) {
                offset += 8;
                continue;
            }
            if (lo + offset + size > at) found = 1;
            else if (lo + offset + size == at) found = 2;
            offset += size;
        }
    }
    (void)region;
    free(data);
    return found;
}

/* Whether next_sequence fits the newest intact message's `sequence`: 1 when it is the one after
 * it, or the floor a rebuild set above it (docs/FORMAT.md, "Cache"); 2 when it is one more (an
 * append a kill cut short after storing it); else 0. */
static int next_fits(uint64_t sequence, uint64_t next, uint64_t floor) {
    if (next == sequence + 1) return 1;
    if (next == sequence + 2) return 2;
    if (floor > sequence + 1 && next == floor) return 1;
    if (floor > sequence + 1 && next == floor + 1) return 2;
    return 0;
}

/* Whether the header's moving fields (which no checksum covers) agree with each other and with
 * the frames they point at (docs/FORMAT.md, "Cache"). 0: they disagree (damage); 1: they agree;
 * 2: they agree but for one append or eviction a kill cut short, which the writer repairs by
 * recounting. The writer's stores are ordered so that a cut-short state is recognisable: an
 * eviction stores head, the counters, then head_sequence (so the head frame carries
 * head_sequence + 1 until it is done); an append stores next_sequence, the counters, last_frame,
 * then tail. `first_kept`: the lowest sequence a scan of the region should keep (the head frame's,
 * when one is found there), or 0 when nothing says. Damaged frames confirm nothing and contradict
 * nothing, but a position inside an intact frame is a contradiction. */
static int moving_fields_agree(int fd, const lb_cache_header *h, uint64_t region, uint64_t available, uint64_t *first_kept) {
    uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail), last = atomic_load(&h->last_frame);
    uint64_t first = atomic_load(&h->head_sequence), next = atomic_load(&h->next_sequence);
    uint64_t messages = atomic_load(&h->messages), bytes = atomic_load(&h->message_bytes), sequence, end;
    int verdict = 1;
    *first_kept = 0;
    if (head > tail || tail - head > region || (head | tail | last) % 8) return 0; /* frames are 8-aligned */
    if (first > next) return 0;
    /* The counters decide nothing a reader reads: counters that cannot be (more bytes than the
     * frames between head and tail could carry) are recounted by the writer, not damage. */
    int counters_off = messages > next - first || messages > (tail - head) / (FRAME_HEAD + MESSAGE_PREFIX) ||
                       bytes > (tail - head) - messages * (FRAME_HEAD + MESSAGE_PREFIX);
    if (head == tail) {
        *first_kept = first;
        if (first == next) return messages == 0 && bytes == 0 ? 1 : 2;
        return next - first == 1 ? 2 : 0; /* an append into an empty cache cut short */
    }
    /* When they disagree, a scan keeps from the lower of head_sequence and what is found at head:
     * one of the two moved, and keeping a removed message beats losing a kept one. */
    if (message_at(fd, region, available, head, &sequence, &end)) {
        *first_kept = sequence < first ? sequence : first;
        if (sequence == first + 1) verdict = 2; /* an eviction cut short */
        else if (sequence != first) return 0;
        *first_kept = sequence;
    } else if (frame_around(fd, region, available, head % region, &sequence) == 1) {
        *first_kept = sequence < first ? sequence : first; /* head moved into an intact frame */
        return 0;
    } else if (first_intact_after(fd, region, available, head, tail, &sequence)) {
        /* The head frame is damaged (then the next carries head_sequence + 1), or head moved. */
        *first_kept = sequence < first ? sequence : first;
        if (sequence != first + 1) return 0;
    }
    if (last >= head && last < tail) {
        int fits;
        if (message_at(fd, region, available, last, &sequence, &end)) {
            if (end != tail || !(fits = next_fits(sequence, next, h->sequence_floor))) return 0;
            if (fits == 2) verdict = 2; /* an append cut short after next_sequence */
        } else {
            /* last_frame names no intact frame: the frame before the tail speaks instead */
            uint64_t at = tail % region ? tail % region : region;
            int around = frame_around(fd, region, available, at, &sequence);
            if (around != 2 || !(fits = next_fits(sequence, next, h->sequence_floor))) return 0; /* no intact frame ends at the tail */
            if (fits == 2) verdict = 2; /* recounted: next_sequence from the frames */
        }
    } else if (append_position(last, tail, region)) {
        /* an append cut short before its tail: its frame (after a wrap, at the region's start) */
        if (message_at(fd, region, available, last, &sequence, &end) && (sequence + 1 != next || end - head > region)) return 0;
        verdict = 2;
    } else {
        return 0;
    }
    return counters_off && verdict == 1 ? 2 : verdict;
}

static int reader_open(const char *path, int writer_may_be_alive, lb_cache_reader **out);

typedef struct kept_message {
    uint64_t sequence;
    int64_t wall_ns;
    uint32_t length;
    uint8_t *bytes;
} kept_message;

/* A cache file of another size: NAME.new of `size` with the newest messages that fit (the rest
 * counted as evicted by overwrite), locked, then renamed over NAME. The new descriptor, or -errno. */
static int rebuild(const lb_cache_header *old, int fixed_ok, int damaged, int dir_fd, const char *dir_path,
                   const char *name, const char *path, uint64_t size) {
    lb_cache_reader *r;
    int rc = reader_open(path, 0, &r);
    if (rc) return rc;
    uint64_t issues = lb_cache_reader_issue_count(r);
    kept_message *list = NULL;
    size_t count = 0, capacity = 0;
    lb_cache_message m;
    while ((rc = lb_cache_reader_next(r, &m)) == 1) {
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            kept_message *grown = realloc(list, capacity * sizeof *grown);
            if (!grown) { rc = -ENOMEM; break; }
            list = grown;
        }
        uint8_t *copy = malloc(m.length ? m.length : 1);
        if (!copy) { rc = -ENOMEM; break; }
        memcpy(copy, m.bytes, m.length);
        list[count++] = (kept_message){m.sequence, m.wall_ns, m.length, copy};
    }
    lb_cache_reader_close(r);
    int fd = -1;
    char temporary[NAME_MAX + 1];
    if (rc == 0 && snprintf(temporary, sizeof temporary, "%s.new", name) >= (int)sizeof temporary) rc = -ENAMETOOLONG;
    if (rc == 0) {
        fd = create_temporary(dir_fd, temporary, dir_path);
        if (fd < 0) rc = fd;
    }
    if (rc == 0) rc = -posix_fallocate(fd, 0, (off_t)size);
    if (rc && fd >= 0)
        lb_error_detail_set("cannot allocate %llu bytes to rebuild the cache '%s': %s", (unsigned long long)size, path,
                            strerror(-rc));
    if (rc == 0) {
        uint64_t region = (size - LB_CACHE_HEADER_SIZE) & ~(uint64_t)7, used = 0, bytes = 0;
        size_t first = count;
        while (first > 0 && used + frame_size(list[first - 1].length) <= region) {
            used += frame_size(list[first - 1].length);
            bytes += list[first - 1].length;
            first--;
        }
        uint64_t at = 0;
        uint8_t *frame = malloc(frame_size(UINT16_MAX));
        for (size_t i = first; i < count && rc == 0; i++) {
            uint64_t body = MESSAGE_PREFIX + list[i].length, whole = frame_size(list[i].length);
            uint8_t *buffer = whole <= frame_size(UINT16_MAX) ? frame : malloc(whole);
            if (!buffer) { rc = -ENOMEM; break; }
            memset(buffer, 0, whole);
            memcpy(buffer + FRAME_HEAD, &list[i].sequence, 8);
            memcpy(buffer + FRAME_HEAD + 8, &list[i].wall_ns, 8);
            memcpy(buffer + FRAME_HEAD + MESSAGE_PREFIX, list[i].bytes, list[i].length);
            lb_archive_frame_head head;
            frame_head_fill(&head, (uint32_t)body, LB_CACHE_FRAME_MESSAGE, lb_crc32c(0, buffer + FRAME_HEAD, body));
            memcpy(buffer, &head, sizeof head);
            if (pwrite(fd, buffer, whole, (off_t)(LB_CACHE_HEADER_SIZE + at)) != (ssize_t)whole) rc = -EIO;
            if (buffer != frame) free(buffer);
            at += whole;
        }
        free(frame);
        lb_cache_header h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, LB_CACHE_MAGIC, 8);
        h.format_version = LB_CACHE_FORMAT_VERSION;
        h.header_size = LB_CACHE_HEADER_SIZE;
        h.region_size = region;
        h.created_wall_ns = fixed_ok ? old->created_wall_ns : (uint64_t)wall_now();
        /* The sequence goes on past the last message kept, and past the old header's
         * next_sequence: that field is a high-water mark damage to the region or a cut tail
         * cannot lower (a message after the last one kept may have been returned to a caller, who
         * may remove through it; reusing its number would delete a message never sent). Only a
         * value no append could have reached (2^62 or more) is not believed: damage to the header
         * itself, where a jump is all that is lost. */
        uint64_t next = count ? list[count - 1].sequence + 1 : 0;
        /* head_sequence (the sequence after every message removed) and the old sequence_floor are
         * high-water marks too: with next_sequence damaged, an emptied cache would start again at 0 */
        uint64_t hinted[3] = {atomic_load(&old->next_sequence), atomic_load(&old->head_sequence),
                              fixed_ok ? old->sequence_floor : 0};
        for (int i = 0; i < 3; i++)
            if (hinted[i] > next && hinted[i] < (UINT64_C(1) << 62)) next = hinted[i];
        h.sequence_floor = next; /* the next_sequence that may stand above the newest message */
        h.fixed_crc = fixed_crc(&h);
        atomic_store(&h.tail, used);
        atomic_store(&h.last_frame, first < count ? used - frame_size(list[count - 1].length) : 0);
        atomic_store(&h.head_sequence, first < count ? list[first].sequence : next);
        atomic_store(&h.next_sequence, next);
        atomic_store(&h.messages, count - first);
        atomic_store(&h.message_bytes, bytes);
        /* The old counters are believed only from a sound header: moving fields that disagree
         * (or a cut file) may hold anything, so they start again from 0 (`rebuilds` says so). */
        int counted = fixed_ok && !damaged;
        atomic_store(&h.evicted_overwrite, (counted ? atomic_load(&old->evicted_overwrite) : 0) + first);
        atomic_store(&h.evicted_count, counted ? atomic_load(&old->evicted_count) : 0);
        atomic_store(&h.evicted_age, counted ? atomic_load(&old->evicted_age) : 0);
        atomic_store(&h.removed, counted ? atomic_load(&old->removed) : 0);
        atomic_store(&h.rebuilds, (fixed_ok ? atomic_load(&old->rebuilds) : 0) + (damaged ? 1 : 0));
        atomic_store(&h.damage_found, (fixed_ok ? atomic_load(&old->damage_found) : 0) + issues);
        if (rc == 0 && pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) rc = -EIO;
    }
    if (rc == 0 && fsync(fd) != 0) rc = -errno;
    if (rc == 0 && renameat(dir_fd, temporary, dir_fd, name) != 0) rc = -errno;
    if (rc == 0 && fsync(dir_fd) != 0) rc = -errno;
    for (size_t i = 0; i < count; i++) free(list[i].bytes);
    free(list);
    if (rc) {
        if (fd >= 0) {
            close(fd);
            unlinkat(dir_fd, temporary, 0);
        }
        return rc;
    }
    return fd;
}

/* After a kill cut an append or an eviction short (moving_fields_agree said 2): the counters,
 * sequences and last_frame from the frames between head and tail, and a frame written whole but
 * not yet published is published (its append never returned; showing it is allowed, losing a
 * returned one is not). Walks the region once: only after such a kill. */
static void recount(lb_cache *c) {
    lb_cache_header *h = c->h;
    uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail), last = atomic_load(&h->last_frame), sequence, end;
    if (append_position(last, tail, c->region_size) && message_at(c->fd, c->region_size, c->region_size, last, &sequence, &end) &&
        sequence + 1 == atomic_load(&h->next_sequence) && end - head <= c->region_size)
        atomic_store(&h->tail, tail = end);
    uint64_t messages = 0, intact = 0, bytes = 0, first = 0, newest = 0, newest_at = 0;
    for (uint64_t position = head; position < tail;) {
        uint64_t offset = position % c->region_size, left = c->region_size - offset;
        lb_archive_frame_head f;
        if (left < FRAME_HEAD) {
            position += left;
            continue;
        }
        memcpy(&f, c->region + offset, sizeof f);
        if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) {
            position += 8;
            continue;
        }
        if (f.kind == LB_CACHE_FRAME_WRAP) {
            position += left;
            continue;
        }
        const uint8_t *body = c->region + offset + FRAME_HEAD;
        if (f.length >= MESSAGE_PREFIX) { /* counted as eviction will uncount it: by its head */
            if (lb_crc32c(0, body, f.length) == f.body_crc) {
                memcpy(&sequence, body, 8);
                if (!intact) first = sequence;
                if (!intact || sequence > newest) {
                    newest = sequence;
                    newest_at = position;
                }
                intact++;
            }
            messages++;
            bytes += f.length - MESSAGE_PREFIX;
        }
        position += FRAME_HEAD + round8(f.length);
    }
    atomic_store(&h->messages, messages);
    atomic_store(&h->message_bytes, bytes);
    /* next_sequence never goes back: a sequence taken by an append a kill cut short stays unused
     * (a gap), because the same state can follow the removal of a message whose append returned,
     * and a sequence must never name two messages. */
    uint64_t next = atomic_load(&h->next_sequence);
    if (intact) {
        atomic_store(&h->head_sequence, first);
        if (newest + 1 > next) atomic_store(&h->next_sequence, next = newest + 1);
        atomic_store(&h->last_frame, newest_at);
    } else {
        atomic_store(&h->head_sequence, next);
    }
    /* Every sequence published is kept or counted out once. An eviction cut short may have moved
     * head without counting its reason: it is counted under overwrite (the reason is not recorded
     * anywhere else). Only a difference of one, with no sequence left unused, is a kill's. */
    uint64_t out = atomic_load(&h->evicted_overwrite) + atomic_load(&h->evicted_count) + atomic_load(&h->evicted_age) +
                   atomic_load(&h->removed) + atomic_load(&h->damage_found);
    if (intact && next == newest + 1) {
        uint64_t taken = next - messages;
        if (taken == out + 1) add(&h->evicted_overwrite, 1);
        else if (out == taken + 1 && atomic_load(&h->evicted_overwrite)) subtract(&h->evicted_overwrite, 1);
    }
}

/* A frame head at the head that fails its check (bit rot, or a head moved back into another
 * frame's bytes) is stepped over when the writer opens the file, 8 bytes at a time as eviction
 * does, instead of being reported by every reader until eviction reaches it: counted once in
 * damage_found; 1 when it was (the counters are then recounted from the frames). */
static int repair_head(lb_cache *c) {
    lb_cache_header *h = c->h;
    int stepped = 0;
    for (;;) {
        uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail);
        uint64_t offset = head % c->region_size, left = c->region_size - offset;
        if (head >= tail || left < FRAME_HEAD) break; /* empty, or padding before the region's end */
        lb_archive_frame_head f;
        memcpy(&f, c->region + offset, sizeof f);
        if (frame_head_valid(&f) && FRAME_HEAD + round8(f.length) <= left) break;
        atomic_store(&h->head, head + 8);
        stepped = 1;
    }
    if (stepped) add(&h->damage_found, 1);
    return stepped;
}

/* ---- fork: a child inherits the mapping (shared with the parent!) and the file description that
 * holds the writer's lock, so its appends would race the parent's under "one writer". In the child
 * every inherited cache refuses to write (-EBADF) and closing it only frees memory; locks another
 * thread held at fork time are made again. */
static pthread_mutex_t open_caches_lock = PTHREAD_MUTEX_INITIALIZER;
static lb_cache *open_caches;

static void cache_fork_prepare(void) { pthread_mutex_lock(&open_caches_lock); }
static void cache_fork_parent(void) { pthread_mutex_unlock(&open_caches_lock); }

static void cache_fork_child(void) {
    pthread_mutex_init(&open_caches_lock, NULL);
    for (lb_cache *c = open_caches; c; c = c->next_open) {
        c->forked = 1;
        c->syncing = 0;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->synced, NULL); /* destroying the inherited one could wait forever */
    }
}

static pthread_once_t cache_fork_once = PTHREAD_ONCE_INIT;
static void cache_fork_init(void) { pthread_atfork(cache_fork_prepare, cache_fork_parent, cache_fork_child); }

static void register_open(lb_cache *c) {
    pthread_once(&cache_fork_once, cache_fork_init);
    pthread_mutex_lock(&open_caches_lock);
    c->next_open = open_caches;
    open_caches = c;
    pthread_mutex_unlock(&open_caches_lock);
}

static void unregister_open(lb_cache *c) {
    pthread_mutex_lock(&open_caches_lock);
    lb_cache **link = &open_caches;
    while (*link && *link != c) link = &(*link)->next_open;
    if (*link) *link = c->next_open;
    pthread_mutex_unlock(&open_caches_lock);
}

int lb_cache_open(const char *path, const lb_cache_options *options, lb_cache **out) {
    if (!path || !out) return -EINVAL;
    lb_error_detail_clear();
    lb_cache_options o;
    if (options) o = *options; else lb_cache_options_init(&o);
    if (o.maximum_bytes < LB_CACHE_MINIMUM_BYTES) {
        lb_error_detail_set("maximum bytes %llu is under the minimum of %u", (unsigned long long)o.maximum_bytes,
                            LB_CACHE_MINIMUM_BYTES);
        return -EINVAL;
    }
    if (o.maximum_bytes > (uint64_t)INT64_MAX) {
        lb_error_detail_set("maximum bytes %llu is over the maximum of %lld", (unsigned long long)o.maximum_bytes,
                            (long long)INT64_MAX);
        return -EINVAL;
    }
    if (o.durability != LB_CACHE_DURABLE_PROCESS && o.durability != LB_CACHE_DURABLE_POWER) {
        lb_error_detail_set("durability %u is neither process (1) nor power (2)", o.durability);
        return -EINVAL;
    }
    char name[NAME_MAX + 1];
    char dir[PATH_MAX];
    int dir_fd = open_parent(path, dir, name, sizeof name);
    if (dir_fd < 0) return dir_fd;
    int fd = -ENOENT, rc = 0;
    struct stat st;
    /* Open and lock the file the name names: a writer that rebuilt the file meanwhile renamed
     * another one over it, and a lock on the old one would write to a file nobody reads. */
    for (int attempt = 0; attempt < 4; attempt++) {
        fd = lb_file_open_at(dir_fd, name, O_RDWR, dir);
        if (fd == -ENOENT) {
            rc = create_file(dir_fd, name, dir, o.maximum_bytes);
            fd = rc < 0 ? rc : lb_file_open_at(dir_fd, name, O_RDWR, dir);
        }
        if (fd < 0) {
            close(dir_fd);
            return fd;
        }
        rc = lb_file_lock_exclusive(fd);
        if (rc == 0 && fstat(fd, &st) != 0) rc = -errno;
        struct stat named;
        if (rc == 0 && fstatat(dir_fd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
            (named.st_ino != st.st_ino || named.st_dev != st.st_dev)) {
            close(fd);
            fd = -ENOENT;
            continue;
        }
        break;
    }
    if (fd < 0) {
        close(dir_fd);
        return -EAGAIN;
    }
    if (rc == -EWOULDBLOCK) lb_error_detail_set("another process writes to the cache '%s'", path);
    lb_cache_header old;
    memset(&old, 0, sizeof old);
    ssize_t got = rc == 0 ? pread(fd, &old, sizeof old, 0) : 0;
    int cut_short = 0;
    if (rc == 0 && (got < 8 || memcmp(old.magic, LB_CACHE_MAGIC, 8) != 0)) {
        lb_error_detail_set("'%s' is not a Logbook cache (it is left as it is)", path);
        rc = -EPROTO;
    }
    int fixed_ok = got == (ssize_t)sizeof old && old.fixed_crc == fixed_crc(&old);
    if (rc == 0 && fixed_ok && old.format_version != LB_CACHE_FORMAT_VERSION) {
        lb_error_detail_set("'%s' is a cache of format version %u; this library writes version %u", path,
                            old.format_version, LB_CACHE_FORMAT_VERSION);
        rc = -EPROTO;
    } else if (rc == 0 && fixed_ok && old.header_size != LB_CACHE_HEADER_SIZE) {
        lb_error_detail_set("'%s' has a header of %u bytes; a cache of format version %u has %u (it is "
                            "left as it is)", path, old.header_size, LB_CACHE_FORMAT_VERSION,
                            LB_CACHE_HEADER_SIZE);
        rc = -EPROTO;
    }
    if (rc == 0) {
        uint64_t region = (uint64_t)st.st_size > LB_CACHE_HEADER_SIZE ? ((uint64_t)st.st_size - LB_CACHE_HEADER_SIZE) & ~(uint64_t)7 : 0;
        uint64_t first_kept;
        int agree = fixed_ok && old.region_size == region ? moving_fields_agree(fd, &old, region, region, &first_kept) : 0;
        int damaged = agree == 0;
        cut_short = agree == 2;
        if (damaged || (uint64_t)st.st_size != o.maximum_bytes) {
            /* Another size: keep the newest messages that fit (the reference refuses to write).
             * Damaged: keep what a scan finds (the reference says to delete the file). */
            int rebuilt = rebuild(&old, fixed_ok, damaged, dir_fd, dir, name, path, o.maximum_bytes);
            if (rebuilt < 0) rc = rebuilt;
            else {
                close(fd);
                fd = rebuilt;
                if (fstat(fd, &st) != 0) rc = -errno;
            }
        }
    }
    close(dir_fd);
    lb_cache *c = NULL;
    if (rc == 0 && !(c = calloc(1, sizeof *c))) rc = -ENOMEM;
    if (rc == 0) {
        c->map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (c->map == MAP_FAILED) rc = -errno;
    }
    if (rc == 0) {
        c->fd = fd;
        c->map_size = (size_t)st.st_size;
        c->h = (lb_cache_header *)c->map;
        c->group_start = atomic_load(&c->h->next_sequence);
        c->region = c->map + LB_CACHE_HEADER_SIZE;
        c->region_size = c->h->region_size;
        c->o = o;
        const lb_cache_header *h = c->h;
        uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail);
        /* Checked above or just rebuilt; checked again, as it is now mapped. */
        if (memcmp(h->magic, LB_CACHE_MAGIC, 8) != 0 || h->fixed_crc != fixed_crc(h) || h->region_size == 0 ||
            h->region_size % 8 || h->region_size > c->map_size - LB_CACHE_HEADER_SIZE || head > tail ||
            tail - head > h->region_size) {
            lb_error_detail_set("the cache '%s' changed while it was opened", path);
            rc = -EPROTO;
        }
    }
    if (rc) {
        if (c && c->map && c->map != MAP_FAILED) munmap(c->map, (size_t)st.st_size);
        free(c);
        close(fd);
        return rc;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->synced, NULL);
    if (repair_head(c) || cut_short) recount(c);
    atomic_store(&c->h->appending, 0); /* a killed writer's append left it set */
    register_open(c);
    *out = c;
    return 0;
}

/* Removes the frame at the head (with c->lock held): its counters and the published head. A
 * damaged head moves on by 8 bytes (the next frame is searched as the reader does); a message's
 * sequence is believed only when its body passes its checksum, and the messages a damaged frame
 * head hid are known from the gap in sequences after it (they are contiguous) and counted in
 * damage_found. (Gaps alone prove nothing: a rebuild keeps only the intact messages.) */
static void evict_one(lb_cache *c, _Atomic uint64_t *reason) {
    lb_cache_header *h = c->h;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t offset = head % c->region_size, left = c->region_size - offset;
    if (left < FRAME_HEAD) {
        atomic_store_explicit(&h->head, head + left, memory_order_release);
        return;
    }
    lb_archive_frame_head f;
    memcpy(&f, c->region + offset, sizeof f);
    uint64_t next, first = atomic_load_explicit(&h->head_sequence, memory_order_relaxed);
    if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) {
        next = head + 8;
        c->stepping_over_damage = 1;
    } else if (f.kind == LB_CACHE_FRAME_WRAP) {
        next = head + left;
    } else {
        const uint8_t *body = c->region + offset + FRAME_HEAD;
        next = head + FRAME_HEAD + round8(f.length);
        uint64_t sequence = first, stored = 0;
        if (f.length >= MESSAGE_PREFIX) memcpy(&stored, body, 8);
        /* The expected sequence under an intact head is believed without its checksum (the common
         * case, on every append of a full cache); anything else must pass it. */
        int intact = f.length >= MESSAGE_PREFIX && (stored == first || lb_crc32c(0, body, f.length) == f.body_crc);
        if (intact) sequence = stored;
        if (intact && sequence < first) { /* stale: left from before a wrap, behind damage */
            atomic_store_explicit(&h->head, next, memory_order_release);
            return;
        }
        /* head first, the counters, head_sequence last (each store after the one before, also
         * for the compiler): a kill in between leaves the head frame at head_sequence + 1, which
         * the next open recognises and recounts (docs/FORMAT.md, "Cache"). */
        atomic_store_explicit(&h->head, next, memory_order_release);
        atomic_thread_fence(memory_order_release);
        if (c->stepping_over_damage && sequence > first) { /* the damaged heads hid these */
            subtract(&h->messages, sequence - first);
            add(&h->damage_found, sequence - first);
        }
        c->stepping_over_damage = 0;
        subtract(&h->messages, 1);
        subtract(&h->message_bytes, f.length >= MESSAGE_PREFIX ? f.length - MESSAGE_PREFIX : 0);
        if (!intact) add(&h->damage_found, 1);
        else if (reason) add(reason, 1);
        /* emptied: the next message is the first kept (the sequence may jump there: a rebuild's
         * sequence_floor, or a number a kill left unused) */
        uint64_t following = atomic_load_explicit(&h->next_sequence, memory_order_relaxed);
        if (next != atomic_load_explicit(&h->tail, memory_order_relaxed) || following < sequence + 1) following = sequence + 1;
        atomic_store_explicit(&h->head_sequence, following, memory_order_release);
        return;
    }
    atomic_store_explicit(&h->head, next, memory_order_release);
}

/* The frame at the head, if it is a message: its sequence and time. */
static int head_message(lb_cache *c, uint64_t *sequence, int64_t *wall_ns) {
    lb_cache_header *h = c->h;
    for (;;) {
        uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
        if (head >= tail) return 0;
        uint64_t offset = head % c->region_size, left = c->region_size - offset;
        lb_archive_frame_head f;
        if (left >= FRAME_HEAD) memcpy(&f, c->region + offset, sizeof f);
        if (left < FRAME_HEAD || !frame_head_valid(&f) || f.kind == LB_CACHE_FRAME_WRAP) {
            evict_one(c, NULL); /* padding, a wrap, or damage: nothing to count */
            continue;
        }
        const uint8_t *body = c->region + offset + FRAME_HEAD;
        if (f.length < MESSAGE_PREFIX || lb_crc32c(0, body, f.length) != f.body_crc) {
            evict_one(c, NULL); /* damaged: counted there */
            continue;
        }
        memcpy(sequence, body, 8);
        memcpy(wall_ns, body + 8, 8);
        if (*sequence < atomic_load_explicit(&h->head_sequence, memory_order_relaxed)) {
            evict_one(c, NULL); /* stale, behind damage */
            continue;
        }
        return 1;
    }
}

static void apply_limits(lb_cache *c, int64_t now) {
    uint64_t sequence;
    int64_t wall;
    while (c->o.maximum_count && atomic_load_explicit(&c->h->messages, memory_order_relaxed) >= c->o.maximum_count &&
           head_message(c, &sequence, &wall))
        evict_one(c, &c->h->evicted_count);
    /* unsigned: a limit past INT64_MAX is no limit, and a clock set back makes nothing old */
    while (c->o.maximum_age_ns && head_message(c, &sequence, &wall) && now > wall &&
           (uint64_t)now - (uint64_t)wall > c->o.maximum_age_ns)
        evict_one(c, &c->h->evicted_age);
}

static int64_t monotonic_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Makes the region and header durable up to at least `target` (c->lock held; released while
 * syncing). Group commit: one caller syncs for all, the others wait for it. A thread whose append
 * a sync covered comes back only after that sync, so a leader that synced at once would catch
 * about half of the appenders; instead, when the last sync covered a group, the leader first
 * lets as many appends arrive (waiting at most half the last sync's time), as databases do with a
 * commit delay. Alone, an appender never waits. */
static int sync_through(lb_cache *c, uint64_t target) {
    while (atomic_load(&c->h->durable_tail) < target) {
        if (c->syncing) {
            pthread_cond_wait(&c->synced, &c->lock);
            continue;
        }
        c->syncing = 1;
        if (c->last_group > 1) {
            uint64_t start = atomic_load_explicit(&c->h->next_sequence, memory_order_relaxed);
            int64_t begin = monotonic_now(), budget = c->last_sync_ns / 2 < 200000 ? c->last_sync_ns / 2 : 200000;
            pthread_mutex_unlock(&c->lock);
            while (atomic_load_explicit(&c->h->next_sequence, memory_order_relaxed) - start < c->last_group - 1 &&
                   monotonic_now() - begin < budget)
                sched_yield();
            pthread_mutex_lock(&c->lock);
        }
        uint64_t upto = atomic_load(&c->h->tail), group_end = atomic_load(&c->h->next_sequence);
        pthread_mutex_unlock(&c->lock);
        int64_t begin = monotonic_now();
        int rc = msync(c->map, c->map_size, MS_SYNC) == 0 ? 0 : -errno;
        int64_t took = monotonic_now() - begin;
        pthread_mutex_lock(&c->lock);
        c->syncing = 0;
        c->last_sync_ns = took;
        c->last_group = group_end - c->group_start;
        c->group_start = group_end;
        if (rc == 0 && upto > atomic_load(&c->h->durable_tail)) atomic_store(&c->h->durable_tail, upto);
        pthread_cond_broadcast(&c->synced);
        if (rc) return rc;
    }
    return 0;
}

int lb_cache_append(lb_cache *c, const void *bytes, size_t length, uint64_t *sequence_out) {
    if (!c || (!bytes && length)) return -EINVAL;
    if (c->forked) return -EBADF; /* a child of the writer: docs above */
    uint64_t need = frame_size(length);
    if (length > UINT32_MAX - MESSAGE_PREFIX || need > c->region_size) return -EMSGSIZE;
    int64_t now = wall_now();
    pthread_mutex_lock(&c->lock);
    lb_cache_header *h = c->h;
    atomic_store_explicit(&h->appending, 1, memory_order_relaxed); /* before any eviction's release store */
    apply_limits(c, now);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    uint64_t offset = tail % c->region_size, left = c->region_size - offset;
    uint64_t skip = need > left ? left : 0;
    for (;;) {
        uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
        if (c->region_size - (tail - head) >= skip + need) break;
        if (head == tail) { /* empty but the frame would straddle the end: start at the region's start */
            atomic_store_explicit(&h->head, tail + skip, memory_order_release);
            atomic_store_explicit(&h->tail, tail + skip, memory_order_release);
            tail += skip;
            skip = 0;
            continue;
        }
        if (!c->o.overwrite) {
            atomic_store_explicit(&h->appending, 0, memory_order_release);
            pthread_mutex_unlock(&c->lock);
            return -ENOSPC;
        }
        evict_one(c, &h->evicted_overwrite);
    }
    /* The head moved past what this append overwrites before a byte of it is written: a reader
     * that copied a frame and then found the head no further knows its copy is the frame. */
    atomic_thread_fence(memory_order_release);
    if (skip >= FRAME_HEAD) {
        lb_archive_frame_head wrap;
        frame_head_fill(&wrap, (uint32_t)(skip - FRAME_HEAD), LB_CACHE_FRAME_WRAP, 0);
        memcpy(c->region + offset, &wrap, sizeof wrap);
    }
    uint64_t at = (tail + skip) % c->region_size;
    uint64_t sequence = atomic_load_explicit(&h->next_sequence, memory_order_relaxed);
    uint8_t *frame = c->region + at;
    memcpy(frame + FRAME_HEAD, &sequence, 8);
    memcpy(frame + FRAME_HEAD + 8, &now, 8);
    if (length) memcpy(frame + FRAME_HEAD + MESSAGE_PREFIX, bytes, length);
    uint64_t body = MESSAGE_PREFIX + length;
    memset(frame + FRAME_HEAD + body, 0, round8(body) - body);
    lb_archive_frame_head head;
    frame_head_fill(&head, (uint32_t)body, LB_CACHE_FRAME_MESSAGE, lb_crc32c(0, frame + FRAME_HEAD, body));
    memcpy(frame, &head, sizeof head);
    uint64_t kept_from = atomic_load_explicit(&h->head, memory_order_relaxed);
    if (kept_from == tail || kept_from == tail + skip) /* empty (a WRAP frame first): by position, not by a counter */
        atomic_store_explicit(&h->head_sequence, sequence, memory_order_relaxed);
    atomic_store_explicit(&h->next_sequence, sequence + 1, memory_order_relaxed);
    add(&h->messages, 1);
    add(&h->message_bytes, length);
    uint64_t end = tail + skip + need;
    atomic_store_explicit(&h->last_frame, tail + skip, memory_order_release); /* after the counters */
    atomic_store_explicit(&h->tail, end, memory_order_release); /* published */
    atomic_store_explicit(&h->appending, 0, memory_order_release);
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER ? sync_through(c, end) : 0;
    pthread_mutex_unlock(&c->lock);
    if (rc == 0 && sequence_out) *sequence_out = sequence;
    return rc;
}

int lb_cache_sync(lb_cache *c) {
    if (!c) return -EINVAL;
    if (c->forked) return -EBADF;
    pthread_mutex_lock(&c->lock);
    int rc = sync_through(c, atomic_load(&c->h->tail));
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int lb_cache_remove_through(lb_cache *c, uint64_t through) {
    if (!c) return -EINVAL;
    if (c->forked) return -EBADF;
    pthread_mutex_lock(&c->lock);
    uint64_t sequence;
    int64_t wall;
    while (head_message(c, &sequence, &wall) && sequence <= through) evict_one(c, &c->h->removed);
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER ? sync_through(c, atomic_load(&c->h->tail)) : 0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int lb_cache_stats_get(lb_cache *c, lb_cache_stats *out) {
    if (!c || !out) return -EINVAL;
    const lb_cache_header *h = c->h;
    out->messages = atomic_load(&h->messages);
    out->message_bytes = atomic_load(&h->message_bytes);
    out->head_sequence = atomic_load(&h->head_sequence);
    out->next_sequence = atomic_load(&h->next_sequence);
    out->evicted_overwrite = atomic_load(&h->evicted_overwrite);
    out->evicted_count = atomic_load(&h->evicted_count);
    out->evicted_age = atomic_load(&h->evicted_age);
    out->removed = atomic_load(&h->removed);
    out->region_size = c->region_size;
    out->used_bytes = atomic_load(&h->tail) - atomic_load(&h->head);
    out->rebuilds = atomic_load(&h->rebuilds);
    out->damage_found = atomic_load(&h->damage_found);
    return 0;
}

int lb_cache_close(lb_cache *c) {
    if (!c) return -EINVAL;
    unregister_open(c);
    int rc = !c->forked && c->o.durability == LB_CACHE_DURABLE_POWER && msync(c->map, c->map_size, MS_SYNC) != 0 ? -errno : 0;
    munmap(c->map, c->map_size);
    close(c->fd); /* releases the lock (in a forked child, the parent's descriptor keeps it) */
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->synced);
    free(c);
    return rc;
}

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

/* A frame at `offset` of `data` (the region, `available` bytes): its whole size if it is an intact
 * message (head and body checked), else 0. */
static uint64_t intact_message(const uint8_t *data, uint64_t available, uint64_t offset, uint64_t *sequence) {
    if (available - offset < FRAME_HEAD) return 0;
    lb_archive_frame_head f;
    memcpy(&f, data + offset, sizeof f);
    uint64_t size = FRAME_HEAD + round8(f.length);
    if (!frame_head_valid(&f) || f.kind != LB_CACHE_FRAME_MESSAGE || f.length < MESSAGE_PREFIX ||
        size > available - offset || lb_crc32c(0, data + offset + FRAME_HEAD, f.length) != f.body_crc)
        return 0;
    memcpy(sequence, data + offset + FRAME_HEAD, 8);
    return size;
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
        uint64_t sequence, size = intact_message(data, got, offset, &sequence);
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

static int reader_open(const char *path, int writer_may_be_alive, lb_cache_reader **out);

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

int lb_cache_reader_open(const char *path, lb_cache_reader **out) { return reader_open(path, 1, out); }

/* `writer_may_be_alive` 0: the caller is the writer, rebuilding: the lock it holds is no sign of
 * a live writer keeping the header whole. */
static int reader_open(const char *path, int writer_may_be_alive, lb_cache_reader **out) {
    if (!path || !out) return -EINVAL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    lb_cache_header h;
    memset(&h, 0, sizeof h);
    int rc = 0;
    ssize_t got = 0;
    if (fstat(fd, &st) != 0) rc = -errno;
    else if (!S_ISREG(st.st_mode)) {
        lb_error_detail_set("'%s' is not a regular file", path);
        rc = -EINVAL;
    } else if ((got = pread(fd, &h, sizeof h, 0)) < 8 || memcmp(h.magic, LB_CACHE_MAGIC, 8) != 0) {
        lb_error_detail_set("'%s' is not a Logbook cache", path);
        rc = -EPROTO;
    } else if (got == (ssize_t)sizeof h && h.fixed_crc == fixed_crc(&h) &&
               h.format_version != LB_CACHE_FORMAT_VERSION) {
        lb_error_detail_set("'%s' is a cache of format version %u; this library reads version %u", path,
                            h.format_version, LB_CACHE_FORMAT_VERSION);
        rc = -EPROTO;
    } else if (got == (ssize_t)sizeof h && h.fixed_crc == fixed_crc(&h) &&
               h.header_size != LB_CACHE_HEADER_SIZE) {
        lb_error_detail_set("'%s' has a header of %u bytes; a cache of format version %u has %u", path,
                            h.header_size, LB_CACHE_FORMAT_VERSION, LB_CACHE_HEADER_SIZE);
        rc = -EPROTO;
    }
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
    uint64_t head = atomic_load(&h.head), tail = atomic_load(&h.tail);
    uint64_t first_kept = 0;
    int agree = 0;
    for (int look = 0; look < 2 && !agree; look++) {
        if (fixed_ok && writer_may_be_alive && writer_is_alive(fd)) {
            /* A writer holds the file: it checked the header when it opened it (rebuilding it if
             * need be) and keeps it whole, but a copy made while it appends mixes old and new
             * fields. So only the positions, read one at a time, tail first: the head read after
             * it is no older, so the pair is never more than the region apart. */
            for (int attempt = 0; attempt < 16 && !agree; attempt++) {
                if (pread(fd, &tail, 8, offsetof(lb_cache_header, tail)) != 8 ||
                    pread(fd, &head, 8, offsetof(lb_cache_header, head)) != 8)
                    break;
                agree = head <= tail && tail - head <= r->region_size;
            }
            if (agree) wait_for_append(fd, &head, &tail);
            first_kept = atomic_load(&h.head_sequence);
            break;
        }
        if (r->region_size) agree = moving_fields_agree(fd, &h, r->region_size, r->available, &first_kept);
        /* Disagreeing, it may have been a writer opening (and repairing) the file meanwhile: look
         * again, once, with a fresh copy. */
        if (!agree && fixed_ok && look == 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.fixed_crc == fixed_crc(&h)) {
            head = atomic_load(&h.head);
            tail = atomic_load(&h.tail);
            continue;
        }
        break;
    }
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
    if (agree == 2 && append_position(last, tail, r->region_size) &&
        message_at(fd, r->region_size, r->available, last, &sequence, &end) && sequence + 1 == atomic_load(&h.next_sequence) &&
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
