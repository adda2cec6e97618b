/* archive_recovery.c — at open, before anything new is archived: the directory recovered (a torn
 * tail cut off the file being written, nothing else ever cut), and every chunk the ring holds
 * sealed or archived reconciled with the files: ARCHIVED only if an intact copy is found. */
#define _GNU_SOURCE
#include "archiver_internal.h"

/* ---- recovery of the directory after a crash (or a clean close: the same path) ---- */

/* The file being written whose header is not valid (`size` bytes): one cut short while being
 * created holds nothing and its number was never published (that happens once its header is
 * written), so it is removed and the number used again; any other is completed as it is, damaged
 * (compression leaves it, readers report it). */
static void set_aside_bad_header(archiver *a, uint64_t number, const char *name, uint64_t size,
                                 int *removed) {
    if (size <= sizeof(lb_archive_file_header)) {
        unlinkat(a->dir_fd, name, 0);
        *removed = 1;
        return;
    }
    char to[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(to, number, LB_ARCHIVE_NAME_COMPLETE);
    file_summary none = {0};
    if (renameat(a->dir_fd, name, a->dir_fd, to) == 0) lb_ar_add_complete(a, number, size, 0, &none);
}

/* Cuts the current file at `at` and syncs it: 0, or the failure counted (the file then closed). */
static int cut_current(archiver *a, const char *name, uint64_t at, const char *what) {
    if (ftruncate(a->cur.fd, (off_t)at) == 0 && fsync(a->cur.fd) == 0) return 0;
    int err = -errno;
    close(a->cur.fd);
    lb_ar_reset_current(a);
    return lb_ar_fail(a, what, name, err);
}

/* A bundle that syncs (it has a `durable` file) fdatasyncs every batch before it marks its chunks
 * archived: after a power loss, pages written since the last fdatasync can come back from before
 * (a hole with frames after it, or a frame whose body fails its CRC), and none of their chunks was
 * marked archived, so the ring still holds them. The current file is cut where the first unsound
 * frame starts (its summary and *size then say what remains, *damage none), and they are archived
 * again. 0 or the failure. */
static int cut_unsynced_end(archiver *a, const char *name, const lb_archive_file_header *h,
                            lb_archive_source *src, uint64_t *size, uint64_t *damage,
                            int *ends_complete) {
    struct stat durable;
    int syncs = fstatat(a->b->dir_fd, "durable", &durable, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(durable.st_mode);
    uint64_t unsound = syncs && !*ends_complete ? lb_ar_first_unsound_frame(src, h->chunk_size) : UINT64_MAX;
    if (unsound == UINT64_MAX) return 0;
    memset(&a->cur.summary, 0, sizeof a->cur.summary);
    lb_archive_source_plain(src, a->cur.fd, unsound);
    lb_ar_walk_frames(src, h->chunk_size, h->chunk_count, lb_ar_summarize_chunk, &a->cur.summary,
                      damage, ends_complete);
    int rc = cut_current(a, name, unsound, "cannot cut the unsynced end of");
    if (rc) return rc;
    fprintf(stderr, "logbook: archiver: %s/%s is cut at offset %llu: what followed was written "
                    "after the bundle's last sync and torn (a power loss); chunks the ring "
                    "still holds are archived again\n", a->dir, name, (unsigned long long)unsound);
    *size = unsound;
    *damage = UINT64_MAX;
    return 0;
}

/* What does not parse at `damage` in the current file: a torn tail (nothing valid after it, and an
 * incomplete last frame, its head valid or not all there, or zeros) is cut off; anything else is
 * damage, never cut (*damaged). Writes to the file are serialized (pwritev from this thread;
 * io_uring runs buffered writes to one file in order), so a crash leaves a prefix of what was
 * being written. 0 or the failure. */
static int settle_damage(archiver *a, const char *name, const lb_archive_file_header *h,
                         lb_archive_source *src, uint64_t valid_end, uint64_t damage,
                         uint64_t *size, int *damaged) {
    lb_archive_frame_head head;
    lb_frame_status tail = lb_archive_frame_read(src, damage, h->chunk_size, &head);
    int torn = valid_end == damage &&
               (tail == LB_FRAME_END || lb_file_range_is_zero(a->cur.fd, damage, *size));
    if (torn) {
        int rc = cut_current(a, name, damage, "cannot cut the incomplete end of");
        if (rc) return rc;
        *size = damage;
        return 0;
    }
    *damaged = 1;
    fprintf(stderr, "logbook: archiver: %s/%s is damaged at offset %llu: completed as it is "
                    "(readers report the damage); chunks the ring still holds are "
                    "archived again\n", a->dir, name, (unsigned long long)damage);
    return 0;
}

/* Why the writing file opened as `fd` (or -errno) is not one the archiver may take over,
 * or NULL: a symlink, directory or FIFO in its place, one it cannot read, or one another name
 * reaches (a hard link: the archiver's own writing file never has one, the spool links only
 * complete files, so writing to it would change a file elsewhere). */
static const char *not_resumable(int fd, struct stat *st) {
    if (fd == -EINVAL) return "a FIFO, device or directory";
    if (fd < 0) return strerror(-fd);
    if (fstat(fd, st) != 0) return strerror(errno);
    if (st->st_nlink > 1) return "another name reaches it, a hard link: it is never written";
    return NULL;
}

/* Opens writing file `number` and recovers it: a torn tail left by a crash (an incomplete last
 * frame, or zeros) is cut off; anything else that does not parse is damage, never cut: the file
 * is then completed as it is and readers report the damage. A file that already ends with its END
 * frame (a crash between the END and the rename) is completed. The newest sound file of this ring
 * becomes the current file. */
static int resume_file(archiver *a, uint64_t number, int newest, int *removed) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_WRITING);
    int fd = lb_file_open_at(a->dir_fd, name, O_RDWR, NULL);
    struct stat st;
    const char *why = not_resumable(fd, &st);
    if (why) {
        /* Not a file we can take over: left alone (neither written, nor renamed, nor given a
         * mode); its chunks are reconciled like those of a missing file. */
        if (fd >= 0) close(fd);
        fprintf(stderr, "logbook: archiver: %s/%s is not a file the archiver can resume "
                        "(%s): left alone; chunks the ring still holds are archived again\n",
                a->dir, name, why);
        return 0;
    }
    lb_bundle_set_mode(a->b, fd, 0);
    lb_archive_file_header h;
    uint64_t size = (uint64_t)st.st_size;
    ssize_t got = lb_pread_full(fd, &h, sizeof h, 0);
    const char *problem = got == (ssize_t)sizeof h ? lb_archive_header_problem(&h, size) : "short";
    if (problem) {
        close(fd);
        set_aside_bad_header(a, number, name, size, removed);
        return 0;
    }
    int same_ring = h.ring_created_wall_ns == a->b->ring->created_wall_ns &&
                    h.chunk_count == a->b->chunk_count && h.chunk_size == a->b->chunk_size;
    lb_ar_reset_current(a);
    a->cur.fd = fd;
    a->cur.number = number;
    a->cur.created_wall_ns = (int64_t)h.created_wall_ns;
    uint64_t damage;
    int ends_complete;
    lb_archive_source src;
    lb_archive_source_plain(&src, fd, size);
    uint64_t valid_end = lb_ar_walk_frames(&src, h.chunk_size, h.chunk_count, lb_ar_summarize_chunk,
                                           &a->cur.summary, &damage, &ends_complete);
    int rc = cut_unsynced_end(a, name, &h, &src, &size, &damage, &ends_complete);
    int damaged = 0;
    if (!rc && damage != UINT64_MAX) rc = settle_damage(a, name, &h, &src, valid_end, damage, &size, &damaged);
    if (rc) return rc;
    /* Frames go on at an 8-byte boundary after whatever the file holds. */
    a->cur.size = (size + 7u) & ~(uint64_t)7u;
    if (ends_complete) {
        /* The END frame is there already (a crash before the rename): the file is completed as
         * it is. A damaged one keeps its END frame too: it says what the file should hold. */
        a->cur.size = size;
        return lb_ar_finish_file(a, 1, 0);
    }
    if (!same_ring || damaged || !newest) return lb_ar_complete_current(a, 1);
    return 0;
}

static int compare_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* ---- reconciliation: which chunks of the ring are safely in the archive ---- */
typedef struct ring_chunk {
    uint64_t sequence, claim;
    uint32_t slot, committed, records;
    int found;
} ring_chunk;

typedef struct reconcile_context {
    archiver *a;
    lb_archive_source *src;
    ring_chunk *chunks;
    size_t count, unresolved;
    uint8_t *buffer;
} reconcile_context;

static int compare_ring_chunks(const void *x, const void *y) {
    const ring_chunk *a = x, *b = y;
    return a->sequence < b->sequence ? -1 : a->sequence > b->sequence;
}

static ring_chunk *find_ring_chunk(reconcile_context *r, uint64_t sequence) {
    size_t lo = 0, hi = r->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->chunks[mid].sequence < sequence) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->count && r->chunks[lo].sequence == sequence ? &r->chunks[lo] : NULL;
}

/* A chunk frame: an intact copy (same claim, body CRC right) of at least what the ring holds
 * resolves its chunk. After a power loss the ring's pages can be older than the file's (the ring
 * is never synced, every archive batch is): the chunk can read *active* there, with fewer
 * records, and recovery then sealed it at that shorter end. The file's copy was sealed and is
 * the whole chunk: archiving the ring's prefix again would put the sequence in two files. */
static void reconcile_chunk(void *context, uint64_t body_offset, const lb_archive_frame_head *head,
                            const lb_chunk_header *ch) {
    reconcile_context *r = context;
    ring_chunk *k = find_ring_chunk(r, ch->sequence);
    if (!k || k->found || k->claim != ch->claim || head->length < k->committed) return;
    if (lb_archive_source_read(r->src, r->buffer, head->length, body_offset) != (ssize_t)head->length ||
        lb_crc32c(0, r->buffer, head->length) != head->body_crc)
        return;
    k->found = 1;
    r->unresolved--;
}

/* Whether any unresolved chunk's sequence lies in [first, last]. */
static int wants_range(const reconcile_context *r, uint64_t first, uint64_t last) {
    for (size_t i = 0; i < r->count; i++)
        if (!r->chunks[i].found && r->chunks[i].sequence >= first && r->chunks[i].sequence <= last)
            return 1;
    return 0;
}

/* Walks the chunk frames of archive file `number` when its header names this ring (its
 * creation time and geometry); a file of another ring, or one that does not open, is passed
 * over. `current`, when given, points at the open source during the walk. */
static void walk_this_rings_file(archiver *a, uint64_t number, lb_archive_name_kind kind,
                                 chunk_frame_visitor visit, void *context, lb_archive_source **current) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, kind);
    lb_archive_file_header h;
    lb_archive_source src;
    uint64_t problem;
    int end_frame;
    if (lb_ar_open_archive_source(a, name, &h, &src) != 0) return;
    if (h.ring_created_wall_ns == a->b->ring->created_wall_ns && h.chunk_size == a->b->chunk_size &&
        h.chunk_count == a->b->chunk_count) {
        if (current) *current = &src;
        lb_ar_walk_frames(&src, h.chunk_size, h.chunk_count, visit, context, &problem, &end_frame);
        if (current) *current = NULL;
    }
    lb_ar_close_source(&src);
}

static void reconcile_file(reconcile_context *r, uint64_t number, lb_archive_name_kind kind,
                           const file_summary *summary) {
    archiver *a = r->a;
    if (summary && summary->known &&
        (!summary->chunks || !wants_range(r, summary->first_sequence, summary->last_sequence)))
        return;
    walk_this_rings_file(a, number, kind, reconcile_chunk, r, &r->src);
}

/* A lossless ring's sealed records are all in the files (theirs, summed from their END frames,
 * and those retention deleted, recorded in the header) or in the ring chunks no file holds. After
 * a power loss the ring header's page can be older than the files (they are synced with every
 * batch, the ring never): its `records` then misses chunks sealed since, and verify would find
 * more records than the bundle says it holds. Raised to that sum, never lowered, only after a
 * session that did not close cleanly, and only when every file's summary is known (a damaged
 * file's records are not). */
static void raise_records_to_files(archiver *a, const reconcile_context *r) {
    lb_bundle *b = a->b;
    if (b->ring->wrap_policy != LB_WRAP_LOSSLESS || !b->after_unclean_session) return;
    uint64_t held = atomic_load(&b->ring->archive_retired_records);
    if (a->cur.fd >= 0) held += a->cur.summary.records;
    for (size_t i = 0; i < a->file_count; i++) {
        if (!a->files[i].summary.known) return;
        held += a->files[i].summary.records;
    }
    for (size_t i = 0; i < r->count; i++)
        if (!r->chunks[i].found) held += r->chunks[i].records;
    uint64_t counted = atomic_load(&b->ring->records);
    while (counted < held && !atomic_compare_exchange_weak(&b->ring->records, &counted, held)) {}
    if (counted < held)
        fprintf(stderr, "logbook: archiver: the ring header counted %llu sealed records, the archive "
                        "files and the ring hold %llu (its page was older than the files: a power "
                        "loss); counted %llu\n", (unsigned long long)counted,
                (unsigned long long)held, (unsigned long long)held);
}

/* ---- claims a power loss emptied ----
 * The claims from the last sync's chunks_claimed on were never durable: after a power loss the
 * pages of their chunks can come back from before the claim, and the claim then holds nothing,
 * in the ring or in a file. Verify excuses such claims while the sync that found them is the
 * last one (its chunks_claimed); the writer reopening the bundle syncs again, so it counts them
 * where verify keeps excusing them: in claims_abandoned, claims a crash cut short. */
typedef struct claim_marks {
    uint64_t from, to;  /* the claims looked for: [from, to) */
    uint8_t *held;      /* held[claim - from]: a chunk in the ring or a file has it */
} claim_marks;

static void mark_claim(claim_marks *m, uint64_t claim) {
    if (claim >= m->from && claim < m->to) m->held[claim - m->from] = 1;
}

static void mark_frame_claim(void *context, uint64_t body_offset, const lb_archive_frame_head *head,
                             const lb_chunk_header *ch) {
    (void)body_offset;
    (void)head;
    mark_claim(context, ch->claim);
}

static void mark_file_claims(archiver *a, claim_marks *m, uint64_t number, lb_archive_name_kind kind,
                             const file_summary *summary) {
    if (summary && summary->known && (!summary->chunks || summary->last_claim < m->from)) return;
    walk_this_rings_file(a, number, kind, mark_frame_claim, m, NULL);
}

/* Lossless, after an unclean session of a bundle that syncs: the claims after the last sync that
 * neither the ring nor a file holds are counted in claims_abandoned (and said). */
static void count_emptied_claims(archiver *a) {
    lb_bundle *b = a->b;
    claim_marks m = {b->durable_claimed_at_open, atomic_load(&b->ring->chunks_claimed), NULL};
    if (b->ring->wrap_policy != LB_WRAP_LOSSLESS || !b->after_unclean_session || !m.from ||
        m.to <= m.from || m.to - m.from > ((uint64_t)b->chunk_count << 8))
        return;
    m.held = calloc(m.to - m.from, 1);
    if (!m.held) return;
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        if (lb_chunk_header_check(h, slot, b->chunk_count) == 0) mark_claim(&m, h->claim);
    }
    if (a->cur.fd >= 0) mark_file_claims(a, &m, a->cur.number, LB_ARCHIVE_NAME_WRITING, NULL);
    for (size_t i = 0; i < a->file_count; i++)
        mark_file_claims(a, &m, a->files[i].number, lb_ar_file_kind(&a->files[i]), &a->files[i].summary);
    uint64_t emptied = 0;
    for (uint64_t c = m.from; c < m.to; c++) emptied += !m.held[c - m.from];
    free(m.held);
    if (!emptied) return;
    atomic_fetch_add(&b->ring->claims_abandoned, emptied);
    fprintf(stderr, "logbook: archiver: %llu chunk claims after the last sync hold nothing (a power "
                    "loss took what no sync covered); counted as claims a crash cut short\n",
            (unsigned long long)emptied);
}

/* Every chunk the ring holds SEALED or ARCHIVED is looked for in the files, newest file first:
 * ARCHIVED if an intact copy is found (also a copy whose write completed just before a crash), or
 * if it was archived into a file retention has deleted since; SEALED otherwise, so that it is
 * archived (again) before its slot can be reused. */
static int reconcile_ring(archiver *a) {
    lb_bundle *b = a->b;
    /* The files' chunks are behind the ring's counters too (its header page can be older than
     * them after a power loss): a sequence or claim number is never handed out twice. */
    if (a->cur.fd >= 0 && a->cur.summary.chunks)
        lb_ring_counters_cover(b, a->cur.summary.last_sequence, a->cur.summary.last_claim, 0);
    for (size_t i = 0; i < a->file_count; i++)
        if (a->files[i].summary.known && a->files[i].summary.chunks)
            lb_ring_counters_cover(b, a->files[i].summary.last_sequence,
                                   a->files[i].summary.last_claim, 0);
    reconcile_context r = {a, NULL, calloc(b->chunk_count, sizeof(ring_chunk)), 0, 0,
                           malloc(b->chunk_size)};
    if (!r.chunks || !r.buffer) {
        free(r.chunks);
        free(r.buffer);
        return -ENOMEM;
    }
    for (uint32_t slot = 0; slot < b->chunk_count; slot++) {
        lb_chunk_header *h = lb_chunk_at(b, slot);
        uint32_t state = atomic_load(&h->state);
        if ((state != LB_CHUNK_SEALED && state != LB_CHUNK_ARCHIVED) ||
            lb_chunk_header_check(h, slot, b->chunk_count) != 0)
            continue;
        r.chunks[r.count++] = (ring_chunk){h->sequence, h->claim, slot, atomic_load(&h->committed),
                                           atomic_load(&h->record_count), 0};
    }
    if (r.count > 1) qsort(r.chunks, r.count, sizeof *r.chunks, compare_ring_chunks);
    r.unresolved = r.count;
    if (r.unresolved && a->cur.fd >= 0)
        reconcile_file(&r, a->cur.number, LB_ARCHIVE_NAME_WRITING, NULL);
    for (size_t i = a->file_count; i-- > 0 && r.unresolved;) {
        complete_file *f = &a->files[i];
        reconcile_file(&r, f->number, lb_ar_file_kind(f), &f->summary);
    }
    /* An archived chunk whose file retention deleted has no copy left, and needs none: its claim
     * is below the retired claim the ring header recorded before the deletion. */
    uint64_t retired_claim = atomic_load(&b->ring->archive_retired_claim);
    uint64_t reverted = 0;
    for (size_t i = 0; i < r.count; i++) {
        lb_chunk_header *h = lb_chunk_at(b, r.chunks[i].slot);
        int retired = !r.chunks[i].found && r.chunks[i].claim < retired_claim &&
                      atomic_load(&h->state) == LB_CHUNK_ARCHIVED;
        uint32_t want = r.chunks[i].found || retired ? LB_CHUNK_ARCHIVED : LB_CHUNK_SEALED;
        if (atomic_exchange(&h->state, want) == LB_CHUNK_ARCHIVED && want == LB_CHUNK_SEALED)
            reverted++;
    }
    raise_records_to_files(a, &r);
    free(r.chunks);
    free(r.buffer);
    if (reverted)
        fprintf(stderr, "logbook: archiver: %llu chunks marked archived have no intact copy in %s; "
                        "archiving them again\n", (unsigned long long)reverted, a->dir);
    lb_bundle_chunks_released(a->b);
    return 0;
}

static void note_damage(void *context, uint64_t offset, uint64_t length, const char *what) {
    (void)offset;
    (void)length;
    (void)what;
    *(int *)context = 1;
}

/* 1 when `name` is a file another name reaches (a hard link) whose header does not show it to be
 * an archive file of this ring: one planted from outside under an archive name (the archiver's
 * own files get a second name only from the uploader's spool, complete and with their header).
 * Such a file is never this archive's: not written, renamed, given a mode, or counted for the
 * numbering (the next number stays the next, so verify finds nothing missing) or for retention;
 * readers report it. A single-name file with a bad header stays this archive's, damaged. */
static int is_planted_link(const archiver *a, const char *name) {
    struct stat st;
    if (fstatat(a->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_nlink <= 1)
        return 0;
    int fd = lb_file_open_at(a->dir_fd, name, O_RDONLY, NULL);
    if (fd < 0) return 0;
    lb_archive_source src;
    lb_archive_file_header h;
    int ours = 0;
    if (fstat(fd, &st) == 0 && lb_archive_source_open(&src, fd, (uint64_t)st.st_size, NULL, NULL, NULL) == 0) {
        ours = lb_archive_source_read(&src, &h, sizeof h, 0) == (ssize_t)sizeof h &&
               !lb_archive_header_problem(&h, src.size) &&
               h.ring_created_wall_ns == a->b->ring->created_wall_ns;
        lb_archive_source_close(&src);
    }
    close(fd);
    return !ours;
}

/* A complete archive file found at open (`name`): added to the list with what its END frame says,
 * unless it belongs to another bundle (said once: `*foreign` counts them). */
static void list_complete_file(archiver *a, const char *name, lb_archive_name_kind kind,
                               uint64_t number, unsigned *foreign) {
    int file = lb_file_open_at(a->dir_fd, name, O_RDONLY, NULL);
    struct stat st;
    if (file < 0) return;
    if (fstat(file, &st) != 0) {
        close(file);
        return;
    }
    lb_archive_file_header h;
    lb_archive_source src;
    int damaged = 0;
    int opened = lb_archive_source_open(&src, file, (uint64_t)st.st_size, note_damage, &damaged,
                                        NULL) == 0;
    int header_ok = opened && lb_archive_source_read(&src, &h, sizeof h, 0) == (ssize_t)sizeof h &&
                    !lb_archive_header_problem(&h, src.size);
    if (header_ok && h.ring_created_wall_ns != a->b->ring->created_wall_ns) {
        /* Another bundle's file (a directory shared by mistake): never ours to delete. */
        if (!(*foreign)++)
            fprintf(stderr, "logbook: archiver: %s/%s belongs to another bundle: left alone, "
                            "not counted for retention\n", a->dir, name);
    } else {
        /* The mode its bundle's permissions say; never to a file another name reaches (the
         * spool's link of a sound file: the spool's mode is its own). */
        if (st.st_nlink == 1) lb_bundle_set_mode(a->b, file, 0);
        file_summary summary;
        if (opened) lb_ar_read_end_frame(&src, a->b->chunk_size, &summary);
        else memset(&summary, 0, sizeof summary);
        complete_file *f = lb_ar_add_complete(a, number, (uint64_t)st.st_size,
                                              kind == LB_ARCHIVE_NAME_UNSYNCED, &summary);
        if (f) {
            f->compressed = kind == LB_ARCHIVE_NAME_COMPRESSED;
            f->created_wall_ns = header_ok ? (int64_t)h.created_wall_ns : 0;
            /* A compressed file with a sound seek table: the one kept when its .lba is there
             * too (a crash between the rename and the delete). */
            f->sound_zst = f->compressed && !damaged;
        }
    }
    if (opened) lb_archive_source_close(&src);
    close(file);
}

/* The same number twice: a .lba and the .lba.zst made of it. A sound .zst was fsynced and checked
 * before its rename: the .lba goes. Otherwise the .zst goes, and the .lba is compressed again.
 * Then what is left to compress and announce is marked. */
static void settle_twins(archiver *a) {
    size_t kept_files = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        complete_file *twin = i + 1 < a->file_count && a->files[i + 1].number == f->number
                                  ? &a->files[i + 1] : NULL;
        if (twin && twin->compressed != f->compressed) {
            complete_file *zst = f->compressed ? f : twin, *plain = f->compressed ? twin : f;
            complete_file *loser = zst->sound_zst ? plain : zst;
            char name[LB_ARCHIVE_NAME_MAX];
            lb_archive_name_format(name, loser->number, lb_ar_file_kind(loser));
            unlinkat(a->dir_fd, name, 0);
            a->files[kept_files++] = zst->sound_zst ? *zst : *plain;
            i++;
            continue;
        }
        a->files[kept_files++] = *f;
    }
    if (kept_files != a->file_count) fsync_dir(a);
    a->file_count = kept_files;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        /* Complete files of this ring not compressed yet (a crash came first, or an earlier run
         * did not compress) are compressed now, and announced then. A damaged one (no readable
         * END frame) is left as it is. The others were announced by the run that made them. */
        f->pending = a->compressor && !f->compressed && !f->unsynced && f->summary.known;
        f->announced = !f->pending;
    }
}

/* Resumes the files being written (numbers writing[0..count), ascending; `highest` the highest
 * number in the directory) and sets the next file number. 0 or the first failure. */
static int resume_writing_files(archiver *a, const uint64_t *writing, size_t count, uint64_t highest) {
    /* Never reuse a number, not even one whose file went missing: readers would take the new
     * file for the old one (only a file removed below, that never had a header, gives its number
     * back). */
    a->next_number = highest + 1;
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        int removed = 0;
        int resumed = resume_file(a, writing[i], i + 1 == count, &removed);
        if (!rc) rc = resumed;
        if (removed && writing[i] == highest) {
            uint64_t below = 0;
            for (size_t k = 0; k < a->file_count; k++)
                if (a->files[k].number > below) below = a->files[k].number;
            for (size_t k = 0; k < i; k++)
                if (writing[k] > below) below = writing[k];
            a->next_number = below + 1;
        }
    }
    uint64_t recorded = atomic_load(&a->b->ring->archive_next_number);
    if (recorded > a->next_number) a->next_number = recorded;
    if (a->cur.fd >= 0 && a->cur.number >= a->next_number) a->next_number = a->cur.number + 1;
    return rc;
}

/* Files retention had already retired (the ring header says so) but a crash kept: they go now,
 * so that what the header counts and what the directory holds agree. */
static void remove_retired_files(archiver *a) {
    uint64_t first_kept = atomic_load(&a->b->ring->archive_first_number);
    size_t kept = 0;
    for (size_t i = 0; i < a->file_count; i++) {
        complete_file *f = &a->files[i];
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, f->number, lb_ar_file_kind(f));
        if (f->number < first_kept && unlinkat(a->dir_fd, name, 0) == 0) continue;
        a->files[kept++] = *f;
    }
    if (kept != a->file_count) fsync_dir(a);
    a->file_count = kept;
}

int lb_ar_recover_directory(archiver *a) {
    int fd = dup(a->dir_fd);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    uint64_t *writing = NULL;
    size_t writing_count = 0, writing_capacity = 0;
    uint64_t highest = 0;
    unsigned foreign = 0, planted = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t number;
        lb_archive_name_kind kind = lb_archive_name_parse(e->d_name, &number);
        if (!kind) continue;
        if (kind == LB_ARCHIVE_NAME_COMPRESSING) {
            /* A compression a crash cut short: its .lba is still there. */
            unlinkat(a->dir_fd, e->d_name, 0);
            continue;
        }
        if (is_planted_link(a, e->d_name)) {
            if (!planted++)
                fprintf(stderr, "logbook: archiver: %s/%s has another name (a hard link) and is not "
                                "an archive file of this bundle: left alone, never given a mode, "
                                "not counted\n", a->dir, e->d_name);
            continue;
        }
        if (number > highest) highest = number;
        if (kind == LB_ARCHIVE_NAME_WRITING) {
            if (lb_array_grow((void **)&writing, &writing_capacity, writing_count + 1, sizeof *writing) == 0)
                writing[writing_count++] = number;
            continue;
        }
        list_complete_file(a, e->d_name, kind, number, &foreign);
    }
    settle_twins(a);
    closedir(d);
    if (writing_count > 1) qsort(writing, writing_count, sizeof *writing, compare_u64);
    int rc = resume_writing_files(a, writing, writing_count, highest);
    free(writing);
    remove_retired_files(a);
    if (!rc && a->cur.fd >= 0 && a->cur.size + LB_ARCHIVE_END_FRAME_SIZE >= a->o.max_file_size)
        rc = lb_ar_roll_current(a);
    /* Always, whatever failed above: a chunk is marked archived only with an intact copy. */
    int reconciled = reconcile_ring(a);
    if (!rc) rc = reconciled;
    count_emptied_claims(a);
    lb_ar_enforce_retention(a);
    return rc;
}
