/* reader_records.c — from a chunk's bytes to entries: the meta file's sessions, loggers and call
 * sites; argument checks; ticks to wall time; the walk of one chunk's records (fragments
 * reassembled, damage reported as issues) into the run being filled. */
#define _GNU_SOURCE
#include "reader_internal.h"

static const lb_session_info *find_session(const lb_reader *r, uint32_t session);

void lb_rd_note_anchor(lb_reader *r, const lb_chunk_header *h) {
    session_clock *c = NULL;
    for (size_t i = 0; i < r->clock_count; i++)
        if (r->clocks[i].session == h->session) c = &r->clocks[i];
    if (!c) {
        if (lb_array_grow((void **)&r->clocks, &r->clock_capacity, r->clock_count + 1, sizeof *c)) return;
        c = &r->clocks[r->clock_count++];
        *c = (session_clock){h->session, h->tick_anchor, h->tick_anchor,
                             (int64_t)h->wall_anchor_ns, (int64_t)h->wall_anchor_ns};
        return;
    }
    if (h->tick_anchor < c->first_ticks) {
        c->first_ticks = h->tick_anchor;
        c->first_wall = (int64_t)h->wall_anchor_ns;
    }
    if (h->tick_anchor > c->last_ticks) {
        c->last_ticks = h->tick_anchor;
        c->last_wall = (int64_t)h->wall_anchor_ns;
    }
}

/* Ticks per second of a session: from chunk anchors at least 10 s apart, else the calibration. */
static uint64_t session_rate(const lb_reader *r, uint32_t session, uint64_t calibrated) {
    for (size_t i = 0; i < r->clock_count; i++) {
        const session_clock *c = &r->clocks[i];
        if (c->session != session) continue;
        int64_t wall = c->last_wall - c->first_wall;
        if (wall < 10ll * 1000000000ll || c->last_ticks <= c->first_ticks) break;
        uint64_t rate = (uint64_t)((__int128)(c->last_ticks - c->first_ticks) * 1000000000 / wall);
        /* A wall clock stepped by an administrator would give nonsense: keep within 1%. */
        if (rate > calibrated - calibrated / 100 && rate < calibrated + calibrated / 100) return rate;
        break;
    }
    return calibrated;
}


/* ---- meta ---- */
void lb_rd_site_info_free(lb_site_info *s) {
    free((char *)s->file);
    free((char *)s->function);
    free((char *)s->template_text);
    free((char *)s->source);
}

void lb_rd_meta_visit(void *context, uint16_t kind, const uint8_t *body, uint32_t length) {
    lb_reader *r = context;
    lb_meta_cursor c = {body, length, 0, 0};
    if (kind == LB_META_SESSION) {
        lb_session_info s = {0};
        s.session = lb_meta_get_u32(&c);
        s.pid = lb_meta_get_u32(&c);
        s.ticks_per_second = lb_meta_get_u64(&c);
        s.clock = lb_meta_get_u32(&c);
        (void)lb_meta_get_u32(&c);
        s.tick_anchor = lb_meta_get_u64(&c);
        s.wall_anchor_ns = lb_meta_get_u64(&c);
        s.host = lb_meta_get_string(&c);
        s.executable = lb_meta_get_string(&c);
        if (!c.failed && find_session(r, s.session)) {
            /* Archive files repeat the entries of the bundle's meta file: the first one counts. */
            free((char *)s.host);
            free((char *)s.executable);
            return;
        }
        if (c.failed || s.ticks_per_second == 0 ||
            lb_array_grow((void **)&r->sessions, &r->session_capacity, r->session_count + 1, sizeof s)) {
            free((char *)s.host);
            free((char *)s.executable);
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "session entry does not parse");
            return;
        }
        r->sessions[r->session_count++] = s;
    } else if (kind == LB_META_LOGGER) {
        uint32_t session = lb_meta_get_u32(&c);
        uint16_t id = lb_meta_get_u16(&c);
        (void)lb_meta_get_u16(&c);
        char *name = lb_meta_get_string(&c);
        if (!c.failed && lb_rd_name_find(r->loggers, session, id)) {
            free(name);
            return;
        }
        name_entry *e = c.failed ? NULL : calloc(1, sizeof *e);
        if (!e) {
            free(name);
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "logger entry does not parse");
            return;
        }
        e->session = session;
        e->id = id;
        e->name = name;
        uint32_t h = lb_rd_name_hash(session, id);
        e->next = r->loggers[h];
        r->loggers[h] = e;
    } else if (kind == LB_META_SITE) {
        lb_site_info s = {0};
        s.session = lb_meta_get_u32(&c);
        s.id = lb_meta_get_u32(&c);
        s.line = lb_meta_get_u32(&c);
        s.column = lb_meta_get_u32(&c);
        s.file = lb_meta_get_string(&c);
        s.function = lb_meta_get_string(&c);
        s.template_text = lb_meta_get_string(&c);
        /* The source string came later: entries without it are complete too. */
        s.source = c.failed || c.offset == c.length ? strdup("") : lb_meta_get_string(&c);
        if (!c.failed && lb_rd_name_find(r->sites, s.session, s.id)) {
            lb_rd_site_info_free(&s);
            return;
        }
        name_entry *e = c.failed || !s.source ? NULL : calloc(1, sizeof *e);
        if (!e) {
            lb_rd_site_info_free(&s);
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "site entry does not parse");
            return;
        }
        e->session = s.session;
        e->id = s.id;
        e->site = s;
        uint32_t h = lb_rd_name_hash(s.session, s.id);
        e->next = r->sites[h];
        r->sites[h] = e;
    }
    /* Unknown kinds are skipped: a later format may add entries that older readers ignore. */
}

int lb_rd_writer_alive(lb_reader *r);

void lb_rd_read_meta(lb_reader *r) {
    if (!r->meta_ok) {
        if (r->meta_offset != 0) return;  /* broken earlier: reported once */
        lb_meta_file_header h;
        ssize_t n = lb_pread_full(r->meta_fd, &h, sizeof h, 0);
        if (n < (ssize_t)sizeof h || memcmp(h.magic, LB_META_MAGIC, 8) != 0 ||
            h.format_version != LB_FORMAT_VERSION) {
            lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, sizeof h, "meta file header is not valid");
            r->meta_offset = 1;
            return;
        }
        r->meta_ok = 1;
        r->meta_offset = sizeof h;
    }
    int rc = lb_meta_read_entries(r->meta_fd, &r->meta_offset, lb_rd_meta_visit, r);
    struct stat st;
    uint64_t size = fstat(r->meta_fd, &st) == 0 ? (uint64_t)st.st_size : r->meta_offset;
    if (rc == -1) {
        lb_rd_add_issue(r, LB_ISSUE_CORRUPT, "meta", r->meta_offset, size - r->meta_offset,
                  "meta entry fails its checksum or length check; the rest is unreadable");
        r->meta_ok = 0;
    } else if (rc == 1 && r->meta_torn_reported != r->meta_offset && !lb_rd_writer_alive(r)) {
        /* (A running writer's entry may be half written as we read: in progress, not torn.) */
        lb_rd_add_issue(r, LB_ISSUE_TORN, "meta", r->meta_offset, size - r->meta_offset,
                  "incomplete meta entry at the end (a crash during a write, or one in progress)");
        r->meta_torn_reported = r->meta_offset;
    }
}

/* ---- records ---- */
int lb_arg_next(const uint8_t *a, uint32_t n, uint32_t *offset, lb_arg *out) {
    uint32_t off = *offset;
    if (off >= n) return 0;
    memset(out, 0, sizeof *out);
    uint8_t type = a[off++];
    uint32_t size;
    switch (type) {
    case LB_ARG_BOOL: case LB_ARG_I8: case LB_ARG_U8: case LB_ARG_REDACTED: size = 1; break;
    case LB_ARG_I16: case LB_ARG_U16: size = 2; break;
    case LB_ARG_I32: case LB_ARG_U32: case LB_ARG_F32: size = 4; break;
    case LB_ARG_I64: case LB_ARG_INT: case LB_ARG_U64: case LB_ARG_UINT: case LB_ARG_F64:
        size = 8; break;
    case LB_ARG_STRING: case LB_ARG_STATIC_STRING: case LB_ARG_BYTES: {
        if (n - off < 4) return -EBADMSG;
        uint32_t length;
        memcpy(&length, a + off, 4);
        off += 4;
        if (length > n - off) return -EBADMSG;
        out->type = type;
        out->length = length;
        out->bytes = a + off;
        *offset = off + length;
        return 1;
    }
    case LB_ARG_METADATA: case LB_ARG_LIST: case LB_ARG_MAP: case LB_ARG_ERROR: {
        if (n - off < 4) return -EBADMSG;
        uint32_t count;
        memcpy(&count, a + off, 4);
        out->type = type;
        out->length = count;
        out->value.u = count;
        *offset = off + 4;
        return 1;
    }
    default: return -EBADMSG;
    }
    if (n - off < size) return -EBADMSG;
    const uint8_t *p = a + off;
    out->type = type;
    switch (type) {
    case LB_ARG_BOOL: if (p[0] > 1) return -EBADMSG; out->value.b = p[0] != 0; break;
    case LB_ARG_I8: out->value.i = (int8_t)p[0]; break;
    case LB_ARG_U8: out->value.u = p[0]; break;
    case LB_ARG_REDACTED:
        if (p[0] < LB_ARG_BOOL || p[0] >= LB_ARG_REDACTED) return -EBADMSG;
        out->redacted_type = p[0];
        break;
    case LB_ARG_I16: { int16_t v; memcpy(&v, p, 2); out->value.i = v; break; }
    case LB_ARG_U16: { uint16_t v; memcpy(&v, p, 2); out->value.u = v; break; }
    case LB_ARG_I32: { int32_t v; memcpy(&v, p, 4); out->value.i = v; break; }
    case LB_ARG_U32: { uint32_t v; memcpy(&v, p, 4); out->value.u = v; break; }
    case LB_ARG_F32: { float v; memcpy(&v, p, 4); out->value.f = v; break; }
    case LB_ARG_F64: { double v; memcpy(&v, p, 8); out->value.f = v; break; }
    case LB_ARG_I64: case LB_ARG_INT: memcpy(&out->value.i, p, 8); break;
    default: memcpy(&out->value.u, p, 8); break;
    }
    *offset = off + size;
    return 1;
}

/* Bytes of a fixed-size argument value by tag, 0 for a u32 length or count, -1 for an unknown
 * tag. */
static const int8_t arg_value_size[LB_ARG_ERROR + 1] = {
    [0] = -1, [LB_ARG_BOOL] = 1, [LB_ARG_I8] = 1, [LB_ARG_I16] = 2, [LB_ARG_I32] = 4,
    [LB_ARG_I64] = 8, [LB_ARG_INT] = 8, [LB_ARG_U8] = 1, [LB_ARG_U16] = 2, [LB_ARG_U32] = 4,
    [LB_ARG_U64] = 8, [LB_ARG_UINT] = 8, [LB_ARG_F32] = 4, [LB_ARG_F64] = 8,
    [LB_ARG_STRING] = 0, [LB_ARG_STATIC_STRING] = 0, [LB_ARG_BYTES] = 0, [LB_ARG_REDACTED] = 1,
    [LB_ARG_METADATA] = 0, [LB_ARG_LIST] = 0, [LB_ARG_MAP] = 0, [LB_ARG_ERROR] = 0,
};

static inline int arg_is_container(uint8_t type) { return type >= LB_ARG_METADATA; }
static int args_valid_structured(const uint8_t *a, uint32_t n);
static inline int arg_is_key(uint8_t type) {
    return type == LB_ARG_STRING || type == LB_ARG_STATIC_STRING;
}

/* Whether the argument bytes are well formed: every argument by the rules of lb_arg_next, and the
 * structure of logbook_format.h (message arguments, then at most one METADATA, then at most one
 * ERROR of two strings; pairs start with a string key; containers nest at most LB_ARG_MAX_DEPTH
 * deep and their counts fit in the bytes left). Checked without decoding values. */
static int args_valid(const uint8_t *a, uint32_t n) {
    /* The common case first: message arguments of fixed size and strings, nothing nested. */
    uint32_t at = 0;
    while (at < n) {
        uint8_t type = a[at];
        if (type >= LB_ARG_I8 && type <= LB_ARG_F64) {
            at += 1u + (uint32_t)arg_value_size[type];
        } else if (type == LB_ARG_STRING || type == LB_ARG_STATIC_STRING) {
            uint32_t length;
            if (n - at < 5) return 0;
            memcpy(&length, a + at + 1, 4);
            if (length > n - at - 5) return 0;
            at += 5u + length;
        } else if (type == LB_ARG_BOOL && n - at >= 2 && a[at + 1] <= 1) {
            at += 2;
        } else {
            break;  /* anything else (or a bad byte): the full check from the start */
        }
    }
    if (at == n) return 1;
    return args_valid_structured(a, n);
}

static int args_valid_structured(const uint8_t *a, uint32_t n) {
    enum { VALUES, PAIRS, ERROR_STRINGS };
    uint64_t left[LB_ARG_MAX_DEPTH + 1];  /* items still expected at each open level */
    uint8_t kind[LB_ARG_MAX_DEPTH + 1];
    unsigned depth = 0;
    int stage = 0;                         /* top level: 0 message args, 1 metadata, 2 error */
    uint32_t off = 0;
    while (off < n) {
        uint8_t type = a[off++];
        if (type > LB_ARG_ERROR || arg_value_size[type] < 0) return 0;
        if (depth == 0) {
            if (type == LB_ARG_METADATA) {
                if (stage >= 1) return 0;
                stage = 1;
            } else if (type == LB_ARG_ERROR) {
                if (stage >= 2) return 0;
                stage = 2;
            } else if (stage != 0 || arg_is_container(type)) {
                return 0;
            }
        } else {
            int key_slot = kind[depth] == PAIRS && left[depth] % 2 == 0;
            if ((key_slot || kind[depth] == ERROR_STRINGS) && !arg_is_key(type)) return 0;
            if (type == LB_ARG_METADATA || type == LB_ARG_ERROR) return 0;
            left[depth]--;
        }
        uint32_t size = (uint32_t)arg_value_size[type];
        if (size == 0) {
            if (n - off < 4) return 0;
            memcpy(&size, a + off, 4);
            off += 4;
            if (arg_is_container(type)) {
                uint64_t items = type == LB_ARG_LIST || type == LB_ARG_ERROR ? size
                                                                             : (uint64_t)size * 2;
                if (type == LB_ARG_ERROR && size != 2) return 0;
                if (items * 2 > n - off) return 0;  /* every item takes at least 2 bytes */
                if (items > 0) {
                    if (depth == LB_ARG_MAX_DEPTH) return 0;
                    depth++;
                    left[depth] = items;
                    kind[depth] = type == LB_ARG_LIST    ? VALUES
                                  : type == LB_ARG_ERROR ? ERROR_STRINGS
                                                         : PAIRS;
                }
                size = 0;
            }
        } else if (type == LB_ARG_BOOL && off < n && a[off] > 1) {
            return 0;
        } else if (type == LB_ARG_REDACTED && off < n &&
                   (a[off] < LB_ARG_BOOL || a[off] >= LB_ARG_REDACTED)) {
            return 0;
        }
        if (size > n - off) return 0;
        off += size;
        while (depth > 0 && left[depth] == 0) depth--;  /* close every finished container */
    }
    return depth == 0;
}

static const lb_session_info *find_session(const lb_reader *r, uint32_t session) {
    for (size_t i = 0; i < r->session_count; i++)
        if (r->sessions[i].session == session) return &r->sessions[i];
    return NULL;
}

/* How a chunk's ticks become wall time: one linear mapping per session keeps a thread's records
 * in order across chunks; a chunk's own anchor is the fallback when the session entry is lost. */
typedef struct time_map {
    uint32_t session;
    uint32_t pid;
    uint64_t anchor_ticks;
    int64_t anchor_wall;
    /* nanoseconds per tick = whole + fraction / 2^64: exact to 2^-64 ns per tick, so that days
     * of ticks stay within a nanosecond, with one 128-bit multiply per record (no floating point) */
    uint64_t whole;
    uint64_t fraction;
} time_map;

static time_map make_time_map(const lb_reader *r, const lb_chunk_header *h, uint32_t session) {
    const lb_session_info *s = find_session(r, session);
    time_map m = {session, s ? s->pid : 0, s ? s->tick_anchor : h->tick_anchor,
                  s ? (int64_t)s->wall_anchor_ns : (int64_t)h->wall_anchor_ns, 1, 0};
    if (s) {
        uint64_t rate = session_rate(r, session, s->ticks_per_second);
        if (rate == 0) rate = 1000000000u;  /* a damaged entry: read ticks as nanoseconds */
        m.whole = 1000000000u / rate;
        m.fraction = (uint64_t)(((unsigned __int128)(1000000000u % rate) << 64) / rate);
    }
    return m;
}

/* Wall time of a tick count. Hostile ticks, anchors or rates saturate instead of overflowing (a
 * regression found by fuzzing under UBSan). */
static inline int64_t ticks_to_wall(const time_map *map, uint64_t ticks) {
    __int128 delta = (int64_t)(ticks - map->anchor_ticks);
    __int128 ns = delta * (__int128)map->whole + ((delta * (__int128)map->fraction) >> 64);
    if (ns < -(__int128)9000000000000000000) ns = -(__int128)9000000000000000000;
    if (ns > (__int128)9000000000000000000) ns = (__int128)9000000000000000000;
    int64_t wall;
    if (__builtin_add_overflow(map->anchor_wall, (int64_t)ns, &wall))
        wall = ns > 0 ? INT64_MAX : INT64_MIN;
    return wall;
}

static int accepted(lb_reader *r, uint32_t session, uint32_t site, uint16_t logger);

/* Builds an entry of the run being filled from a logical record (bytes from the timestamp on), or
 * skips it when the pass's filter does. `in_image` says whether the bytes are in the run's image
 * (a record in one piece) or in a reassembled large record (its arguments are copied). Returns 1
 * when the record does not decode (not shown: an issue accounts for it), else 0. */
int lb_rd_writer_alive(lb_reader *r);

/* After a power loss or kernel crash, what no sync covered may be torn: pages of the ring from
 * different moments. A bundle that syncs (it has a `durable` file) never syncs its ring (the
 * mirror holds the durable copies), so once no writer holds it, damage in the ring at or past
 * chunk `sequence`'s durable offset is `torn` (verify passes); before it, where the mirror's copy
 * was not sound either, or in a bundle that never synced, it is `corrupt`. */
/* Whether the read filter takes records of this call site and logger, memoised per stream. */
static int accepted(lb_reader *r, uint32_t session, uint32_t site, uint16_t logger) {
    accept_memo *m = r->memo_last;
    if (m && m->session == session && m->site == site && m->logger == logger) return m->accept;
    if ((r->memo_count + 1) * 2 > r->memo_capacity) {
        size_t capacity = r->memo_capacity ? r->memo_capacity * 2 : 64;
        accept_memo *table = calloc(capacity, sizeof *table);
        if (!table) return 1;
        for (size_t i = 0; i < r->memo_capacity; i++) {
            if (!r->memo[i].used) continue;
            const accept_memo *old = &r->memo[i];
            size_t at = (old->session * 2654435761u ^ old->site * 40503u ^ old->logger) & (capacity - 1);
            while (table[at].used) at = (at + 1) & (capacity - 1);
            table[at] = *old;
        }
        free(r->memo);
        r->memo = table;
        r->memo_capacity = capacity;
    }
    size_t mask = r->memo_capacity - 1;
    size_t at = (session * 2654435761u ^ site * 40503u ^ logger) & mask;
    while (r->memo[at].used &&
           !(r->memo[at].session == session && r->memo[at].site == site && r->memo[at].logger == logger))
        at = (at + 1) & mask;
    m = &r->memo[at];
    if (!m->used) {
        const name_entry *s = lb_rd_name_find(r->sites, session, site);
        const name_entry *l = lb_rd_name_find(r->loggers, session, logger);
        *m = (accept_memo){session, site, logger, 1, 0};
        m->accept = r->filter.accept(r->filter.accept_context, s ? &s->site : NULL,
                                     l ? l->name : NULL) != 0;
        r->memo_count++;
    }
    r->memo_last = m;
    return m->accept;
}

static uint32_t ring_damage_kind(lb_reader *r, const char *file, uint64_t sequence, uint32_t offset,
                                 uint32_t otherwise) {
    if (!r->durable_valid || strcmp(file, "ring") != 0 || lb_rd_writer_alive(r)) return otherwise;
    return offset >= lb_rd_durable_through(r, sequence) ? LB_ISSUE_TORN : otherwise;
}

static int emit(lb_reader *r, const time_map *map, const char *file, uint64_t file_offset,
                uint32_t offset,
                const uint8_t *logical, size_t length, uint32_t thread_id, uint64_t sequence,
                int fragmented) {
    window_run *run = r->run;
    if (length < LB_RECORD_FIXED_SIZE - 8) {
        lb_issue *issue = lb_rd_add_issue(r, LB_ISSUE_CORRUPT, file, file_offset, length + 8,
                                    "record arguments do not decode");
        if (issue) issue->records = 1;
        return 1;
    }
    uint64_t ticks;
    uint32_t site_id;
    uint16_t logger_id;
    memcpy(&ticks, logical, 8);
    memcpy(&site_id, logical + 8, 4);
    memcpy(&logger_id, logical + 12, 2);
    uint8_t level = logical[14];
    int64_t wall = ticks_to_wall(map, ticks);
    uint32_t args_length = (uint32_t)(length - (LB_RECORD_FIXED_SIZE - 8));
    const uint8_t *args = logical + (LB_RECORD_FIXED_SIZE - 8);
    if (LB_UNLIKELY(map->session != r->known_site_session || site_id != r->known_site_id)) {
        /* A live writer appends a site to meta before any record names it, but this scan read
         * meta before the ring: a site registered in between is read now, not reported. */
        if (!lb_rd_name_find(r->sites, map->session, site_id) && r->meta_fd >= 0 && r->meta_ok) lb_rd_read_meta(r);
        if (!lb_rd_name_find(r->sites, map->session, site_id)) {
            lb_rd_add_issue(r, ring_damage_kind(r, file, sequence, offset, LB_ISSUE_UNKNOWN_SITE), file,
                      file_offset, length + 8,
                      "record refers to a call site that no meta entry defines");
        } else {
            r->known_site_session = map->session;
            r->known_site_id = site_id;
        }
    }
    if (LB_UNLIKELY(r->stopped)) {
        run->found++;  /* read, not handed out: the visitor stopped the stream */
        return 0;
    }
    if (LB_UNLIKELY(r->filtering)) {
        const lb_read_filter *f = &r->filter;
        if ((f->min_level && level < f->min_level && level != 0) || (f->max_level && level > f->max_level) ||
            (f->since_ns && wall < f->since_ns) || (f->until_ns && wall >= f->until_ns) ||
            (f->accept && !accepted(r, map->session, site_id, logger_id))) {
            run->found++;  /* read, not handed out */
            return 0;
        }
    }
    if (!args_valid(args, args_length)) {
        lb_issue *issue = lb_rd_add_issue(r, LB_ISSUE_CORRUPT, file, file_offset, length + 8,
                                    "record arguments do not decode");
        if (issue) issue->records = 1;
        return 1;
    }
    if (LB_UNLIKELY(run->count == run->capacity)) {
        size_t cap = run->capacity ? run->capacity * 2 : 256;
        lb_entry *grown = realloc(run->entries, cap * sizeof *grown);
        if (!grown) return 0;
        run->entries = grown;
        run->capacity = cap;
    }
    if (fragmented) {
        args = lb_rd_spill_copy(run, args, args_length);
        if (!args) return 0;
    }
    lb_entry *e = &run->entries[run->count];
    e->ticks = ticks;
    e->site_id = site_id;
    e->logger_id = logger_id;
    e->level = level;
    e->fragmented = (uint8_t)fragmented;
    e->chunk_sequence = sequence;
    e->chunk_offset = offset;
    e->thread_id = thread_id;
    e->session = map->session;
    e->pid = map->pid;
    e->wall_ns = wall;
    e->args = args;
    e->args_length = args_length;
    run->count++;
    run->found++;
    return 0;
}


typedef struct walk_context {
    lb_reader *r;
    const lb_chunk_header *h;
    time_map map;
    const char *file;            /* "ring" or the archive file's name, for issues */
    uint64_t chunk_file_offset;
    uint32_t chunk_size;
    int corrupt;
    lb_issue *corrupt_issue;     /* the issue reporting where the walk broke off, if any */
    uint32_t records;            /* FULL and LAST records walked (the header's record_count) */
    int deferred;                /* stopped before a fragment whose beginning comes next scan */
    walk_tally tally;            /* of those records, what could not be shown, and why */
} walk_context;

static int fragment_beginning_may_come(lb_reader *r, uint64_t chunk, uint64_t previous);
seen_chunk *lb_rd_seen_find(lb_reader *r, uint64_t sequence);

static pending_record *find_pending(lb_reader *r, uint64_t last_sequence) {
    for (size_t i = 0; i < r->pending_count; i++)
        if (!r->pending[i].consumed && r->pending[i].last_sequence == last_sequence)
            return &r->pending[i];
    return NULL;
}

/* Whether the beginning of a large record whose next fragment is in `chunk` may still be read,
 * its chunk `previous` not walked to the end yet. A scan lists the chunks, then reads them: the
 * writer may have finished `previous` and written the next fragment into `chunk` in between, so
 * that this scan read the end of the record before its beginning. True when `previous` is in the
 * ring with bytes not walked yet, or left a lossless ring (which archives a chunk before it reuses
 * its slot) without this reader having read its archived copy; at most 3 scans per chunk. */
static int fragment_beginning_may_come(lb_reader *r, uint64_t chunk, uint64_t previous) {
    if (!r->ring_mode || r->ring_fd < 0 || !r->geometry_known) return 0;
    /* Only a live writer finishes chunks between a scan's listing and its reading. Deferring for a
     * dead one hid the rest of the chunk when retention had deleted the file with the beginning
     * (a single scan never came back to it: found by the power-loss simulator). */
    if (!lb_rd_writer_alive(r)) return 0;
    seen_chunk *self = lb_rd_seen_find(r, chunk);
    if (self && self->deferrals >= 3) return 0;
    seen_chunk *seen = lb_rd_seen_find(r, previous);
    /* Gone from a lossless ring is not gone: its archived copy is still to be read (the listing
     * that should have had it can miss a file being renamed as it is read). */
    const int lossless = r->header.wrap_policy == LB_WRAP_LOSSLESS;
    if (seen && (seen->broken || (seen->gone && !lossless))) return 0;
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    lb_chunk_header h;
    uint64_t at = LB_RING_HEADER_SIZE + (previous % count) * (uint64_t)size;
    if (lb_pread_full(r->ring_fd, &h, sizeof h, at) != (ssize_t)sizeof h) return 0;
    if (h.sequence == previous && lb_chunk_header_check(&h, (uint32_t)(previous % count), count) >= 0)
        return !seen || atomic_load(&h.committed) > seen->offset;
    return lossless && !(seen && seen->archived);
}

/* Whether the overwrite policy destroyed the beginning of a large record whose next fragment found
 * none pending, `previous` being the chunk before that fragment's: `previous` is a MIDDLE whose own
 * beginning was destroyed so, or it left the ring (its slot reused) before this reader walked to
 * its end. Otherwise the beginning was lost to damage (an issue accounts for the record, and
 * lb_reader_overwritten does not), or with an archive file: neither is the overwrite policy. */
static int beginning_overwritten(lb_reader *r, uint64_t previous) {
    if (!r->ring_mode || r->ring_fd < 0 || !r->geometry_known || r->ring_broken ||
        r->header.wrap_policy == LB_WRAP_LOSSLESS)
        return 0;
    const seen_chunk *seen = lb_rd_seen_find(r, previous);
    if (seen && seen->trailing) return seen->trailing == TRAILING_OVERWRITTEN;
    if (seen && seen->broken) return 0;
    if (seen && seen->gone) return 1;
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    const uint32_t slot = (uint32_t)(previous % count);
    lb_chunk_header h;
    if (lb_pread_full(r->ring_fd, &h, sizeof h, LB_RING_HEADER_SIZE + (uint64_t)slot * size) !=
        (ssize_t)sizeof h)
        return 0;
    /* Reused: a later chunk is there, or a claim is under way. A damaged header tells nothing. */
    int check = lb_chunk_header_check(&h, slot, count);
    return check == 2 ? h.sequence != previous : check == 0 && h.sequence > previous;
}

void lb_rd_drop_pending(lb_reader *r, pending_record *p) {
    free(p->bytes);
    *p = r->pending[--r->pending_count];
}

/* After a walk of chunk `h` that counts: a large record whose last fragment is in an earlier chunk
 * will never be finished when this chunk is its thread's (a thread's next chunk starts with the
 * record's next fragment, and this one did not) or another session's (its writer is gone). */
void lb_rd_orphan_pending(lb_reader *r, const lb_chunk_header *h) {
    for (size_t i = 0; i < r->pending_count; i++) {
        pending_record *p = &r->pending[i];
        /* A later session means its writer is gone: one process writes a bundle at a time. */
        if (p->last_sequence < h->sequence &&
            (p->session != h->session || p->thread_id == h->thread_id))
            p->orphaned = 1;
    }
}

/* After a walk that counts: the records it emitted or gave up leave the pending list. */
void lb_rd_drop_consumed_pending(lb_reader *r) {
    for (size_t i = r->pending_count; i-- > 0;)
        if (r->pending[i].consumed) lb_rd_drop_pending(r, &r->pending[i]);
}

/* How a record that fails its page check is reported: `torn` (an incomplete write at a crash,
 * which verify passes) unless a sync made it durable, then `corrupt`. */
static uint32_t altered_issue_kind(walk_context *w, const lb_walk_record *rec) {
    return lb_rd_durable_through(w->r, w->h->sequence) > rec->offset ? LB_ISSUE_CORRUPT : LB_ISSUE_TORN;
}

/* In a bundle that syncs, once its writer is gone: the ring's damage past what the last sync made
 * durable (ring_damage_kind), and counts that disagree for the same reason, are torn. */
int lb_rd_read_after_power_loss(lb_reader *r) {
    return r->durable_valid && !lb_rd_writer_alive(r);
}

/* A record that crosses a page and fails its page check: after a power loss its later pages came
 * from another moment than its header, so its bytes are not what was logged. It is never shown: an
 * issue names it (with the record it accounts for), and the large record it belongs to, if any,
 * is given up. The walk goes on after it: its header's page is whole, so its length is right. */
static int altered_record(walk_context *w, const lb_walk_record *rec, uint64_t file_offset) {
    lb_reader *r = w->r;
    /* The record is accounted once: here for a FULL or LAST; a FIRST's or MIDDLE's by its LAST,
     * which then finds no beginning. */
    int counted = rec->kind == LB_RECORD_FULL || rec->kind == LB_RECORD_LAST;
    if (rec->kind == LB_RECORD_MIDDLE || rec->kind == LB_RECORD_LAST) {
        uint64_t prev = lb_chunk_prev_sequence(w->h);
        pending_record *p = prev ? find_pending(r, prev) : NULL;
        if (p) p->consumed = 1;
    }
    if (rec->kind == LB_RECORD_FIRST || rec->kind == LB_RECORD_MIDDLE)
        w->tally.trailing = TRAILING_LOST;
    lb_issue *issue = lb_rd_add_issue(r, altered_issue_kind(w, rec), w->file, file_offset, rec->length,
                                "record fails its page check: its bytes after the first page are "
                                "from another moment (a power loss) or damaged; not shown");
    if (issue && counted) issue->records = 1;
    if (counted) w->tally.unreadable++;
    return 0;
}

static int walk_visit(void *context, const lb_walk_record *rec) {
    walk_context *w = context;
    lb_reader *r = w->r;
    const lb_chunk_header *h = w->h;
    uint64_t file_offset = w->chunk_file_offset + rec->offset;
    const uint8_t *body = rec->bytes + 8;
    size_t body_length = rec->length - 8;
    uint32_t end = rec->next;
    if (rec->kind == LB_RECORD_FULL || rec->kind == LB_RECORD_LAST) w->records++;
    if (LB_UNLIKELY(rec->altered)) return altered_record(w, rec, file_offset);
    switch (rec->kind) {
    case LB_RECORD_FULL:
        w->tally.unreadable += (uint32_t)emit(r, &w->map, w->file, file_offset, rec->offset, body,
                                              body_length, h->thread_id, h->sequence, 0);
        return 0;
    case LB_RECORD_FIRST: {
        if (end + LB_RECORD_CHECK_SIZE + 8 <= w->chunk_size) {
            w->corrupt_issue = lb_rd_add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                                         "first fragment does not end its chunk");
            w->corrupt = 1;
            return 1;
        }
        w->tally.trailing = TRAILING_LOST;  /* unless it is kept below */
        if (r->pending_count >= PENDING_MAX) return 0;
        pending_record p = {h->sequence, h->sequence, rec->offset, file_offset, w->file,
                            h->thread_id, h->session, malloc(body_length + COPY_SLACK),
                            body_length, 0, 0};
        if (!p.bytes) return 0;
        memcpy(p.bytes, body, body_length);
        r->pending = realloc(r->pending, (r->pending_count + 1) * sizeof *r->pending);
        if (!r->pending) { free(p.bytes); r->pending_count = 0; return 0; }
        r->pending[r->pending_count++] = p;
        w->tally.trailing = TRAILING_PENDING;
        return 0;
    }
    default: {
        if (rec->offset != LB_CHUNK_HEADER_SIZE ||
            (rec->kind == LB_RECORD_MIDDLE && end + LB_RECORD_CHECK_SIZE + 8 <= w->chunk_size)) {
            if (rec->kind == LB_RECORD_LAST) w->records--;  /* not walked past: counted below */
            w->corrupt_issue = lb_rd_add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                                         "fragment is out of place in its chunk");
            w->corrupt = 1;
            return 1;
        }
        uint64_t prev = lb_chunk_prev_sequence(h);
        pending_record *p = prev ? find_pending(r, prev) : NULL;
        if (!p && prev && fragment_beginning_may_come(r, h->sequence, prev)) {
            /* Its beginning is in a chunk this scan listed before the writer got there: stop
             * before this fragment, and the next scan reads that chunk, then this one from here. */
            if (rec->kind == LB_RECORD_LAST) w->records--;
            w->deferred = 1;
            return 1;
        }
        int last = rec->kind == LB_RECORD_LAST;
        if (!p) {
            /* Its chunk counts the record, which cannot be shown: accounted for here. Whether the
             * overwrite policy destroyed its beginning (an overwritten issue: lb_reader_overwritten
             * and verify count it overwritten) or it was lost otherwise (damage: a torn issue,
             * which counts it unreadable) is passed on to the chunk after. */
            int overwritten = prev && beginning_overwritten(r, prev);
            lb_issue *issue = lb_rd_add_issue(r, overwritten ? LB_ISSUE_OVERWRITTEN : LB_ISSUE_TORN,
                                        w->file, file_offset, rec->length,
                                        overwritten ? "fragment whose beginning was overwritten"
                                                    : "fragment whose beginning was lost");
            if (issue && last) issue->records = 1;
            if (!last) w->tally.trailing = overwritten ? TRAILING_OVERWRITTEN : TRAILING_LOST;
            else if (overwritten) w->tally.beginnings_overwritten++;
            else w->tally.unreadable++;
            return 0;
        }
        if (!last) w->tally.trailing = TRAILING_LOST;  /* unless it is kept below */
        if (p->length + body_length > LB_RECORD_MAX_SIZE) {
            lb_issue *issue = lb_rd_add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                                        "fragmented record exceeds the record size limit");
            if (issue && last) issue->records = 1;
            if (last) w->tally.unreadable++;
            p->consumed = 1;
            return 0;
        }
        uint8_t *grown = realloc(p->bytes, p->length + body_length + COPY_SLACK);
        if (!grown) { p->consumed = 1; return 0; }
        p->bytes = grown;
        memcpy(p->bytes + p->length, body, body_length);
        p->length += body_length;
        p->last_sequence = h->sequence;
        if (last) {
            time_map map = make_time_map(r, h, p->session);
            w->tally.unreadable += (uint32_t)emit(r, &map, p->first_file, p->first_file_offset,
                                                  p->first_offset, p->bytes, p->length,
                                                  p->thread_id, p->first_sequence, 1);
            p->consumed = 1;
        } else {
            w->tally.trailing = TRAILING_PENDING;
        }
        return 0;
    }
    }
}

/* ---- open / scan ---- */

/* A file of a bundle, opened for reading: never through a symlink, never blocking (a FIFO planted
 * as `ring` must not hang a reader), and only a regular file. -ENOENT when absent, -ELOOP for a
 * symlink, -EINVAL for anything but a regular file. */

/* Walks a chunk copied into the image of r->run (image_length bytes) from where earlier scans stopped. Once
 * the chunk is complete (sealed in the ring, or an archived image) its walk must reach its
 * `committed` end and find its `record_count` records: what it does not find is reported with
 * the number of records lost (and tallied as unreadable). */
void lb_rd_walk_chunk(lb_reader *r, uint32_t image_length, uint32_t chunk_size, const char *file,
                       uint64_t file_offset, int complete, size_t *entry_mark, size_t *issue_mark,
                       size_t *pending_mark, uint32_t *stop, int *corrupt, uint32_t *records,
                       walk_tally *tally) {
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)r->run->image;
    seen_chunk *seen = lb_rd_seen_find(r, h->sequence);
    uint32_t start = seen ? seen->offset : LB_CHUNK_HEADER_SIZE;
    uint32_t before = seen ? seen->records : 0;
    *entry_mark = r->run->found;
    *issue_mark = r->issue_count;
    *pending_mark = r->pending_count;
    walk_context w = {r, h, make_time_map(r, h, h->session), file, file_offset, chunk_size, 0,
                      NULL, 0, 0, {0}};
    lb_walk_end end;
    *stop = lb_chunk_walk_inline(r->run->image, image_length, start, walk_visit, &w, &end);
    if (end == LB_WALK_END_INVALID && !w.corrupt) {
        w.corrupt_issue = lb_rd_add_issue(r, ring_damage_kind(r, file, h->sequence, *stop, LB_ISSUE_CORRUPT),
                                    file, file_offset + *stop, image_length - *stop,
                                    "record header is not valid for its chunk");
        w.corrupt = 1;
    }
    *corrupt = w.corrupt;
    *records = before + w.records;
    *tally = w.tally;
    if (w.deferred) {
        seen_chunk *again = lb_rd_seen_add(r, h->sequence);
        if (again && again->deferrals < UINT8_MAX) again->deferrals++;
        return;  /* the records after the stop are read next scan: nothing is missing */
    }
    uint32_t count = atomic_load(&h->record_count);
    uint32_t committed = atomic_load(&h->committed);
    /* An active chunk's count is stored after each record, and is copied before the records
     * after it: a walk never finds fewer records than it, unless bytes are damaged. */
    if (*records < count && (complete || !w.corrupt)) {
        uint32_t lost = count - *records;
        tally->unreadable += lost;
        if (w.corrupt_issue) {
            w.corrupt_issue->records += lost;
        } else {
            lb_rd_add_issuef(r, ring_damage_kind(r, file, h->sequence, *stop, LB_ISSUE_CORRUPT), file,
                       file_offset + *stop, committed > *stop ? committed - *stop : 0, lost,
                       "chunk %llu: its records end at offset %u of %u committed bytes; %u of "
                       "its %u records are unreadable",
                       (unsigned long long)h->sequence, *stop, committed, lost, count);
            *corrupt = 1;
        }
    } else if (complete && !w.corrupt && *stop != committed) {
        lb_rd_add_issuef(r, ring_damage_kind(r, file, h->sequence, *stop, LB_ISSUE_CORRUPT), file,
                   file_offset + *stop, 0, 0,
                   "chunk %llu: its records end at offset %u, its header says %u",
                   (unsigned long long)h->sequence, *stop, committed);
        *corrupt = 1;
    }
}
