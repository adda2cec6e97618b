/* cache.c — the message cache (logbook_cache.h): one file, a mapped header and a circular region
 * of frames published by atomic stores of the header's tail. Opening it: the file made or checked,
 * rebuilt at another size or after damage, repaired after a kill; fork safety. */
#define _GNU_SOURCE
#include "cache_internal.h"

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


typedef struct kept_message {
    uint64_t sequence;
    int64_t wall_ns;
    uint32_t length;
    uint8_t *bytes;
} kept_message;

/* Every message a reader of `path` finds (copied), oldest first; the number of issues it found in
 * *issues. 0 or -errno (the list then holds what was copied). */
static int collect_messages(const char *path, kept_message **list, size_t *count, uint64_t *issues) {
    lb_cache_reader *r;
    int rc = lb_cc_reader_open(path, 0, &r);
    if (rc) return rc;
    *issues = lb_cache_reader_issue_count(r);
    size_t capacity = 0;
    lb_cache_message m;
    while ((rc = lb_cache_reader_next(r, &m)) == 1) {
        if (*count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            kept_message *grown = realloc(*list, capacity * sizeof *grown);
            if (!grown) { rc = -ENOMEM; break; }
            *list = grown;
        }
        uint8_t *copy = malloc(m.length ? m.length : 1);
        if (!copy) { rc = -ENOMEM; break; }
        memcpy(copy, m.bytes, m.length);
        (*list)[(*count)++] = (kept_message){m.sequence, m.wall_ns, m.length, copy};
    }
    lb_cache_reader_close(r);
    return rc;
}

/* Writes list[first..count) as MESSAGE frames from the start of fd's region. 0 or -errno. */
static int write_kept_frames(int fd, const kept_message *list, size_t first, size_t count) {
    int rc = 0;
    uint64_t at = 0;
    uint8_t *frame = malloc(frame_size(UINT16_MAX));
    for (size_t i = first; i < count && rc == 0; i++) {
        uint64_t body = MESSAGE_PREFIX + list[i].length, whole = frame_size(list[i].length);
        uint8_t *buffer = frame && whole <= frame_size(UINT16_MAX) ? frame : malloc(whole);
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
    return rc;
}

/* The header of a rebuilt cache (region `region` bytes) that holds list[first..count) in its first
 * `used` bytes (`bytes` of messages), with what the old header says that can still be believed. */
static void rebuilt_header(lb_cache_header *h, const lb_cache_header *old, int fixed_ok, int damaged,
                           uint64_t issues, uint64_t region, const kept_message *list, size_t first,
                           size_t count, uint64_t used, uint64_t bytes) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, LB_CACHE_MAGIC, 8);
    h->format_version = LB_CACHE_FORMAT_VERSION;
    h->header_size = LB_CACHE_HEADER_SIZE;
    h->region_size = region;
    h->created_wall_ns = fixed_ok ? old->created_wall_ns : (uint64_t)wall_now();
    /* The sequence goes on past the last message kept, and past the old header's next_sequence:
     * that field is a high-water mark damage to the region or a cut tail cannot lower (a message
     * after the last one kept may have been returned to a caller, who may remove through it;
     * reusing its number would delete a message never sent). Only a value no append could have
     * reached (2^62 or more) is not believed: damage to the header itself, where a jump is all
     * that is lost. */
    uint64_t next = count ? list[count - 1].sequence + 1 : 0;
    /* head_sequence (the sequence after every message removed) and the old sequence_floor are
     * high-water marks too: with next_sequence damaged, an emptied cache would start again at 0 */
    uint64_t hinted[3] = {atomic_load(&old->next_sequence), atomic_load(&old->head_sequence),
                          fixed_ok ? old->sequence_floor : 0};
    for (int i = 0; i < 3; i++)
        if (hinted[i] > next && hinted[i] < (UINT64_C(1) << 62)) next = hinted[i];
    h->sequence_floor = next; /* the next_sequence that may stand above the newest message */
    h->fixed_crc = fixed_crc(h);
    atomic_store(&h->tail, used);
    atomic_store(&h->last_frame, first < count ? used - frame_size(list[count - 1].length) : 0);
    atomic_store(&h->head_sequence, first < count ? list[first].sequence : next);
    atomic_store(&h->next_sequence, next);
    atomic_store(&h->messages, count - first);
    atomic_store(&h->message_bytes, bytes);
    /* The old counters are believed only from a sound header: moving fields that disagree (or a
     * cut file) may hold anything, so they start again from 0 (`rebuilds` says so). The damage
     * counters are moving fields too: a header whose fixed part is sound but whose moving fields
     * are damaged kept them, random values included (found by the fourth outside test). */
    int counted = fixed_ok && !damaged;
    atomic_store(&h->evicted_overwrite, (counted ? atomic_load(&old->evicted_overwrite) : 0) + first);
    atomic_store(&h->evicted_count, counted ? atomic_load(&old->evicted_count) : 0);
    atomic_store(&h->evicted_age, counted ? atomic_load(&old->evicted_age) : 0);
    atomic_store(&h->removed, counted ? atomic_load(&old->removed) : 0);
    atomic_store(&h->rebuilds, (counted ? atomic_load(&old->rebuilds) : 0) + (damaged ? 1 : 0));
    atomic_store(&h->damage_found, (counted ? atomic_load(&old->damage_found) : 0) + issues);
}

/* A cache file of another size: NAME.new of `size` with the newest messages that fit (the rest
 * counted as evicted by overwrite), locked, then renamed over NAME. The new descriptor, or -errno. */
static int rebuild(const lb_cache_header *old, int fixed_ok, int damaged, int dir_fd, const char *dir_path,
                   const char *name, const char *path, uint64_t size) {
    kept_message *list = NULL;
    size_t count = 0;
    uint64_t issues = 0;
    int rc = collect_messages(path, &list, &count, &issues);
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
        /* The newest messages that fit. */
        uint64_t region = (size - LB_CACHE_HEADER_SIZE) & ~(uint64_t)7, used = 0, bytes = 0;
        size_t first = count;
        while (first > 0 && used + frame_size(list[first - 1].length) <= region) {
            used += frame_size(list[first - 1].length);
            bytes += list[first - 1].length;
            first--;
        }
        rc = write_kept_frames(fd, list, first, count);
        lb_cache_header h;
        rebuilt_header(&h, old, fixed_ok, damaged, issues, region, list, first, count, used, bytes);
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
    if (lb_cc_append_position(last, tail, c->region_size) && lb_cc_message_at(c->fd, c->region_size, c->region_size, last, &sequence, &end) &&
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

void lb_cc_unregister_open(lb_cache *c) {
    pthread_mutex_lock(&open_caches_lock);
    lb_cache **link = &open_caches;
    while (*link && *link != c) link = &(*link)->next_open;
    if (*link) *link = c->next_open;
    pthread_mutex_unlock(&open_caches_lock);
}

static int valid_cache_options(const lb_cache_options *o) {
    if (o->maximum_bytes < LB_CACHE_MINIMUM_BYTES) {
        lb_error_detail_set("maximum bytes %llu is under the minimum of %u", (unsigned long long)o->maximum_bytes,
                            LB_CACHE_MINIMUM_BYTES);
        return 0;
    }
    if (o->maximum_bytes > (uint64_t)INT64_MAX) {
        lb_error_detail_set("maximum bytes %llu is over the maximum of %lld", (unsigned long long)o->maximum_bytes,
                            (long long)INT64_MAX);
        return 0;
    }
    if (o->durability != LB_CACHE_DURABLE_PROCESS && o->durability != LB_CACHE_DURABLE_POWER) {
        lb_error_detail_set("durability %u is neither process (1) nor power (2)", o->durability);
        return 0;
    }
    return 1;
}

/* Opens and locks the file `name` names (created at `size` when absent): a writer that rebuilt the
 * file meanwhile renamed another one over it, and a lock on the old one would write to a file
 * nobody reads. A file another name reaches (a hard link planted as the cache) is never written:
 * -EMLINK with a detail naming it. The descriptor (with *rc the lock's result: -EWOULDBLOCK when
 * another process writes) or -errno. */
static int open_locked(int dir_fd, const char *name, const char *dir, uint64_t size, struct stat *st, int *rc) {
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = lb_file_open_own_at(dir_fd, name, O_RDWR, dir);
        if (fd == -ENOENT) {
            *rc = create_file(dir_fd, name, dir, size);
            fd = *rc < 0 ? *rc : lb_file_open_own_at(dir_fd, name, O_RDWR, dir);
        }
        if (fd < 0) return fd;
        *rc = lb_file_lock_exclusive(fd);
        if (*rc == 0 && fstat(fd, st) != 0) *rc = -errno;
        struct stat named;
        if (*rc == 0 && fstatat(dir_fd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
            (named.st_ino != st->st_ino || named.st_dev != st->st_dev)) {
            close(fd);
            continue;
        }
        return fd;
    }
    return -EAGAIN;
}

/* The header of the locked file fd: read into *old, its fixed part checked (*fixed_ok). 0, or
 * -EPROTO for a file that is not a cache of this format (said in the error detail). */
static int read_cache_header(int fd, const char *path, lb_cache_header *old, int *fixed_ok) {
    memset(old, 0, sizeof *old);
    ssize_t got = pread(fd, old, sizeof *old, 0);
    *fixed_ok = got == (ssize_t)sizeof *old && old->fixed_crc == fixed_crc(old);
    if (got < 8 || memcmp(old->magic, LB_CACHE_MAGIC, 8) != 0) {
        lb_error_detail_set("'%s' is not a Logbook cache (it is left as it is)", path);
        return -EPROTO;
    }
    if (*fixed_ok && old->format_version != LB_CACHE_FORMAT_VERSION) {
        lb_error_detail_set("'%s' is a cache of format version %u; this library writes version %u", path,
                            old->format_version, LB_CACHE_FORMAT_VERSION);
        return -EPROTO;
    }
    if (*fixed_ok && old->header_size != LB_CACHE_HEADER_SIZE) {
        lb_error_detail_set("'%s' has a header of %u bytes; a cache of format version %u has %u (it is "
                            "left as it is)", path, old->header_size, LB_CACHE_FORMAT_VERSION,
                            LB_CACHE_HEADER_SIZE);
        return -EPROTO;
    }
    return 0;
}

/* Maps the checked (or rebuilt) file fd of st->st_size bytes into *out. 0 or -errno. */
static int map_cache(int fd, const struct stat *st, const lb_cache_options *o, const char *path, lb_cache **out) {
    lb_cache *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->map = mmap(NULL, (size_t)st->st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c->map == MAP_FAILED) {
        int rc = -errno;
        free(c);
        return rc;
    }
    c->fd = fd;
    c->map_size = (size_t)st->st_size;
    c->h = (lb_cache_header *)c->map;
    c->group_start = atomic_load(&c->h->next_sequence);
    c->region = c->map + LB_CACHE_HEADER_SIZE;
    c->region_size = c->h->region_size;
    c->o = *o;
    const lb_cache_header *h = c->h;
    uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail);
    /* Checked above or just rebuilt; checked again, as it is now mapped. */
    if (memcmp(h->magic, LB_CACHE_MAGIC, 8) != 0 || h->fixed_crc != fixed_crc(h) || h->region_size == 0 ||
        h->region_size % 8 || h->region_size > c->map_size - LB_CACHE_HEADER_SIZE || head > tail ||
        tail - head > h->region_size) {
        lb_error_detail_set("the cache '%s' changed while it was opened", path);
        munmap(c->map, c->map_size);
        free(c);
        return -EPROTO;
    }
    *out = c;
    return 0;
}

int lb_cache_open(const char *path, const lb_cache_options *options, lb_cache **out) {
    if (!path || !out) return -EINVAL;
    lb_error_detail_clear();
    lb_cache_options o;
    if (options) o = *options; else lb_cache_options_init(&o);
    if (!valid_cache_options(&o)) return -EINVAL;
    char name[NAME_MAX + 1];
    char dir[PATH_MAX];
    int dir_fd = open_parent(path, dir, name, sizeof name);
    if (dir_fd < 0) return dir_fd;
    int rc = 0;
    struct stat st;
    int fd = open_locked(dir_fd, name, dir, o.maximum_bytes, &st, &rc);
    if (fd < 0) {
        close(dir_fd);
        return fd;
    }
    if (rc == -EWOULDBLOCK) lb_error_detail_set("another process writes to the cache '%s'", path);
    lb_cache_header old;
    int fixed_ok = 0, cut_short = 0;
    if (rc == 0) rc = read_cache_header(fd, path, &old, &fixed_ok);
    if (rc == 0) {
        uint64_t region = (uint64_t)st.st_size > LB_CACHE_HEADER_SIZE ? ((uint64_t)st.st_size - LB_CACHE_HEADER_SIZE) & ~(uint64_t)7 : 0;
        uint64_t first_kept;
        int agree = fixed_ok && old.region_size == region ? lb_cc_moving_fields_agree(fd, &old, region, region, &first_kept) : 0;
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
    if (rc == 0) rc = map_cache(fd, &st, &o, path, &c);
    if (rc) {
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
