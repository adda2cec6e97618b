/* reader_chunks.c — the ring's chunks: the ring header and its geometry, the durable mirror, the
 * seen-chunk table, listing the ring's chunks as references and reading one, checked against
 * what a live writer may be changing. */
#define _GNU_SOURCE
#include "reader_internal.h"

static int valid_geometry(uint32_t chunk_size, uint32_t chunk_count) {
    return chunk_size >= LB_CHUNK_SIZE_MIN && chunk_size <= LB_CHUNK_SIZE_MAX &&
           !(chunk_size & (chunk_size - 1)) && chunk_count >= 2 && chunk_count <= LB_CHUNK_COUNT_MAX;
}

/* Sets the geometry the ring's chunks are read with (its header's, or an archive file's when the
 * header is damaged). */
static int use_geometry(lb_reader *r, uint32_t chunk_size, uint32_t chunk_count) {
    r->header.chunk_size = chunk_size;
    r->header.chunk_count = chunk_count;
    free(r->progress);
    r->progress = calloc(chunk_count, sizeof *r->progress);
    if (!r->progress || lb_rd_chunk_buffer(r, chunk_size)) return -ENOMEM;
    r->geometry_known = 1;
    return 0;
}

static void drop_superseded_durable(lb_reader *r);

int lb_rd_read_header(lb_reader *r) {
    lb_ring_header h;
    ssize_t n = lb_pread_full(r->ring_fd, &h, sizeof h, 0);
    if (n < 0) return (int)n;
    const char *why = NULL;
    if ((size_t)n < sizeof h) why = "ring file is shorter than its header";
    else if (memcmp(h.magic, LB_RING_MAGIC, 8) != 0) why = "ring file has no Logbook magic";
    else if (h.format_version != LB_FORMAT_VERSION) why = "ring file has an unknown format version";
    else if (h.header_crc != lb_ring_header_crc(&h)) why = "ring header fails its checksum";
    else if (h.header_size != LB_RING_HEADER_SIZE || !valid_geometry(h.chunk_size, h.chunk_count))
        why = "ring header has an impossible geometry";
    if (why) {
        /* The archive files are read anyway: a damaged ring header hides only the ring. */
        lb_rd_add_issue(r, (size_t)n < sizeof h ? LB_ISSUE_TRUNCATED : LB_ISSUE_CORRUPT, "ring", 0,
                  sizeof h, why);
        return -EPROTO;
    }
    r->header = h;
    int rc = use_geometry(r, h.chunk_size, h.chunk_count);
    if (rc) return rc;
    r->header_ok = 1;
    if (r->durable_fd >= 0) {
        uint64_t generation;
        free(r->durable);
        r->durable = NULL;
        r->durable_count = 0;
        lb_durable_read(r->durable_fd, h.created_wall_ns, h.chunk_count, &r->durable,
                        &r->durable_count, &generation, &r->durable_claimed,
                        &r->durable_overwritten);
        r->durable_valid = generation > 0;
        drop_superseded_durable(r);
    }
    return 0;
}

/* Under the overwrite policy a chunk the last sync listed can have been overwritten since: when
 * the mirror's copy of its slot already holds a newer chunk (a later sync wrote it before its own
 * snapshot was written), its durable records are the policy's loss, and damage to its ring copy
 * is not damage to anything durable. Such entries get committed 0 and are counted overwritten. */
static void drop_superseded_durable(lb_reader *r) {
    r->durable_superseded = 0;
    if (r->mirror_fd < 0 || r->header.wrap_policy == LB_WRAP_LOSSLESS || !r->header.chunk_count) return;
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    for (size_t i = 0; i < r->durable_count; i++) {
        lb_durable_entry *e = &r->durable[i];
        uint32_t slot = (uint32_t)(e->sequence % count);
        lb_chunk_header h;
        if (lb_pread_full(r->mirror_fd, &h, sizeof h, (uint64_t)slot * size) == (ssize_t)sizeof h &&
            h.magic == LB_CHUNK_MAGIC && h.sequence > e->sequence &&
            lb_chunk_header_check(&h, slot, count) >= 0) {
            r->durable_superseded += e->records;
            e->committed = 0;
            e->records = 0;
        }
    }
}

/* A chunk this reader read (some of) left the ring: unless an archive file holds it, the records
 * it had read of it (shown, or accounted for by issues as damaged) are not among those the
 * overwrite policy destroyed unread. */
static void chunk_left_ring(lb_reader *r, uint64_t sequence) {
    seen_chunk *seen = lb_rd_seen_find(r, sequence);
    if (seen) seen->active = 0;  /* sealed before its slot was reused: counted in the header */
    if (!seen || seen->archived || seen->gone) return;
    seen->gone = 1;
    r->gone_read += seen->shown + seen->unreadable;
    /* Its records whose beginning was overwritten are now among those its reuse counted. */
    r->beginnings_overwritten -= seen->beginnings_overwritten;
    r->gone_beginnings += seen->beginnings_overwritten;
}

/* ---- the ring ---- */
/* A chunk left CLAIMING whose header is complete and valid (as recovery keeps it). */
static int claiming_chunk_complete(const lb_chunk_header *h, uint32_t slot, uint32_t count) {
    return h->magic == LB_CHUNK_MAGIC && h->header_crc == lb_chunk_crc(h) && h->sequence &&
           h->sequence % count == slot && h->prev_delta < h->sequence;
}

int lb_rd_collect_ring(lb_reader *r, ref_list *refs) {
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    struct stat st;
    if (fstat(r->ring_fd, &st) != 0) return -errno;
    uint64_t expected = LB_RING_HEADER_SIZE + (uint64_t)count * size;
    uint32_t present = count;
    if ((uint64_t)st.st_size < expected) {
        present = st.st_size <= LB_RING_HEADER_SIZE
                      ? 0
                      : (uint32_t)(((uint64_t)st.st_size - LB_RING_HEADER_SIZE) / size);
        if (!r->truncation_reported) {
            lb_rd_add_issue(r, LB_ISSUE_TRUNCATED, "ring", (uint64_t)st.st_size,
                      expected - (uint64_t)st.st_size, "ring file is shorter than its header says");
            r->truncation_reported = 1;
        }
    }
    for (uint32_t slot = 0; slot < present; slot++) {
        chunk_start start;
        uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)slot * size;
        if (lb_pread_full(r->ring_fd, &start, sizeof start, at) != (ssize_t)sizeof start) continue;
        const lb_chunk_header h = start.h;
        int check = lb_chunk_header_check(&h, slot, count);
        slot_progress *p = &r->progress[slot];
        if (check == -1) {
            if (p->sequence != UINT64_MAX) {
                lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "ring", at, size, "chunk header is not valid");
                if (p->sequence) chunk_left_ring(r, p->sequence);
                p->sequence = UINT64_MAX;  /* reported; look again only when it changes */
            }
            continue;
        }
        if (check == 2) {
            /* A claim in progress, or one a crash cut short. The next writer's recovery keeps a
             * chunk whose header is complete (a new empty one, or the old occupant not yet
             * touched) and counts the others as abandoned claims: a reader of a dead writer's
             * bundle does the same, so that verify agrees before and after recovery. */
            if (!claiming_chunk_complete(&h, slot, count)) {
                if (p->sequence != UINT64_MAX - 1) {
                    r->claiming_slots++;
                    /* Being reused: the chunk that was here has left the ring. */
                    if (p->sequence && p->sequence != UINT64_MAX) chunk_left_ring(r, p->sequence);
                }
                p->sequence = UINT64_MAX - 1;
                continue;
            }
            if (lb_rd_writer_alive(r)) continue;
        } else if (check != 0) {
            continue;
        }
        if (p->sequence && p->sequence < UINT64_MAX - 1 && p->sequence != h.sequence)
            chunk_left_ring(r, p->sequence);
        p->sequence = h.sequence;
        lb_rd_note_anchor(r, &h);
        seen_chunk *seen = lb_rd_seen_add(r, h.sequence);
        /* Walked while active, sealed since: its records are now in the header's count, and
         * counting them as active's too made verify expect more records than were written. */
        if (seen && atomic_load(&h.state) >= LB_CHUNK_SEALED) seen->active = 0;
        if (seen && !seen->claim_noted) {
            lb_rd_note_claim(r, h.claim, h.sequence);
            seen->claim_noted = 1;
        }
        if (seen && check == 2 && !seen->kept_from_claim && r->header.wrap_policy == LB_WRAP_OVERWRITE) {
            /* As recovery counts it in records_kept_from_claims. */
            seen->kept_from_claim = 1;
            r->claiming_kept_records += atomic_load(&h.record_count);
        }
        if (seen && (seen->broken || atomic_load(&h.committed) <= seen->offset)) continue;
        lb_rd_push_ref(refs, (chunk_ref){h.sequence, -1, slot, 0, 0, atomic_load(&h.record_count), 0,
                                   h.session, lb_rd_chunk_floor(&start), 0});
    }
    return 0;
}

/* The durable prefixes the mirror holds, for a bundle that syncs whose writer is gone: after a
 * power loss the ring's copy of a chunk may be torn; the mirror's, written and synced before the
 * snapshot that lists it, is read first and the ring's copy from where it ends. */
void lb_rd_collect_mirror(lb_reader *r, ref_list *refs) {
    if (r->mirror_fd < 0 || !r->durable_count || !r->geometry_known || lb_rd_writer_alive(r)) return;
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    for (size_t i = 0; i < r->durable_count; i++) {
        const lb_durable_entry *e = &r->durable[i];
        uint32_t slot = (uint32_t)(e->sequence % count);
        seen_chunk *seen = lb_rd_seen_find(r, e->sequence);
        if (e->committed > size || (seen && (seen->broken || seen->offset >= e->committed))) continue;
        chunk_start start;
        if (lb_pread_full(r->mirror_fd, &start, sizeof start, (uint64_t)slot * size) !=
                (ssize_t)sizeof start ||
            start.h.sequence != e->sequence || lb_chunk_header_check(&start.h, slot, count) < 0)
            continue;
        lb_rd_push_ref(refs, (chunk_ref){e->sequence, SOURCE_MIRROR, slot, (uint64_t)slot * size,
                                   e->committed, e->records, 0, start.h.session, lb_rd_chunk_floor(&start), 0});
    }
}

/* A chunk's durable prefix from the mirror, when it is sound (it walks to its durable end with its
 * records, no page check failing); otherwise nothing is read here and the ring's copy speaks. */
void lb_rd_read_mirror_chunk(lb_reader *r, const chunk_ref *ref) {
    seen_chunk *seen = lb_rd_seen_find(r, ref->sequence);
    if (seen && (seen->broken || seen->offset >= ref->length)) return;
    uint8_t *image = r->run->image;
    if (lb_pread_full(r->mirror_fd, image, ref->length, ref->offset) != (ssize_t)ref->length) return;
    lb_chunk_header *h = (lb_chunk_header *)(void *)image;
    if (h->sequence != ref->sequence ||
        lb_chunk_header_check(h, ref->slot, r->header.chunk_count) < 0 ||
        !lb_durable_prefix_holds(image, ref->length, ref->length, ref->records))
        return;
    /* The mirror's header may come from a sync that was under way (a newer end and count than the
     * snapshot that lists it): the snapshot's are what this copy is held to. */
    atomic_store_explicit(&h->committed, ref->length, memory_order_relaxed);
    atomic_store_explicit(&h->record_count, ref->records, memory_order_relaxed);
    /* Its claim is accounted for (lossless bundles check every claim number is somewhere). */
    seen_chunk *noted = lb_rd_seen_add(r, ref->sequence);
    if (noted && !noted->claim_noted) {
        lb_rd_note_claim(r, h->claim, h->sequence);
        noted->claim_noted = 1;
    }
    size_t entries, issues, pending;
    uint32_t stop, records;
    int corrupt;
    walk_tally tally;
    lb_rd_walk_chunk(r, ref->length, r->header.chunk_size, "mirror", ref->offset, 0, &entries, &issues,
               &pending, &stop, &corrupt, &records, &tally);
    lb_rd_drop_consumed_pending(r);
    lb_rd_orphan_pending(r, h);
    lb_rd_note_walk(r, ref->sequence, entries, stop, records, corrupt, &tally, 0,
              atomic_load(&h->state) == LB_CHUNK_ACTIVE);
    r->run_counts = 1;
}

/* Returns 1 when the chunk left the ring (its slot was reused) before or while it was copied: then
 * nothing of it was read, and an archive file may hold it by now. */
int lb_rd_read_ring_chunk(lb_reader *r, const chunk_ref *ref) {
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)ref->slot * size;
    seen_chunk *seen = lb_rd_seen_find(r, ref->sequence);
    if (seen && seen->broken) return 0;
    ssize_t n = lb_pread_full(r->ring_fd, r->run->image, size, at);
    if (n != (ssize_t)size) return 0;
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)r->run->image;
    int check = lb_chunk_header_check(h, ref->slot, count);
    if ((check != 0 && !(check == 2 && claiming_chunk_complete(h, ref->slot, count))) ||
        h->sequence != ref->sequence)
        return h->sequence != ref->sequence;  /* changed between the two reads */
    uint32_t state = atomic_load(&h->state);
    int complete = state >= LB_CHUNK_SEALED || state == LB_CHUNK_CLAIMING;
    /* The walk may finish or extend records pending from earlier chunks: kept to undo it. */
    size_t saved_count = r->pending_count;
    pending_state *saved = saved_count ? malloc(saved_count * sizeof *saved) : NULL;
    if (saved_count && !saved) return 0;  /* read next scan */
    for (size_t i = 0; i < saved_count; i++)
        saved[i] = (pending_state){r->pending[i].last_sequence, r->pending[i].length};
    size_t entry_mark, issue_mark, pending_mark;
    uint32_t stop, records;
    int corrupt;
    walk_tally tally;
    lb_rd_walk_chunk(r, size, size, "ring", at, complete, &entry_mark, &issue_mark, &pending_mark, &stop,
               &corrupt, &records, &tally);
    /* The chunk may have been reclaimed while we copied it: then nothing of it counts. */
    lb_chunk_header again;
    if (lb_pread_full(r->ring_fd, &again, sizeof again, at) != (ssize_t)sizeof again ||
        again.sequence != ref->sequence ||
        (atomic_load(&again.state) == LB_CHUNK_CLAIMING && state != LB_CHUNK_CLAIMING)) {
        (void)entry_mark;  /* the run is discarded: r->run_counts stays 0 */
        r->issue_count = issue_mark;
        while (r->pending_count > pending_mark) lb_rd_drop_pending(r, &r->pending[r->pending_count - 1]);
        for (size_t i = 0; i < saved_count && i < r->pending_count; i++) {
            r->pending[i].last_sequence = saved[i].last_sequence;
            r->pending[i].length = saved[i].length;
            r->pending[i].consumed = 0;
        }
        free(saved);
        return again.sequence != ref->sequence;
    }
    free(saved);
    lb_rd_drop_consumed_pending(r);
    lb_rd_orphan_pending(r, h);
    lb_rd_note_walk(r, ref->sequence, entry_mark, stop, records, corrupt, &tally, 0, !complete);
    r->run_counts = 1;
    return 0;
}

/* How well geometry (chunk_size, count) fits the ring's chunk headers (at most the first 4096
 * slots are looked at): the number of sound headers, or 0 when a header whose magic and CRC hold
 * names another slot (a chunk of another geometry, or none). */
static uint32_t geometry_fit(lb_reader *r, uint32_t chunk_size, uint32_t count) {
    uint32_t sound = 0;
    for (uint32_t slot = 0; slot < count && slot < 4096; slot++) {
        lb_chunk_header h;
        uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)slot * chunk_size;
        if (lb_pread_full(r->ring_fd, &h, sizeof h, at) != (ssize_t)sizeof h) return 0;
        if (lb_chunk_header_check(&h, slot, count) == 0) sound++;
        else if (h.magic == LB_CHUNK_MAGIC && h.header_crc == lb_chunk_crc(&h)) return 0;
    }
    return sound;
}

/* The geometry the chunk headers themselves give, for a ring whose damaged header no archive file
 * stands in for: of the chunk sizes that divide the ring file into 2 or more chunks, the one
 * under which every sound chunk header sits in its sequence's slot (and the most of them). */
static void adopt_chunk_geometry(lb_reader *r, uint64_t size) {
    uint32_t best_size = 0, best_fit = 0;
    for (uint64_t chunk_size = LB_CHUNK_SIZE_MIN; chunk_size <= LB_CHUNK_SIZE_MAX; chunk_size *= 2) {
        if (size <= LB_RING_HEADER_SIZE || (size - LB_RING_HEADER_SIZE) % chunk_size) continue;
        uint64_t count = (size - LB_RING_HEADER_SIZE) / chunk_size;
        if (!valid_geometry((uint32_t)chunk_size, count > UINT32_MAX ? 0 : (uint32_t)count)) continue;
        uint32_t fit = geometry_fit(r, (uint32_t)chunk_size, (uint32_t)count);
        if (fit > best_fit) {
            best_fit = fit;
            best_size = (uint32_t)chunk_size;
        }
    }
    if (!best_fit) return;
    uint32_t count = (uint32_t)((size - LB_RING_HEADER_SIZE) / best_size);
    if (use_geometry(r, best_size, count) == 0)
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, "ring", 0, LB_RING_HEADER_SIZE, 0,
                   "ring header is damaged; its chunks are read with the geometry their own headers "
                   "give (%u chunks of %u bytes); the ring's counters are lost, so verify cannot "
                   "account for its records", count, best_size);
}

/* The ring header is damaged: read the ring's chunks with the geometry an archive file of this
 * bundle gives, when the ring file has exactly that size, else with the one the chunk headers
 * give (every chunk header is checked anyway). */
void lb_rd_adopt_archive_geometry(lb_reader *r) {
    struct stat st;
    if (fstat(r->ring_fd, &st) != 0) return;
    for (size_t i = 0; i < r->archive_count; i++) {
        const archive_file *f = &r->archives[i];
        if (!f->header_ok || !valid_geometry(f->chunk_size, f->chunk_count)) continue;
        if ((uint64_t)st.st_size != LB_RING_HEADER_SIZE + (uint64_t)f->chunk_size * f->chunk_count)
            continue;
        if (use_geometry(r, f->chunk_size, f->chunk_count) == 0)
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "ring", 0, LB_RING_HEADER_SIZE,
                      "ring header is damaged; its chunks are read with the geometry of the "
                      "archive files");
        return;
    }
    adopt_chunk_geometry(r, (uint64_t)st.st_size);
}
