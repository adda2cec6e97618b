/* reader.c — the one decoder. It reads bundles of live, exited or killed writers with pread (never
 * a mapping: a truncated file cannot SIGBUS it), checks every length and offset, reassembles
 * fragmented records, and reports what it cannot use as issues. Its memory is bounded by the size
 * of the files it reads. */
#define _GNU_SOURCE
#include "reader_internal.h"

#include <sys/resource.h>

/* The reader's big arrays (entries, their order, argument bytes) are anonymous mappings sized from
 * the chunk headers' record counts and pre-faulted in one MAP_POPULATE: building the index of a
 * large bundle was otherwise a third page-fault traps. (Transparent huge pages were tried: 2-5x
 * faster when the kernel has free huge pages, 2x slower when it must compact first.) */
static void *large_resize(void *old, size_t old_size, size_t new_size) {
    void *p;
    if (!old) {
        p = mmap(NULL, new_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
    } else {
        p = mremap(old, old_size, new_size, MREMAP_MAYMOVE);
    }
    return p == MAP_FAILED ? NULL : p;
}

static void large_free(void *p, size_t size) {
    if (p) munmap(p, size);
}

/* Grows a large array to hold at least `need` elements. */
static int large_grow(void **array, size_t *capacity, size_t need, size_t element) {
    if (need <= *capacity) return 0;
    size_t cap = *capacity ? *capacity * 2 : 4096;
    if (cap < need) cap = need;
    void *p = large_resize(*array, *capacity * element, cap * element);
    if (!p) return -ENOMEM;
    *array = p;
    *capacity = cap;
    return 0;
}

static inline uint8_t *arena_copy(lb_reader *r, const uint8_t *bytes, size_t length) {
    arena_block *b = r->arena;
    if (LB_LIKELY(b && b->capacity - b->used >= length && length <= 32)) {
        /* The common small case: two fixed 16-byte moves, no call. The source has COPY_SLACK
         * bytes after its end; the arena block has room for the full 32. */
        uint8_t *p = b->bytes + b->used;
        if (b->capacity - b->used >= 32) {
            memcpy(p, bytes, 16);
            if (length > 16) memcpy(p + 16, bytes + 16, 16);
            b->used += length;
            return p;
        }
    }
    if (!b || b->capacity - b->used < length) {
        size_t cap = length > ARENA_BLOCK ? length : ARENA_BLOCK;
        b = large_resize(NULL, 0, sizeof *b + cap);
        if (!b) return NULL;
        b->capacity = cap;
        b->used = 0;
        b->next = r->arena;
        r->arena = b;
    }
    uint8_t *p = b->bytes + b->used;
    if (length) memcpy(p, bytes, length);
    b->used += length;
    return p;
}

static int open_bundle_file(int dir_fd, const char *name) {
    return lb_file_open_at(dir_fd, name, O_RDONLY, NULL);
}

static int directory_has_archive_files(int dir_fd) {
    int fd = dup(dir_fd);
    if (fd < 0) return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) found = lb_archive_name_parse(e->d_name, NULL) != 0;
    closedir(d);
    return found;
}

static int entry_exists(int dir_fd, const char *name) {
    struct stat st;
    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A bundle directory whose creation was cut short (a writer stopped before `ring` was renamed
 * into place, the last step): no ring, a meta without a single entry (its 16-byte header) or none,
 * and nothing a writer makes once the bundle exists (a session entry, mirror, durable, archive).
 * Nothing was ever logged to it. */
static int creation_cut_short(int dir_fd, int meta_fd) {
    struct stat st;
    if (meta_fd >= 0 && (fstat(meta_fd, &st) != 0 || st.st_size > (off_t)sizeof(lb_meta_file_header)))
        return 0;
    return !entry_exists(dir_fd, "archive") && !entry_exists(dir_fd, "mirror") &&
           !entry_exists(dir_fd, "durable");
}

/* `dir_fd` is the `archive` directory of the bundle in its parent directory (the default place;
 * the parent's `archive` entry, followed, is this directory): an archive directory, read as such
 * also when it holds no file yet (a bundle closed before a record was archived). */
static int is_bundle_archive_directory(int dir_fd) {
    int parent = openat(dir_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) return 0;
    struct stat mine, named;
    int found = (entry_exists(parent, "ring") || entry_exists(parent, "meta")) && fstat(dir_fd, &mine) == 0 &&
                fstatat(parent, "archive", &named, 0) == 0 && mine.st_dev == named.st_dev &&
                mine.st_ino == named.st_ino;
    close(parent);
    return found;
}

static const char *bundle_file_problem(int rc) {
    switch (rc) {
    case -ENOENT: return "is missing";
    case -ELOOP: return "is a symbolic link: not followed";
    case -EINVAL: return "is not a regular file (a FIFO, device or directory): not read";
    default: return "cannot be opened";
    }
}

static int starts_with_archive_magic(const char *path) {
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return 0;
    /* A plain file starts with the archive magic; a compressed one with a skippable frame
     * holding the archive header. */
    uint8_t start[16];
    ssize_t n = lb_pread_full(fd, start, sizeof start, 0);
    int found = n >= 8 && memcmp(start, LB_ARCHIVE_MAGIC, 8) == 0;
    if (n == (ssize_t)sizeof start && lb_archive_bytes_compressed(start, 4))
        found = memcmp(start + 8, LB_ARCHIVE_MAGIC, 8) == 0;
    close(fd);
    return found;
}

static int is_permission_error(int rc) { return rc == -EACCES || rc == -EPERM; }

/* Why a bundle may not be readable: its files are its writer's, or its group's when made so. */
#define PRIVATE_HINT                                                                              \
    " (a bundle is readable by the user that wrote it, and by that user's group when it was "  \
    "opened group readable, lb_options.permissions; every directory above it must let this "  \
    "user through)"

static int refuse_file(const char *dir, const char *name, int rc) {
    lb_error_detail_set("'%s/%s' cannot be read: %s%s", dir, name, strerror(-rc), PRIVATE_HINT);
    return rc;
}

/* A reader that may not read a file of the bundle (its permissions) refuses to open, naming the
 * file: nothing it would show could be trusted to be all there is, and the records are not lost,
 * only not readable by this user. Each archive file is opened once to see. */
static int refuse_what_cannot_be_read(lb_reader *r) {
    if (r->ring_mode) {
        if (is_permission_error(r->ring_open_error)) return refuse_file(r->path, "ring", r->ring_open_error);
        if (is_permission_error(r->meta_open_error)) return refuse_file(r->path, "meta", r->meta_open_error);
    }
    if (!r->archive_dir) return 0;
    int dir = open(r->archive_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        if (is_permission_error(-errno)) {
            int rc = -errno;
            lb_error_detail_set("the archive directory '%s' cannot be read: %s%s", r->archive_dir,
                                strerror(-rc), PRIVATE_HINT);
            return rc;
        }
        return 0;
    }
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return 0;
    }
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (!lb_archive_name_parse(e->d_name, NULL)) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
        if (fd >= 0) close(fd);
        else if (is_permission_error(-errno)) rc = refuse_file(r->archive_dir, e->d_name, -errno);
    }
    closedir(d);
    return rc;
}

int lb_reader_open(const char *path, lb_reader **out) {
    lb_error_detail_clear();
    if (!path || !out) return -EINVAL;
    struct stat st;
    if (stat(path, &st) != 0) {
        int rc = -errno;
        lb_error_detail_set("'%s': %s%s", path, strerror(-rc), is_permission_error(rc) ? PRIVATE_HINT : "");
        return rc;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        lb_error_detail_set("neither a directory nor a regular file (a FIFO, socket or device): not read");
        return -EINVAL;
    }
    lb_reader *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->ring_fd = r->meta_fd = r->lock_fd = r->durable_fd = r->mirror_fd = -1;
    r->path = strdup(path);
    int rc = r->path ? 0 : -ENOMEM;
    if (!rc && S_ISREG(st.st_mode)) {
        int probe = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (probe >= 0) close(probe);
        else if (is_permission_error(-errno)) {
            rc = -errno;
            lb_error_detail_set("'%s' cannot be read: %s", path, strerror(-rc));
            lb_reader_close(r);
            return rc;
        }
    }
    if (!rc && S_ISREG(st.st_mode)) {
        /* One archive file (e.g. picked up by an uploader). */
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        uint64_t number = 0;
        int kind = lb_archive_name_parse(name, &number);
        /* A file named like an archive file is read whatever its state (its damage reported); any
         * other must start like one: a text file is refused, not read as 0 entries. */
        if (!kind && !starts_with_archive_magic(path)) {
            lb_error_detail_set("neither a Logbook bundle nor an archive directory or file (a file "
                                "without an archive header, not named archive-N.lba)");
            lb_reader_close(r);
            return -EPROTO;
        }
        if (lb_array_grow((void **)&r->archives, &r->archive_capacity, 1, sizeof *r->archives)) rc = -ENOMEM;
        else {
            memset(&r->archives[0], 0, sizeof r->archives[0]);
            r->archives[0].number = number;
            r->archives[0].name = strdup(path);
            r->archives[0].fd = -1;
            r->archives[0].kind = kind ? kind : LB_ARCHIVE_NAME_COMPLETE;
            r->archives[0].named = kind != 0;
            r->archive_count = 1;
            if (!r->archives[0].name) rc = -ENOMEM;
        }
    } else if (!rc) {
        int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) rc = -errno;
        if (is_permission_error(rc))
            lb_error_detail_set("'%s' cannot be read: %s%s", path, strerror(-rc), PRIVATE_HINT);
        if (!rc) {
            int ring = open_bundle_file(dir, "ring");
            if (ring >= 0 || ring != -ENOENT || entry_exists(dir, "meta") ||
                entry_exists(dir, "lock") || entry_exists(dir, "archive")) {
                /* A bundle, also when its ring is gone: that is reported, not taken for an
                 * archive directory that holds nothing. */
                r->ring_mode = 1;
                r->ring_fd = ring >= 0 ? ring : -1;
                r->ring_open_error = ring >= 0 ? 0 : ring;
                int meta = open_bundle_file(dir, "meta");
                r->meta_fd = meta >= 0 ? meta : -1;
                r->meta_open_error = meta >= 0 ? 0 : meta;
                r->never_completed = ring == -ENOENT && (meta >= 0 || meta == -ENOENT) &&
                                     creation_cut_short(dir, r->meta_fd);
                int lock = open_bundle_file(dir, "lock");
                r->lock_fd = lock >= 0 ? lock : -1;
                int durable = open_bundle_file(dir, "durable");
                r->durable_fd = durable >= 0 ? durable : -1;
                int mirror = open_bundle_file(dir, "mirror");
                r->mirror_fd = mirror >= 0 ? mirror : -1;
                r->archive_dir = lb_path_join(path, "archive");
                if (!r->archive_dir) rc = -ENOMEM;
            } else if (directory_has_archive_files(dir) || is_bundle_archive_directory(dir)) {
                r->archive_dir = strdup(path);  /* an archive directory without its bundle */
                if (!r->archive_dir) rc = -ENOMEM;
            } else {
                rc = -EPROTO;  /* neither a bundle nor an archive directory: nothing to read */
                lb_error_detail_set("neither a Logbook bundle nor an archive directory or file (a "
                                    "directory without ring, meta, lock or archive files)");
            }
            close(dir);
        }
    }
    if (!rc) rc = refuse_what_cannot_be_read(r);
    if (rc) {
        lb_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

static void free_names(name_entry **table, int sites) {
    for (uint32_t i = 0; i < NAME_TABLE_SIZE; i++) {
        name_entry *e = table[i];
        while (e) {
            name_entry *next = e->next;
            free(e->name);
            if (sites) lb_rd_site_info_free(&e->site);
            free(e);
            e = next;
        }
    }
}

void lb_reader_discard_entries(lb_reader *r) {
    arena_block *b = r->arena;
    while (b) {
        arena_block *next = b->next;
        large_free(b, sizeof *b + b->capacity);
        b = next;
    }
    r->arena = NULL;
    r->entry_count = 0;
}

void lb_reader_close(lb_reader *r) {
    if (!r) return;
    if (r->ring_fd >= 0) close(r->ring_fd);
    if (r->meta_fd >= 0) close(r->meta_fd);
    if (r->lock_fd >= 0) close(r->lock_fd);
    if (r->durable_fd >= 0) close(r->durable_fd);
    if (r->mirror_fd >= 0) close(r->mirror_fd);
    free(r->durable);
    lb_reader_discard_entries(r);
    large_free(r->entries, r->entry_capacity * sizeof(lb_entry));
    free(r->issues);
    for (size_t i = 0; i < r->session_count; i++) {
        free((char *)r->sessions[i].host);
        free((char *)r->sessions[i].executable);
    }
    free(r->sessions);
    free_names(r->loggers, 0);
    free_names(r->sites, 1);
    for (size_t i = 0; i < r->pending_count; i++) free(r->pending[i].bytes);
    free(r->pending);
    free(r->progress);
    large_free(r->order, r->order_capacity * sizeof *r->order);
    free(r->clocks);
    free(r->chunk);
    free(r->seen);
    for (size_t i = 0; i < r->archive_count; i++) {
        lb_rd_close_archive_file(&r->archives[i]);
        free(r->archives[i].damage);
        free(r->archives[i].name);
        free(r->archives[i].label);
    }
    free(r->archives);
    free(r->unfinished);
    free(r->archive_dir);
    for (size_t i = 0; i < r->owned_count; i++) free(r->owned[i]);
    free(r->owned);
    free(r->claims);
    free(r->path);
    lb_rd_run_free(r->run);
    for (size_t i = 0; i < r->heap_count; i++) lb_rd_run_free(r->heap[i]);
    free(r->heap);
    for (size_t i = 0; i < r->spare_count; i++) lb_rd_run_free(r->spare[i]);
    free(r->spare);
    free(r->floors);
    free(r->memo);
    free(r);
}

/* The copy buffer holds the largest chunk met so far (ring or archive), plus COPY_SLACK. */
/* lb_reader_scan's visitor: the entry and its arguments are kept. */
static int hold_entry(void *context, const lb_entry *entry) {
    lb_reader *r = context;
    if (LB_UNLIKELY(r->entry_count == r->entry_capacity) &&
        large_grow((void **)&r->entries, &r->entry_capacity, r->entry_count + 1, sizeof(lb_entry)))
        return 0;
    lb_entry *e = &r->entries[r->entry_count];
    *e = *entry;
    e->args = arena_copy(r, entry->args, entry->args_length);
    if (!e->args && entry->args_length) return 0;
    r->entry_count++;
    return 0;
}

/* A ring bundle at the start of a pass: its missing or unusable files reported once, its header
 * read (once it can be), the overwrite count taken, new meta read. 0 or -errno. */
static int refresh_ring(lb_reader *r) {
    if (!r->open_reported && r->never_completed) {
        r->open_reported = 1;
        /* Not damage: nothing was committed. Said (torn: verify passes), not taken for a bundle
         * whose ring was lost. */
        lb_rd_add_issue(r, LB_ISSUE_TORN, "ring", 0, 0,
                        "the bundle was never completed: its creation was cut short (or is under "
                        "way) before its ring was in place, so nothing was ever logged to it; the "
                        "next writer's open completes it");
    }
    if (!r->open_reported) {
        r->open_reported = 1;
        if (r->ring_open_error)
            lb_rd_add_issuef(r, r->ring_open_error == -ENOENT ? LB_ISSUE_MISSING : LB_ISSUE_CORRUPT,
                       "ring", 0, 0, 0,
                       "the ring file %s: the records it held (those not archived) are lost",
                       bundle_file_problem(r->ring_open_error));
        if (r->meta_open_error)
            lb_rd_add_issuef(r, r->meta_open_error == -ENOENT ? LB_ISSUE_MISSING : LB_ISSUE_CORRUPT,
                       "meta", 0, 0, 0,
                       "the meta file %s: records cannot be matched with their call sites "
                       "and loggers", bundle_file_problem(r->meta_open_error));
    }
    if (r->ring_fd >= 0 && !r->header_ok && !r->ring_broken) {
        int rc = lb_rd_read_header(r);
        if (rc == -EPROTO) r->ring_broken = 1;
        else if (rc) return rc;
    }
    if (r->header_ok) {
        /* Read before the chunks: see lb_reader_overwritten. */
        lb_ring_header h;
        if (lb_pread_full(r->ring_fd, &h, sizeof h, 0) == (ssize_t)sizeof h) {
            r->overwritten_now = atomic_load(&h.records_overwritten);
            if (!r->overwritten_baseline_set) {
                r->overwritten_baseline = r->overwritten_now;
                r->overwritten_baseline_set = 1;
            }
        }
    }
    /* The meta of a creation cut short holds no entry (its header, part of it, or nothing): a
     * header cut short there is part of the cut creation, not damage. */
    if (r->meta_fd >= 0 && !r->never_completed) lb_rd_read_meta(r);
    return 0;
}

/* Lists what this pass reads into refs, in sequence order. 0 or -errno.
 *
 * The ring's chunks are listed before the archive files: a chunk archived and then overwritten in
 * the ring between the two listings is then in the archive files' (a lossless ring reuses a slot
 * only after its chunk is archived), where listing the archive files first would miss it in both,
 * and with it the beginning of a large record whose end is in the next chunk. Chunks are read
 * after both listings: archive files' meta frames, which define what chunks refer to, are read
 * when they are listed. */
/* The most archive files one pass keeps open: half the descriptors this process may have. */
static size_t archive_open_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
    return limit.rlim_cur / 2 < 16 ? 16 : (size_t)(limit.rlim_cur / 2);
}

/* More archive files wait to be read than may be open at once (a directory of thousands): this
 * pass lists only the oldest of them, as many as may be open, and nothing of the ring, whose
 * chunks are newer; the pass closes them once read and lb_reader_stream runs another. 1 when it
 * did so. */
static int list_oldest_archive_files(lb_reader *r, ref_list *refs) {
    lb_rd_list_archive_directory(r);
    size_t open = 0, waiting = 0, limit = archive_open_limit();
    for (size_t i = 0; i < r->archive_count; i++) {
        if (r->archives[i].fd >= 0) open++;
        else if (!r->archives[i].done) waiting++;
    }
    r->archives_deferred = 0;
    if (open + waiting <= limit || open >= limit) return 0;
    for (size_t i = 0; i < r->archive_count && open < limit; i++) {
        if (r->archives[i].done) continue;
        if (r->archives[i].fd < 0) open++;
        lb_rd_collect_archive(r, i, refs);
    }
    r->archives_deferred = 1;
    if (refs->count) qsort(refs->refs, refs->count, sizeof *refs->refs, lb_rd_compare_refs);
    return 1;
}

static int list_chunks(lb_reader *r, ref_list *refs) {
    if (list_oldest_archive_files(r, refs)) return 0;
    const int ring_listed_first = r->ring_mode && r->ring_fd >= 0 && r->geometry_known;
    if (ring_listed_first) {
        int rc = lb_rd_collect_ring(r, refs);
        if (rc) return rc;
    }
    lb_rd_list_archive_directory(r);
    for (size_t i = 0; i < r->archive_count; i++) lb_rd_collect_archive(r, i, refs);
    lb_rd_relist_unfinished(r, refs);
    if (r->ring_mode && r->ring_fd >= 0 && !ring_listed_first) {
        /* A damaged ring header: the archive files may tell its geometry. */
        if (r->ring_broken && !r->geometry_known) lb_rd_adopt_archive_geometry(r);
        if (r->geometry_known) {
            int rc = lb_rd_collect_ring(r, refs);
            if (rc) return rc;
        }
    }
    if (r->ring_mode && r->ring_broken && !r->geometry_known && r->archive_count == 0)
        return -EPROTO;  /* nothing at all can be read */
    if (r->ring_mode) lb_rd_collect_mirror(r, refs);
    if (refs->count) qsort(refs->refs, refs->count, sizeof *refs->refs, lb_rd_compare_refs);
    return 0;
}

/* lb_reader_scan keeps every entry: reserve those the chunks say they hold (a damaged count only
 * costs a grow). */
static int reserve_entries(lb_reader *r, const ref_list *refs) {
    size_t most = r->entry_count + 16;
    for (size_t i = 0; i < refs->count; i++) {
        uint32_t cap = (refs->refs[i].source < 0 ? r->header.chunk_size : refs->refs[i].length) /
                       LB_RECORD_FIXED_SIZE;
        most += refs->refs[i].records < cap ? refs->refs[i].records : cap;
    }
    if (most > r->entry_capacity &&
        large_grow((void **)&r->entries, &r->entry_capacity, most, sizeof(lb_entry)))
        return -ENOMEM;
    return 0;
}

/* A ring chunk left the ring while this pass ran, so it was archived meanwhile: list the archive
 * files again, to read it (and whatever else they now hold) in order after refs[0..at]. */
static int list_archived_meanwhile(lb_reader *r, ref_list *refs, size_t at) {
    size_t listed = refs->count;
    lb_rd_list_archive_directory(r);
    for (size_t k = 0; k < r->archive_count; k++) lb_rd_collect_archive(r, k, refs);
    if (refs->count > listed)
        qsort(refs->refs + at + 1, refs->count - at - 1, sizeof *refs->refs, lb_rd_compare_refs);
    return lb_rd_compute_floors(r, refs) ? -ENOMEM : 0;
}

/* Another archived copy of a chunk already read: a good second copy means the chunk was archived
 * twice; a damaged one is damage. Its records are shown once. */
static void report_second_copy(lb_reader *r, const chunk_ref *ref) {
    archive_file *f = lb_rd_ref_file(r, ref);
    int intact = f->fd >= 0 &&
                 lb_archive_source_read(&f->src, r->chunk, ref->length, ref->offset) == (ssize_t)ref->length &&
                 lb_crc32c(0, r->chunk, ref->length) == ref->body_crc;
    lb_rd_add_issue(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), ref->offset, ref->length,
              intact ? "chunk archived twice (its records are shown once)"
                     : "chunk fails its checksum; its records were read from another copy");
}

/* Reads refs->refs[i] into a run of the window, then hands out what is older than every chunk
 * still to come. `read_from_archive`: the sequence whose archived copy was read last. 0 or
 * -errno. */
static int read_listed_chunk(lb_reader *r, ref_list *refs, size_t i, uint64_t *read_from_archive) {
    const chunk_ref *ref = &refs->refs[i];
    if (ref->source >= 0 && *read_from_archive == ref->sequence) {
        report_second_copy(r, ref);
        return 0;
    }
    r->run = lb_rd_run_acquire(r);
    if (!r->run) return -ENOMEM;
    r->run_counts = 0;
    if (ref->source == SOURCE_MIRROR) {
        lb_rd_read_mirror_chunk(r, ref);
        lb_rd_finish_run(r);
    } else if (ref->source < 0) {
        int left = lb_rd_read_ring_chunk(r, ref);
        lb_rd_finish_run(r);
        if (left) {
            int rc = list_archived_meanwhile(r, refs, i);
            if (rc) return rc;
        }
    } else {
        int follows = i + 1 < refs->count && refs->refs[i + 1].sequence == ref->sequence;
        int walked;
        lb_rd_read_archived_chunk(r, ref, follows, &walked);
        lb_rd_finish_run(r);
        if (walked) *read_from_archive = ref->sequence;
        /* Stopped before its end (deferred), or left to a copy that follows: listed again. */
        if (walked || follows) lb_rd_keep_unfinished(r, ref);
        /* The last chunk this pass reads in the file: its decoding buffers go (about 3 MB of a
         * compressed file), so that memory does not grow with the files a pass reads. */
        archive_file *f = lb_rd_ref_file(r, ref);
        if (f && f->fd >= 0 && ref->sequence >= f->last_listed) lb_archive_source_rest(&f->src);
    }
    order_key w = lb_rd_watermark(r, i + 1);
    lb_rd_drain(r, &w);
    return 0;
}

/* One pass over what is new: chunks in sequence order, through the window to r->visit. */
static long read_pass(lb_reader *r) {
    /* Taken before anything is listed: a writer gone by then wrote all it ever will into what this
     * pass lists. One that stops during the pass may still finish a large record this pass began
     * (its last fragment committed after the listing): the next pass reads it. */
    const int writer_gone = !lb_rd_writer_alive(r);
    if (r->ring_mode) {
        int rc = refresh_ring(r);
        if (rc) return rc;
    }
    ref_list refs = {0};
    int failure = list_chunks(r, &refs);
    if (!failure && r->visit == hold_entry) failure = reserve_entries(r, &refs);
    if (!failure && lb_rd_compute_floors(r, &refs)) failure = -ENOMEM;
    if (failure) {
        free(refs.refs);
        return failure;
    }
    for (size_t i = 0; i < r->archive_count; i++) r->archives[i].last_listed = 0;
    for (size_t i = 0; i < refs.count; i++) {
        archive_file *f = refs.refs[i].source >= 0 ? lb_rd_ref_file(r, &refs.refs[i]) : NULL;
        if (f && refs.refs[i].sequence > f->last_listed) f->last_listed = refs.refs[i].sequence;
    }
    uint64_t read_from_archive = 0;
    for (size_t i = 0; i < refs.count && !failure; i++)
        failure = read_listed_chunk(r, &refs, i, &read_from_archive);
    free(refs.refs);
    for (size_t i = 0; i < r->archive_count; i++) {
        archive_file *f = &r->archives[i];
        if (f->done && f->fd >= 0) lb_rd_close_archive_file(f);
    }

    /* A large record whose beginning the walk found but whose writer is gone will never finish
     * (unless its next fragment is in what a pass of the oldest archive files left to read). */
    if (r->pending_count && writer_gone && !r->archives_deferred) {
        while (r->pending_count) {
            pending_record *p = &r->pending[r->pending_count - 1];
            lb_rd_add_issue(r, LB_ISSUE_TORN, p->first_file, p->first_file_offset, p->length,
                      "large record cut short: its writer stopped before the end");
            lb_rd_drop_pending(r, p);
        }
    }
    lb_rd_drain(r, NULL);
    return failure ? failure : r->visited;
}

static long stream(lb_reader *r, const lb_read_filter *filter, lb_entry_visitor visit, void *context) {
    r->visit = visit;
    r->visit_context = context;
    r->visited = 0;
    r->stopped = 0;
    static const lb_read_filter none;
    r->filter = filter ? *filter : none;
    r->filtering = r->filter.min_level || r->filter.max_level || r->filter.since_ns ||
                   r->filter.until_ns || r->filter.accept;
    free(r->memo);  /* a new filter asks again */
    r->memo = NULL;
    r->memo_count = r->memo_capacity = 0;
    r->memo_last = NULL;
    long rc;
    do rc = read_pass(r);
    while (rc >= 0 && r->archives_deferred && !r->stopped);
    r->visit = NULL;
    r->filtering = 0;
    return rc;
}

long lb_reader_stream(lb_reader *r, const lb_read_filter *filter, lb_entry_visitor visit,
                      void *context) {
    if (!r || !visit) return -EINVAL;
    return stream(r, filter, visit, context);
}

size_t lb_reader_window_peak(const lb_reader *r) { return r ? r->window_peak : 0; }

long lb_reader_scan(lb_reader *r) {
    if (!r) return -EINVAL;
    size_t first_new = r->entry_count;
    long rc = stream(r, NULL, hold_entry, r);
    if (rc < 0) return rc;
    size_t added = r->entry_count - first_new;
    if (r->entry_count > UINT32_MAX) return -EOVERFLOW;
    if (large_grow((void **)&r->order, &r->order_capacity, r->entry_count, sizeof *r->order))
        return -ENOMEM;
    /* The window hands entries out in order; a chunk whose anchor is damaged may not be. */
    if (lb_rd_order_entries(r->entries, r->order, first_new, r->entry_count)) return -ENOMEM;
    return (long)added;
}

/* Records destroyed unread = the growth of records_overwritten (what reuse destroyed) less what
 * this reader had read of the chunks that left the ring (shown, or accounted for by issues as
 * damaged), plus the LAST fragments it walked in chunks still there whose beginning the overwrite
 * policy destroyed (the record is counted in its own chunk, which survived). Records it could not
 * show because their bytes are damaged are not here: issues account for them, and counting them
 * too made `logbook export` call damaged records overwritten (found by an outside test). */
uint64_t lb_reader_overwritten(const lb_reader *r) {
    if (!r || !r->overwritten_baseline_set) return 0;
    uint64_t destroyed = r->overwritten_now - r->overwritten_baseline + r->beginnings_overwritten;
    return destroyed > r->gone_read ? destroyed - r->gone_read : 0;
}

uint64_t lb_reader_archive_files_deleted_unread(const lb_reader *r) {
    return r ? r->archive_files_deleted_unread : 0;
}

int lb_reader_ring_replaced(const lb_reader *r) {
    if (!r) return -EINVAL;
    if (!r->ring_mode) return 0;
    struct stat held, named;
    if (r->ring_fd >= 0 && fstat(r->ring_fd, &held) != 0) return -errno;
    char *ring = lb_path_join(r->path, "ring");
    if (!ring) return -ENOMEM;
    int rc = lstat(ring, &named) == 0 ? 0 : -errno;
    free(ring);
    if (rc == -ENOENT || rc == -ENOTDIR) return 2;
    if (rc) return rc;
    if (r->ring_fd < 0) return 1; /* a ring where this reader found none */
    return named.st_ino != held.st_ino || named.st_dev != held.st_dev ? 1 : 0;
}

int lb_reader_never_completed(const lb_reader *r) { return r && r->never_completed; }

size_t lb_reader_entry_count(const lb_reader *r) { return r ? r->entry_count : 0; }

int lb_reader_entry(const lb_reader *r, size_t index, lb_entry *out) {
    if (!r || !out || index >= r->entry_count) return -EINVAL;
    *out = r->entries[r->order[index]];
    return 0;
}

const lb_site_info *lb_reader_site(const lb_reader *r, uint32_t session, uint32_t site_id) {
    name_entry *e = lb_rd_name_find(r->sites, session, site_id);
    return e ? &e->site : NULL;
}

const char *lb_reader_logger_name(const lb_reader *r, uint32_t session, uint16_t logger_id) {
    name_entry *e = lb_rd_name_find(r->loggers, session, logger_id);
    return e ? e->name : NULL;
}

size_t lb_reader_session_count(const lb_reader *r) { return r->session_count; }

const lb_session_info *lb_reader_session(const lb_reader *r, size_t index) {
    return index < r->session_count ? &r->sessions[index] : NULL;
}

size_t lb_reader_issue_count(const lb_reader *r) { return r ? r->issue_count : 0; }

int lb_reader_issue(const lb_reader *r, size_t index, lb_issue *out) {
    if (!r || !out || index >= r->issue_count) return -EINVAL;
    *out = r->issues[index];
    return 0;
}
