/* The message cache (logbook_cache.h): one file, a mapped header and a circular region of frames
 * published by atomic stores of the header's tail. WORK IN PROGRESS (issue 13). */
#define _GNU_SOURCE
#include "logbook_cache.h"
#include "logbook_files.h"
#include "logbook_format.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
};

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
static int open_parent(const char *path, char *name, size_t name_size) {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    const char *base = slash ? slash + 1 : path;
    if (!*base || strlen(base) >= name_size) return -EINVAL;
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/name" */
        if (n >= sizeof dir) return -ENAMETOOLONG;
        memcpy(dir, path, n);
        dir[n] = 0;
    } else {
        strcpy(dir, ".");
    }
    strcpy(name, base);
    return lb_dir_open_private(dir, "cache directory", 0);
}

static int create_file(int dir_fd, const char *name, const char *dir_path, uint64_t size) {
    char temporary[NAME_MAX + 1];
    if (snprintf(temporary, sizeof temporary, "%s.new", name) >= (int)sizeof temporary) return -ENAMETOOLONG;
    int fd = lb_file_create_at(dir_fd, temporary, dir_path);
    if (fd < 0) return fd;
    int rc = posix_fallocate(fd, 0, (off_t)size);
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
    close(fd);
    if (rc == 0 && renameat(dir_fd, temporary, dir_fd, name) != 0) rc = errno;
    if (rc == 0 && fsync(dir_fd) != 0) rc = errno;
    if (rc) unlinkat(dir_fd, temporary, 0);
    return -rc;
}

typedef struct kept_message {
    uint64_t sequence;
    int64_t wall_ns;
    uint32_t length;
    uint8_t *bytes;
} kept_message;

/* A cache file of another size: NAME.new of `size` with the newest messages that fit (the rest
 * counted as evicted by overwrite), locked, then renamed over NAME. The new descriptor, or -errno. */
static int rebuild(int old_fd, int dir_fd, const char *name, const char *path, uint64_t size) {
    lb_cache_header old;
    if (pread(old_fd, &old, sizeof old, 0) != (ssize_t)sizeof old) return -EPROTO;
    lb_cache_reader *r;
    int rc = lb_cache_reader_open(path, &r);
    if (rc) return rc;
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
        fd = lb_file_create_at(dir_fd, temporary, path);
        if (fd < 0) rc = fd;
    }
    if (rc == 0 && (rc = lb_file_lock_exclusive(fd)) == 0) rc = -posix_fallocate(fd, 0, (off_t)size);
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
        h.created_wall_ns = old.created_wall_ns;
        h.fixed_crc = fixed_crc(&h);
        uint64_t next = atomic_load(&old.next_sequence);
        atomic_store(&h.tail, used);
        atomic_store(&h.head_sequence, first < count ? list[first].sequence : next);
        atomic_store(&h.next_sequence, next);
        atomic_store(&h.messages, count - first);
        atomic_store(&h.message_bytes, bytes);
        atomic_store(&h.evicted_overwrite, atomic_load(&old.evicted_overwrite) + first);
        atomic_store(&h.evicted_count, atomic_load(&old.evicted_count));
        atomic_store(&h.evicted_age, atomic_load(&old.evicted_age));
        atomic_store(&h.removed, atomic_load(&old.removed));
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
    if (o.durability != LB_CACHE_DURABLE_PROCESS && o.durability != LB_CACHE_DURABLE_POWER) {
        lb_error_detail_set("durability %u is neither process (1) nor power (2)", o.durability);
        return -EINVAL;
    }
    char name[NAME_MAX + 1];
    int dir_fd = open_parent(path, name, sizeof name);
    if (dir_fd < 0) return dir_fd;
    int fd = lb_file_open_at(dir_fd, name, O_RDWR, path);
    if (fd == -ENOENT) {
        int rc = create_file(dir_fd, name, path, o.maximum_bytes);
        fd = rc < 0 ? rc : lb_file_open_at(dir_fd, name, O_RDWR, path);
    }
    if (fd < 0) {
        close(dir_fd);
        return fd;
    }
    int rc = lb_file_lock_exclusive(fd);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) != 0) rc = -errno;
    if (rc == -EWOULDBLOCK) lb_error_detail_set("another process writes to the cache '%s'", path);
    if (rc == 0 && (uint64_t)st.st_size != o.maximum_bytes) {
        /* Another size: keep the newest messages that fit (the reference refuses to write). */
        int rebuilt = rebuild(fd, dir_fd, name, path, o.maximum_bytes);
        if (rebuilt < 0) rc = rebuilt;
        else {
            close(fd);
            fd = rebuilt;
            if (fstat(fd, &st) != 0) rc = -errno;
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
        c->region = c->map + LB_CACHE_HEADER_SIZE;
        c->region_size = c->h->region_size;
        c->o = o;
        const lb_cache_header *h = c->h;
        uint64_t head = atomic_load(&c->h->head), tail = atomic_load(&c->h->tail);
        if (memcmp(h->magic, LB_CACHE_MAGIC, 8) != 0 || h->fixed_crc != fixed_crc(h)) rc = -EPROTO;
        else if (h->format_version != LB_CACHE_FORMAT_VERSION || h->header_size != LB_CACHE_HEADER_SIZE) rc = -EPROTO;
        else if (h->region_size == 0 || h->region_size % 8 || h->region_size > c->map_size - LB_CACHE_HEADER_SIZE) rc = -EPROTO;
        else if (head > tail || tail - head > h->region_size) rc = -EPROTO; /* TODO: recover by scanning */
    }
    if (rc == -EPROTO)
        lb_error_detail_set("'%s' is not a Logbook cache of format version %u, or its header is damaged",
                            path, LB_CACHE_FORMAT_VERSION);
    if (rc) {
        if (c && c->map && c->map != MAP_FAILED) munmap(c->map, (size_t)st.st_size);
        free(c);
        close(fd);
        return rc;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->synced, NULL);
    *out = c;
    return 0;
}

/* Removes the frame at the head (with c->lock held): its counters and the published head. A
 * damaged head moves on by 8 bytes (the next frame is searched as the reader does). */
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
    uint64_t next;
    if (!frame_head_valid(&f) || FRAME_HEAD + round8(f.length) > left) {
        next = head + 8;
    } else if (f.kind == LB_CACHE_FRAME_WRAP) {
        next = head + left;
    } else {
        uint64_t sequence;
        memcpy(&sequence, c->region + offset + FRAME_HEAD, 8);
        next = head + FRAME_HEAD + round8(f.length);
        uint64_t messages = atomic_load_explicit(&h->messages, memory_order_relaxed);
        if (messages) atomic_store_explicit(&h->messages, messages - 1, memory_order_relaxed);
        uint64_t bytes = atomic_load_explicit(&h->message_bytes, memory_order_relaxed);
        uint64_t length = f.length >= MESSAGE_PREFIX ? f.length - MESSAGE_PREFIX : 0;
        atomic_store_explicit(&h->message_bytes, bytes >= length ? bytes - length : 0, memory_order_relaxed);
        atomic_store_explicit(&h->head_sequence, sequence + 1, memory_order_relaxed);
        if (reason) atomic_fetch_add_explicit(reason, 1, memory_order_relaxed);
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
        memcpy(sequence, c->region + offset + FRAME_HEAD, 8);
        memcpy(wall_ns, c->region + offset + FRAME_HEAD + 8, 8);
        return 1;
    }
}

static void apply_limits(lb_cache *c, int64_t now) {
    uint64_t sequence;
    int64_t wall;
    while (c->o.maximum_count && atomic_load_explicit(&c->h->messages, memory_order_relaxed) >= c->o.maximum_count &&
           head_message(c, &sequence, &wall))
        evict_one(c, &c->h->evicted_count);
    while (c->o.maximum_age_ns && head_message(c, &sequence, &wall) && now - wall > (int64_t)c->o.maximum_age_ns)
        evict_one(c, &c->h->evicted_age);
}

/* Makes the region and header durable up to at least `target` (c->lock held; released while
 * syncing). One caller syncs for all: the others wait for it (group commit). */
static int sync_through(lb_cache *c, uint64_t target) {
    while (atomic_load(&c->h->durable_tail) < target) {
        if (c->syncing) {
            pthread_cond_wait(&c->synced, &c->lock);
            continue;
        }
        c->syncing = 1;
        uint64_t upto = atomic_load(&c->h->tail);
        pthread_mutex_unlock(&c->lock);
        int rc = msync(c->map, c->map_size, MS_SYNC) == 0 ? 0 : -errno;
        pthread_mutex_lock(&c->lock);
        c->syncing = 0;
        if (rc == 0 && upto > atomic_load(&c->h->durable_tail)) atomic_store(&c->h->durable_tail, upto);
        pthread_cond_broadcast(&c->synced);
        if (rc) return rc;
    }
    return 0;
}

int lb_cache_append(lb_cache *c, const void *bytes, size_t length, uint64_t *sequence_out) {
    if (!c || (!bytes && length)) return -EINVAL;
    uint64_t need = frame_size(length);
    if (length > UINT32_MAX - MESSAGE_PREFIX || need > c->region_size) return -EMSGSIZE;
    int64_t now = wall_now();
    pthread_mutex_lock(&c->lock);
    lb_cache_header *h = c->h;
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
            pthread_mutex_unlock(&c->lock);
            return -ENOSPC;
        }
        evict_one(c, &h->evicted_overwrite);
    }
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
    if (atomic_load_explicit(&h->messages, memory_order_relaxed) == 0)
        atomic_store_explicit(&h->head_sequence, sequence, memory_order_relaxed);
    atomic_store_explicit(&h->next_sequence, sequence + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->messages, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->message_bytes, length, memory_order_relaxed);
    uint64_t end = tail + skip + need;
    atomic_store_explicit(&h->tail, end, memory_order_release); /* published */
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER ? sync_through(c, end) : 0;
    pthread_mutex_unlock(&c->lock);
    if (rc == 0 && sequence_out) *sequence_out = sequence;
    return rc;
}

int lb_cache_sync(lb_cache *c) {
    if (!c) return -EINVAL;
    pthread_mutex_lock(&c->lock);
    int rc = sync_through(c, atomic_load(&c->h->tail));
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int lb_cache_remove_through(lb_cache *c, uint64_t through) {
    if (!c) return -EINVAL;
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
    return 0;
}

int lb_cache_close(lb_cache *c) {
    if (!c) return -EINVAL;
    int rc = c->o.durability == LB_CACHE_DURABLE_POWER && msync(c->map, c->map_size, MS_SYNC) != 0 ? -errno : 0;
    munmap(c->map, c->map_size);
    close(c->fd); /* releases the lock */
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->synced);
    free(c);
    return rc;
}

/* ---- reader ---- */

struct lb_cache_reader {
    int fd;
    uint64_t region_size, position, end;
    uint8_t *buffer;
    size_t capacity;
    lb_cache_issue *issues;
    size_t issue_count, issue_capacity;
};

static void add_issue(lb_cache_reader *r, uint64_t offset, uint64_t length, const char *what) {
    if (r->issue_count == r->issue_capacity) {
        size_t capacity = r->issue_capacity ? r->issue_capacity * 2 : 8;
        lb_cache_issue *grown = realloc(r->issues, capacity * sizeof *grown);
        if (!grown) return;
        r->issues = grown;
        r->issue_capacity = capacity;
    }
    r->issues[r->issue_count++] = (lb_cache_issue){offset, length, what};
}

int lb_cache_reader_open(const char *path, lb_cache_reader **out) {
    if (!path || !out) return -EINVAL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    lb_cache_header h;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = -errno;
    else if (!S_ISREG(st.st_mode)) rc = -EINVAL;
    else if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) rc = -EPROTO;
    else if (memcmp(h.magic, LB_CACHE_MAGIC, 8) != 0 || h.fixed_crc != fixed_crc(&h) ||
             h.format_version != LB_CACHE_FORMAT_VERSION || h.header_size != LB_CACHE_HEADER_SIZE ||
             h.region_size == 0 || h.region_size % 8 ||
             h.region_size > (uint64_t)st.st_size - LB_CACHE_HEADER_SIZE)
        rc = -EPROTO;
    lb_cache_reader *r = NULL;
    if (rc == 0 && !(r = calloc(1, sizeof *r))) rc = -ENOMEM;
    if (rc) {
        close(fd);
        return rc;
    }
    r->fd = fd;
    r->region_size = h.region_size;
    uint64_t head = atomic_load(&h.head), tail = atomic_load(&h.tail);
    if (head > tail || tail - head > h.region_size) {
        add_issue(r, offsetof(lb_cache_header, head), 16, "the header's head and tail are out of bounds");
        head = tail; /* TODO: recover by scanning the region */
    }
    r->position = head;
    r->end = tail;
    *out = r;
    return 0;
}

/* The header's head now: a frame before it was overwritten while it was read. */
static uint64_t current_head(lb_cache_reader *r) {
    uint64_t head = 0;
    if (pread(r->fd, &head, 8, offsetof(lb_cache_header, head)) != 8) return 0;
    return head;
}

int lb_cache_reader_next(lb_cache_reader *r, lb_cache_message *m) {
    if (!r || !m) return -EINVAL;
    while (r->position < r->end) {
        uint64_t position = r->position;
        uint64_t offset = position % r->region_size, left = r->region_size - offset;
        uint64_t file_offset = LB_CACHE_HEADER_SIZE + offset;
        if (left < FRAME_HEAD) {
            r->position += left;
            continue;
        }
        lb_archive_frame_head f;
        if (pread(r->fd, &f, sizeof f, (off_t)file_offset) != (ssize_t)sizeof f) return -EIO;
        uint64_t size = FRAME_HEAD + round8(f.length);
        if (!frame_head_valid(&f) || size > left || (f.kind == LB_CACHE_FRAME_MESSAGE && f.length < MESSAGE_PREFIX)) {
            if (current_head(r) > position) { r->position = current_head(r); continue; }
            add_issue(r, file_offset, 8, "a frame head fails its check; the next one is searched");
            r->position += 8;
            continue;
        }
        if (f.kind == LB_CACHE_FRAME_WRAP) {
            r->position += left;
            continue;
        }
        if (f.length > r->capacity) {
            uint8_t *grown = realloc(r->buffer, f.length);
            if (!grown) return -ENOMEM;
            r->buffer = grown;
            r->capacity = f.length;
        }
        if (pread(r->fd, r->buffer, f.length, (off_t)(file_offset + FRAME_HEAD)) != (ssize_t)f.length) return -EIO;
        r->position += size;
        if (current_head(r) > position) continue; /* overwritten while it was read */
        if (lb_crc32c(0, r->buffer, f.length) != f.body_crc) {
            add_issue(r, file_offset, size, "a message fails its checksum");
            continue;
        }
        memcpy(&m->sequence, r->buffer, 8);
        memcpy(&m->wall_ns, r->buffer + 8, 8);
        m->bytes = r->buffer + MESSAGE_PREFIX;
        m->length = f.length - MESSAGE_PREFIX;
        return 1;
    }
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
    free(r->issues);
    free(r);
    return 0;
}
