/* archive_files.c — the archive files: what each holds (its END frame, or a scan), the one being
 * written (opened, finished with an END frame, synced and renamed), the list of complete files,
 * retention, announcing a file through on_roll, and failures counted and said once. */
#define _GNU_SOURCE
#include "archiver_internal.h"

/* Records a failure: counted, kept as last_error, said once on stderr per streak of failures. */
int lb_ar_fail(archiver *a, const char *what, const char *name, int rc) {
    pthread_mutex_lock(&a->lock);
    a->stats.failures++;
    a->stats.last_error = rc;
    int say = !a->error_reported;
    a->error_reported = 1;
    pthread_mutex_unlock(&a->lock);
    atomic_fetch_add(&a->b->ring->archive_failures, 1);
    atomic_store(&a->b->ring->archive_last_error, (uint32_t)-rc);
    if (say)
        fprintf(stderr, "logbook: archiver: %s %s/%s: %s (records stay in the ring; retrying)\n",
                what, a->dir, name ? name : "", strerror(-rc));
    return rc;
}

void lb_ar_succeeded(archiver *a) {
    if (!a->error_reported && a->stats.last_error == 0) return;
    pthread_mutex_lock(&a->lock);
    a->stats.last_error = 0;
    a->error_reported = 0;
    pthread_mutex_unlock(&a->lock);
    atomic_store(&a->b->ring->archive_last_error, 0);
}

complete_file *lb_ar_find_file(archiver *a, uint64_t number) {
    for (size_t i = 0; i < a->file_count; i++)
        if (a->files[i].number == number) return &a->files[i];
    return NULL;
}

void lb_ar_announce(archiver *a, const complete_file *f, const char *name) {
    if (!a->o.on_roll) return;
    lb_archive_file info = {NULL, f->number, f->bytes, f->summary.chunks, f->summary.first_sequence,
                            f->summary.last_sequence, f->created_wall_ns, f->summary.records,
                            f->compressed ? f->uncompressed_bytes : f->bytes};
    char *path = lb_path_join(a->dir, name);
    info.path = path ? path : name;
    a->o.on_roll(a->o.on_roll_context, &info);
    free(path);
}

/* ---- what files hold ---- */
void lb_ar_summary_add(file_summary *s, uint64_t sequence, uint64_t claim, uint64_t records) {
    if (!s->chunks || sequence < s->first_sequence) s->first_sequence = sequence;
    if (!s->chunks || sequence > s->last_sequence) s->last_sequence = sequence;
    if (!s->chunks || claim < s->first_claim) s->first_claim = claim;
    if (!s->chunks || claim > s->last_claim) s->last_claim = claim;
    s->chunks++;
    s->records += records;
}

/* The END frame of a complete file of `size` bytes: its last 80 bytes. */
int lb_ar_read_end_frame(lb_archive_source *src, uint32_t chunk_size, file_summary *out) {
    memset(out, 0, sizeof *out);
    uint64_t size = src->size;
    if (size < LB_ARCHIVE_HEADER_SIZE + LB_ARCHIVE_END_FRAME_SIZE) return -1;
    uint64_t at = size - LB_ARCHIVE_END_FRAME_SIZE;
    lb_archive_frame_head head;
    lb_archive_end end;
    if (lb_archive_frame_read(src, at, chunk_size, &head) != LB_FRAME_OK ||
        head.kind != LB_ARCHIVE_FRAME_END ||
        lb_archive_source_read(src, &end, sizeof end, at + LB_ARCHIVE_FRAME_HEAD_SIZE) != (ssize_t)sizeof end ||
        lb_crc32c(0, &end, sizeof end) != head.body_crc || end.end_offset != at)
        return -1;
    *out = (file_summary){end.chunks, end.records, end.first_sequence, end.last_sequence,
                          end.first_claim, end.last_claim, 1};
    return 0;
}

/* Walks the frames of an archive file from its header on, stepping over damage (a frame head
 * fails its check: the next valid head is searched for). Calls `chunk` for each chunk frame whose
 * image header is valid. Returns the offset where the frames end, *problem the offset of the
 * first damage or incomplete frame (UINT64_MAX: none), *end_frame whether the file ends with an
 * END frame. */

uint64_t lb_ar_walk_frames(lb_archive_source *src, uint32_t chunk_size, uint32_t chunk_count,
                            chunk_frame_visitor chunk, void *context, uint64_t *problem,
                            int *end_frame) {
    uint64_t size = src->size;
    uint64_t offset = LB_ARCHIVE_HEADER_SIZE, valid_end = offset;
    *problem = UINT64_MAX;
    *end_frame = 0;
    while (offset < size) {
        lb_archive_frame_head head;
        lb_frame_status status = lb_archive_frame_read(src, offset, chunk_size, &head);
        uint64_t damaged_until = status != LB_FRAME_OK ? lb_archive_source_damaged_until(src, offset) : 0;
        if (damaged_until) {  /* a compressed file's data frame that cannot be read */
            if (*problem == UINT64_MAX) *problem = offset;
            offset = damaged_until;
            *end_frame = 0;
            continue;
        }
        if (status == LB_FRAME_END) {
            if (*problem == UINT64_MAX) *problem = offset;
            break;
        }
        if (status == LB_FRAME_INVALID) {
            if (*problem == UINT64_MAX) *problem = offset;
            offset = lb_archive_frame_resync(src, offset, chunk_size);
            *end_frame = 0;
            continue;
        }
        *end_frame = head.kind == LB_ARCHIVE_FRAME_END;
        if (head.kind == LB_ARCHIVE_FRAME_CHUNK && chunk) {
            lb_chunk_header ch;
            uint64_t body = offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
            if (lb_archive_source_read(src, &ch, sizeof ch, body) == (ssize_t)sizeof ch &&
                lb_chunk_header_check(&ch, (uint32_t)(ch.sequence % chunk_count), chunk_count) == 0)
                chunk(context, body, &head, &ch);
        }
        offset += lb_archive_frame_span(head.length);
        valid_end = offset;
    }
    return valid_end;
}

void lb_ar_summarize_chunk(void *context, uint64_t body_offset, const lb_archive_frame_head *head,
                            const lb_chunk_header *ch) {
    (void)body_offset;
    (void)head;
    lb_ar_summary_add(context, ch->sequence, ch->claim, atomic_load(&ch->record_count));
}

/* The offset of the first frame whose head is not valid or whose body fails its CRC-32C, or
 * UINT64_MAX: in a bundle that syncs, where the last synced write of the file being written ends. */
uint64_t lb_ar_first_unsound_frame(lb_archive_source *src, uint32_t chunk_size) {
    static const size_t piece = 64 << 10;
    uint8_t *buffer = malloc(piece);
    if (!buffer) return LB_ARCHIVE_HEADER_SIZE;
    uint64_t offset = LB_ARCHIVE_HEADER_SIZE, found = UINT64_MAX;
    while (offset < src->size) {
        lb_archive_frame_head head;
        if (lb_archive_frame_read(src, offset, chunk_size, &head) != LB_FRAME_OK) {
            found = offset;
            break;
        }
        uint32_t crc = 0;
        uint64_t body = offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
        for (uint64_t done = 0; done < head.length;) {
            size_t want = head.length - done < piece ? (size_t)(head.length - done) : piece;
            if (lb_archive_source_read(src, buffer, want, body + done) != (ssize_t)want) break;
            crc = lb_crc32c(crc, buffer, want);
            done += want;
        }
        if (crc != head.body_crc) {
            found = offset;
            break;
        }
        offset += lb_archive_frame_span(head.length);
    }
    free(buffer);
    return found;
}

/* ---- files ---- */
lb_archive_name_kind lb_ar_file_kind(const complete_file *f) {
    return f->compressed ? LB_ARCHIVE_NAME_COMPRESSED
                         : f->unsynced ? LB_ARCHIVE_NAME_UNSYNCED : LB_ARCHIVE_NAME_COMPLETE;
}

/* Adds a complete file to the list (under files_lock once the compression thread runs). */
complete_file *lb_ar_add_complete(archiver *a, uint64_t number, uint64_t bytes, int unsynced,
                                   const file_summary *summary) {
    if (lb_array_grow((void **)&a->files, &a->file_capacity, a->file_count + 1, sizeof *a->files))
        return NULL;
    size_t at = a->file_count;
    while (at > 0 && a->files[at - 1].number > number) {
        a->files[at] = a->files[at - 1];
        at--;
    }
    a->files[at] = (complete_file){.number = number, .bytes = bytes, .unsynced = unsynced,
                                   .summary = *summary, .uncompressed_bytes = bytes};
    a->file_count++;
    return &a->files[at];
}

/* The directory's numbers for lb_archive_stats (files_lock held). The archiver thread, which owns
 * the file being written, passes its size; the compression thread passes what the archiver thread
 * last published (lb_ar_publish_directory_stats_compressed). */
static void publish_directory_stats(archiver *a, uint64_t current_bytes) {
    a->current_bytes_published = current_bytes;
    uint64_t bytes = current_bytes, pending = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        bytes += a->files[i].bytes;
        pending += a->files[i].pending || a->files[i].compressing;
    }
    pthread_mutex_lock(&a->lock);
    a->stats.files = a->file_count;
    a->stats.directory_bytes = bytes;
    a->stats.compression_pending = pending;
    pthread_mutex_unlock(&a->lock);
}

void lb_ar_publish_directory_stats_locked(archiver *a) {
    publish_directory_stats(a, a->cur.fd >= 0 ? a->cur.size : 0);
}

/* Called by the compression thread once a file's compressed copy replaced it (or compression gave
 * up), before the file is announced: a roll returns after the announcement, so that what
 * lb_archive_stats says then is the directory as it is (before, the numbers waited for the archiver
 * thread's next pass and still counted the .lba replaced by its .lba.zst). */
void lb_ar_publish_directory_stats_compressed(archiver *a) {
    publish_directory_stats(a, a->current_bytes_published);
}

/* Opens archive file `name` of the directory for reading, plain or compressed: never through a
 * symlink, never blocking (a FIFO), only a regular file whose header is valid. 0 with the source
 * (its descriptor open: close both with lb_ar_close_source) and the header, or -1. */
int lb_ar_open_archive_source(archiver *a, const char *name, lb_archive_file_header *h,
                               lb_archive_source *src) {
    int fd = lb_file_open_at(a->dir_fd, name, O_RDONLY, NULL);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 &&
        lb_archive_source_open(src, fd, (uint64_t)st.st_size, NULL, NULL, NULL) == 0) {
        if (lb_archive_source_read(src, h, sizeof *h, 0) == (ssize_t)sizeof *h &&
            !lb_archive_header_problem(h, src->size))
            return 0;
        lb_archive_source_close(src);
    }
    close(fd);
    return -1;
}

void lb_ar_close_source(lb_archive_source *src) {
    int fd = src->fd;
    lb_archive_source_close(src);
    close(fd);
}

/* What a complete file without a readable END frame holds, from its frames (before retention
 * deletes it, so that the ring header can say what left). */
static void summarize_file(archiver *a, complete_file *f) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, f->number, lb_ar_file_kind(f));
    lb_archive_file_header h;
    lb_archive_source src;
    uint64_t problem;
    int end_frame;
    if (lb_ar_open_archive_source(a, name, &h, &src) != 0) return;
    memset(&f->summary, 0, sizeof f->summary);
    lb_ar_walk_frames(&src, h.chunk_size, h.chunk_count, lb_ar_summarize_chunk, &f->summary, &problem,
                &end_frame);
    f->summary.known = 1;
    lb_ar_close_source(&src);
}

/* Makes the ring header page durable: what it says about the archive must not be older, after a
 * power loss, than the directory it describes. */
static void sync_ring_header(archiver *a) {
    msync(a->b->ring, LB_RING_HEADER_SIZE, MS_SYNC);
}

/* Deletes the oldest complete files while there are more than max_files or all files together
 * exceed the quota (bytes on disk: a compressed file counts its compressed bytes, one waiting for
 * compression its full size). The file being written is never deleted. A file not announced yet
 * (waiting for compression, or being compressed) is announced first, uncompressed (on_roll links
 * it into an uploader's spool), then deleted, and the compression thread discards its copy: the
 * quota holds however far compression is behind. Before a file goes, the ring header says so
 * (first number kept, claims and records retired), made durable first: a reader must never take a
 * file retention deleted for one that went missing. Takes files_lock; runs on the archiver thread
 * (or the thread opening or closing the bundle). */
void lb_ar_announce(archiver *a, const complete_file *f, const char *name);
complete_file *lb_ar_find_file(archiver *a, uint64_t number);
static void enforce_retention_locked(archiver *a);
void lb_ar_enforce_retention(archiver *a) {
    pthread_mutex_lock(&a->files_lock);
    enforce_retention_locked(a);
    pthread_mutex_unlock(&a->files_lock);
}

/* How many of the oldest files retention would delete now (stopping at one being announced). */
static size_t retention_doomed(archiver *a) {
    uint64_t left = a->cur.fd >= 0 ? a->cur.size : 0;
    for (size_t i = 0; i < a->file_count; i++) left += a->files[i].bytes;
    size_t doomed = 0;
    while (doomed < a->file_count && !a->files[doomed].announcing &&
           ((a->o.max_files && a->file_count - doomed > a->o.max_files) ||
            (a->o.quota && left > a->o.quota))) {
        left -= a->files[doomed].bytes;
        doomed++;
    }
    return doomed;
}

static void enforce_retention_locked(archiver *a) {
    size_t doomed = retention_doomed(a);
    /* Files that must go before they were announced: announced now, as they are. */
    for (size_t i = 0; i < doomed; i++) {
        complete_file *f = &a->files[i];
        if (f->announced) continue;
        f->pending = 0;
        f->announcing = 1;
        f->retired = 1;
        complete_file copy = *f;
        pthread_mutex_unlock(&a->files_lock);
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, copy.number, LB_ARCHIVE_NAME_COMPLETE);
        lb_ar_announce(a, &copy, name);
        pthread_mutex_lock(&a->files_lock);
        f = lb_ar_find_file(a, copy.number);
        f->announcing = 0;
        f->announced = 1;
        pthread_cond_broadcast(&a->compress_done);
        doomed = retention_doomed(a);  /* the list may have changed meanwhile */
        i = (size_t)-1;
    }
    if (!doomed) {
        lb_ar_publish_directory_stats_locked(a);
        return;
    }
    lb_ring_header *ring = a->b->ring;
    uint64_t retired_claim = atomic_load(&ring->archive_retired_claim);
    uint64_t retired_records = 0;
    for (size_t i = 0; i < doomed; i++) {
        if (!a->files[i].summary.known) summarize_file(a, &a->files[i]);
        const file_summary *s = &a->files[i].summary;
        if (s->known && s->chunks && s->last_claim + 1 > retired_claim) retired_claim = s->last_claim + 1;
        retired_records += s->records;
    }
    atomic_store(&ring->archive_retired_claim, retired_claim);
    atomic_fetch_add(&ring->archive_retired_records, retired_records);
    atomic_store(&ring->archive_first_number, a->files[doomed - 1].number + 1);
    sync_ring_header(a);
    size_t deleted = 0;
    for (; deleted < doomed; deleted++) {
        complete_file *f = &a->files[deleted];
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, f->number, lb_ar_file_kind(f));
        if (unlinkat(a->dir_fd, name, 0) != 0 && errno != ENOENT) {
            /* Still there: readers find it (older than the first number kept, it is no gap). */
            lb_ar_fail(a, "cannot delete", name, -errno);
            break;
        }
    }
    memmove(a->files, a->files + deleted, (a->file_count - deleted) * sizeof *a->files);
    a->file_count -= deleted;
    if (deleted) fsync_dir(a);
    pthread_mutex_lock(&a->lock);
    a->stats.files_deleted += deleted;
    pthread_mutex_unlock(&a->lock);
    lb_ar_publish_directory_stats_locked(a);
}

void lb_ar_reset_current(archiver *a) {
    a->cur.fd = -1;
    a->cur.size = 0;
    memset(&a->cur.summary, 0, sizeof a->cur.summary);
    a->cur.session_count = 0;
}

/* The ring header's next file number: the highest number an archiver of this ring created, + 1. */
static void publish_next_number(archiver *a) {
    lb_ring_header *ring = a->b->ring;
    uint64_t next = atomic_load(&ring->archive_next_number);
    while (next < a->next_number &&
           !atomic_compare_exchange_weak(&ring->archive_next_number, &next, a->next_number)) {}
}

int lb_ar_open_new_file(archiver *a) {
    uint64_t number = a->next_number;
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_WRITING);
    /* Exclusive: a number is never reused, so whatever has this name already is not ours. */
    int fd = openat(a->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return lb_ar_fail(a, "cannot create", name, -errno);
    lb_bundle_set_mode(a->b, fd, 0);
    lb_archive_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, LB_ARCHIVE_MAGIC, 8);
    h.format_version = LB_FORMAT_VERSION;
    h.header_size = LB_ARCHIVE_HEADER_SIZE;
    h.chunk_size = a->b->chunk_size;
    h.chunk_count = a->b->chunk_count;
    h.file_number = number;
    h.created_wall_ns = (uint64_t)now_ns(a);
    h.ring_created_wall_ns = a->b->ring->created_wall_ns;
    h.header_crc = lb_archive_header_crc(&h);
    int rc = lb_pwrite_full(fd, &h, sizeof h, 0);
    if (!rc) rc = fsync_dir(a);
    if (rc) {
        close(fd);
        unlinkat(a->dir_fd, name, 0);
        return lb_ar_fail(a, "cannot start", name, rc);
    }
    /* The number is used only once the file exists: numbers have no gaps. */
    a->next_number = number + 1;
    publish_next_number(a);
    lb_ar_reset_current(a);
    a->cur.fd = fd;
    a->cur.number = number;
    a->cur.size = sizeof h;
    a->cur.created_wall_ns = (int64_t)h.created_wall_ns;
    return 0;
}

/* Appends the END frame to the current file. */
static int write_end_frame(archiver *a) {
    struct {
        lb_archive_frame_head head;
        lb_archive_end end;
    } frame;
    const file_summary *s = &a->cur.summary;
    frame.end = (lb_archive_end){a->cur.number, s->chunks, s->records, s->first_sequence,
                                 s->last_sequence, s->first_claim, s->last_claim, a->cur.size};
    lb_archive_frame_head_make(&frame.head, sizeof frame.end, LB_ARCHIVE_FRAME_END,
                               lb_crc32c(0, &frame.end, sizeof frame.end));
    _Static_assert(sizeof frame == LB_ARCHIVE_END_FRAME_SIZE, "END frame");
    int rc = lb_pwrite_full(a->cur.fd, &frame, sizeof frame, a->cur.size);
    if (rc) {
        if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open cuts it */ }
        return rc;
    }
    a->cur.size += sizeof frame;
    return 0;
}

/* Completes the current file: END frame, fsync, rename, fsync of the directory, callback,
 * retention. A file whose fsync failed is not called complete (its data may be lost): it is
 * renamed ".lba.unsynced", still read by readers, never handed to on_roll. With `even_empty`
 * (close, recovery) a file without chunks is completed too; otherwise it is left as it is. */
int lb_ar_finish_file(archiver *a, int even_empty, int write_end) {
    if (a->cur.fd < 0 || (a->cur.summary.chunks == 0 && !even_empty)) return 0;
    char from[LB_ARCHIVE_NAME_MAX], to[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(from, a->cur.number, LB_ARCHIVE_NAME_WRITING);
    int rc = write_end ? write_end_frame(a) : 0;
    if (rc) return lb_ar_fail(a, "cannot complete", from, rc);
    rc = fsync(a->cur.fd) == 0 ? 0 : -errno;
    int unsynced = rc != 0;
    if (unsynced) lb_ar_fail(a, "fsync failed for", from, rc);
    lb_archive_name_format(to, a->cur.number, unsynced ? LB_ARCHIVE_NAME_UNSYNCED : LB_ARCHIVE_NAME_COMPLETE);
    if (renameat(a->dir_fd, from, a->dir_fd, to) != 0) {
        int err = -errno;
        /* Not renamed: the END frame goes again, so that the next attempt appends a new one. */
        if (write_end) {
            a->cur.size -= LB_ARCHIVE_END_FRAME_SIZE;
            if (ftruncate(a->cur.fd, (off_t)a->cur.size) != 0) { /* the next open completes it */ }
        }
        return lb_ar_fail(a, "cannot rename", from, err);
    }
    int dir_rc = fsync_dir(a);
    close(a->cur.fd);
    const file_summary *s = &a->cur.summary;
    lb_archive_file info = {NULL, a->cur.number, a->cur.size, s->chunks,
                            s->first_sequence, s->last_sequence, a->cur.created_wall_ns,
                            s->records, a->cur.size};
    file_summary summary = *s;
    summary.known = 1;
    /* With compression the file is announced (on_roll) once compressed: its final name. */
    int compress = a->compressor && !unsynced;
    pthread_mutex_lock(&a->files_lock);
    complete_file *added = lb_ar_add_complete(a, a->cur.number, a->cur.size, unsynced, &summary);
    if (added) {
        added->created_wall_ns = a->cur.created_wall_ns;
        added->announced = !(compress);  /* (announced just below, before retention runs) */
    }
    if (added && compress) {
        added->pending = 1;
        pthread_cond_signal(&a->compress_wake);
    }
    pthread_mutex_unlock(&a->files_lock);
    lb_ar_reset_current(a);
    pthread_mutex_lock(&a->lock);
    a->stats.files_rolled++;
    pthread_mutex_unlock(&a->lock);
    if (!(compress && added) && !unsynced && !dir_rc && a->o.on_roll) {
        char *path = lb_path_join(a->dir, to);
        info.path = path ? path : to;
        a->o.on_roll(a->o.on_roll_context, &info);
        free(path);
    }
    lb_ar_enforce_retention(a);
    if (dir_rc) return lb_ar_fail(a, "fsync failed for the directory of", to, dir_rc);
    return unsynced ? rc : 0;
}

int lb_ar_complete_current(archiver *a, int even_empty) { return lb_ar_finish_file(a, even_empty, 1); }
int lb_ar_roll_current(archiver *a) { return lb_ar_complete_current(a, 0); }
