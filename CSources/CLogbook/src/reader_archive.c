/* reader_archive.c — the reader's archive files: the directory listed, each file opened (plain or
 * compressed, through archive_source.c), its frames walked into chunk references, its END frame
 * checked, and an archived chunk read and walked like a ring chunk. */
#define _GNU_SOURCE
#include "reader_internal.h"

/* ---- archive files ---- */
/* Adds the archive files `d` lists that r->archives lacks, in number order; a file renamed since
 * (.lba.writing to .lba, .lba to .lba.zst) keeps its entry under its new name. */
static void add_listed_files(lb_reader *r, DIR *d) {
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t number;
        int kind = (int)lb_archive_name_parse(e->d_name, &number);
        if (!kind || kind == LB_ARCHIVE_NAME_COMPRESSING) continue;  /* not complete yet */
        archive_file *f = NULL;
        for (size_t i = 0; i < r->archive_count; i++)
            if (r->archives[i].number == number) f = &r->archives[i];
        /* Both the .lba and its .lba.zst (for a moment, or after a crash): the same bytes; the
         * .lba is the one about to go. */
        if (f && (f->kind == kind || f->kind == LB_ARCHIVE_NAME_COMPRESSED)) continue;
        char *name = lb_path_join(r->archive_dir, e->d_name);
        if (!name) continue;
        if (f) {  /* renamed: complete now */
            free(f->name);
            f->name = name;
            f->kind = kind;
            continue;
        }
        if (lb_array_grow((void **)&r->archives, &r->archive_capacity, r->archive_count + 1,
                 sizeof *r->archives)) {
            free(name);
            continue;
        }
        size_t at = r->archive_count++;
        while (at > 0 && r->archives[at - 1].number > number) {
            r->archives[at] = r->archives[at - 1];
            at--;
        }
        r->archives[at] = (archive_file){.number = number, .name = name, .fd = -1, .kind = kind,
                                         .in_directory = 1};
    }
}

/* Whether the numbers listed have a hole: archive files are numbered without gaps (retention
 * deletes the oldest), so a hole is a file deleted or damaged, or one a listing missed. */
static int numbers_have_a_hole(const lb_reader *r) {
    for (size_t i = 1; i < r->archive_count; i++)
        if (r->archives[i].number > r->archives[i - 1].number + 1) return 1;
    return 0;
}

/* Files made and deleted between two listings: a follower behind retention never saw them. The
 * numbers above the highest an earlier listing found and below the lowest this one found above
 * it are files retention deleted before this reader could read them, counted when the next
 * listing still lacks them (a listing can miss a file being renamed; the next finds it)
 * (lb_reader_archive_files_deleted_unread). The first listing counts nothing: what retention
 * deleted before a reader began is not its loss. */
static int archive_listed(const lb_reader *r, uint64_t number) {
    for (size_t i = 0; i < r->archive_count; i++)
        if (r->archives[i].number == number) return 1;
    return 0;
}

static void note_files_deleted_between_listings(lb_reader *r) {
    for (uint64_t n = r->archive_gap_low; n && n <= r->archive_gap_high; n++)
        if (!archive_listed(r, n)) r->archive_files_deleted_unread++;
    r->archive_gap_low = r->archive_gap_high = 0;
    uint64_t before = r->archive_listed_max, lowest_new = 0, highest = before;
    for (size_t i = 0; i < r->archive_count; i++) {
        uint64_t n = r->archives[i].number;
        if (n > before && (!lowest_new || n < lowest_new)) lowest_new = n;
        if (n > highest) highest = n;
    }
    if (before && lowest_new > before + 1) {
        r->archive_gap_low = before + 1;
        r->archive_gap_high = lowest_new - 1;
    }
    r->archive_listed_max = highest;
}

void lb_rd_list_archive_directory(lb_reader *r) {
    if (!r->archive_dir) return;
    DIR *d = opendir(r->archive_dir);
    if (!d) {
        r->archive_dir_missing = errno == ENOENT;
        if (errno != ENOENT && !r->archive_dir_reported) { /* said once, never skipped in silence */
            r->archive_dir_reported = 1;
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, "archive", 0, 0, 0, "the archive directory cannot be read: %s",
                       strerror(errno));
        }
        return;
    }
    r->archive_dir_missing = 0;
    /* A file renamed while readdir runs (the archiver completing or compressing it) can be missed
     * by that listing, and its chunks read after later ones. A hole in the numbers is listed
     * again, at most twice (a file really missing stays a hole; verify reports it). */
    add_listed_files(r, d);
    for (int again = 0; again < 2 && numbers_have_a_hole(r); again++) {
        rewinddir(d);
        add_listed_files(r, d);
    }
    closedir(d);
    note_files_deleted_between_listings(r);
}

/* The index in r->archives of archive file `number`. */
static size_t archive_index(const lb_reader *r, uint64_t number) {
    size_t low = 0, high = r->archive_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (r->archives[middle].number < number) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* The archive file a chunk reference was listed from, found by its number when a later listing
 * moved it in r->archives (archives are kept in number order; a file a readdir missed while it
 * was renamed is inserted before later ones when the next listing finds it). */
archive_file *lb_rd_ref_file(lb_reader *r, const chunk_ref *ref) {
    archive_file *f = &r->archives[ref->source];
    if (f->number == ref->file_number) return f;
    return &r->archives[archive_index(r, ref->file_number)];  /* entries are never removed */
}

/* The name issues carry: the file's base name, kept for the reader's lifetime. */
const char *lb_rd_archive_label(lb_reader *r, archive_file *f) {
    (void)r;
    if (!f->label) {
        const char *slash = strrchr(f->name, '/');
        f->label = strdup(slash ? slash + 1 : f->name);
    }
    return f->label ? f->label : "archive";
}

static void archive_meta_frame(lb_reader *r, archive_file *f, const lb_archive_frame_head *head) {
    uint32_t length = head->length;
    uint8_t *body = malloc(length ? length : 1);
    if (!body) return;
    if (lb_archive_source_read(&f->src, body, length, f->offset + LB_ARCHIVE_FRAME_HEAD_SIZE) != (ssize_t)length ||
        lb_crc32c(0, body, length) != head->body_crc ||
        lb_meta_parse_entries(body, length, lb_rd_meta_visit, r) != 0)
        lb_rd_add_issue(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), f->offset, length,
                  "meta entries in an archive frame do not parse or fail their checksum");
    free(body);
}

/* A complete file's frames against its END frame: a file cut short or missing chunks says so. */
static void check_end_frame(lb_reader *r, archive_file *f, uint64_t size) {
    const char *label = lb_rd_archive_label(r, f);
    if (!f->end_found) {
        lb_rd_add_issuef(r, LB_ISSUE_TRUNCATED, label, f->offset, size > f->offset ? size - f->offset : 0,
                   0, "complete archive file has no END frame: it was cut short (%llu chunks read)",
                   (unsigned long long)f->chunk_frames);
        return;
    }
    if (f->end.file_number != f->number && f->in_directory)
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, label, f->end.end_offset, 0, 0,
                   "END frame says file %llu, the name %llu", (unsigned long long)f->end.file_number,
                   (unsigned long long)f->number);
    if (f->end.chunks != f->chunk_frames || f->end.records != f->chunk_records) {
        uint64_t lost = f->end.records > f->chunk_records ? f->end.records - f->chunk_records : 0;
        lb_rd_add_issuef(r, LB_ISSUE_MISSING, label, f->end.end_offset, 0, lost,
                   "the END frame counts %llu chunks with %llu records; %llu chunks with %llu "
                   "records were read",
                   (unsigned long long)f->end.chunks, (unsigned long long)f->end.records,
                   (unsigned long long)f->chunk_frames, (unsigned long long)f->chunk_records);
    }
}

/* What a compressed file's source found damaged (its seek table, listing or a data frame), as an
 * issue of the file. */
typedef struct source_damage {
    lb_reader *r;
    const char *label;
} source_damage;

static void source_damaged(void *context, uint64_t offset, uint64_t length, const char *what) {
    source_damage *d = context;
    lb_rd_add_issuef(d->r, LB_ISSUE_CORRUPT, d->label, offset, length, 0, "%s", what);  /* copied */
}

void lb_rd_close_archive_file(archive_file *f) {
    lb_archive_source_close(&f->src);
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    f->src.fd = -1;  /* opened again (an unfinished chunk of it), its source is made again */
}

/* Opens archive file `f` (never through a symlink inside a directory, never blocking on a FIFO).
 * A file deleted since the listing was compressed meanwhile (or completed): the directory is
 * listed again and its new name opened. 0, or errno. */
static int open_archive_file(lb_reader *r, uint64_t number) {
    for (int attempt = 0;; attempt++) {
        archive_file *f = NULL;
        for (size_t i = 0; i < r->archive_count && !f; i++)
            if (r->archives[i].number == number) f = &r->archives[i];
        if (!f) return ENOENT;
        int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (f->in_directory ? O_NOFOLLOW : 0);
        f->fd = open(f->name, flags);
        if (f->fd >= 0) {
            f->opened_kind = f->kind;
            return 0;
        }
        int err = errno;
        f->fd = -1;
        if (err != ENOENT || !f->in_directory || attempt == 2) return err;
        lb_rd_list_archive_directory(r);
    }
}

/* Archive file `index` open and its source ready, or NULL when it cannot be read now (then
 * reported and marked done when it never can). */
static archive_file *ready_archive_file(lb_reader *r, size_t index) {
    archive_file *f = &r->archives[index];
    if (f->fd < 0) {
        uint64_t number = f->number;
        int err = open_archive_file(r, number);
        f = &r->archives[index];
        if (f->number != number) return NULL;  /* relisted: the files moved; the next pass reads it */
        if (err) {
            /* Gone though the directory was listed again: deleted (retention) since the listing,
             * before this reader read it: counted (lb_reader_archive_files_deleted_unread; the
             * ring counts its records as retired). Not looked for again. */
            if (err == ENOENT) {
                f->done = 1;
                r->archive_files_deleted_unread++;
                return NULL;
            }
            lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 0, 0, 0,
                       "archive file cannot be opened: %s", strerror(err));
            f->done = 1;
            return NULL;
        }
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0) return NULL;
    if (!S_ISREG(st.st_mode)) {
        lb_rd_add_issue(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 0, 0,
                  "archive file is not a regular file (a FIFO, device or directory): not read");
        f->done = 1;
        return NULL;
    }
    if ((!f->header_ok && !f->src.zst) || f->src.fd != f->fd) {
        if (!f->damage) {
            f->damage = malloc(sizeof *f->damage);
            if (!f->damage) return NULL;
            *f->damage = (source_damage){r, lb_rd_archive_label(r, f)};
        }
        const char *problem = NULL;
        int rc = lb_archive_source_open(&f->src, f->fd, (uint64_t)st.st_size, source_damaged,
                                        f->damage, &problem);
        if (rc == -ENOMEM) return NULL;
        if (rc) {
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 0, (uint64_t)st.st_size, problem);
            f->done = 1;
            return NULL;
        }
        /* Read by what it holds; but its name must say the same (an uploader sends a .zst as
         * zstd, and `zstd -d` must work on it). */
        if ((f->in_directory || f->named) &&
            (f->opened_kind == LB_ARCHIVE_NAME_COMPRESSED) != (f->src.zst != NULL))
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 0, 0,
                      f->src.zst ? "a compressed archive file under a plain file's name: renamed "
                                   "or replaced (read as what it holds)"
                                 : "a plain archive file under a compressed file's name (.lba.zst): "
                                   "renamed or replaced (read as what it holds)");
    }
    if (!f->src.zst) f->src.size = (uint64_t)st.st_size;  /* a .writing file grows */
    return f;
}

/* Reads and checks the file header of `f` (`size` bytes), once. 1 when its frames can be read. */
static int read_archive_header(lb_reader *r, archive_file *f, uint64_t size) {
    if (f->header_ok) return 1;
    lb_archive_file_header h;
    ssize_t n = lb_archive_source_read(&f->src, &h, sizeof h, 0);
    const char *problem = n == (ssize_t)sizeof h ? lb_archive_header_problem(&h, size)
                                                 : "archive file is shorter than its header";
    if (problem) {
        /* Another name reaching it too: a file planted from outside (the archiver neither
         * takes nor counts it, and its own file being written never has one), not a damaged
         * archive file or one being created. */
        struct stat st;
        int planted = f->planted = fstat(f->fd, &st) == 0 && st.st_nlink > 1;
        if (!planted && f->kind == LB_ARCHIVE_NAME_WRITING && size < sizeof h) return 0;  /* being created */
        /* A bundle that syncs: a file being written whose header never reached the disk held
         * nothing synced (each batch is synced with it); the next archiver removes it. */
        int torn = !planted && f->kind == LB_ARCHIVE_NAME_WRITING && lb_rd_read_after_power_loss(r);
        lb_rd_add_issuef(r, torn ? LB_ISSUE_TORN : size < sizeof h ? LB_ISSUE_TRUNCATED : LB_ISSUE_CORRUPT,
                         lb_rd_archive_label(r, f), 0, size, 0, "%s%s", problem,
                         planted ? "; another name reaches it (a hard link): a file planted from "
                                   "outside, not one of this archive's" : "");
        f->done = 1;
        return 0;
    }
    if (r->ring_mode && r->header_ok && h.ring_created_wall_ns != r->header.created_wall_ns) {
        /* Another bundle's file (its ring was made at another time): its chunk sequences are
         * not this ring's, so it is not read with this bundle. */
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 0, size, 0,
                   "archive file of another bundle (its ring was created at %llu ns, this "
                   "one at %llu ns): not read; read it on its own",
                   (unsigned long long)h.ring_created_wall_ns,
                   (unsigned long long)r->header.created_wall_ns);
        f->done = 1;
        f->foreign = 1;
        return 0;
    }
    if (f->in_directory && h.file_number != f->number)
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), 24, 8, 0,
                   "archive file's header says number %llu, its name %llu: renamed or "
                   "replaced", (unsigned long long)h.file_number,
                   (unsigned long long)f->number);
    if (lb_rd_chunk_buffer(r, h.chunk_size)) return 0;
    f->chunk_size = h.chunk_size;
    f->chunk_count = h.chunk_count;
    f->ring_created_wall_ns = h.ring_created_wall_ns;
    f->offset = sizeof h;
    f->header_ok = 1;
    return 1;
}

/* A CHUNK frame of archive file `index` at `body`: its header checked, the chunk noted as
 * archived, and a reference to it listed unless it was read already. -1 when its start cannot be
 * read (the next pass tries again), else 0. */
static int list_archived_chunk(lb_reader *r, size_t index, const lb_archive_frame_head *head,
                               uint64_t body, const char *label, ref_list *refs) {
    archive_file *f = &r->archives[index];
    chunk_start start = {0};
    size_t want = head->length >= sizeof start ? sizeof start : sizeof start.h;
    if (lb_archive_source_read(&f->src, &start, want, body) != (ssize_t)want) return -1;
    const lb_chunk_header h = start.h;
    if (lb_chunk_header_check(&h, (uint32_t)(h.sequence % f->chunk_count), f->chunk_count) != 0) {
        lb_rd_add_issue(r, LB_ISSUE_CORRUPT, label, body, head->length,
                  "archived chunk header is not valid");
        return 0;
    }
    lb_rd_note_anchor(r, &h);
    f->chunk_frames++;
    f->chunk_records += atomic_load(&h.record_count);
    seen_chunk *seen = lb_rd_seen_add(r, h.sequence);
    if (seen) {
        seen->archived = 1;
        seen->active = 0;  /* archived, so sealed: its records are in the header's count */
        if (seen->gone) {
            /* It left the ring before this scan listed its archived copy: it was not
             * overwritten unread after all (see chunk_left_ring). */
            seen->gone = 0;
            r->gone_read -= seen->shown + seen->unreadable;
            r->beginnings_overwritten += seen->beginnings_overwritten;
            r->gone_beginnings -= seen->beginnings_overwritten;
        }
        if (!seen->claim_noted) lb_rd_note_claim(r, h.claim, h.sequence);
        seen->claim_noted = 1;
    }
    if (!seen || (!seen->broken && seen->offset < head->length))
        lb_rd_push_ref(refs, (chunk_ref){h.sequence, (int32_t)index, 0, body, head->length,
                                   atomic_load(&h.record_count), head->body_crc,
                                   h.session, lb_rd_chunk_floor(&start), f->number});
    return 0;
}

/* An END frame at `body`: kept when its checksum holds. */
static void read_end_frame(lb_reader *r, archive_file *f, const lb_archive_frame_head *head,
                           uint64_t body, const char *label) {
    lb_archive_end end;
    if (lb_archive_source_read(&f->src, &end, sizeof end, body) == (ssize_t)sizeof end &&
        lb_crc32c(0, &end, sizeof end) == head->body_crc) {
        f->end = end;
        f->end_found = 1;
    } else {
        lb_rd_add_issue(r, LB_ISSUE_CORRUPT, label, f->offset, head->length,
                  "END frame fails its checksum");
    }
}

/* Where the frame walk of `f` cannot read a valid frame at f->offset (`status`): steps over the
 * damage and returns 1 to go on, or returns 0 when the walk ends here (the file's end, or its
 * torn tail). */
static int step_over_invalid_frame(lb_reader *r, archive_file *f, lb_frame_status status,
                                   uint64_t size, const char *label) {
    uint64_t damaged_until = status != LB_FRAME_OK && f->offset < size
                                 ? lb_archive_source_damaged_until(&f->src, f->offset)
                                 : 0;
    if (damaged_until) {
        /* A compressed file's data frame that cannot be read (reported by the source): the
         * frames in it are lost; the END frame's account says how many records. */
        f->damaged = 1;
        f->end_found = 0;
        f->offset = damaged_until;
        return 1;
    }
    if (status == LB_FRAME_END) {
        if (f->kind == LB_ARCHIVE_NAME_WRITING) return 0;  /* more may come */
        if (f->offset < size)
            lb_rd_add_issue(r, LB_ISSUE_TRUNCATED, label, f->offset, size - f->offset,
                      "incomplete frame at the end of a complete archive file");
        check_end_frame(r, f, size);
        f->done = 1;
        return 0;
    }
    if (f->kind == LB_ARCHIVE_NAME_WRITING && lb_rd_read_after_power_loss(r)) {
        /* A bundle that syncs fdatasyncs each batch before it marks its chunks archived: a hole
         * in the file being written is where the last synced write ends (the pages after it came
         * back from before), and its chunks are still in the ring. The next archiver cuts the
         * file there. */
        lb_rd_add_issue(r, LB_ISSUE_TORN, label, f->offset, size - f->offset,
                  "archive file being written ends here: what follows was written after the "
                  "bundle's last sync and torn (a power loss)");
        f->done = 1;
        return 0;
    }
    uint64_t next = lb_archive_frame_resync(&f->src, f->offset, f->chunk_size);
    lb_rd_add_issue(r, LB_ISSUE_CORRUPT, label, f->offset, next - f->offset,
              "archive frame head is not valid; skipped to the next valid frame");
    f->damaged = 1;
    f->end_found = 0;
    f->offset = next;
    return 1;
}

/* Reads the new frames of archive file `index`: meta entries at once, chunks as refs. Damage
 * (a frame head that fails its check) is reported and stepped over: the next valid head is
 * searched for, so one damaged frame hides only itself. */
void lb_rd_collect_archive(lb_reader *r, size_t index, ref_list *refs) {
    if (r->archives[index].done) return;
    archive_file *f = ready_archive_file(r, index);
    if (!f) return;
    uint64_t size = f->src.size;
    if (!read_archive_header(r, f, size)) return;
    const char *label = lb_rd_archive_label(r, f);
    for (;;) {
        lb_archive_frame_head head;
        lb_frame_status status = lb_archive_frame_read(&f->src, f->offset, f->chunk_size, &head);
        if (status != LB_FRAME_OK) {
            if (step_over_invalid_frame(r, f, status, size, label)) continue;
            return;
        }
        if (f->end_found) {
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, label, f->offset, 0,
                      "a frame follows the END frame of an archive file");
            f->end_found = 0;
        }
        uint64_t body = f->offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
        if (head.kind == LB_ARCHIVE_FRAME_META) archive_meta_frame(r, f, &head);
        else if (head.kind == LB_ARCHIVE_FRAME_CHUNK) {
            if (list_archived_chunk(r, index, &head, body, label, refs)) return;
        } else if (head.kind == LB_ARCHIVE_FRAME_END) read_end_frame(r, f, &head, body, label);
        /* Other kinds: a later format's frames, skipped. */
        f->offset += lb_archive_frame_span(head.length);
    }
}

/* The copy buffer holds an archived chunk image: its CRC must match the frame's. */
void lb_rd_read_archived_chunk(lb_reader *r, const chunk_ref *ref, int intact_copy_follows,
                                int *walked) {
    archive_file *f = lb_rd_ref_file(r, ref);
    *walked = 0;
    seen_chunk *seen = lb_rd_seen_find(r, ref->sequence);
    if (seen && (seen->broken || seen->offset >= ref->length)) return;  /* the ring had it */
    uint8_t *image = r->run->image;
    if (f->fd < 0 || lb_archive_source_read(&f->src, image, ref->length, ref->offset) != (ssize_t)ref->length) {
        /* Listed but unreadable now: a compressed file's data frame that fails (the source
         * reported which), or a file cut short since it was listed. */
        if (!intact_copy_follows)
            lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), ref->offset, ref->length,
                       ref->records, "chunk %llu cannot be read: its %u records are lost",
                       (unsigned long long)ref->sequence, ref->records);
        return;
    }
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)image;
    if (h->sequence != ref->sequence) {
        if (!intact_copy_follows)
            lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), ref->offset, ref->length,
                       ref->records, "chunk %llu is no longer where its file listed it: its %u "
                       "records are lost", (unsigned long long)ref->sequence, ref->records);
        return;
    }
    if (lb_crc32c(0, image, ref->length) != ref->body_crc) {
        if (intact_copy_follows) {
            /* In the file being written of a bundle that syncs, after its writer is gone: a frame
             * written after the last sync, torn; the ring's copy follows. */
            int torn = f->kind == LB_ARCHIVE_NAME_WRITING && lb_rd_read_after_power_loss(r);
            lb_rd_add_issuef(r, torn ? LB_ISSUE_TORN : LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), ref->offset,
                       ref->length, 0,
                       "chunk %llu fails its checksum; its records are read from another copy",
                       (unsigned long long)ref->sequence);
            return;
        }
        if (f->kind == LB_ARCHIVE_NAME_WRITING) {
            /* The file being written was not synced past its last batch: after a power loss its
             * pages can come from different moments, so a record in this image may be altered
             * where no page check of the ring's layout can tell. None of them is shown. */
            lb_rd_add_issuef(r, lb_rd_read_after_power_loss(r) ? LB_ISSUE_TORN : LB_ISSUE_CORRUPT,
                       lb_rd_archive_label(r, f), ref->offset, ref->length,
                       atomic_load(&h->record_count),
                       "chunk %llu fails its checksum in the archive file being written (torn by a "
                       "power loss, or damaged): its %u records are not shown",
                       (unsigned long long)ref->sequence, atomic_load(&h->record_count));
            return;
        }
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, lb_rd_archive_label(r, f), ref->offset, ref->length, 0,
                   "chunk %llu fails its checksum: its %u records are shown but may be altered",
                   (unsigned long long)ref->sequence, atomic_load(&h->record_count));
    }
    size_t entries, issues, pending;
    uint32_t stop, records;
    int corrupt;
    walk_tally tally;
    lb_rd_walk_chunk(r, ref->length, f->chunk_size, lb_rd_archive_label(r, f), ref->offset, 1, &entries,
               &issues, &pending, &stop, &corrupt, &records, &tally);
    lb_rd_drop_consumed_pending(r);
    lb_rd_orphan_pending(r, h);
    lb_rd_note_walk(r, ref->sequence, entries, stop, records, corrupt, &tally, 1, 0);
    r->run_counts = 1;
    *walked = 1;
}


/* The ring the archive files were written from: the header's ring_created_wall_ns of the newest
 * file whose header reads (opened and checked as a read would; damage found is an issue). An
 * archive directory or file read without its ring has no other identity, and a bundle made again
 * at the same path numbers its files and chunk sequences from 1 again. */
int lb_reader_archive_ring(lb_reader *r, uint64_t *out) {
    if (!r || !out) return -EINVAL;
    *out = 0;
    lb_rd_list_archive_directory(r);
    for (size_t i = r->archive_count; i-- > 0;) {
        archive_file *f = &r->archives[i];
        if (!f->header_ok) {
            if (f->done || !(f = ready_archive_file(r, i)) || !read_archive_header(r, f, f->src.size))
                continue;
        }
        *out = f->ring_created_wall_ns;
        return 0;
    }
    return 0;
}

/* ---- archived chunks read in part ----
 * A file's frames are listed once. A follower's walk of an archived chunk can stop before its end:
 * at a fragment whose beginning is in a chunk not read yet (the archiver's pass may take a chunk
 * sealed after the one before it was looked at, so files can hold them out of order, and a
 * listing can miss a file being renamed), or to read another copy that follows (the ring's, which
 * the writer may reuse before it is read). Its slot in the ring may be reused meanwhile, so the
 * rest is read from the file: these references are listed again, pass after pass, until the walk
 * reaches the chunk's end (a deferral gives up after three scans, with an issue). Before, the rest
 * of such a chunk, and the record the fragment ended, were never handed out, without an issue. */

static int chunk_walked_to_end(lb_reader *r, const chunk_ref *ref) {
    const seen_chunk *seen = lb_rd_seen_find(r, ref->sequence);
    return seen && (seen->broken || seen->offset >= ref->length);
}

/* After archived chunk `ref` was read: kept to be listed again when its walk stopped short. */
void lb_rd_keep_unfinished(lb_reader *r, const chunk_ref *ref) {
    if (chunk_walked_to_end(r, ref)) return;
    for (size_t i = 0; i < r->unfinished_count; i++)
        if (r->unfinished[i].sequence == ref->sequence &&
            r->unfinished[i].file_number == ref->file_number)
            return;
    if (lb_array_grow((void **)&r->unfinished, &r->unfinished_capacity, r->unfinished_count + 1,
                      sizeof *r->unfinished)) {
        const seen_chunk *seen = lb_rd_seen_find(r, ref->sequence);
        uint32_t read = seen ? seen->records : 0;
        uint32_t lost = ref->records > read ? ref->records - read : 0;
        lb_rd_add_issuef(r, LB_ISSUE_MISSING, lb_rd_archive_label(r, lb_rd_ref_file(r, ref)),
                   ref->offset, ref->length, lost,
                   "chunk %llu: out of memory to read the rest of it; %u records not read",
                   (unsigned long long)ref->sequence, lost);
        return;
    }
    r->unfinished[r->unfinished_count++] = *ref;
}

/* Lists again the archived chunks kept unfinished, their files opened again if a pass closed
 * them; those read to their end are forgotten. One whose file is gone (retention deleted it, or
 * it cannot be opened) is an issue for the records not read. */
void lb_rd_relist_unfinished(lb_reader *r, ref_list *refs) {
    size_t kept = 0;
    for (size_t i = 0; i < r->unfinished_count; i++) {
        chunk_ref ref = r->unfinished[i];
        if (chunk_walked_to_end(r, &ref)) continue;
        size_t index = archive_index(r, ref.file_number);
        archive_file *f = index < r->archive_count && r->archives[index].number == ref.file_number
                              ? ready_archive_file(r, index)
                              : NULL;
        if (!f && index < r->archive_count && r->archives[index].number != ref.file_number) {
            r->unfinished[kept++] = ref;  /* a listing moved the files meanwhile: next pass */
            continue;
        }
        if (!f) {
            const seen_chunk *seen = lb_rd_seen_find(r, ref.sequence);
            uint32_t read = seen ? seen->records : 0;
            uint32_t lost = ref.records > read ? ref.records - read : 0;
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, "archive", ref.offset, ref.length, lost,
                       "chunk %llu: its archive file %llu is gone before the rest of it was "
                       "read; %u records not read", (unsigned long long)ref.sequence,
                       (unsigned long long)ref.file_number, lost);
            continue;
        }
        ref.source = (int32_t)index;
        lb_rd_push_ref(refs, ref);
        r->unfinished[kept++] = ref;
    }
    r->unfinished_count = kept;
}
