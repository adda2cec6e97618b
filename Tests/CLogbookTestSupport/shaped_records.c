/* shaped_records.c — the records of the integrity tests. Every field of record `seq` of test
 * thread `thread` follows from the pair (its size, its string bytes, whether it carries metadata
 * and what), so a reader can tell a record that was altered, mixed with another one's bytes, or
 * duplicated. Sizes vary on purpose: mostly short strings, some longer, some that nearly fill a
 * chunk (the record moves to a fresh chunk), some longer than a chunk (fragments). */
#define _GNU_SOURCE
#include "logbook_test_support.h"
#include "logbook.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void lb_test_record_shape(uint32_t thread, uint64_t seq, uint32_t chunk_size, lb_test_shape *out) {
    uint64_t h = mix(((uint64_t)thread << 40) ^ seq);
    uint32_t pick = (uint32_t)(h % 1000);
    uint32_t room = chunk_size - 64;  /* record bytes of an empty chunk */
    uint32_t length;
    if (pick < 850) length = (uint32_t)((h >> 10) % 40);
    else if (pick < 950) length = 40 + (uint32_t)((h >> 10) % 560);
    else if (pick < 985) length = 600 + (uint32_t)((h >> 10) % 2400);
    else if (pick < 995) length = room - 120 + (uint32_t)((h >> 10) % 112);  /* about a chunk */
    else length = room + (uint32_t)((h >> 10) % (2 * chunk_size));           /* fragments */
    if (length > LB_TEST_SHAPE_TEXT_MAX) length = LB_TEST_SHAPE_TEXT_MAX;
    out->text_length = length;
    out->metadata = ((h >> 40) & 7) == 0;
    out->metadata_text_length = (uint32_t)((h >> 44) % 12);
    out->metadata_number = (int64_t)(seq * 3 + thread);
}

static char text_byte(uint32_t thread, uint64_t seq, uint32_t i) {
    return (char)('a' + (seq * 7 + thread * 13 + i) % 26);
}

size_t lb_test_shape_text(uint32_t thread, uint64_t seq, uint32_t length, char *buffer) {
    for (uint32_t i = 0; i < length; i++) buffer[i] = text_byte(thread, seq, i);
    return length;
}

int lb_test_log_shaped(lb_logger *logger, uint32_t thread, uint64_t seq, uint32_t chunk_size,
                       char *scratch) {
    lb_test_shape shape;
    lb_test_record_shape(thread, seq, chunk_size, &shape);
    /* The metadata string is a prefix of the same bytes, possibly longer than the text. */
    lb_test_shape_text(thread, seq,
                       shape.text_length > shape.metadata_text_length ? shape.text_length
                                                                      : shape.metadata_text_length,
                       scratch);
    lb_bundle *bundle = logger->bundle;
    lb_writer *w = lb_writer_get(bundle);
    lb_record_begin(w, logger->id, LB_LEVEL_INFO);
    lb_record_put_u32(w, thread);
    lb_record_put_u64(w, seq);
    lb_record_put_string(w, scratch, shape.text_length);
    if (shape.metadata) {
        lb_record_put_container(w, LB_ARG_METADATA, 2);
        lb_record_put_cstring(w, "k");
        lb_record_put_i64(w, shape.metadata_number);
        lb_record_put_cstring(w, "t");
        lb_record_put_string(w, scratch, shape.metadata_text_length);
    }
    static const char file[] = "shaped", function[] = "lb_test_log_shaped";
    uint32_t site = lb_site_lookup(bundle, file, function, 1, 1);
    if (!site) {
        lb_site_desc desc = {file, function, 1, 1, file, sizeof file - 1, function,
                             sizeof function - 1, LB_TEST_SHAPE_TEMPLATE,
                             sizeof LB_TEST_SHAPE_TEMPLATE - 1, NULL, 0};
        if (lb_site_register(bundle, &desc, &site) != 0) site = 0;
    }
    if (!site) lb_record_discard(w, LB_DROP_META);
    return lb_record_commit(w, site);
}

static int arg_is_text(const lb_arg *a, uint32_t thread, uint64_t seq, uint32_t length) {
    if (a->type != LB_ARG_STRING || a->length != length) return 0;
    for (uint32_t i = 0; i < length; i++)
        if ((char)a->bytes[i] != text_byte(thread, seq, i)) return 0;
    return 1;
}

int lb_test_check_shaped(const lb_entry *e, uint32_t chunk_size, uint32_t *thread, uint64_t *seq) {
    uint32_t off = 0;
    lb_arg a;
    if (e->level != LB_LEVEL_INFO) return 0;
    if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_U32) return 0;
    uint32_t t = (uint32_t)a.value.u;
    if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_U64) return 0;
    uint64_t s = a.value.u;
    lb_test_shape shape;
    lb_test_record_shape(t, s, chunk_size, &shape);
    if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 ||
        !arg_is_text(&a, t, s, shape.text_length))
        return 0;
    if (shape.metadata) {
        if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_METADATA ||
            a.value.u != 2)
            return 0;
        if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_STRING ||
            a.length != 1 || a.bytes[0] != 'k')
            return 0;
        if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_I64 ||
            a.value.i != shape.metadata_number)
            return 0;
        if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 || a.type != LB_ARG_STRING ||
            a.length != 1 || a.bytes[0] != 't')
            return 0;
        if (lb_arg_next(e->args, e->args_length, &off, &a) != 1 ||
            !arg_is_text(&a, t, s, shape.metadata_text_length))
            return 0;
    }
    if (off != e->args_length) return 0;
    *thread = t;
    *seq = s;
    return 1;
}

/* ---- many threads ---- */
#include <pthread.h>
#include <stdlib.h>

typedef struct shaped_thread {
    lb_logger *logger;
    uint32_t index, chunk_size;
    uint64_t count;
    uint8_t *dropped;  /* this thread's row, or NULL */
    long failures;
} shaped_thread;

static void *shaped_thread_main(void *arg) {
    shaped_thread *t = arg;
    char *scratch = malloc(LB_TEST_SHAPE_TEXT_MAX);
    if (!scratch) {
        t->failures = -ENOMEM;
        return NULL;
    }
    for (uint64_t seq = 0; seq < t->count; seq++) {
        if (lb_test_log_shaped(t->logger, t->index, seq, t->chunk_size, scratch) != 0) {
            t->failures++;
            if (t->dropped) t->dropped[seq] = 1;
        }
    }
    free(scratch);
    return NULL;
}

long lb_test_log_shaped_threads(lb_logger *logger, uint32_t threads, uint64_t per_thread,
                                uint32_t chunk_size, uint8_t *dropped) {
    shaped_thread *t = calloc(threads, sizeof *t);
    pthread_t *ids = calloc(threads, sizeof *ids);
    if (!t || !ids) {
        free(t);
        free(ids);
        return -ENOMEM;
    }
    long result = 0;
    uint32_t started = 0;
    for (; started < threads; started++) {
        t[started] = (shaped_thread){logger, started, chunk_size, per_thread,
                                     dropped ? dropped + started * per_thread : NULL, 0};
        if (pthread_create(&ids[started], NULL, shaped_thread_main, &t[started]) != 0) {
            result = -EAGAIN;
            break;
        }
    }
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
        if (result >= 0) result = t[i].failures < 0 ? t[i].failures : result + t[i].failures;
    }
    free(t);
    free(ids);
    return result;
}

typedef struct shaped_tally {
    lb_test_check *out;
    uint8_t *seen;
    uint32_t chunk_size, threads;
    uint64_t per_thread;
    const uint8_t *dropped;
    int started;
    uint32_t last_session;
    uint64_t last_ticks;
} shaped_tally;

static void tally(shaped_tally *t, const lb_entry *e) {
    uint32_t thread;
    uint64_t seq;
    t->out->entries++;
    if (t->started && (e->session < t->last_session ||
                       (e->session == t->last_session && e->ticks < t->last_ticks)))
        t->out->out_of_order++;
    t->started = 1;
    t->last_session = e->session;
    t->last_ticks = e->ticks;
    if (!lb_test_check_shaped(e, t->chunk_size, &thread, &seq) || thread >= t->threads ||
        seq >= t->per_thread) {
        t->out->foreign++;
        return;
    }
    size_t at = (size_t)thread * t->per_thread + seq;
    if (t->seen[at]) t->out->duplicates++;
    t->seen[at] = 1;
    if (t->dropped && t->dropped[at]) t->out->dropped_found++;
}

static int tally_visit(void *context, const lb_entry *entry) {
    tally(context, entry);
    return 0;
}

/* Both checks: `streaming` reads with lb_reader_stream (entries borrowed one at a time), else with
 * lb_reader_scan (entries held, read by index). */
static int check_shaped(const char *path, uint32_t chunk_size, uint32_t threads, uint64_t per_thread,
                        const uint8_t *dropped, int streaming, lb_test_check *out) {
    memset(out, 0, sizeof *out);
    lb_reader *r;
    int rc = lb_reader_open(path, &r);
    if (rc) return rc;
    shaped_tally t = {out, calloc((size_t)threads * per_thread, 1), chunk_size, threads, per_thread,
                      dropped, 0, 0, 0};
    if (!t.seen) {
        lb_reader_close(r);
        return -ENOMEM;
    }
    if (streaming) {
        out->scan_result = lb_reader_stream(r, NULL, tally_visit, &t);
    } else {
        out->scan_result = lb_reader_scan(r);
        size_t count = lb_reader_entry_count(r);
        for (size_t i = 0; i < count; i++) {
            lb_entry e;
            if (lb_reader_entry(r, i, &e) != 0) out->foreign++;
            else tally(&t, &e);
        }
    }
    for (size_t at = 0; at < (size_t)threads * per_thread; at++)
        if (!t.seen[at] && !(dropped && dropped[at])) out->missing++;
    out->issues = (long)lb_reader_issue_count(r);
    for (size_t i = 0; i < lb_reader_issue_count(r); i++) {
        lb_issue issue;
        if (lb_reader_issue(r, i, &issue) == 0 && issue.kind != LB_ISSUE_TORN) out->failures++;
    }
    free(t.seen);
    lb_reader_close(r);
    return 0;
}

int lb_test_check_shaped_bundle(const char *path, uint32_t chunk_size, uint32_t threads,
                                uint64_t per_thread, const uint8_t *dropped, lb_test_check *out) {
    return check_shaped(path, chunk_size, threads, per_thread, dropped, 0, out);
}

int lb_test_check_shaped_stream(const char *path, uint32_t chunk_size, uint32_t threads,
                                uint64_t per_thread, const uint8_t *dropped, lb_test_check *out) {
    return check_shaped(path, chunk_size, threads, per_thread, dropped, 1, out);
}

typedef struct identity_list {
    uint32_t chunk_size;
    uint64_t *ids, *chunks;
    size_t count, capacity;
    long foreign;
    int error;
} identity_list;

static int identify_visit(void *context, const lb_entry *e) {
    identity_list *list = context;
    uint32_t thread;
    uint64_t seq;
    if (!lb_test_check_shaped(e, list->chunk_size, &thread, &seq)) {
        list->foreign++;
        return 0;
    }
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 4096;
        uint64_t *ids = realloc(list->ids, capacity * sizeof *ids);
        if (ids) list->ids = ids;
        uint64_t *chunks = ids ? realloc(list->chunks, capacity * sizeof *chunks) : NULL;
        if (chunks) list->chunks = chunks;
        if (!ids || !chunks) {
            list->error = -ENOMEM;
            return 1;
        }
        list->capacity = capacity;
    }
    list->chunks[list->count] = e->chunk_sequence;
    list->ids[list->count++] = (uint64_t)thread << 48 | seq;
    return 0;
}

int lb_test_read_shaped(const char *path, uint32_t chunk_size, lb_test_shaped_read *out) {
    memset(out, 0, sizeof *out);
    lb_reader *r;
    int rc = lb_reader_open(path, &r);
    if (rc) return rc;
    identity_list list = {.chunk_size = chunk_size};
    out->scan_result = lb_reader_stream(r, NULL, identify_visit, &list);
    if (list.error) {
        free(list.ids);
        free(list.chunks);
        lb_reader_close(r);
        return list.error;
    }
    rc = lb_reader_verify(r, &out->summary);
    if (rc > 0) rc = 0;  /* the failing issues: counted in out->failures below */
    lb_ring_info info;
    if (!rc) rc = lb_reader_ring_info(r, &info);
    if (!rc) {
        out->next_sequence = info.next_sequence;
        out->chunk_count = info.chunk_count;
    }
    out->ids = list.ids;
    out->chunk_sequences = list.chunks;
    out->count = list.count;
    out->foreign = list.foreign;
    for (size_t i = 0; i < lb_reader_issue_count(r); i++) {
        lb_issue issue;
        if (lb_reader_issue(r, i, &issue) == 0 && issue.kind != LB_ISSUE_TORN &&
            issue.kind != LB_ISSUE_OVERWRITTEN)
            out->failures++;
    }
    lb_reader_close(r);
    return rc;
}

/* A record whose argument takes `stall_ms` to evaluate: the record's timestamp is taken before. */
static const char *stall_then_text(uint32_t stall_ms, char *scratch, uint32_t length) {
    usleep(stall_ms * 1000u);
    memset(scratch, 's', length);
    scratch[length] = 0;
    return scratch;
}

void lb_test_log_slow_record(lb_logger *logger, uint32_t stall_ms, uint32_t length, char *scratch) {
    LB_INFO(logger, "slow record {}", stall_then_text(stall_ms, scratch, length));
}
