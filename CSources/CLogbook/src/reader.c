/* reader.c — the one decoder. It reads bundles of live, exited or killed writers with pread (never
 * a mapping: a truncated file cannot SIGBUS it), checks every length and offset, reassembles
 * fragmented records, and reports what it cannot use as issues. Its memory is bounded by the size
 * of the files it reads. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_TABLE_SIZE 1024u
#define ARENA_BLOCK (4u << 20)
#define PENDING_MAX 4096u
/* Source buffers of argument bytes (the chunk buffer, assembled fragments) end with this much
 * slack, so that arena_copy may move small arguments in fixed 16-byte pieces. */
#define COPY_SLACK 32u

typedef struct name_entry {
    uint32_t session;
    uint32_t id;
    char *name;
    lb_site_info site;  /* used by the site table */
    struct name_entry *next;
} name_entry;

typedef struct arena_block {
    struct arena_block *next;
    size_t used, capacity;
    uint8_t bytes[];
} arena_block;

typedef struct slot_progress {
    uint64_t sequence;   /* chunk read last from this slot */
    uint32_t offset;     /* where its walk stopped */
    uint32_t broken;     /* a corrupt record was reported: do not walk it again */
} slot_progress;

/* Every chunk sequence read so far, from the ring or an archive file, and how far: a chunk is read
 * once even when the ring and the archive both hold it. Open addressing; sequence 0 is empty. */
typedef struct seen_chunk {
    uint64_t sequence;
    uint32_t offset;     /* where its walk stopped */
    uint16_t broken;     /* a corrupt record was reported: do not walk it again */
    uint16_t archived;   /* an archive file holds it (a second one would be a duplicate) */
} seen_chunk;

/* An archive file being read (see logbook_format.h). */
typedef struct archive_file {
    uint64_t number;
    char *name;          /* its current path (a .writing file is renamed when complete) */
    char *label;         /* its first base name, for issues; kept until close */
    int fd;
    int kind;            /* lb_archive_name_kind */
    int header_ok, done;
    uint32_t chunk_size, chunk_count;
    uint64_t offset;     /* the next frame to read */
} archive_file;

typedef struct pending_record {
    uint64_t last_sequence;  /* chunk holding the newest fragment */
    uint64_t first_sequence;
    uint32_t first_offset;
    uint64_t first_file_offset;
    const char *first_file;
    uint32_t thread_id, session;
    uint8_t *bytes;          /* logical record from its timestamp on */
    size_t length;
} pending_record;

/* Per session: the span of chunk anchors seen, to refine the tick rate. A 20 ms calibration at
 * open is good to ~50 ppm; anchors minutes apart pin it down far better. */
typedef struct session_clock {
    uint32_t session;
    uint64_t first_ticks, last_ticks;
    int64_t first_wall, last_wall;
} session_clock;

struct lb_reader {
    char *path;
    int ring_mode;          /* reading a bundle (ring and meta), not only archive files */
    int ring_fd, meta_fd, lock_fd;
    int header_ok, meta_ok, truncation_reported;
    lb_ring_header header;
    uint64_t meta_offset;
    uint64_t meta_torn_reported;
    lb_session_info *sessions;
    size_t session_count, session_capacity;
    name_entry *loggers[NAME_TABLE_SIZE];
    name_entry *sites[NAME_TABLE_SIZE];
    slot_progress *progress;
    uint8_t *chunk;
    lb_entry *entries;
    size_t entry_count, entry_capacity;
    arena_block *arena;
    lb_issue *issues;
    size_t issue_count, issue_capacity;
    pending_record *pending;
    size_t pending_count;
    session_clock *clocks;
    size_t clock_count, clock_capacity;
    uint32_t known_site_session, known_site_id;  /* the last site found defined */
    uint32_t *order;                             /* entries in time order, by index */
    size_t order_capacity;
    size_t chunk_capacity;                       /* bytes of `chunk` (the largest chunk size) */
    seen_chunk *seen;
    size_t seen_count, seen_capacity;
    /* archive files: a bundle's "archive" directory, an archive directory, or a single file */
    char *archive_dir;                           /* NULL when reading one file */
    archive_file *archives;
    size_t archive_count, archive_capacity;
};

static int grow(void **array, size_t *capacity, size_t need, size_t element);
static const lb_session_info *find_session(const lb_reader *r, uint32_t session);

static void note_anchor(lb_reader *r, const lb_chunk_header *h) {
    session_clock *c = NULL;
    for (size_t i = 0; i < r->clock_count; i++)
        if (r->clocks[i].session == h->session) c = &r->clocks[i];
    if (!c) {
        if (grow((void **)&r->clocks, &r->clock_capacity, r->clock_count + 1, sizeof *c)) return;
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

/* ---- small containers ---- */
static int grow(void **array, size_t *capacity, size_t need, size_t element) {
    if (need <= *capacity) return 0;
    size_t cap = *capacity ? *capacity : 64;
    while (cap < need) cap *= 2;
    void *p = realloc(*array, cap * element);
    if (!p) return -ENOMEM;
    *array = p;
    *capacity = cap;
    return 0;
}

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

static void add_issue(lb_reader *r, uint32_t kind, const char *file, uint64_t offset,
                      uint64_t length, const char *reason) {
    if (grow((void **)&r->issues, &r->issue_capacity, r->issue_count + 1, sizeof(lb_issue)))
        return;
    r->issues[r->issue_count++] = (lb_issue){kind, file, offset, length, reason};
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

static uint32_t name_hash(uint32_t session, uint32_t id) {
    return (session * 2654435761u ^ id * 40503u) & (NAME_TABLE_SIZE - 1);
}

static name_entry *name_find(name_entry *const *table, uint32_t session, uint32_t id) {
    for (name_entry *e = table[name_hash(session, id)]; e; e = e->next)
        if (e->session == session && e->id == id) return e;
    return NULL;
}

/* ---- meta ---- */
static void site_info_free(lb_site_info *s) {
    free((char *)s->file);
    free((char *)s->function);
    free((char *)s->template_text);
    free((char *)s->source);
}

static void meta_visit(void *context, uint16_t kind, const uint8_t *body, uint32_t length) {
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
            grow((void **)&r->sessions, &r->session_capacity, r->session_count + 1, sizeof s)) {
            free((char *)s.host);
            free((char *)s.executable);
            add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "session entry does not parse");
            return;
        }
        r->sessions[r->session_count++] = s;
    } else if (kind == LB_META_LOGGER) {
        uint32_t session = lb_meta_get_u32(&c);
        uint16_t id = lb_meta_get_u16(&c);
        (void)lb_meta_get_u16(&c);
        char *name = lb_meta_get_string(&c);
        if (!c.failed && name_find(r->loggers, session, id)) {
            free(name);
            return;
        }
        name_entry *e = c.failed ? NULL : calloc(1, sizeof *e);
        if (!e) {
            free(name);
            add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "logger entry does not parse");
            return;
        }
        e->session = session;
        e->id = id;
        e->name = name;
        uint32_t h = name_hash(session, id);
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
        if (!c.failed && name_find(r->sites, s.session, s.id)) {
            site_info_free(&s);
            return;
        }
        name_entry *e = c.failed || !s.source ? NULL : calloc(1, sizeof *e);
        if (!e) {
            site_info_free(&s);
            add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, length, "site entry does not parse");
            return;
        }
        e->session = s.session;
        e->id = s.id;
        e->site = s;
        uint32_t h = name_hash(s.session, s.id);
        e->next = r->sites[h];
        r->sites[h] = e;
    }
    /* Unknown kinds are skipped: a later format may add entries that older readers ignore. */
}

static void read_meta(lb_reader *r) {
    if (!r->meta_ok) {
        if (r->meta_offset != 0) return;  /* broken earlier: reported once */
        lb_meta_file_header h;
        ssize_t n = lb_pread_full(r->meta_fd, &h, sizeof h, 0);
        if (n < (ssize_t)sizeof h || memcmp(h.magic, LB_META_MAGIC, 8) != 0 ||
            h.format_version != LB_FORMAT_VERSION) {
            add_issue(r, LB_ISSUE_CORRUPT, "meta", 0, sizeof h, "meta file header is not valid");
            r->meta_offset = 1;
            return;
        }
        r->meta_ok = 1;
        r->meta_offset = sizeof h;
    }
    int rc = lb_meta_read_entries(r->meta_fd, &r->meta_offset, meta_visit, r);
    struct stat st;
    uint64_t size = fstat(r->meta_fd, &st) == 0 ? (uint64_t)st.st_size : r->meta_offset;
    if (rc == -1) {
        add_issue(r, LB_ISSUE_CORRUPT, "meta", r->meta_offset, size - r->meta_offset,
                  "meta entry fails its checksum or length check; the rest is unreadable");
        r->meta_ok = 0;
    } else if (rc == 1 && r->meta_torn_reported != r->meta_offset) {
        add_issue(r, LB_ISSUE_TORN, "meta", r->meta_offset, size - r->meta_offset,
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
static inline int arg_is_key(uint8_t type) {
    return type == LB_ARG_STRING || type == LB_ARG_STATIC_STRING;
}

/* Whether the argument bytes are well formed: every argument by the rules of lb_arg_next, and the
 * structure of logbook_format.h (message arguments, then at most one METADATA, then at most one
 * ERROR of two strings; pairs start with a string key; containers nest at most LB_ARG_MAX_DEPTH
 * deep and their counts fit in the bytes left). Checked without decoding values. */
static int args_valid(const uint8_t *a, uint32_t n) {
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
    double ns_per_tick;
} time_map;

static time_map make_time_map(const lb_reader *r, const lb_chunk_header *h, uint32_t session) {
    const lb_session_info *s = find_session(r, session);
    time_map m = {session, s ? s->pid : 0, s ? s->tick_anchor : h->tick_anchor,
                  s ? (int64_t)s->wall_anchor_ns : (int64_t)h->wall_anchor_ns, 1.0};
    if (s) m.ns_per_tick = 1e9 / (double)session_rate(r, session, s->ticks_per_second);
    return m;
}

/* Wall time of a tick count. Double keeps sub-nanosecond precision over days of ticks and needs no
 * 128-bit division per record; hostile ticks, anchors or rates saturate instead of overflowing
 * (a regression found by fuzzing under UBSan). */
static inline int64_t ticks_to_wall(const time_map *map, uint64_t ticks) {
    double delta = (double)(int64_t)(ticks - map->anchor_ticks) * map->ns_per_tick;
    if (!(delta > -9.0e18)) delta = -9.0e18;  /* also catches NaN */
    if (delta > 9.0e18) delta = 9.0e18;
    int64_t wall;
    if (__builtin_add_overflow(map->anchor_wall, (int64_t)delta, &wall))
        wall = delta > 0 ? INT64_MAX : INT64_MIN;
    return wall;
}

/* Builds an entry from a logical record (bytes from the timestamp on). */
static void emit(lb_reader *r, const time_map *map, const char *file, uint64_t file_offset,
                 uint32_t offset,
                 const uint8_t *logical, size_t length, uint32_t thread_id, uint64_t sequence,
                 int fragmented) {
    if (length < LB_RECORD_FIXED_SIZE - 8) return;
    uint32_t args_length = (uint32_t)(length - (LB_RECORD_FIXED_SIZE - 8));
    const uint8_t *args = logical + (LB_RECORD_FIXED_SIZE - 8);
    if (!args_valid(args, args_length)) {
        add_issue(r, LB_ISSUE_CORRUPT, file, file_offset, length + 8,
                  "record arguments do not decode");
        return;
    }
    if (LB_UNLIKELY(r->entry_count == r->entry_capacity) &&
        large_grow((void **)&r->entries, &r->entry_capacity, r->entry_count + 1, sizeof(lb_entry)))
        return;
    /* Written in place: the array is the only copy. */
    lb_entry *e = &r->entries[r->entry_count];
    memcpy(&e->ticks, logical, 8);
    memcpy(&e->site_id, logical + 8, 4);
    memcpy(&e->logger_id, logical + 12, 2);
    e->level = logical[14];
    e->fragmented = (uint8_t)fragmented;
    e->chunk_sequence = sequence;
    e->chunk_offset = offset;
    e->thread_id = thread_id;
    e->session = map->session;
    e->pid = map->pid;
    e->wall_ns = ticks_to_wall(map, e->ticks);
    e->args = arena_copy(r, args, args_length);
    e->args_length = args_length;
    if (!e->args && args_length) return;
    if (LB_UNLIKELY(e->session != r->known_site_session || e->site_id != r->known_site_id)) {
        if (!name_find(r->sites, e->session, e->site_id)) {
            add_issue(r, LB_ISSUE_UNKNOWN_SITE, file, file_offset, length + 8,
                      "record refers to a call site that no meta entry defines");
        } else {
            r->known_site_session = e->session;
            r->known_site_id = e->site_id;
        }
    }
    r->entry_count++;
}

typedef struct walk_context {
    lb_reader *r;
    const lb_chunk_header *h;
    time_map map;
    const char *file;            /* "ring" or the archive file's name, for issues */
    uint64_t chunk_file_offset;
    uint32_t chunk_size;
    int corrupt;
} walk_context;

static pending_record *find_pending(lb_reader *r, uint64_t last_sequence) {
    for (size_t i = 0; i < r->pending_count; i++)
        if (r->pending[i].last_sequence == last_sequence) return &r->pending[i];
    return NULL;
}

static void drop_pending(lb_reader *r, pending_record *p) {
    free(p->bytes);
    *p = r->pending[--r->pending_count];
}

static int walk_visit(void *context, const lb_walk_record *rec) {
    walk_context *w = context;
    lb_reader *r = w->r;
    const lb_chunk_header *h = w->h;
    uint64_t file_offset = w->chunk_file_offset + rec->offset;
    const uint8_t *body = rec->bytes + 8;
    size_t body_length = rec->length - 8;
    uint32_t end = rec->offset + ((rec->length + 7u) & ~7u);
    switch (rec->kind) {
    case LB_RECORD_FULL:
        emit(r, &w->map, w->file, file_offset, rec->offset, body, body_length, h->thread_id,
             h->sequence, 0);
        return 0;
    case LB_RECORD_FIRST: {
        if (end + 8 <= w->chunk_size) {
            add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                      "first fragment does not end its chunk");
            w->corrupt = 1;
            return 1;
        }
        if (r->pending_count >= PENDING_MAX) return 0;
        pending_record p = {h->sequence, h->sequence, rec->offset, file_offset, w->file,
                            h->thread_id, h->session, malloc(body_length + COPY_SLACK),
                            body_length};
        if (!p.bytes) return 0;
        memcpy(p.bytes, body, body_length);
        r->pending = realloc(r->pending, (r->pending_count + 1) * sizeof *r->pending);
        if (!r->pending) { free(p.bytes); r->pending_count = 0; return 0; }
        r->pending[r->pending_count++] = p;
        return 0;
    }
    default: {
        if (rec->offset != LB_CHUNK_HEADER_SIZE ||
            (rec->kind == LB_RECORD_MIDDLE && end + 8 <= w->chunk_size)) {
            add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                      "fragment is out of place in its chunk");
            w->corrupt = 1;
            return 1;
        }
        pending_record *p = h->prev_sequence ? find_pending(r, h->prev_sequence) : NULL;
        if (!p) {
            add_issue(r, LB_ISSUE_TORN, w->file, file_offset, rec->length,
                      "fragment whose beginning was overwritten or lost");
            return 0;
        }
        if (p->length + body_length > LB_RECORD_MAX_SIZE) {
            add_issue(r, LB_ISSUE_CORRUPT, w->file, file_offset, rec->length,
                      "fragmented record exceeds the record size limit");
            drop_pending(r, p);
            return 0;
        }
        uint8_t *grown = realloc(p->bytes, p->length + body_length + COPY_SLACK);
        if (!grown) { drop_pending(r, p); return 0; }
        p->bytes = grown;
        memcpy(p->bytes + p->length, body, body_length);
        p->length += body_length;
        p->last_sequence = h->sequence;
        if (rec->kind == LB_RECORD_LAST) {
            time_map map = make_time_map(r, h, p->session);
            emit(r, &map, p->first_file, p->first_file_offset, p->first_offset, p->bytes,
                 p->length, p->thread_id, p->first_sequence, 1);
            drop_pending(r, p);
        }
        return 0;
    }
    }
}

/* ---- open / scan ---- */
int lb_reader_open(const char *path, lb_reader **out) {
    if (!path || !out) return -EINVAL;
    struct stat st;
    if (stat(path, &st) != 0) return -errno;
    lb_reader *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->ring_fd = r->meta_fd = r->lock_fd = -1;
    r->path = strdup(path);
    int rc = r->path ? 0 : -ENOMEM;
    if (!rc && S_ISREG(st.st_mode)) {
        /* One archive file (e.g. picked up by an uploader). */
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        uint64_t number = 0;
        int kind = lb_archive_name_parse(name, &number);
        if (grow((void **)&r->archives, &r->archive_capacity, 1, sizeof *r->archives)) rc = -ENOMEM;
        else {
            r->archives[0] = (archive_file){number, strdup(path), NULL, -1,
                                            kind ? (int)kind : LB_ARCHIVE_NAME_COMPLETE, 0, 0, 0, 0, 0};
            r->archive_count = 1;
            if (!r->archives[0].name) rc = -ENOMEM;
        }
    } else if (!rc) {
        r->ring_fd = lb_open_in(path, "ring", O_RDONLY);
        if (r->ring_fd == -ENOENT) {
            r->archive_dir = strdup(path);  /* an archive directory without its bundle */
        } else if (r->ring_fd < 0) {
            rc = r->ring_fd;
        } else {
            r->ring_mode = 1;
            r->meta_fd = lb_open_in(path, "meta", O_RDONLY);
            r->lock_fd = lb_open_in(path, "lock", O_RDONLY);
            if (r->meta_fd < 0) rc = r->meta_fd;
            r->archive_dir = lb_path_join(path, "archive");
        }
        if (!rc && !r->archive_dir) rc = -ENOMEM;
    }
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
            if (sites) site_info_free(&e->site);
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
        if (r->archives[i].fd >= 0) close(r->archives[i].fd);
        free(r->archives[i].name);
        free(r->archives[i].label);
    }
    free(r->archives);
    free(r->archive_dir);
    free(r->path);
    free(r);
}

/* The copy buffer holds the largest chunk met so far (ring or archive), plus COPY_SLACK. */
static int chunk_buffer(lb_reader *r, uint32_t chunk_size) {
    if (chunk_size <= r->chunk_capacity) return 0;
    uint8_t *p = realloc(r->chunk, (size_t)chunk_size + COPY_SLACK);
    if (!p) return -ENOMEM;
    r->chunk = p;
    r->chunk_capacity = chunk_size;
    return 0;
}

/* ---- chunks already read ---- */
static seen_chunk *seen_slot(seen_chunk *table, size_t capacity, uint64_t sequence) {
    size_t i = (size_t)(sequence * 0x9E3779B97F4A7C15ull >> 20) & (capacity - 1);
    while (table[i].sequence != 0 && table[i].sequence != sequence) i = (i + 1) & (capacity - 1);
    return &table[i];
}

static seen_chunk *seen_find(lb_reader *r, uint64_t sequence) {
    if (!r->seen_capacity) return NULL;
    seen_chunk *s = seen_slot(r->seen, r->seen_capacity, sequence);
    return s->sequence == sequence ? s : NULL;
}

static void seen_set(lb_reader *r, uint64_t sequence, uint32_t offset, uint32_t broken) {
    if ((r->seen_count + 1) * 2 > r->seen_capacity) {
        size_t capacity = r->seen_capacity ? r->seen_capacity * 2 : 1024;
        seen_chunk *table = calloc(capacity, sizeof *table);
        if (!table) return;  /* the chunk may be read again: duplicates, never a crash */
        for (size_t i = 0; i < r->seen_capacity; i++)
            if (r->seen[i].sequence) *seen_slot(table, capacity, r->seen[i].sequence) = r->seen[i];
        free(r->seen);
        r->seen = table;
        r->seen_capacity = capacity;
    }
    seen_chunk *s = seen_slot(r->seen, r->seen_capacity, sequence);
    if (!s->sequence) r->seen_count++;
    uint16_t archived = s->sequence ? s->archived : 0;
    *s = (seen_chunk){sequence, offset, (uint16_t)broken, archived};
}

static int read_header(lb_reader *r) {
    lb_ring_header h;
    ssize_t n = lb_pread_full(r->ring_fd, &h, sizeof h, 0);
    if (n < 0) return (int)n;
    const char *why = NULL;
    if ((size_t)n < sizeof h) why = "ring file is shorter than its header";
    else if (memcmp(h.magic, LB_RING_MAGIC, 8) != 0) why = "ring file has no Logbook magic";
    else if (h.format_version != LB_FORMAT_VERSION) why = "ring file has an unknown format version";
    else if (h.header_crc != lb_ring_header_crc(&h)) why = "ring header fails its checksum";
    else if (h.header_size != LB_RING_HEADER_SIZE || h.chunk_size < LB_CHUNK_SIZE_MIN ||
             h.chunk_size > LB_CHUNK_SIZE_MAX || (h.chunk_size & (h.chunk_size - 1)) ||
             h.chunk_count < 2 || h.chunk_count > LB_CHUNK_COUNT_MAX)
        why = "ring header has an impossible geometry";
    if (why) {
        add_issue(r, (size_t)n < sizeof h ? LB_ISSUE_TRUNCATED : LB_ISSUE_CORRUPT, "ring", 0,
                  sizeof h, why);
        return -EPROTO;
    }
    r->header = h;
    r->progress = calloc(h.chunk_count, sizeof *r->progress);
    if (!r->progress || chunk_buffer(r, h.chunk_size)) return -ENOMEM;
    r->header_ok = 1;
    return 0;
}

typedef struct chunk_ref {
    uint64_t sequence;
    int32_t source;    /* -1: the ring; else the index of an archive file */
    uint32_t slot;     /* ring: the slot */
    uint64_t offset;   /* archive: file offset of the chunk image */
    uint32_t length;   /* archive: bytes of the image */
    uint32_t records;  /* the chunk's record_count: sizes the entry array */
} chunk_ref;

typedef struct ref_list {
    chunk_ref *refs;
    size_t count, capacity;
} ref_list;

static void push_ref(ref_list *list, chunk_ref ref) {
    if (grow((void **)&list->refs, &list->capacity, list->count + 1, sizeof ref) == 0)
        list->refs[list->count++] = ref;
}

/* Oldest first, so that the fragments of a large record arrive in order; an archived copy before
 * the ring's copy of the same chunk. */
static int compare_refs(const void *a, const void *b) {
    const chunk_ref *x = a, *y = b;
    if (x->sequence != y->sequence) return x->sequence < y->sequence ? -1 : 1;
    return (x->source < 0) - (y->source < 0);
}

/* ---- archive files ---- */
static void list_archive_directory(lb_reader *r) {
    if (!r->archive_dir) return;
    DIR *d = opendir(r->archive_dir);
    if (!d) return;  /* no archive (yet) */
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t number;
        int kind = (int)lb_archive_name_parse(e->d_name, &number);
        if (!kind) continue;
        archive_file *f = NULL;
        for (size_t i = 0; i < r->archive_count; i++)
            if (r->archives[i].number == number) f = &r->archives[i];
        if (f && f->kind == kind) continue;
        char *name = lb_path_join(r->archive_dir, e->d_name);
        if (!name) continue;
        if (f) {  /* renamed: complete now */
            free(f->name);
            f->name = name;
            f->kind = kind;
            continue;
        }
        if (grow((void **)&r->archives, &r->archive_capacity, r->archive_count + 1,
                 sizeof *r->archives)) {
            free(name);
            continue;
        }
        size_t at = r->archive_count++;
        while (at > 0 && r->archives[at - 1].number > number) {
            r->archives[at] = r->archives[at - 1];
            at--;
        }
        r->archives[at] = (archive_file){number, name, NULL, -1, kind, 0, 0, 0, 0, 0};
    }
    closedir(d);
}

/* The name issues carry: the file's base name, kept for the reader's lifetime. */
static const char *archive_label(lb_reader *r, archive_file *f) {
    (void)r;
    if (!f->label) {
        const char *slash = strrchr(f->name, '/');
        f->label = strdup(slash ? slash + 1 : f->name);
    }
    return f->label ? f->label : "archive";
}

static void archive_meta_frame(lb_reader *r, archive_file *f, uint32_t length) {
    uint8_t *body = malloc(length ? length : 1);
    if (!body) return;
    if (lb_pread_full(f->fd, body, length, f->offset + LB_ARCHIVE_FRAME_HEAD_SIZE) != (ssize_t)length ||
        lb_meta_parse_entries(body, length, meta_visit, r) != 0)
        add_issue(r, LB_ISSUE_CORRUPT, archive_label(r, f), f->offset, length,
                  "meta entries in an archive frame do not parse");
    free(body);
}

/* Reads the new frames of archive file `index`: meta entries at once, chunks as refs. */
static void collect_archive(lb_reader *r, size_t index, ref_list *refs) {
    archive_file *f = &r->archives[index];
    if (f->done) return;
    if (f->fd < 0 && (f->fd = open(f->name, O_RDONLY | O_CLOEXEC)) < 0) {
        f->fd = -1;
        return;  /* renamed or deleted since the listing: the next scan sees it */
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0) return;
    uint64_t size = (uint64_t)st.st_size;
    if (!f->header_ok) {
        lb_archive_file_header h;
        ssize_t n = lb_pread_full(f->fd, &h, sizeof h, 0);
        const char *problem = n == (ssize_t)sizeof h ? lb_archive_header_problem(&h, size)
                                                     : "archive file is shorter than its header";
        if (problem) {
            if (f->kind == LB_ARCHIVE_NAME_WRITING && size < sizeof h) return;  /* being created */
            add_issue(r, size < sizeof h ? LB_ISSUE_TRUNCATED : LB_ISSUE_CORRUPT,
                      archive_label(r, f), 0, size, problem);
            f->done = 1;
            return;
        }
        if (chunk_buffer(r, h.chunk_size)) return;
        f->chunk_size = h.chunk_size;
        f->chunk_count = h.chunk_count;
        f->offset = sizeof h;
        f->header_ok = 1;
    }
    for (;;) {
        uint32_t length;
        uint16_t kind;
        lb_frame_status status =
            lb_archive_frame_head(f->fd, f->offset, size, f->chunk_size, &length, &kind);
        if (status == LB_FRAME_END) {
            if (f->kind != LB_ARCHIVE_NAME_WRITING) {
                if (f->offset < size)
                    add_issue(r, LB_ISSUE_TORN, archive_label(r, f), f->offset, size - f->offset,
                              "incomplete frame at the end of an archive file");
                f->done = 1;
            }
            return;
        }
        if (status == LB_FRAME_INVALID) {
            add_issue(r, LB_ISSUE_CORRUPT, archive_label(r, f), f->offset, size - f->offset,
                      "archive frame head is not valid; the rest of the file is unreadable");
            f->done = 1;
            return;
        }
        if (kind == LB_ARCHIVE_FRAME_META) {
            archive_meta_frame(r, f, length);
        } else if (kind == LB_ARCHIVE_FRAME_CHUNK) {
            lb_chunk_header h;
            uint64_t body = f->offset + LB_ARCHIVE_FRAME_HEAD_SIZE;
            if (lb_pread_full(f->fd, &h, sizeof h, body) != (ssize_t)sizeof h) return;
            if (lb_chunk_header_check(&h, (uint32_t)(h.sequence % f->chunk_count), f->chunk_count) != 0) {
                add_issue(r, LB_ISSUE_CORRUPT, archive_label(r, f), body, length,
                          "archived chunk header is not valid");
            } else {
                note_anchor(r, &h);
                seen_chunk *seen = seen_find(r, h.sequence);
                if (!seen) {
                    seen_set(r, h.sequence, LB_CHUNK_HEADER_SIZE, 0);
                    seen = seen_find(r, h.sequence);
                }
                if (seen && seen->archived)
                    add_issue(r, LB_ISSUE_CORRUPT, archive_label(r, f), body, length,
                              "chunk archived twice (its records are shown once)");
                else if (seen)
                    seen->archived = 1;
                if (!seen || (!seen->broken && seen->offset < length))
                    push_ref(refs, (chunk_ref){h.sequence, (int32_t)index, 0, body, length,
                                               atomic_load(&h.record_count)});
            }
        }
        /* Other kinds: a later format's frames, skipped. */
        f->offset += lb_archive_frame_span(length);
    }
}

/* Walks a chunk copied into r->chunk (image_length bytes) from where earlier scans stopped. */
static void walk_chunk(lb_reader *r, uint32_t image_length, uint32_t chunk_size, const char *file,
                       uint64_t file_offset, size_t *entry_mark, size_t *issue_mark,
                       size_t *pending_mark, uint32_t *stop, int *corrupt) {
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)r->chunk;
    seen_chunk *seen = seen_find(r, h->sequence);
    uint32_t start = seen ? seen->offset : LB_CHUNK_HEADER_SIZE;
    *entry_mark = r->entry_count;
    *issue_mark = r->issue_count;
    *pending_mark = r->pending_count;
    walk_context w = {r, h, make_time_map(r, h, h->session), file, file_offset, chunk_size, 0};
    lb_walk_end end;
    *stop = lb_chunk_walk(r->chunk, image_length, start, walk_visit, &w, &end);
    if (end == LB_WALK_END_INVALID && !w.corrupt) {
        add_issue(r, LB_ISSUE_CORRUPT, file, file_offset + *stop, image_length - *stop,
                  "record header is not valid for its chunk");
        w.corrupt = 1;
    }
    *corrupt = w.corrupt;
}

static void read_archived_chunk(lb_reader *r, const chunk_ref *ref) {
    archive_file *f = &r->archives[ref->source];
    seen_chunk *seen = seen_find(r, ref->sequence);
    if (seen && (seen->broken || seen->offset >= ref->length)) return;  /* the ring had it */
    if (f->fd < 0 || lb_pread_full(f->fd, r->chunk, ref->length, ref->offset) != (ssize_t)ref->length)
        return;
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)r->chunk;
    if (h->sequence != ref->sequence) return;
    size_t entries, issues, pending;
    uint32_t stop;
    int corrupt;
    walk_chunk(r, ref->length, f->chunk_size, archive_label(r, f), ref->offset, &entries, &issues,
               &pending, &stop, &corrupt);
    seen_set(r, ref->sequence, stop, (uint32_t)corrupt);
}

/* ---- the ring ---- */
static int collect_ring(lb_reader *r, ref_list *refs) {
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
            add_issue(r, LB_ISSUE_TRUNCATED, "ring", (uint64_t)st.st_size,
                      expected - (uint64_t)st.st_size, "ring file is shorter than its header says");
            r->truncation_reported = 1;
        }
    }
    for (uint32_t slot = 0; slot < present; slot++) {
        lb_chunk_header h;
        uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)slot * size;
        if (lb_pread_full(r->ring_fd, &h, sizeof h, at) != (ssize_t)sizeof h) continue;
        int check = lb_chunk_header_check(&h, slot, count);
        slot_progress *p = &r->progress[slot];
        if (check == -1) {
            if (p->sequence != UINT64_MAX) {
                add_issue(r, LB_ISSUE_CORRUPT, "ring", at, size, "chunk header is not valid");
                p->sequence = UINT64_MAX;  /* reported; look again only when it changes */
            }
            continue;
        }
        if (check != 0) continue;
        p->sequence = h.sequence;
        note_anchor(r, &h);
        seen_chunk *seen = seen_find(r, h.sequence);
        if (seen && (seen->broken || atomic_load(&h.committed) <= seen->offset)) continue;
        push_ref(refs, (chunk_ref){h.sequence, -1, slot, 0, 0, atomic_load(&h.record_count)});
    }
    return 0;
}

static void read_ring_chunk(lb_reader *r, const chunk_ref *ref) {
    const uint32_t count = r->header.chunk_count, size = r->header.chunk_size;
    uint64_t at = LB_RING_HEADER_SIZE + (uint64_t)ref->slot * size;
    seen_chunk *seen = seen_find(r, ref->sequence);
    if (seen && seen->broken) return;
    ssize_t n = lb_pread_full(r->ring_fd, r->chunk, size, at);
    if (n != (ssize_t)size) return;
    const lb_chunk_header *h = (const lb_chunk_header *)(const void *)r->chunk;
    if (lb_chunk_header_check(h, ref->slot, count) != 0 || h->sequence != ref->sequence)
        return;  /* changed between the two reads: next scan */
    size_t entry_mark, issue_mark, pending_mark;
    uint32_t stop;
    int corrupt;
    walk_chunk(r, size, size, "ring", at, &entry_mark, &issue_mark, &pending_mark, &stop, &corrupt);
    /* The chunk may have been reclaimed while we copied it: then nothing of it counts. */
    lb_chunk_header again;
    if (lb_pread_full(r->ring_fd, &again, sizeof again, at) != (ssize_t)sizeof again ||
        again.sequence != ref->sequence || atomic_load(&again.state) == LB_CHUNK_CLAIMING) {
        r->entry_count = entry_mark;
        r->issue_count = issue_mark;
        while (r->pending_count > pending_mark) drop_pending(r, &r->pending[r->pending_count - 1]);
        return;
    }
    seen_set(r, ref->sequence, stop, (uint32_t)corrupt);
}

/* Time order: sessions one after another, within a session by clock ticks (the order the writers
 * really logged in; wall times are derived from them).
 *
 * New entries arrive chunk by chunk in sequence order, each chunk already in
 * tick order: a few long sorted runs. If they are not in order already, a k-way merge of the runs
 * (a binary heap of run cursors) writes the sorted order as an index, and entries stay where they
 * are. Ties keep arrival order (chunk sequence, then offset). */
static int entry_before(const lb_entry *a, size_t ia, const lb_entry *b, size_t ib) {
    if (a->session != b->session) return a->session < b->session;
    if (a->ticks != b->ticks) return a->ticks < b->ticks;
    return ia < ib;
}

typedef struct run_cursor {
    size_t next, end;
} run_cursor;

static int heap_before(const lb_entry *entries, const run_cursor *x, const run_cursor *y) {
    return entry_before(&entries[x->next], x->next, &entries[y->next], y->next);
}

static void heap_down(const lb_entry *entries, run_cursor *heap, size_t count, size_t at) {
    for (;;) {
        size_t smallest = at, left = 2 * at + 1, right = left + 1;
        if (left < count && heap_before(entries, &heap[left], &heap[smallest])) smallest = left;
        if (right < count && heap_before(entries, &heap[right], &heap[smallest])) smallest = right;
        if (smallest == at) return;
        run_cursor swap = heap[at];
        heap[at] = heap[smallest];
        heap[smallest] = swap;
        at = smallest;
    }
}

/* Fills order[first..count) with the indices of entries[first..count) in time order. */
static int order_entries(const lb_entry *entries, uint32_t *order, size_t first, size_t count) {
    size_t runs = first < count ? 1 : 0;
    for (size_t i = first + 1; i < count; i++)
        if (entry_before(&entries[i], i, &entries[i - 1], i - 1)) runs++;
    if (runs <= 1) {
        for (size_t i = first; i < count; i++) order[i] = (uint32_t)i;
        return 0;
    }
    run_cursor *heap = malloc(runs * sizeof *heap);
    if (!heap) return -ENOMEM;
    size_t heap_count = 0, start = first;
    for (size_t i = first + 1; i <= count; i++) {
        if (i == count || entry_before(&entries[i], i, &entries[i - 1], i - 1)) {
            heap[heap_count++] = (run_cursor){start, i};
            start = i;
        }
    }
    for (size_t i = heap_count; i-- > 0;) heap_down(entries, heap, heap_count, i);
    for (size_t out = first; heap_count > 0; out++) {
        order[out] = (uint32_t)heap[0].next++;
        if (heap[0].next == heap[0].end) heap[0] = heap[--heap_count];
        heap_down(entries, heap, heap_count, 0);
    }
    free(heap);
    return 0;
}

static int writer_alive(lb_reader *r) {
    if (r->lock_fd < 0) return 0;
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(r->lock_fd, F_OFD_GETLK, &fl) != 0) return 0;
    return fl.l_type != F_UNLCK;
}

long lb_reader_scan(lb_reader *r) {
    if (!r) return -EINVAL;
    if (r->ring_mode) {
        if (!r->header_ok) {
            int rc = read_header(r);
            if (rc) return rc;
        }
        read_meta(r);
    }
    /* Archive files first: their meta frames define what chunks refer to. */
    ref_list refs = {0};
    list_archive_directory(r);
    for (size_t i = 0; i < r->archive_count; i++) collect_archive(r, i, &refs);
    if (r->ring_mode) {
        int rc = collect_ring(r, &refs);
        if (rc) {
            free(refs.refs);
            return rc;
        }
    }
    if (refs.count) qsort(refs.refs, refs.count, sizeof *refs.refs, compare_refs);

    /* Reserve the entries the chunks say they hold (a damaged count only costs a later grow). */
    size_t most = r->entry_count + 16;
    for (size_t i = 0; i < refs.count; i++) {
        uint32_t cap = (refs.refs[i].source < 0 ? r->header.chunk_size : refs.refs[i].length) /
                       LB_RECORD_FIXED_SIZE;
        most += refs.refs[i].records < cap ? refs.refs[i].records : cap;
    }
    if (most > r->entry_capacity &&
        large_grow((void **)&r->entries, &r->entry_capacity, most, sizeof(lb_entry))) {
        free(refs.refs);
        return -ENOMEM;
    }
    size_t first_new = r->entry_count;
    for (size_t i = 0; i < refs.count; i++) {
        if (refs.refs[i].source < 0) read_ring_chunk(r, &refs.refs[i]);
        else read_archived_chunk(r, &refs.refs[i]);
    }
    free(refs.refs);
    for (size_t i = 0; i < r->archive_count; i++) {
        archive_file *f = &r->archives[i];
        if (f->done && f->fd >= 0) {
            close(f->fd);
            f->fd = -1;
        }
    }

    /* A large record whose beginning the walk found but whose writer is gone will never finish. */
    if (r->pending_count && !writer_alive(r)) {
        while (r->pending_count) {
            pending_record *p = &r->pending[r->pending_count - 1];
            add_issue(r, LB_ISSUE_TORN, p->first_file, p->first_file_offset, p->length,
                      "large record cut short: its writer stopped before the end");
            drop_pending(r, p);
        }
    }
    size_t added = r->entry_count - first_new;
    if (r->entry_count > UINT32_MAX) return -EOVERFLOW;
    if (large_grow((void **)&r->order, &r->order_capacity, r->entry_count, sizeof *r->order))
        return -ENOMEM;
    if (order_entries(r->entries, r->order, first_new, r->entry_count)) return -ENOMEM;
    return (long)added;
}

size_t lb_reader_entry_count(const lb_reader *r) { return r ? r->entry_count : 0; }

int lb_reader_entry(const lb_reader *r, size_t index, lb_entry *out) {
    if (!r || !out || index >= r->entry_count) return -EINVAL;
    *out = r->entries[r->order[index]];
    return 0;
}

const lb_site_info *lb_reader_site(const lb_reader *r, uint32_t session, uint32_t site_id) {
    name_entry *e = name_find(r->sites, session, site_id);
    return e ? &e->site : NULL;
}

const char *lb_reader_logger_name(const lb_reader *r, uint32_t session, uint16_t logger_id) {
    name_entry *e = name_find(r->loggers, session, logger_id);
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

int lb_reader_ring_info(lb_reader *r, lb_ring_info *out) {
    if (!r || !out) return -EINVAL;
    if (!r->ring_mode) return -ENOTSUP;
    if (!r->header_ok) {
        int rc = read_header(r);
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
    out->writer_alive = (uint32_t)writer_alive(r);
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
    list_archive_directory(r);
    for (size_t i = 0; i < r->archive_count; i++) {
        archive_file *f = &r->archives[i];
        struct stat st;
        if (stat(f->name, &st) != 0) continue;  /* deleted by retention since */
        if (f->kind == LB_ARCHIVE_NAME_WRITING) out->writing_files++;
        else if (f->kind == LB_ARCHIVE_NAME_UNSYNCED) out->unsynced_files++;
        else out->files++;
        out->bytes += (uint64_t)st.st_size;
        if (!out->oldest_number || f->number < out->oldest_number) out->oldest_number = f->number;
        if (f->number > out->newest_number) out->newest_number = f->number;
    }
    return 0;
}
