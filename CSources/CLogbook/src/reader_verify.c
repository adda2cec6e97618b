/* reader_verify.c — what the reader proves once it has read everything (lb_reader_verify: archive
 * file numbers, chunk claims, the durable mirror, the bundle's own counts), and the facts of the
 * ring and the archive (lb_reader_ring_info, lb_reader_archive_info). */
#define _GNU_SOURCE
#include "reader_internal.h"

#include <limits.h>

/* ---- verify: what the bundle's own records say should exist ---- */
static int compare_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static const char *archive_name(lb_reader *r, uint64_t number) {
    char name[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(name, number, LB_ARCHIVE_NAME_COMPLETE);
    return lb_rd_keep_string(r, strdup(name));
}

/* Whether `number` of `kind` is a file planted from outside that the scans found (see
 * archive_file.planted): not one of the archive's numbers. */
static int is_planted(const lb_reader *r, uint64_t number, int kind) {
    for (size_t i = 0; i < r->archive_count; i++)
        if (r->archives[i].number == number && r->archives[i].kind == kind) return r->archives[i].planted;
    return 0;
}

/* The numbers of the archive files in the directory now, sorted (a planted file is none). */
static size_t list_numbers(lb_reader *r, uint64_t **out) {
    *out = NULL;
    if (!r->archive_dir) return 0;
    DIR *d = opendir(r->archive_dir);
    if (!d) return 0;
    size_t count = 0, capacity = 0;
    struct dirent *e;
    uint64_t *compressed = NULL;  /* numbers of .lba.zst files: their .lba may still be there */
    size_t compressed_count = 0, compressed_capacity = 0;
    while ((e = readdir(d))) {
        uint64_t number;
        lb_archive_name_kind kind = lb_archive_name_parse(e->d_name, &number);
        if (!kind || kind == LB_ARCHIVE_NAME_COMPRESSING || is_planted(r, number, (int)kind)) continue;
        if (kind == LB_ARCHIVE_NAME_COMPRESSED) {
            if (lb_array_grow((void **)&compressed, &compressed_capacity, compressed_count + 1, sizeof *compressed))
                break;
            compressed[compressed_count++] = number;
            continue;
        }
        if (lb_array_grow((void **)out, &capacity, count + 1, sizeof **out)) break;
        (*out)[count++] = number;
    }
    closedir(d);
    if (count) qsort(*out, count, sizeof **out, compare_u64);
    /* A compressed file counts once, with or without its .lba beside it (the same bytes). */
    size_t plain = count;  /* sorted: the search stays within them */
    for (size_t i = 0; i < compressed_count; i++) {
        if (plain && bsearch(&compressed[i], *out, plain, sizeof **out, compare_u64)) continue;
        if (lb_array_grow((void **)out, &capacity, count + 1, sizeof **out)) break;
        (*out)[count++] = compressed[i];
    }
    free(compressed);
    if (count) qsort(*out, count, sizeof **out, compare_u64);
    return count;
}

/* Archive file numbers have no gaps: from the first one retention kept to the newest made (the
 * ring header says both), or, for an archive directory read alone, between the lowest and the
 * highest present. A live archiver creates and deletes files meanwhile: the header is read before
 * and after the listing, and only numbers both readings require are checked. */
static void verify_file_numbers(lb_reader *r, const lb_ring_header *h, int alive) {
    uint64_t first, next;
    uint64_t *numbers;
    size_t count;
    if (h) {
        uint64_t first_before = atomic_load(&h->archive_first_number);
        uint64_t next_before = atomic_load(&h->archive_next_number);
        count = list_numbers(r, &numbers);
        lb_ring_header after;
        if (lb_pread_full(r->ring_fd, &after, sizeof after, 0) != (ssize_t)sizeof after) after = *h;
        first = atomic_load(&after.archive_first_number);
        if (first < first_before) first = first_before;
        if (first == 0) first = 1;
        next = atomic_load(&after.archive_next_number);
        if (next > next_before) next = next_before;
        if (next > first && count == 0 && r->archive_dir_missing) {
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, "archive", 0, 0, 0,
                       "the archive directory is missing: archive files %llu..%llu with it",
                       (unsigned long long)first, (unsigned long long)(next - 1));
            free(numbers);
            return;
        }
    } else {
        count = list_numbers(r, &numbers);
        if (count == 0) return;
        first = numbers[0];
        next = numbers[count - 1] + 1;
    }
    /* (A live archiver renames a file while the directory is listed: both names may show.) */
    for (size_t k = 1; k < count && !alive; k++)
        if (numbers[k] == numbers[k - 1] && (k < 2 || numbers[k - 2] != numbers[k]))
            lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, archive_name(r, numbers[k]), 0, 0, 0,
                       "two archive files have number %llu (a file is complete, unsynced or "
                       "being written, never two of these at once)",
                       (unsigned long long)numbers[k]);
    size_t i = 0;
    for (uint64_t n = first; n < next;) {
        while (i < count && numbers[i] < n) i++;
        if (i < count && numbers[i] == n) {
            n++;
            continue;
        }
        uint64_t gap_end = i < count && numbers[i] < next ? numbers[i] : next;
        if (gap_end - n == 1)
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, archive_name(r, n), 0, 0, 0,
                       "archive file %llu is missing (files %llu..%llu should exist)",
                       (unsigned long long)n, (unsigned long long)first,
                       (unsigned long long)(next - 1));
        else
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, archive_name(r, n), 0, 0, 0,
                       "archive files %llu..%llu are missing (files %llu..%llu should exist)",
                       (unsigned long long)n, (unsigned long long)(gap_end - 1),
                       (unsigned long long)first, (unsigned long long)(next - 1));
        n = gap_end;
    }
    free(numbers);
}

static int compare_claims(const void *x, const void *y) {
    const noted_claim *a = x, *b = y;
    return a->claim < b->claim ? -1 : a->claim > b->claim;
}

/* Adds "claims LO..HI (chunk sequences after S and before T)" to `text` (at *used): the chunks
 * found around a gap name where the missing ones were, sequences being handed out just before
 * claim numbers (`before`/`after` NULL at either end of what was found). */
static void describe_gap(char *text, size_t size, size_t *used, uint64_t low, uint64_t high,
                         const noted_claim *before, const noted_claim *after) {
    if (*used >= size - 80) return;
    int n = snprintf(text + *used, size - *used, "%sclaims %llu..%llu (chunk sequences", *used ? "; " : "",
                     (unsigned long long)low, (unsigned long long)high);
    if (before) n += snprintf(text + *used + n, size - *used - n, " after %llu", (unsigned long long)before->sequence);
    if (before && after) n += snprintf(text + *used + n, size - *used - n, " and");
    if (after) n += snprintf(text + *used + n, size - *used - n, " before %llu", (unsigned long long)after->sequence);
    if (!before && !after) n += snprintf(text + *used + n, size - *used - n, " unknown");
    n += snprintf(text + *used + n, size - *used - n, ")");
    *used += (size_t)n < size - *used ? (size_t)n : size - *used - 1;
}

/* Lossless: every chunk ever claimed is in the ring or an archive file, but for those retention
 * deleted (claims below archive_retired_claim) and claims a crash cut short. */
static void verify_claims(lb_reader *r, const lb_ring_header *h) {
    uint64_t end = atomic_load(&h->chunks_claimed), start = atomic_load(&h->archive_retired_claim);
    if (end <= start) return;
    if (end - start > (1ull << 32)) {
        lb_rd_add_issue(r, LB_ISSUE_TORN, "ring", 0, 0,
                  "too many chunk claims to check one by one; the record counts are checked");
        return;
    }
    qsort(r->claims, r->claim_count, sizeof *r->claims, compare_claims);
    uint64_t missing = 0;
    uint64_t expect = start;
    char ranges[400] = "";
    size_t used = 0;
    const noted_claim *before = NULL;
    for (size_t i = 0; i <= r->claim_count; i++) {
        const noted_claim *found = i < r->claim_count ? &r->claims[i] : NULL;
        uint64_t next = found ? found->claim : end;
        if (next < expect) {  /* a repeat, or retired */
            if (found) before = found;
            continue;
        }
        if (next > end) next = end;
        if (next > expect) {
            missing += next - expect;
            describe_gap(ranges, sizeof ranges, &used, expect, next - 1, before,
                         found && found->claim == next ? found : NULL);
        }
        before = found;
        expect = next + 1;
        if (expect > end) break;
    }
    uint64_t abandoned = atomic_load(&h->claims_abandoned) + r->claiming_slots;
    uint64_t discarded = atomic_load(&h->chunks_discarded);
    if (discarded)
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, "ring", 0, 0, 0,
                   "%llu chunks with a damaged header were cleared when the bundle was reopened "
                   "for writing: their records are lost", (unsigned long long)discarded);
    /* After a power loss, claims the last sync did not cover may hold nothing: the claim counter's
     * page can be newer than the chunks' pages. */
    uint64_t undurable = 0;
    if (lb_rd_read_after_power_loss(r) && r->durable_claimed < end) {
        for (size_t i = 0, at = r->durable_claimed; at < end; at++) {
            while (i < r->claim_count && r->claims[i].claim < at) i++;
            if (i >= r->claim_count || r->claims[i].claim != at) undurable++;
        }
        if (undurable > missing) undurable = missing;
        if (undurable)
            lb_rd_add_issuef(r, LB_ISSUE_TORN, "ring", 0, 0, 0,
                       "%llu chunk claims after the last sync hold nothing: lost with what no sync "
                       "covered", (unsigned long long)undurable);
        missing -= undurable;
    }
    if (missing > abandoned + discarded)
        lb_rd_add_issuef(r, LB_ISSUE_MISSING, "ring", 0, 0, 0,
                   "%llu chunks are neither in the ring nor in an archive file: %s%s",
                   (unsigned long long)(missing - abandoned - discarded), ranges,
                   used >= sizeof ranges - 80 ? "; ..." : "");
    else if (missing)
        lb_rd_add_issuef(r, LB_ISSUE_TORN, "ring", 0, 0, 0,
                   "%llu chunk claims hold nothing: claims a crash cut short (%llu) or damaged "
                   "chunks cleared (%llu)", (unsigned long long)missing,
                   (unsigned long long)abandoned, (unsigned long long)discarded);
}

/* The records the last sync made durable (the `durable` file) must all be here: in the chunk it
 * listed, walked at least to the offset and count it recorded. A listed chunk no copy holds is
 * accounted for only by archive retention, or, under the overwrite policy, by a newer claim of
 * its slot; otherwise its durable records are missing. */
static void verify_durable(lb_reader *r, const lb_ring_header *h) {
    uint64_t retired = atomic_load(&h->archive_retired_claim);
    if (r->durable_superseded)
        lb_rd_add_issuef(r, LB_ISSUE_OVERWRITTEN, "mirror", 0, 0, r->durable_superseded,
                   "%llu records a sync made durable were overwritten since (their chunks' slots "
                   "hold newer chunks: the overwrite policy keeps the newest)",
                   (unsigned long long)r->durable_superseded);
    for (size_t i = 0; i < r->durable_count; i++) {
        const lb_durable_entry *e = &r->durable[i];
        if (e->committed == 0) continue;  /* superseded */
        seen_chunk *seen = lb_rd_seen_find(r, e->sequence);
        if (seen) {
            if (seen->offset >= e->committed && seen->records >= e->records) continue;
            uint32_t short_by = seen->records < e->records ? e->records - seen->records : 0;
            lb_rd_add_issuef(r, LB_ISSUE_MISSING, "ring", 0, 0, short_by,
                       "chunk %llu: a sync made %u records through offset %u durable, but it reads "
                       "only to offset %u (%u records)", (unsigned long long)e->sequence,
                       e->records, e->committed, seen->offset, seen->records);
            continue;
        }
        if (e->claim < retired) continue;
        if (h->wrap_policy != LB_WRAP_LOSSLESS && r->ring_fd >= 0 && r->geometry_known) {
            lb_chunk_header now;
            uint32_t count = r->header.chunk_count;
            uint64_t at = LB_RING_HEADER_SIZE + (e->sequence % count) * (uint64_t)r->header.chunk_size;
            /* A claim under way shows its state (the magic is cleared after it); a page of zeros
             * is a page that never reached the disk, which excuses nothing. */
            if (lb_pread_full(r->ring_fd, &now, sizeof now, at) == (ssize_t)sizeof now &&
                (atomic_load(&now.state) == LB_CHUNK_CLAIMING ||
                 (now.magic == LB_CHUNK_MAGIC && now.sequence > e->sequence &&
                  lb_chunk_header_check(&now, (uint32_t)(e->sequence % count), count) >= 0))) {
                /* Overwritten by a newer claim of its slot: the policy's loss. Said with its
                 * records, since after a power loss the ring header's count of overwritten
                 * records can come from before it. */
                lb_rd_add_issuef(r, LB_ISSUE_OVERWRITTEN, "ring", 0, 0, e->records,
                           "chunk %llu: %u records a sync made durable were overwritten since "
                           "(the overwrite policy keeps the newest)",
                           (unsigned long long)e->sequence, e->records);
                continue;
            }
        }
        lb_rd_add_issuef(r, LB_ISSUE_MISSING, "ring", 0, 0, e->records,
                   "chunk %llu (claim %llu): a sync made %u records durable, and neither the ring "
                   "nor an archive file holds it", (unsigned long long)e->sequence,
                   (unsigned long long)e->claim, e->records);
    }
}

static uint64_t add_saturating(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t multiply_saturating(uint64_t a, uint64_t b) {
    uint64_t product;
    return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

/* Counters no bundle can reach, each reported (corrupt, at the ring header's counters): a chunk
 * holds at most (chunk_size - 64) / 24 records, a record being 24 bytes at least, so records
 * overwritten cannot exceed what the chunks reused held, nor the records sealed or retired what
 * the chunks claimed held; a lossless ring overwrites nothing. (A durable copy whose count of
 * records overwritten lied hid 113 records truly lost; a count of 2^63 passed.) After a power
 * loss the header can be older than the last sync: the claims since then may each have reused a
 * chunk. 1 when the counters can be believed. */
static int counters_possible(lb_reader *r, const lb_ring_header *h, uint64_t overwritten) {
    const uint64_t per_chunk = (h->chunk_size - LB_CHUNK_HEADER_SIZE) / LB_RECORD_FIXED_SIZE;
    uint64_t claimed = atomic_load(&h->chunks_claimed), reused = atomic_load(&h->chunks_reused);
    uint64_t records = atomic_load(&h->records), bytes = atomic_load(&h->bytes);
    uint64_t retired = atomic_load(&h->archive_retired_records);
    uint64_t retired_claim = atomic_load(&h->archive_retired_claim);
    uint64_t reuse_bound = reused;
    if (lb_rd_read_after_power_loss(r) && r->durable_claimed > claimed)
        reuse_bound = add_saturating(reused, r->durable_claimed - claimed);
    const char *what = NULL;
    char text[200];
    if (h->wrap_policy == LB_WRAP_LOSSLESS && overwritten) {
        snprintf(text, sizeof text, "%llu records overwritten, but a lossless ring never reuses a chunk "
                 "before it is archived", (unsigned long long)overwritten);
        what = text;
    } else if (overwritten > multiply_saturating(reuse_bound, per_chunk)) {
        snprintf(text, sizeof text, "%llu records overwritten, but the %llu chunks reused held at most "
                 "%llu", (unsigned long long)overwritten, (unsigned long long)reuse_bound,
                 (unsigned long long)multiply_saturating(reuse_bound, per_chunk));
        what = text;
    } else if (reused > claimed) {
        snprintf(text, sizeof text, "%llu chunks reused of %llu claimed", (unsigned long long)reused,
                 (unsigned long long)claimed);
        what = text;
    } else if (records > multiply_saturating(claimed, per_chunk) ||
               bytes > multiply_saturating(claimed, h->chunk_size - LB_CHUNK_HEADER_SIZE)) {
        snprintf(text, sizeof text, "%llu records (%llu bytes) sealed, but the %llu chunks claimed held "
                 "at most %llu", (unsigned long long)records, (unsigned long long)bytes,
                 (unsigned long long)claimed, (unsigned long long)multiply_saturating(claimed, per_chunk));
        what = text;
    } else if (retired > multiply_saturating(retired_claim, per_chunk)) {
        snprintf(text, sizeof text, "%llu records in deleted archive files, but the %llu chunks claimed "
                 "before them held at most %llu", (unsigned long long)retired,
                 (unsigned long long)retired_claim,
                 (unsigned long long)multiply_saturating(retired_claim, per_chunk));
        what = text;
    }
    if (!what) return 1;
    lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, "ring", 128, 128, 0,
                     "the ring header's counters are impossible: %s; records cannot be accounted for",
                     what);
    return 0;
}

/* The records once the writer stopped: those read plus those the issues account for, against
 * what the counters say the bundle holds (see lb_reader_verify in logbook.h). */
static void verify_records(lb_reader *r, const lb_ring_header *h, lb_verify_summary *out) {
    uint64_t active = 0;
    for (size_t i = 0; i < r->seen_capacity; i++)
        if (r->seen[i].sequence && r->seen[i].active) active += r->seen[i].records;
    uint64_t explained = 0;
    for (size_t i = 0; i < r->issue_count; i++)
        if (r->issues[i].kind != LB_ISSUE_OVERWRITTEN) explained += r->issues[i].records;
    /* LAST fragments in chunks still here whose beginning the overwrite policy destroyed: their
     * chunk counts them written, no reuse counted them overwritten, and they are said overwritten
     * (as the reader's count and export say) rather than unreadable. */
    uint64_t beginnings = r->beginnings_overwritten;
    uint64_t written = add_saturating(atomic_load(&h->records), active);
    uint64_t gone = add_saturating(out->records_overwritten, out->records_retired);
    /* A claim a crash cut short may have counted as overwritten the records of a chunk that
     * recovery (or this reader, for a dead writer) kept: the counters may say up to this many
     * records too few (they err toward "overwritten", never toward "lost"). */
    uint64_t kept = add_saturating(atomic_load(&h->records_kept_from_claims), r->claiming_kept_records);
    if (kept > out->records_overwritten) kept = out->records_overwritten;
    out->records_expected = written > gone ? written - gone : 0;
    /* A reader that followed a live overwrite ring read some records before the ring overwrote
     * them: they are among the overwritten, and among the found or those issues account for. */
    if (h->wrap_policy != LB_WRAP_LOSSLESS) out->records_expected += r->gone_read;
    out->records_unreadable = explained;
    out->accounted = 1;
    uint64_t here = add_saturating(add_saturating(out->records_found, explained), beginnings);
    if (here > out->records_expected && here - out->records_expected <= kept &&
        gone <= add_saturating(written, kept))
        out->records_expected = here;  /* the kept records, counted overwritten by their claim */
    out->records_overwritten += beginnings;
    if (gone > add_saturating(written, kept) && lb_rd_read_after_power_loss(r)) {
        /* Counters from different moments (the header's page, the last sync's count). */
    } else if (gone > add_saturating(written, kept)) {
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, "ring", 128, 128, 0,
                   "the ring header's counters are inconsistent: %llu records written, but %llu "
                   "overwritten and %llu in deleted archive files",
                   (unsigned long long)written, (unsigned long long)(out->records_overwritten - beginnings),
                   (unsigned long long)out->records_retired);
    } else if (here > out->records_expected && atomic_load(&h->writer_state) == LB_WRITER_STATE_CLOSED &&
               atomic_load(&h->unclean_sessions) == 0 && atomic_load(&h->archive_first_number) == 0) {
        /* A bundle that never crashed and whose archive retention never deleted anything counts
         * exactly (a crash can leave the counters short by the chunk being sealed; retention can
         * delete the copy of a chunk the ring still holds): more records than counted means the
         * counters are damaged. */
        lb_rd_add_issuef(r, LB_ISSUE_CORRUPT, "ring", 128, 128, 0,
                   "%llu records were read but the ring header's counters say %llu: the counters "
                   "are damaged", (unsigned long long)here, (unsigned long long)out->records_expected);
    }
    if (out->records_expected > here && lb_rd_read_after_power_loss(r)) {
        /* The counters' page may be newer than the chunks': what the sync covered was checked
         * record by record (verify_durable); the rest cannot be told from a power loss's tear. */
        lb_rd_add_issuef(r, LB_ISSUE_TORN, "ring", 0, 0, 0,
                   "%llu records the counters name are not here: the writer died after its last "
                   "sync, and what no sync covered can be lost to a power loss",
                   (unsigned long long)(out->records_expected - here));
    } else if (out->records_expected > here) {
        out->records_lost = out->records_expected - here;
        lb_rd_add_issuef(r, LB_ISSUE_MISSING, "ring", 0, 0, out->records_lost,
                   "%llu records are missing: the bundle's counters say %llu should be here, %llu "
                   "were read and %llu are accounted for by the issues above",
                   (unsigned long long)out->records_lost,
                   (unsigned long long)out->records_expected, (unsigned long long)out->records_found,
                   (unsigned long long)(explained + beginnings));
    }
}

static void verify_bundle(lb_reader *r, lb_verify_summary *out) {
    memset(out, 0, sizeof *out);
    out->records_found = r->emitted;
    out->writer_alive = (uint32_t)lb_rd_writer_alive(r);
    lb_ring_header h;
    int have_header = r->ring_mode && r->header_ok &&
                      lb_pread_full(r->ring_fd, &h, sizeof h, 0) == (ssize_t)sizeof h;
    if (!r->ring_mode) {
        verify_file_numbers(r, NULL, 0);
        return;
    }
    if (!have_header) return;  /* the ring header (its counters) is damaged or missing */
    verify_file_numbers(r, &h, (int)out->writer_alive);
    out->records_overwritten = atomic_load(&h.records_overwritten);
    /* The ring header is never synced: after a power loss it can be older than the last sync. (A
     * lossless ring overwrites nothing: a count in its sync is one a claim under way made an
     * earlier writer add there by mistake.) */
    if (lb_rd_read_after_power_loss(r) && h.wrap_policy != LB_WRAP_LOSSLESS &&
        r->durable_overwritten > out->records_overwritten)
        out->records_overwritten = r->durable_overwritten;
    out->records_retired = atomic_load(&h.archive_retired_records);
    for (unsigned i = 0; i < LB_DROP_REASON_COUNT; i++) out->records_dropped += atomic_load(&h.drops[i]);
    /* Counts move while a writer runs: they are checked once it stops. */
    int possible = out->writer_alive || counters_possible(r, &h, out->records_overwritten);
    if (out->records_overwritten && possible)
        lb_rd_add_issuef(r, LB_ISSUE_OVERWRITTEN, "ring", 0, 0, out->records_overwritten,
                   "%llu records were overwritten before they were archived (the overwrite policy "
                   "keeps the newest)", (unsigned long long)out->records_overwritten);
    if (out->writer_alive) return;
    verify_durable(r, &h);
    if (h.wrap_policy == LB_WRAP_LOSSLESS) verify_claims(r, &h);
    if (possible) verify_records(r, &h, out);
}

/* The issues that fail verification (all but torn and overwritten), of every pass and verify's. */
static int failing_issues(const lb_reader *r) {
    size_t failing = 0;
    for (size_t i = 0; i < r->issue_count; i++)
        if (r->issues[i].kind != LB_ISSUE_TORN && r->issues[i].kind != LB_ISSUE_OVERWRITTEN) failing++;
    return failing > INT_MAX ? INT_MAX : (int)failing;
}

int lb_reader_verify(lb_reader *r, lb_verify_summary *out) {
    if (!r || !out) return -EINVAL;
    if (r->verified) return -EALREADY;
    r->verified = 1;
    verify_bundle(r, out);
    return failing_issues(r);
}

int lb_reader_ring_info(lb_reader *r, lb_ring_info *out) {
    if (!r || !out) return -EINVAL;
    if (!r->ring_mode) return -ENOTSUP;
    if (r->ring_fd < 0) return r->ring_open_error ? r->ring_open_error : -ENOENT;
    if (!r->header_ok) {
        if (r->ring_broken) return -EPROTO;
        int rc = lb_rd_read_header(r);
        if (rc == -EPROTO) r->ring_broken = 1;
        if (rc) return rc;
    }
    lb_ring_header h;
    if (lb_pread_full(r->ring_fd, &h, sizeof h, 0) != (ssize_t)sizeof h) return -EIO;
    memset(out, 0, sizeof *out);
    out->format_version = r->header.format_version;
    out->chunk_size = r->header.chunk_size;
    out->chunk_count = r->header.chunk_count;
    out->wrap_policy = r->header.wrap_policy;
    out->created_wall_ns = r->header.created_wall_ns;
    out->writer_pid = atomic_load(&h.writer_pid);
    out->writer_alive = (uint32_t)lb_rd_writer_alive(r);
    out->next_sequence = atomic_load(&h.next_sequence);
    lb_counters *c = &out->counters;
    c->records = atomic_load(&h.records);
    c->bytes = atomic_load(&h.bytes);
    c->chunks_claimed = atomic_load(&h.chunks_claimed);
    c->chunks_reused = atomic_load(&h.chunks_reused);
    c->large_records = atomic_load(&h.large_records);
    for (unsigned i = 0; i < LB_DROP_REASON_COUNT; i++) {
        c->drops[i] = atomic_load(&h.drops[i]);
        c->dropped += c->drops[i];
    }
    out->archived_chunks = atomic_load(&h.archived_chunks);
    out->archived_bytes = atomic_load(&h.archived_bytes);
    out->archive_failures = atomic_load(&h.archive_failures);
    out->chunks_lost_unarchived = atomic_load(&h.chunks_lost_unarchived);
    out->archive_last_error = atomic_load(&h.archive_last_error);
    out->archive_backend = atomic_load(&h.archive_backend);
    out->records_overwritten = atomic_load(&h.records_overwritten);
    out->claims_abandoned = atomic_load(&h.claims_abandoned);
    out->chunks_discarded = atomic_load(&h.chunks_discarded);
    out->archive_first_number = atomic_load(&h.archive_first_number);
    out->archive_next_number = atomic_load(&h.archive_next_number);
    out->archive_retired_records = atomic_load(&h.archive_retired_records);
    for (uint32_t slot = 0; slot < r->header.chunk_count; slot++) {
        lb_chunk_header ch;
        uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)slot * r->header.chunk_size;
        if (lb_pread_full(r->ring_fd, &ch, sizeof ch, at) != (ssize_t)sizeof ch) break;
        int check = lb_chunk_header_check(&ch, slot, r->header.chunk_count);
        uint32_t state = atomic_load(&ch.state);
        if (check != 0) { out->chunks_free++; continue; }
        if (state == LB_CHUNK_SEALED || state == LB_CHUNK_ARCHIVING) {
            out->unarchived_bytes += atomic_load(&ch.committed);
            if (!out->oldest_unarchived_wall_ns || (int64_t)ch.wall_anchor_ns < out->oldest_unarchived_wall_ns)
                out->oldest_unarchived_wall_ns = (int64_t)ch.wall_anchor_ns;
        }
        if (state == LB_CHUNK_ARCHIVING) out->chunks_archiving++;
        if (state == LB_CHUNK_ACTIVE) {
            out->chunks_active++;
            /* Records of open chunks reach the header counters only when the chunk is sealed
             * (by its writer, or by recovery when a killed writer's bundle is reopened). */
            c->records += atomic_load(&ch.record_count);
            c->bytes += atomic_load(&ch.committed) - LB_CHUNK_HEADER_SIZE;
        } else if (state == LB_CHUNK_SEALED) out->chunks_sealed++;
        else if (state == LB_CHUNK_ARCHIVED) out->chunks_archived++;
    }
    return 0;
}

int lb_reader_archive_info(lb_reader *r, lb_archive_info *out) {
    if (!r || !out) return -EINVAL;
    memset(out, 0, sizeof *out);
    lb_rd_list_archive_directory(r);
    for (size_t i = 0; i < r->archive_count; i++) {
        archive_file *f = &r->archives[i];
        struct stat st;
        if (stat(f->name, &st) != 0) continue;  /* deleted by retention since */
        if (f->kind == LB_ARCHIVE_NAME_WRITING) out->writing_files++;
        else if (f->kind == LB_ARCHIVE_NAME_UNSYNCED) out->unsynced_files++;
        else out->files++;
        if (f->kind == LB_ARCHIVE_NAME_COMPRESSED) out->compressed_files++;
        out->bytes += (uint64_t)st.st_size;
        if (!out->oldest_number || f->number < out->oldest_number) out->oldest_number = f->number;
        if (f->number > out->newest_number) out->newest_number = f->number;
    }
    return 0;
}
