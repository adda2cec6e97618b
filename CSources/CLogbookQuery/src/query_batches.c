/* query_batches.c — lb_reader_stream turned inside out for SQLite, which pulls rows: the stream
 * runs on a thread of its own and fills batches (entries, copies of their arguments, their site and
 * logger resolved to the query's shared names). Two batches go round: the stream fills one while
 * the caller reads the other, so reading and SQL overlap on two cores. In `alternate` mode (the
 * caller asks the reader itself about an entry: its message rendered) there is one batch, and the
 * stream waits while the caller uses it, so that the reader is never used by two threads at once.
 * Memory: two batches beside the reader's window. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "query_internal.h"

enum { BATCH_ENTRIES = 4096, BATCH_BYTES = 1u << 20 };

typedef struct batch {
    lb_q_entry *entries;
    size_t count;
    uint8_t *arena;
    size_t used, capacity;
    int full;                   /* under lock: handed to the caller, not yet given back */
} batch;

struct lb_q_batches {
    lb_query *query;
    lb_reader *reader;
    lb_read_filter filter;
    int alternate;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t filled;      /* the caller waits on it: a batch full, or the stream done */
    pthread_cond_t emptied;     /* the stream waits on it: a batch given back, or stop */
    batch batches[2];
    int stop;                   /* under lock: the caller is done, hand out nothing more */
    int finished;               /* under lock: the stream returned */
    long result;                /* lb_reader_stream's (or -ENOMEM), once finished */
    /* the stream's thread only */
    int filling;
    uint64_t visited;
    lb_q_memo sites, loggers;
    /* the caller's only */
    int reading, holding;
    size_t next;
};

/* On the stream's thread: hands the batch being filled over, and waits for one to fill (the other,
 * or in alternate mode the same once given back). Nonzero when the caller stopped. */
static int hand_over(lb_q_batches *b) {
    pthread_mutex_lock(&b->lock);
    b->batches[b->filling].full = 1;
    pthread_cond_signal(&b->filled);
    if (!b->alternate) b->filling ^= 1;
    while (b->batches[b->filling].full && !b->stop) pthread_cond_wait(&b->emptied, &b->lock);
    int stop = b->stop;
    pthread_mutex_unlock(&b->lock);
    b->batches[b->filling].count = 0;
    b->batches[b->filling].used = 0;
    return stop;
}

static int keep_entry(void *context, const lb_entry *entry) {
    lb_q_batches *b = context;
    batch *f = &b->batches[b->filling];
    if (f->count == BATCH_ENTRIES || entry->args_length > f->capacity - f->used) {
        if (f->count > 0 && hand_over(b)) return 1;
        f = &b->batches[b->filling];
        if (entry->args_length > f->capacity) {
            /* One record larger than the arena: the arena grows to hold it (an empty batch). */
            uint8_t *bigger = realloc(f->arena, entry->args_length);
            if (!bigger) {
                b->result = -ENOMEM;
                return 1;
            }
            f->arena = bigger;
            f->capacity = entry->args_length;
        }
    }
    lb_q_entry *kept = &f->entries[f->count++];
    kept->entry = *entry;
    if (entry->args_length > 0) memcpy(f->arena + f->used, entry->args, entry->args_length);
    kept->entry.args = f->arena + f->used;
    f->used += entry->args_length;
    kept->site = lb_q_memo_site(&b->sites, b->query, b->reader, entry->session, entry->site_id);
    kept->logger = lb_q_memo_logger(&b->loggers, b->query, b->reader, entry->session, entry->logger_id);
    b->visited++;
    return 0;
}

static void *run_stream(void *context) {
    lb_q_batches *b = context;
    long rc = lb_reader_stream(b->reader, &b->filter, keep_entry, b);
    pthread_mutex_lock(&b->lock);
    if (rc < 0 && b->result == 0) b->result = rc;
    if (b->batches[b->filling].count > 0 && !b->stop) b->batches[b->filling].full = 1;
    b->finished = 1;
    pthread_cond_signal(&b->filled);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

static void free_batches(lb_q_batches *b) {
    for (int i = 0; i < 2; i++) {
        free(b->batches[i].entries);
        free(b->batches[i].arena);
    }
    lb_q_memo_reset(&b->sites);
    lb_q_memo_reset(&b->loggers);
    free(b);
}

int lb_q_batches_start(lb_query *query, lb_reader *reader, const lb_read_filter *filter, int alternate,
                       lb_q_batches **out) {
    lb_q_batches *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    b->query = query;
    b->reader = reader;
    b->filter = *filter;
    b->alternate = alternate != 0;
    for (int i = 0; i < (b->alternate ? 1 : 2); i++) {
        b->batches[i].entries = malloc(BATCH_ENTRIES * sizeof *b->batches[i].entries);
        b->batches[i].arena = malloc(BATCH_BYTES);
        b->batches[i].capacity = BATCH_BYTES;
        if (!b->batches[i].entries || !b->batches[i].arena) {
            free_batches(b);
            return -ENOMEM;
        }
    }
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->filled, NULL);
    pthread_cond_init(&b->emptied, NULL);
    int rc = pthread_create(&b->thread, NULL, run_stream, b);
    if (rc != 0) {
        pthread_mutex_destroy(&b->lock);
        pthread_cond_destroy(&b->filled);
        pthread_cond_destroy(&b->emptied);
        free_batches(b);
        return -rc;
    }
    *out = b;
    return 0;
}

int lb_q_batches_next(lb_q_batches *b, const lb_q_entry **out) {
    for (;;) {
        /* A batch's fields are the caller's only while it holds the batch. */
        if (b->holding) {
            batch *r = &b->batches[b->reading];
            if (b->next < r->count) {
                *out = &r->entries[b->next++];
                return 1;
            }
            pthread_mutex_lock(&b->lock);
            r->full = 0;
            pthread_cond_signal(&b->emptied);
            pthread_mutex_unlock(&b->lock);
            b->holding = 0;
            if (!b->alternate) b->reading ^= 1;
        }
        /* Batches are filled and read in the same order: when the next one is not full and the
         * stream is done, every batch has been read. */
        pthread_mutex_lock(&b->lock);
        while (!b->batches[b->reading].full && !b->finished) pthread_cond_wait(&b->filled, &b->lock);
        int have = b->batches[b->reading].full;
        pthread_mutex_unlock(&b->lock);
        if (!have) return b->result < 0 ? (int)b->result : 0;
        b->holding = 1;
        b->next = 0;
    }
}

uint64_t lb_q_batches_stop(lb_q_batches *b) {
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_cond_signal(&b->emptied);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    uint64_t visited = b->visited;
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->filled);
    pthread_cond_destroy(&b->emptied);
    free_batches(b);
    return visited;
}
