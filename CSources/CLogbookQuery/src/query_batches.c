/* query_batches.c — lb_reader_stream turned inside out for SQLite, which pulls rows: the stream
 * runs on a thread of its own, fills a batch (entries and copies of their arguments), hands it
 * over and waits until the caller has used it. The two threads take turns, so the reader (and
 * what the caller asks it about an entry: its site, its logger) is never used by both at once;
 * memory is one batch beside the reader's window. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "query_internal.h"

enum { BATCH_ENTRIES = 4096, BATCH_BYTES = 1u << 20 };

typedef enum { FILLING, HANDED_OVER, FINISHED } batch_state;

struct lb_q_batches {
    lb_reader *reader;
    lb_read_filter filter;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t turn;
    batch_state state;          /* under lock */
    int stop;                   /* under lock: the caller is done, hand out nothing more */
    long result;                /* lb_reader_stream's, once FINISHED */
    uint64_t visited;           /* entries the stream handed to the batch */
    int finished;               /* the caller's: it has the last batch */
    int holding;                /* the caller's: it has been handed a batch (count, entries) */
    lb_entry *entries;
    size_t count, next;
    uint8_t *arena;
    size_t arena_used, arena_capacity;
};

/* On the stream's thread, with a batch to hand over: waits for the caller's turn to end.
 * Returns nonzero when the caller stopped. */
static int hand_over(lb_q_batches *b) {
    pthread_mutex_lock(&b->lock);
    b->state = HANDED_OVER;
    pthread_cond_signal(&b->turn);
    while (b->state == HANDED_OVER && !b->stop) pthread_cond_wait(&b->turn, &b->lock);
    int stop = b->stop;
    pthread_mutex_unlock(&b->lock);
    b->count = 0;
    b->arena_used = 0;
    return stop;
}

static int keep_entry(void *context, const lb_entry *entry) {
    lb_q_batches *b = context;
    if (b->count == BATCH_ENTRIES || entry->args_length > b->arena_capacity - b->arena_used) {
        if (b->count > 0 && hand_over(b)) return 1;
        if (entry->args_length > b->arena_capacity) {
            /* One record larger than the arena: the arena grows to hold it (an empty batch). */
            uint8_t *bigger = realloc(b->arena, entry->args_length);
            if (!bigger) {
                b->result = -ENOMEM;
                return 1;
            }
            b->arena = bigger;
            b->arena_capacity = entry->args_length;
        }
    }
    lb_entry *kept = &b->entries[b->count++];
    *kept = *entry;
    if (entry->args_length > 0) memcpy(b->arena + b->arena_used, entry->args, entry->args_length);
    kept->args = b->arena + b->arena_used;
    b->arena_used += entry->args_length;
    b->visited++;
    return 0;
}

static void *run_stream(void *context) {
    lb_q_batches *b = context;
    long rc = lb_reader_stream(b->reader, &b->filter, keep_entry, b);
    pthread_mutex_lock(&b->lock);
    if (rc < 0 && b->result == 0) b->result = rc;
    b->state = FINISHED;
    pthread_cond_signal(&b->turn);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

int lb_q_batches_start(lb_reader *reader, const lb_read_filter *filter, lb_q_batches **out) {
    lb_q_batches *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    b->reader = reader;
    b->filter = *filter;
    b->entries = malloc(BATCH_ENTRIES * sizeof *b->entries);
    b->arena = malloc(BATCH_BYTES);
    b->arena_capacity = BATCH_BYTES;
    if (!b->entries || !b->arena) {
        free(b->entries);
        free(b->arena);
        free(b);
        return -ENOMEM;
    }
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->turn, NULL);
    b->state = FILLING;
    int rc = pthread_create(&b->thread, NULL, run_stream, b);
    if (rc != 0) {
        pthread_mutex_destroy(&b->lock);
        pthread_cond_destroy(&b->turn);
        free(b->entries);
        free(b->arena);
        free(b);
        return -rc;
    }
    *out = b;
    return 0;
}

int lb_q_batches_next(lb_q_batches *b, const lb_entry **out) {
    for (;;) {
        /* The batch's fields are the caller's only while it holds the batch (the stream's thread
         * is filling it otherwise). */
        if (b->holding && b->next < b->count) {
            *out = &b->entries[b->next++];
            return 1;
        }
        if (b->finished) return b->result < 0 ? (int)b->result : 0;
        pthread_mutex_lock(&b->lock);
        if (b->state == HANDED_OVER) {
            b->state = FILLING;
            pthread_cond_signal(&b->turn);
        }
        while (b->state == FILLING) pthread_cond_wait(&b->turn, &b->lock);
        b->finished = b->state == FINISHED;  /* its entries are the last batch */
        pthread_mutex_unlock(&b->lock);
        b->holding = 1;
        b->next = 0;
    }
}

uint64_t lb_q_batches_stop(lb_q_batches *b) {
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_cond_signal(&b->turn);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    uint64_t visited = b->visited;
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->turn);
    free(b->entries);
    free(b->arena);
    free(b);
    return visited;
}
