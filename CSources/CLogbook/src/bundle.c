/* bundle.c — a bundle opened for writing: files, writer lock, mapping, recovery after a crash,
 * the meta file (sessions, loggers, call sites), and the idle sealer. Chunks are claimed and
 * sealed in chunk.c. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

void lb_options_init(lb_options *o) {
    memset(o, 0, sizeof *o);
    o->capacity = 16u << 20;
    o->chunk_size = 64u << 10;
    o->wrap_policy = LB_WRAP_OVERWRITE;
    o->idle_seal_ms = 1000;
    o->lossless_wait_ms = 100;
    o->sync_interval_ms = 0;
}

/* ---- meta file ---- */

/* Appends one entry; on any failure the file is cut back so that no torn entry stays behind.
 * Caller holds b->lock. */
static int meta_append(lb_bundle *b, uint16_t kind, const lb_meta_buffer *body) {
    if (body->failed) return -ENOMEM;
    /* Closed (or inherited by fork): the writer lock is (about to be) released, another process
     * may own the file, and an entry written at our old end would overwrite its entries. Until
     * close detached every writer, the call sites of records begun before it are still added. */
    if (atomic_load(&b->meta_closed)) return -EBADF;
    uint8_t head[LB_META_ENTRY_HEAD_SIZE];
    uint32_t length = (uint32_t)body->length, crc = lb_crc32c(0, body->bytes, body->length);
    uint16_t zero = 0;
    memcpy(head, &length, 4);
    memcpy(head + 4, &crc, 4);
    memcpy(head + 8, &kind, 2);
    memcpy(head + 10, &zero, 2);
    size_t total = sizeof head + body->length;
    uint8_t *entry = malloc(total);
    if (!entry) return -ENOMEM;
    memcpy(entry, head, sizeof head);
    memcpy(entry + sizeof head, body->bytes, body->length);
    int rc = lb_pwrite_full(b->meta_fd, entry, total, b->meta_offset);
    free(entry);
    if (rc != 0) {
        if (ftruncate(b->meta_fd, (off_t)b->meta_offset) != 0) { /* the reader reports a torn tail */ }
        return rc;
    }
    b->meta_offset += total;
    return 0;
}

/* The highest session a SESSION entry of meta names (+1), for the count of sessions. */
static void meta_count_session(void *context, uint16_t kind, const uint8_t *body, uint32_t length) {
    uint32_t *sessions = context, session;
    if (kind != LB_META_SESSION || length < 4) return;
    memcpy(&session, body, 4);
    if (session >= *sessions) *sessions = session + 1;
}

static int meta_prepare(lb_bundle *b) {
    lb_meta_file_header h;
    ssize_t n = lb_pread_full(b->meta_fd, &h, sizeof h, 0);
    if (n < 0) return (int)n;
    if ((size_t)n < sizeof h || memcmp(h.magic, LB_META_MAGIC, 8) != 0 ||
        h.format_version != LB_FORMAT_VERSION)
        return -EPROTO;
    /* Keep every complete entry; cut a torn tail left by a crash so new entries stay readable. */
    uint64_t end = sizeof h;
    int rc = lb_meta_read_entries(b->meta_fd, &end, meta_count_session, &b->meta_sessions);
    if (rc < 0 && rc != -1) return rc;
    if (rc != 0 && ftruncate(b->meta_fd, (off_t)end) != 0) return -errno;
    b->meta_offset = end;
    return 0;
}

static int meta_write_session(lb_bundle *b, uint64_t tick_anchor, int64_t wall_anchor) {
    char host[256] = "", exe[PATH_MAX] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    lb_meta_buffer body = {0};
    lb_meta_put_u32(&body, b->session);
    lb_meta_put_u32(&body, (uint32_t)getpid());
    lb_meta_put_u64(&body, b->ticks_per_second);
    lb_meta_put_u32(&body, lb_clock_is_tsc ? LB_CLOCK_TSC : LB_CLOCK_MONOTONIC);
    lb_meta_put_u32(&body, 0);
    lb_meta_put_u64(&body, tick_anchor);
    lb_meta_put_u64(&body, (uint64_t)wall_anchor);
    lb_meta_put_string(&body, host, strlen(host));
    lb_meta_put_string(&body, exe, strlen(exe));
    pthread_mutex_lock(&b->lock);
    int rc = meta_append(b, LB_META_SESSION, &body);
    pthread_mutex_unlock(&b->lock);
    free(body.bytes);
    return rc;
}

static uint64_t logger_name_hash(const char *name, size_t length) {
    uint64_t h = 0xcbf29ce484222325u;                 /* FNV-1a */
    for (size_t i = 0; i < length; i++) h = (h ^ (uint8_t)name[i]) * 0x100000001b3u;
    return h ^ (h >> 32);
}

/* The slot of `name` in the logger index: its id's slot, or the empty slot where it belongs.
 * Under `lock`. The index has twice as many slots as `loggers` can hold, so one is always empty. */
static uint32_t logger_index_slot(const lb_bundle *b, const char *name, size_t length) {
    uint32_t mask = 2 * b->logger_capacity - 1;
    uint32_t slot = (uint32_t)logger_name_hash(name, length) & mask;
    for (;;) {
        uint16_t id = b->logger_index[slot];
        if (id == 0 || strcmp(b->loggers[id - 1]->name, name) == 0) return slot;
        slot = (slot + 1) & mask;
    }
}

/* Doubles the room for loggers and rebuilds the index. Under `lock`. */
static int loggers_grow(lb_bundle *b) {
    uint32_t capacity = b->logger_capacity ? b->logger_capacity * 2 : 16;
    lb_logger **loggers = realloc(b->loggers, capacity * sizeof *loggers);
    if (!loggers) return -ENOMEM;
    b->loggers = loggers;
    uint16_t *index = calloc(2 * (size_t)capacity, sizeof *index);
    if (!index) return -ENOMEM;
    free(b->logger_index);
    b->logger_index = index;
    b->logger_capacity = capacity;
    for (uint32_t i = 0; i < b->logger_count; i++) {
        const char *name = b->loggers[i]->name;
        b->logger_index[logger_index_slot(b, name, strlen(name))] = (uint16_t)(i + 1);
    }
    return 0;
}

int lb_logger_register(lb_bundle *b, const char *name, lb_logger **out) {
    if (!b || !name || !out) return -EINVAL;
    if (atomic_load(&b->closed)) return -EBADF;
    size_t name_length = strlen(name);
    int rc = 0;
    pthread_mutex_lock(&b->lock);
    uint32_t slot = 0;
    if (b->logger_capacity) {
        slot = logger_index_slot(b, name, name_length);
        uint16_t id = b->logger_index[slot];
        if (id) {
            *out = b->loggers[id - 1];
            goto done;
        }
    }
    if (b->logger_count >= 65535) { rc = -ENOSPC; goto done; }
    if (b->logger_count == b->logger_capacity) {
        if ((rc = loggers_grow(b))) goto done;
        slot = logger_index_slot(b, name, name_length);
    }
    lb_logger *logger = calloc(1, sizeof *logger);
    char *copy = strdup(name);
    if (!logger || !copy) { free(logger); free(copy); rc = -ENOMEM; goto done; }
    logger->id = (uint16_t)(b->logger_count + 1);
    logger->bundle = b;
    logger->name = copy;
    atomic_store(&logger->min_level, lb_filter_level_for(b, name));
    lb_meta_buffer body = {0};
    lb_meta_put_u32(&body, b->session);
    lb_meta_put_u16(&body, logger->id);
    lb_meta_put_u16(&body, 0);
    lb_meta_put_string(&body, name, name_length);
    rc = meta_append(b, LB_META_LOGGER, &body);
    free(body.bytes);
    if (rc) { free(copy); free(logger); goto done; }
    b->loggers[b->logger_count++] = logger;
    b->logger_index[slot] = logger->id;
    *out = logger;
done:
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static uint32_t site_hash(const void *file, const void *extra, uint32_t line, uint32_t column) {
    return lb_site_slot_index(file, extra, line, column) & (LB_SITE_TABLE_SIZE - 1);
}

int lb_site_register(lb_bundle *b, const lb_site_desc *d, uint32_t *id_out) {
    if (!b || !d || !id_out) return -EINVAL;
    uint32_t h = site_hash(d->key_file, d->key_extra, d->line, d->column);
    pthread_mutex_lock(&b->lock);
    lb_site_entry *e = b->site_table[h];
    for (; e; e = e->next) {
        if (e->slot.key_file == d->key_file && e->slot.key_extra == d->key_extra &&
            e->slot.line == d->line && e->slot.column == d->column)
            break;
    }
    int rc = 0;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) { rc = -ENOMEM; goto done; }
        e->slot.key_file = d->key_file;
        e->slot.key_extra = d->key_extra;
        e->slot.line = d->line;
        e->slot.column = d->column;
        e->slot.id = b->next_site_id;
        lb_meta_buffer body = {0};
        lb_meta_put_u32(&body, b->session);
        lb_meta_put_u32(&body, e->slot.id);
        lb_meta_put_u32(&body, d->line);
        lb_meta_put_u32(&body, d->column);
        lb_meta_put_string(&body, d->file ? d->file : "", d->file ? d->file_length : 0);
        lb_meta_put_string(&body, d->function ? d->function : "",
                           d->function ? d->function_length : 0);
        lb_meta_put_string(&body, d->template_text ? d->template_text : "",
                           d->template_text ? d->template_length : 0);
        if (d->source && d->source_length) lb_meta_put_string(&body, d->source, d->source_length);
        rc = meta_append(b, LB_META_SITE, &body);
        free(body.bytes);
        if (rc) { free(e); goto done; }
        b->next_site_id++;
        e->next = b->site_table[h];
        b->site_table[h] = e;
    }
    /* Publish in the lock-free cache; a colliding site simply replaces the slot. */
    atomic_store_explicit(
        &b->hot.site_cache[lb_site_slot_index(d->key_file, d->key_extra, d->line, d->column)],
        &e->slot, memory_order_release);
    *id_out = e->slot.id;
done:
    pthread_mutex_unlock(&b->lock);
    return rc;
}

uint32_t lb_site_register_c(lb_bundle *b, const char *file, uint32_t line, const char *function,
                            const char *template_text) {
    lb_site_desc d = {
        .key_file = file, .key_extra = template_text, .line = line, .column = 0,
        .file = file, .file_length = strlen(file),
        .function = function, .function_length = strlen(function),
        .template_text = template_text, .template_length = strlen(template_text),
    };
    uint32_t id = 0;
    return lb_site_register(b, &d, &id) == 0 ? id : 0;
}

/* ---- the archiver's attachment ---- */
void lb_bundle_attach_archiver(lb_bundle *b, void *archiver, int (*stop)(void *archiver),
                               void (*forget)(void *archiver)) {
    b->archiver_stop = stop;
    b->archiver_forget = forget;
    b->archiver = archiver;
    /* A quarter of the ring, at most 16 chunks: the archiver wakes long before a lossless ring
     * fills, and a fast logger pays one wake per batch rather than per chunk. */
    uint32_t batch = b->chunk_count / 4;
    b->archiver_wake_batch = batch < 1 ? 1 : batch > 16 ? 16 : batch;
    b->archiving = 1;
}

/* Every chunk and session the ring and meta name is behind the header's counters: after a power
 * loss its page can be older than theirs (lb_ring_counters_cover). */
static void cover_found_chunks(lb_bundle *b) {
    if (b->meta_sessions) lb_ring_counters_cover(b, 0, 0, b->meta_sessions - 1);
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        if (lb_chunk_header_check(h, slot, b->chunk_count) < 0 || h->magic != LB_CHUNK_MAGIC ||
            h->header_crc != lb_chunk_crc(h))
            continue;
        lb_ring_counters_cover(b, h->sequence, h->claim, h->session);
    }
}

/* ---- recovery: chunks a dead writer left active are sealed with what they really hold ---- */
typedef struct recovery_count {
    uint32_t records, end;
} recovery_count;

static int recovery_visit(void *context, const lb_walk_record *r) {
    recovery_count *c = context;
    if (r->kind == LB_RECORD_FULL || r->kind == LB_RECORD_LAST) c->records++;
    c->end = r->next;
    return 0;
}

/* The ring becomes this writer's: a session number, and the last session's end noted. A session
 * that did not close cleanly may have left the counters short (a seal cut short between its state
 * and its counters: verify then stops demanding exact counts), or, after a power loss, the ring
 * header older than the archive files (the archiver's recovery reads after_unclean_session). */
static void start_session(lb_bundle *b) {
    b->after_unclean_session =
        atomic_exchange(&b->ring->writer_state, LB_WRITER_STATE_OPEN) == LB_WRITER_STATE_OPEN;
    if (b->after_unclean_session) atomic_fetch_add(&b->ring->unclean_sessions, 1);
    b->session = atomic_fetch_add(&b->ring->session_count, 1);
    atomic_store(&b->ring->writer_pid, (uint32_t)getpid());
}

static void recover_chunks(lb_bundle *b) {
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        int check = lb_chunk_header_check(h, slot, b->chunk_count);
        uint32_t state = atomic_load(&h->state);
        if (check == 2) {
            /* A claim cut short. With a complete header (a new empty one, or the old occupant
             * not yet touched) the chunk is kept as sealed, its records as its walk finds them;
             * the archiver's reconciliation finds out whether it is archived already. Otherwise
             * the claim's number may be taken and holds nothing: counted, so that verify can
             * tell a missing claim number from lost records. */
            if (h->magic == LB_CHUNK_MAGIC && h->header_crc == lb_chunk_crc(h) && h->sequence &&
                h->sequence % b->chunk_count == slot) {
                /* A claim counts the old occupant's records as overwritten before it touches a
                 * byte: they may be counted so and still be here (verify allows that much). */
                if (b->wrap_policy == LB_WRAP_OVERWRITE)
                    atomic_fetch_add(&b->ring->records_kept_from_claims, atomic_load(&h->record_count));
                recovery_count count = {0, LB_CHUNK_HEADER_SIZE};
                lb_walk_end end;
                lb_chunk_walk((const uint8_t *)h, b->chunk_size, LB_CHUNK_HEADER_SIZE,
                              recovery_visit, &count, &end);
                atomic_store(&h->committed, count.end);
                atomic_store(&h->record_count, count.records);
                atomic_store(&h->state, LB_CHUNK_SEALED);
            } else {
                memset(h, 0, LB_CHUNK_HEADER_SIZE);
                atomic_fetch_add(&b->ring->claims_abandoned, 1);
            }
            continue;
        }
        if (check < 0 && state != LB_CHUNK_FREE) {
            /* A damaged header: the slot holds nothing readable. What it held is lost; counted. */
            memset(h, 0, LB_CHUNK_HEADER_SIZE);
            atomic_fetch_add(&b->ring->chunks_discarded, 1);
            continue;
        }
        if (check == 0 && state == LB_CHUNK_ARCHIVING) {
            /* The archiver died with this chunk's write in flight: archive it again (the archiver
             * recognises a copy that did reach its file). */
            atomic_store(&h->state, LB_CHUNK_SEALED);
            continue;
        }
        if (check != 0 || state != LB_CHUNK_ACTIVE) continue;
        recovery_count count = {0, LB_CHUNK_HEADER_SIZE};
        lb_walk_end end;
        lb_chunk_walk((const uint8_t *)h, b->chunk_size, LB_CHUNK_HEADER_SIZE, recovery_visit,
                      &count, &end);
        atomic_store(&h->committed, count.end);
        atomic_store(&h->record_count, count.records);
        lb_chunk_seal(b, h);
    }
}

/* ---- open / close ---- */

/* Gives `name` in `dir_fd` (a regular file, never through a symlink) the mode the bundle's
 * permissions say, only when no other name reaches it: with `dir_path` (a bundle file) a second
 * name is refused (-EMLINK, with a detail); without (an archive file) such a file is left as it
 * is, never refused and never given a mode. A hard link planted under an archive name would
 * otherwise chmod a file elsewhere, and the archive's own files with a second name (the
 * uploader's spool item) are never written, so their mode is not this open's to set. 0 when it
 * is absent or done, else -errno. */
static int set_mode_at(const lb_bundle *b, int dir_fd, const char *name, const char *dir_path) {
    /* Already so (the usual case, also for a directory of thousands of archive files): one stat. */
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return 0;
    } else if (!S_ISREG(st.st_mode) || (!dir_path && st.st_nlink > 1) ||
               ((st.st_mode & 07777) == (mode_t)LB_FILE_MODE(b) && st.st_nlink == 1)) {
        /* A symlink, FIFO or directory in a file's place is not made anything: whoever would
         * use it (the archiver's recovery, the syncer, a reader) refuses it and says so. */
        return 0;
    }
    int fd = dir_path ? lb_file_open_own_at(dir_fd, name, O_RDONLY, dir_path)
                      : lb_file_open_at(dir_fd, name, O_RDONLY, NULL);
    if (fd == -ENOENT || fd == -ELOOP || fd == -EINVAL) return 0;  /* replaced meanwhile: as above */
    if (fd < 0) return fd;
    /* Checked again on the file opened: the name may have been linked since the stat. */
    int rc = fstat(fd, &st) != 0 ? -errno : st.st_nlink > 1 ? 0 : lb_bundle_set_mode(b, fd, 0);
    close(fd);
    return rc;
}

/* The bundle's archive directory (`archive`, or the custom one it is this user's symlink to,
 * resolved with the bundle directory's checks) and its archive files, given the bundle's modes:
 * an earlier session may have archived (a reader that cannot read them refuses the whole bundle),
 * or may have made them group readable when this one is private. */
static int set_archive_modes(const lb_bundle *b) {
    char *path = lb_path_join(b->path, "archive");
    if (!path) return -ENOMEM;
    int dir = lb_dir_open_private_mode(path, "archive directory", 0, 0, LB_DIR_MODE(b));
    free(path);
    /* None, or one this bundle may not write in (the archiver refuses it too): nothing to do. */
    if (dir < 0) {
        lb_error_detail_clear();
        return 0;
    }
    int rc = lb_bundle_set_mode(b, dir, 1);
    DIR *d = rc ? NULL : fdopendir(dir);
    if (!d) {
        close(dir);
        return rc;
    }
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        lb_archive_name_kind kind = lb_archive_name_parse(e->d_name, NULL);
        if (kind) rc = set_mode_at(b, dirfd(d), e->d_name, NULL);
    }
    closedir(d);
    return rc;
}

/* The permissions are applied at every open for writing, to the files that exist: the directory,
 * lock, ring, meta, the mirror and durable files an earlier session made, and the archive. Group
 * readable makes them 0750/0640; private makes them 0700/0600 again, so group access given by an
 * earlier open can be taken back. 0 or -errno. */
static int set_existing_modes(lb_bundle *b) {
    int rc = lb_bundle_set_mode(b, b->dir_fd, 1);
    if (!rc) rc = lb_bundle_set_mode(b, b->lock_fd, 0);
    if (!rc) rc = lb_bundle_set_mode(b, b->ring_fd, 0);
    if (!rc) rc = lb_bundle_set_mode(b, b->meta_fd, 0);
    if (!rc) rc = set_mode_at(b, b->dir_fd, "mirror", b->path);
    if (!rc) rc = set_mode_at(b, b->dir_fd, "durable", b->path);
    if (!rc) rc = set_archive_modes(b);
    return rc;
}

/* 1 when the options are usable; otherwise 0 with a detail naming the option, its value and what
 * is allowed (the names are plain words, the same for C and Swift callers). */
static int valid_options(const lb_options *o) {
    if (o->chunk_size < LB_CHUNK_SIZE_MIN || o->chunk_size > LB_CHUNK_SIZE_MAX ||
        (o->chunk_size & (o->chunk_size - 1))) {
        lb_error_detail_set("chunk size %u is not a power of two from %u to %u bytes (4 KiB to 16 MiB)",
                            o->chunk_size, LB_CHUNK_SIZE_MIN, LB_CHUNK_SIZE_MAX);
        return 0;
    }
    if (o->wrap_policy != LB_WRAP_OVERWRITE && o->wrap_policy != LB_WRAP_LOSSLESS) {
        lb_error_detail_set("wrap policy %u is neither overwrite (%u) nor lossless (%u)", o->wrap_policy,
                            LB_WRAP_OVERWRITE, LB_WRAP_LOSSLESS);
        return 0;
    }
    if (o->create_parents > 1) {
        lb_error_detail_set("create parents %u is neither 0 nor 1", o->create_parents);
        return 0;
    }
    if (o->permissions != LB_PERMISSIONS_PRIVATE && o->permissions != LB_PERMISSIONS_GROUP_READABLE) {
        lb_error_detail_set("permissions %u are neither private (%u) nor group readable (%u)", o->permissions,
                            LB_PERMISSIONS_PRIVATE, LB_PERMISSIONS_GROUP_READABLE);
        return 0;
    }
    uint64_t count = o->capacity / o->chunk_size;
    if (count < 2 || count > LB_CHUNK_COUNT_MAX) {
        lb_error_detail_set("capacity %llu bytes holds %llu chunks of %u bytes; a ring needs 2 to %u "
                            "chunks (capacity %llu to %llu bytes with this chunk size)",
                            (unsigned long long)o->capacity, (unsigned long long)count, o->chunk_size,
                            (unsigned)LB_CHUNK_COUNT_MAX, 2ull * o->chunk_size,
                            (unsigned long long)LB_CHUNK_COUNT_MAX * o->chunk_size);
        return 0;
    }
    return 1;
}

static void seal_idle(void *bundle);

static void bundle_free(lb_bundle *b) {
    if (b->ring) munmap(b->ring, b->map_length);
    free(b->abandoned);
    if (b->ring_fd >= 0) close(b->ring_fd);
    if (b->meta_fd >= 0) close(b->meta_fd);
    if (b->lock_fd >= 0) close(b->lock_fd);
    if (b->dir_fd >= 0) close(b->dir_fd);
    for (uint32_t i = 0; i < LB_SITE_TABLE_SIZE; i++) {
        lb_site_entry *e = b->site_table[i];
        while (e) {
            lb_site_entry *next = e->next;
            free(e);
            e = next;
        }
    }
    for (uint32_t i = 0; i < b->logger_count; i++) {
        free((char *)b->loggers[i]->name);
        free(b->loggers[i]);
    }
    free(b->loggers);
    free(b->logger_index);
    lb_filter_free(b);
    lb_durable_free(b);
    pthread_mutex_destroy(&b->lock);
    lb_ticker_destroy(&b->sealer);
    pthread_mutex_destroy(&b->detach_lock);
    free(b->path);
    free(b);
}

/* Writer lock: an OFD lock on `lock`, so it is per open file (a second opener in the same process
 * conflicts too, and closing a reader's descriptor never drops it) and dies with the process. */
static int take_writer_lock(int fd) {
    int rc = lb_file_lock_exclusive(fd);
    if (rc == -EWOULDBLOCK) lb_error_detail_set("another process is writing to this bundle");
    else if (rc) lb_error_detail_set("cannot lock the bundle: %s", strerror(-rc));
    return rc;
}

/* Creates the ring and meta files under temporary names and renames them into place, ring last:
 * a bundle whose `ring` exists is complete, so a crash during creation never leaves a bundle that
 * cannot be opened again. The blocks are allocated for real (posix_fallocate), never a sparse
 * file: a store into a hole on a full disk is SIGBUS. */
static int create_files_in_place(lb_bundle *b, const lb_options *options, lb_ring_header *header);

static int create_files(lb_bundle *b, const lb_options *options, lb_ring_header *header) {
    int rc = create_files_in_place(b, options, header);
    if (rc) {
        /* Give the space back (e.g. after ENOSPC) and leave no half-made files behind. */
        unlinkat(b->dir_fd, "ring.new", 0);
        unlinkat(b->dir_fd, "meta.new", 0);
    }
    return rc;
}

static int create_files_in_place(lb_bundle *b, const lb_options *options, lb_ring_header *header) {
    uint32_t count = (uint32_t)(options->capacity / options->chunk_size);
    memset(header, 0, sizeof *header);
    memcpy(header->magic, LB_RING_MAGIC, 8);
    header->format_version = LB_FORMAT_VERSION;
    header->header_size = LB_RING_HEADER_SIZE;
    header->chunk_size = options->chunk_size;
    header->chunk_count = count;
    header->wrap_policy = options->wrap_policy;
    header->created_wall_ns = (uint64_t)lb_wall_now_ns();
    header->header_crc = lb_ring_header_crc(header);
    atomic_store(&header->next_sequence, 1);

    b->ring_fd = lb_file_create_at(b->dir_fd, "ring.new", b->path);
    if (b->ring_fd < 0) return b->ring_fd;
    off_t length = (off_t)LB_RING_HEADER_SIZE + (off_t)count * options->chunk_size;
    /* A ring the file system cannot hold is refused before posix_fallocate takes every free block
     * (other processes would see ENOSPC until the failed file is removed). */
    struct statvfs fs;
    /* A file system that reports no blocks at all (ramfs) has no limit to check against. */
    if (fstatvfs(b->ring_fd, &fs) == 0 && fs.f_blocks > 0 &&
        (uint64_t)fs.f_bavail * fs.f_frsize < (uint64_t)length) {
        lb_error_detail_set("the %lld-byte ring does not fit: the file system has %llu bytes free",
                            (long long)length, (unsigned long long)fs.f_bavail * fs.f_frsize);
        return -ENOSPC;
    }
    int err = posix_fallocate(b->ring_fd, 0, length);
    if (err) {
        lb_error_detail_set("cannot allocate the %lld-byte ring: %s", (long long)length, strerror(err));
        return -err;
    }
    int rc = lb_pwrite_full(b->ring_fd, header, sizeof *header, 0);
    if (rc) return rc;

    b->meta_fd = lb_file_create_at(b->dir_fd, "meta.new", b->path);
    if (b->meta_fd < 0) return b->meta_fd;
    lb_meta_file_header meta;
    memset(&meta, 0, sizeof meta);
    memcpy(meta.magic, LB_META_MAGIC, 8);
    meta.format_version = LB_FORMAT_VERSION;
    rc = lb_pwrite_full(b->meta_fd, &meta, sizeof meta, 0);
    if (rc) return rc;
    if (fsync(b->meta_fd) != 0 || fsync(b->ring_fd) != 0) return -errno;
    const char *moved = "meta";
    if (renameat(b->dir_fd, "meta.new", b->dir_fd, "meta") != 0 ||
        (moved = "ring", renameat(b->dir_fd, "ring.new", b->dir_fd, "ring")) != 0) {
        int err = errno;
        lb_error_detail_set("cannot put '%s/%s' in place: %s", b->path, moved, strerror(err));
        return -err;
    }
    fsync(b->dir_fd);
    return 0;
}

/* Opens the existing ring and meta and checks the ring header: -EPROTO, with a detail saying what
 * is wrong, for anything that is not a usable bundle of this format version. */
static int open_existing_files(lb_bundle *b, const lb_options *options, lb_ring_header *header) {
    b->meta_fd = lb_file_open_own_at(b->dir_fd, "meta", O_RDWR, b->path);
    if (b->meta_fd == -ENOENT) {
        lb_error_detail_set("'%s/meta' is missing: the bundle's meta file was deleted", b->path);
        return -EPROTO;
    }
    if (b->meta_fd < 0) return b->meta_fd;
    ssize_t n = lb_pread_full(b->ring_fd, header, sizeof *header, 0);
    if (n < 0) return (int)n;
    if ((size_t)n < sizeof *header || memcmp(header->magic, LB_RING_MAGIC, 8) != 0) {
        lb_error_detail_set("'%s/ring' is not a Logbook ring (no ring header)", b->path);
        return -EPROTO;
    }
    if (header->format_version != LB_FORMAT_VERSION) {
        lb_error_detail_set("'%s/ring' is of format version %u; this library reads and writes version %u",
                            b->path, header->format_version, LB_FORMAT_VERSION);
        return -EPROTO;
    }
    lb_options geometry = *options;
    geometry.chunk_size = header->chunk_size;
    geometry.capacity = (uint64_t)header->chunk_count * header->chunk_size;
    geometry.wrap_policy = header->wrap_policy;
    if (header->header_crc != lb_ring_header_crc(header) || header->header_size != LB_RING_HEADER_SIZE ||
        !valid_options(&geometry)) {
        lb_error_detail_set("'%s/ring' has a damaged header (its checksum or geometry is wrong); "
                            "`logbook verify` reads what is left", b->path);
        return -EPROTO;
    }
    struct stat st;
    if (fstat(b->ring_fd, &st) != 0) return -errno;
    if ((uint64_t)st.st_size < LB_RING_HEADER_SIZE + geometry.capacity) {
        lb_error_detail_set("'%s/ring' is cut short: %lld bytes of the %llu its header describes",
                            b->path, (long long)st.st_size,
                            (unsigned long long)(LB_RING_HEADER_SIZE + geometry.capacity));
        return -EPROTO;
    }
    int rc = meta_prepare(b);
    if (rc == -EPROTO)
        lb_error_detail_set("'%s/meta' is not a Logbook meta file of format version %u", b->path,
                            LB_FORMAT_VERSION);
    return rc;
}

/* The bundle directory (made, with its parents when asked, in the mode its permissions say) and
 * its writer lock, taken. 0 or -errno. */
static int open_directory_locked(lb_bundle *b, const lb_options *options) {
    b->group_readable = options->permissions == LB_PERMISSIONS_GROUP_READABLE;
    b->dir_fd = lb_dir_open_private_mode(b->path, "bundle directory", 1, options->create_parents != 0,
                                         LB_DIR_MODE(b));
    if (b->dir_fd < 0) return b->dir_fd;
    b->lock_fd = lb_file_open_own_at(b->dir_fd, "lock", O_RDWR | O_CREAT, b->path);
    if (b->lock_fd < 0) return b->lock_fd;
    return take_writer_lock(b->lock_fd);
}

int lb_bundle_open(const char *path, const lb_options *options, lb_bundle **out) {
    lb_error_detail_clear();
    if (!path || !out) return -EINVAL;
    lb_options defaults;
    lb_options_init(&defaults);
    if (!options) options = &defaults;
    if (!valid_options(options)) return -EINVAL;

    lb_bundle *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    b->ring_fd = b->meta_fd = b->lock_fd = b->dir_fd = -1;
    pthread_mutex_init(&b->lock, NULL);
    lb_ticker_init(&b->sealer);
    pthread_mutex_init(&b->detach_lock, NULL);
    lb_durable_init(b);
    b->path = strdup(path);
    b->next_site_id = 1;
    int rc = 0;
    if (!b->path) { rc = -ENOMEM; goto fail; }
    rc = lb_filter_open(b, options);  /* before any logger can be registered */
    if (rc) goto fail;

    rc = open_directory_locked(b, options);
    if (rc) goto fail;

    b->ticks_per_second = lb_clock_setup();

    int created = 0;
    lb_ring_header header;
    b->ring_fd = lb_file_open_own_at(b->dir_fd, "ring", O_RDWR, path);
    if (b->ring_fd == -ENOENT) {
        created = 1;
        rc = create_files(b, options, &header);
    } else if (b->ring_fd < 0) {
        rc = b->ring_fd;
    } else {
        rc = open_existing_files(b, options, &header);
    }
    if (rc) goto fail;
    /* The permissions: applied at every open for writing, to an existing bundle's files too. */
    rc = set_existing_modes(b);
    if (rc) {
        if (rc != -EMLINK)  /* that detail names the file already */
            lb_error_detail_set("'%s' cannot be made %s: %s", path,
                                b->group_readable ? "group readable" : "private", strerror(-rc));
        goto fail;
    }
    b->chunk_size = header.chunk_size;
    b->chunk_count = header.chunk_count;
    b->wrap_policy = header.wrap_policy;
    b->map_length = LB_RING_HEADER_SIZE + (size_t)b->chunk_count * b->chunk_size;
    void *map = mmap(NULL, b->map_length, PROT_READ | PROT_WRITE, MAP_SHARED, b->ring_fd, 0);
    if (map == MAP_FAILED) { rc = -errno; goto fail; }
    b->ring = map;
    b->chunks = (uint8_t *)map + LB_RING_HEADER_SIZE;
    /* Pre-fault every page writable so that no page fault lands on the hot path. */
    if (madvise(map, b->map_length, MADV_POPULATE_WRITE) != 0) {
        volatile uint8_t *p = map;
        for (size_t i = 0; i < b->map_length; i += 4096) p[i] = p[i];
    }

    if (created) b->meta_offset = sizeof(lb_meta_file_header);
    else {
        cover_found_chunks(b);
        lb_durable_restore(b);  /* a failure leaves the ring as it is: verify reports what is lost */
        recover_chunks(b);
    }
    start_session(b);
    uint64_t before = lb_clock_ticks();
    int64_t wall = lb_wall_now_ns();
    rc = meta_write_session(b, before + (lb_clock_ticks() - before) / 2, wall);
    if (rc) goto fail;

    lb_registry_add_bundle(b);
    b->idle_seal_ms = options->idle_seal_ms;
    b->lossless_wait_ms = options->lossless_wait_ms;
    lb_membarrier();  /* registers the process for expedited barriers */
    if (b->idle_seal_ms > 0 && lb_membarrier() == 0) {
        b->idle_seal_ticks = (uint64_t)((__uint128_t)b->ticks_per_second * b->idle_seal_ms / 1000);
        lb_ticker_start(&b->sealer, b->idle_seal_ms / 2, seal_idle, b);  /* none: chunks wait for flush */
    }
    rc = lb_durable_start(b, options);
    if (rc) {
        if (rc != -EMLINK)  /* that detail names the file already */
            lb_error_detail_set("'%s/durable' cannot be opened or the interval syncer started", path);
        lb_bundle_shutdown(b);
        lb_registry_remove_bundle(b);
        goto fail;
    }
    *out = b;
    return 0;
fail:
    bundle_free(b);
    return rc;
}

/* The last step of shutdown: from here nothing this process does reaches the bundle's files,
 * which another process may own once the writer lock is released. A writer close gave up waiting
 * for (a thread stuck inside a record, e.g. in a description that blocks) still holds a chunk and
 * a record in progress in it, and a detached writer counts its drops in the ring header: the ring
 * is mapped again, at the same address, over anonymous memory, where such late writes land. The
 * header is copied from the file (the drops counted meanwhile are added); the chunks the given-up
 * writers held are read from the file, which keeps them active with the records that reached it
 * (counted in lb_bundle_counters; a record one of them commits later lands in memory only and is
 * counted there as dropped, `closed`). */
static void ring_usage_of(lb_bundle *b, lb_ring_usage *out);

/* The chunks close gave up on, as the file keeps them: their records counted as recovery will
 * count them when the next writer seals them, `end` where a late record's header word would be. */
static void count_abandoned(lb_bundle *b) {
    if (!b->abandoned_count) return;
    uint8_t *chunk = malloc(b->chunk_size);
    for (uint32_t i = 0; i < b->abandoned_count; i++) {
        lb_abandoned_chunk *a = &b->abandoned[i];
        uint64_t at = (uint64_t)((uint8_t *)a->chunk - (uint8_t *)b->ring);
        a->end = a->header_end;  /* if the file cannot be read: as the header said before the remap */
        if (chunk && lb_pread_full(b->ring_fd, chunk, b->chunk_size, at) == (ssize_t)b->chunk_size) {
            recovery_count count = {0, LB_CHUNK_HEADER_SIZE};
            lb_walk_end how;
            a->end = lb_chunk_walk(chunk, b->chunk_size, LB_CHUNK_HEADER_SIZE, recovery_visit,
                                   &count, &how);
            b->abandoned_records += count.records;
        } else {
            b->abandoned_records += a->header_records;
        }
        b->abandoned_bytes += a->end - LB_CHUNK_HEADER_SIZE;
    }
    free(chunk);
}

static void detach_ring_locked(lb_bundle *b) {
    ring_usage_of(b, &b->final_usage);
    for (uint32_t i = 0; i < b->abandoned_count; i++) {
        lb_abandoned_chunk *a = &b->abandoned[i];
        a->header_records = atomic_load(&a->chunk->record_count);
        a->header_end = atomic_load(&a->chunk->committed);
    }
    /* The header as it was, on the stack: no allocation can fail and leave the counters reading
     * zeroed memory (found by review). */
    _Alignas(64) uint8_t saved[LB_RING_HEADER_SIZE];
    memcpy(saved, b->ring, LB_RING_HEADER_SIZE);
    void *fresh = mmap(b->ring, b->map_length, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (fresh == MAP_FAILED) return;  /* the file mapping stays: a stuck writer may still reach it */
    b->ring_detached = 1;
    count_abandoned(b);
    uint8_t *header = (uint8_t *)b->ring;
    /* The file's header as it stays; the copy taken before the remap if it cannot be read. */
    _Alignas(64) uint8_t read_back[LB_RING_HEADER_SIZE];
    if (lb_pread_full(b->ring_fd, read_back, LB_RING_HEADER_SIZE, 0) == (ssize_t)LB_RING_HEADER_SIZE)
        memcpy(saved, read_back, LB_RING_HEADER_SIZE);
    lb_ring_header *file = (lb_ring_header *)(void *)saved;
    size_t drops_at = offsetof(lb_ring_header, drops), drops_end = drops_at + sizeof file->drops;
    memcpy(header, saved, drops_at);
    memcpy(header + drops_end, saved + drops_end, LB_RING_HEADER_SIZE - drops_end);
    for (unsigned i = 0; i < LB_DROP_REASON_COUNT; i++)
        atomic_fetch_add(&b->ring->drops[i], atomic_load(&file->drops[i]));
}

static void detach_ring(lb_bundle *b) {
    pthread_mutex_lock(&b->detach_lock);
    detach_ring_locked(b);
    pthread_mutex_unlock(&b->detach_lock);
}

int lb_bundle_shutdown(lb_bundle *b) {
    if (!b) return -EINVAL;
    if (b->forked) return 0;  /* a forked child leaves the parent's chunks and lock alone */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&b->closed, &expected, 1)) return -EBADF;
    /* From here each thread's next record is dropped (counted `closed`); the ones it began before
     * are kept (detach waits for them), so a thread's records are an unbroken run. */
    lb_writers_stop_all(b);
    lb_ticker_stop(&b->sealer);
    lb_durable_stop(b);
    lb_bundle_chunks_released(b);  /* lossless writers waiting for a chunk see `closed` */
    lb_writers_detach_all(b);
    /* A meta entry being appended right now (under the lock) completes before the archiver's last
     * pass and the release of the writer lock; every later one is refused. */
    pthread_mutex_lock(&b->lock);
    atomic_store(&b->meta_closed, 1);
    pthread_mutex_unlock(&b->lock);
    int rc = 0;
    if (b->archiver_stop) {
        /* Every chunk is sealed now: the archiver persists them all, then stops. */
        rc = b->archiver_stop(b->archiver);
        b->archiver_stop = NULL;
        b->archiver = NULL;  /* freed by stop; `archiving` stays set for racing claimers */
    }
    /* Every chunk is sealed and counted, the archiver done: the counters are exact. */
    atomic_store(&b->ring->writer_state, LB_WRITER_STATE_CLOSED);
    /* A bundle that syncs ends durable; others are scheduled for writeback. */
    int synced = lb_durable_final(b);
    if (synced && !rc) rc = synced;
    if (msync(b->ring, b->map_length, MS_ASYNC) != 0 && !rc) rc = -errno;
    detach_ring(b);
    if (b->lock_fd >= 0) {
        close(b->lock_fd);  /* releases the OFD writer lock */
        b->lock_fd = -1;
    }
    return rc;
}

int lb_bundle_close(lb_bundle *b) {
    if (!b) return -EINVAL;
    int rc = atomic_load(&b->closed) ? 0 : lb_bundle_shutdown(b);
    lb_registry_remove_bundle(b);
    if (b->forked) {
        /* Closing the child's copy of the descriptor keeps the parent's OFD lock (it belongs to
         * the open file description, which the parent still holds). */
        if (b->lock_fd >= 0) close(b->lock_fd);
        b->lock_fd = -1;
        /* The archiver's thread stayed in the parent: free the child's copy of its memory and
         * descriptors without joining, signalling or destroying anything the parent uses. */
        if (b->archiver_forget && b->archiver) b->archiver_forget(b->archiver);
        b->archiver = NULL;
    }
    bundle_free(b);
    return rc;
}

int lb_bundle_flush(lb_bundle *b) {
    if (!b) return -EINVAL;
    if (atomic_load(&b->closed) || b->forked) return -EBADF;
    lb_writers_seal_all(b);
    if (msync(b->ring, b->map_length, MS_ASYNC) != 0) return -errno;
    return 0;
}

int lb_bundle_counters(lb_bundle *b, lb_counters *out) {
    if (!b || !out) return -EINVAL;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->detach_lock);
    lb_ring_header *r = b->ring;
    lb_writers_count_records(b, &out->records, &out->bytes);
    out->chunks_claimed = atomic_load(&r->chunks_claimed);
    out->chunks_reused = atomic_load(&r->chunks_reused);
    out->large_records = atomic_load(&r->large_records);
    for (unsigned i = 0; i < LB_DROP_REASON_COUNT; i++) out->drops[i] = atomic_load(&r->drops[i]);
    /* Writers close gave up on (detach_ring): their records in the file, and a record one of them
     * committed since, in memory only (its header word is where the file's records end). */
    for (uint32_t i = 0; b->ring_detached && i < b->abandoned_count; i++) {
        lb_abandoned_chunk *a = &b->abandoned[i];
        if (a->end + 8 <= b->chunk_size &&
            atomic_load((_Atomic uint64_t *)(void *)((uint8_t *)a->chunk + a->end)) != 0)
            out->drops[LB_DROP_CLOSED]++;
    }
    for (unsigned i = 0; i < LB_DROP_REASON_COUNT; i++) out->dropped += out->drops[i];
    pthread_mutex_unlock(&b->detach_lock);
    return 0;
}

int lb_bundle_ring_usage(lb_bundle *b, lb_ring_usage *out) {
    if (!b || !out) return -EINVAL;
    pthread_mutex_lock(&b->detach_lock);
    if (b->ring_detached) *out = b->final_usage;  /* closed: as the ring was left */
    else ring_usage_of(b, out);
    pthread_mutex_unlock(&b->detach_lock);
    return 0;
}

static void ring_usage_of(lb_bundle *b, lb_ring_usage *out) {
    memset(out, 0, sizeof *out);
    out->chunk_size = b->chunk_size;
    out->chunk_count = b->chunk_count;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load_explicit(&h->state, memory_order_relaxed);
        switch (state) {
        case LB_CHUNK_FREE: out->chunks_free++; continue;
        case LB_CHUNK_CLAIMING: out->chunks_active++; continue;  /* being reset: holds nothing yet */
        case LB_CHUNK_ACTIVE: out->chunks_active++; break;
        case LB_CHUNK_SEALED: out->chunks_sealed++; break;
        case LB_CHUNK_ARCHIVING: out->chunks_archiving++; break;
        case LB_CHUNK_ARCHIVED: out->chunks_archived++; break;
        default: continue;  /* not a state this writer stores */
        }
        uint32_t committed = atomic_load_explicit(&h->committed, memory_order_relaxed);
        out->bytes_in_use += committed < b->chunk_size ? committed : b->chunk_size;
    }
}

/* ---- idle sealer: a chunk whose writer went quiet is sealed so readers and the archiver see it
 * complete. It uses the same steal protocol as flush. ---- */
static void seal_idle(void *bundle) {
    lb_bundle *b = bundle;
    lb_writers_seal_idle(b, b->idle_seal_ticks);
}
