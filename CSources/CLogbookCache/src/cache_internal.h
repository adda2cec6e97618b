/* cache_internal.h — the message cache's state and small pieces shared by its files:
 *   cache.c          opening: the file made, checked, rebuilt or repaired; fork safety
 *   cache_append.c   appending, eviction, syncs, removal, statistics, close
 *   cache_reader.c   the reader (another process may be appending)
 *   cache_check.c    what a file holds: messages at positions, the header's moving fields
 *                    checked against the frames
 * Dependencies point one way: cache_append.c -> cache.c -> cache_reader.c -> cache_check.c. */
#ifndef LOGBOOK_CACHE_INTERNAL_H
#define LOGBOOK_CACHE_INTERNAL_H
#define _GNU_SOURCE
#include "logbook_cache.h"
#include "logbook_files.h"
#include "logbook_format.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(offsetof(lb_cache_header, fixed_crc) == 60, "the fixed part is 64 bytes");
_Static_assert(sizeof(lb_cache_header) <= LB_CACHE_HEADER_SIZE, "the header fits its page");
/* docs/FORMAT.md, "Cache", draws these offsets */
_Static_assert(offsetof(lb_cache_header, head) == 64 && offsetof(lb_cache_header, next_sequence) == 88 &&
                   offsetof(lb_cache_header, removed) == 136 && offsetof(lb_cache_header, damage_found) == 160 &&
                   offsetof(lb_cache_header, last_frame) == 168 && offsetof(lb_cache_header, appending) == 176 &&
                   sizeof(lb_cache_header) == 184,
               "the header's moving fields are where docs/FORMAT.md says");

#define FRAME_HEAD ((uint64_t)sizeof(lb_archive_frame_head))
#define MESSAGE_PREFIX 16u /* u64 sequence, i64 wall ns */

struct lb_cache {
    int fd;
    uint8_t *map;
    size_t map_size;
    lb_cache_header *h;
    uint8_t *region;
    uint64_t region_size;
    lb_cache_options o;
    pthread_mutex_t lock;
    pthread_cond_t synced;
    int syncing;
    int stepping_over_damage; /* eviction is searching past a damaged frame head */
    int forked;                       /* in a child of the process that opened it: refuse to write */
    lb_cache *next_open;              /* the registry of open caches (for fork) */
    int64_t last_sync_ns;             /* group commit: how long the last sync took, */
    uint64_t last_group, group_start; /* how many appends it covered, and where the next group starts */
};

/* Counters change only with c->lock held: a load and a store, not a locked read-modify-write
 * (readers in other processes load them whole). */
static inline void add(_Atomic uint64_t *counter, uint64_t amount) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + amount, memory_order_relaxed);
}

static inline void subtract(_Atomic uint64_t *counter, uint64_t amount) {
    uint64_t value = atomic_load_explicit(counter, memory_order_relaxed);
    atomic_store_explicit(counter, value >= amount ? value - amount : 0, memory_order_relaxed);
}

static inline uint64_t round8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static inline uint64_t frame_size(uint64_t length) { return FRAME_HEAD + round8(MESSAGE_PREFIX + length); }

static inline int64_t wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline uint32_t fixed_crc(const lb_cache_header *h) {
    return lb_crc32c(0, h, offsetof(lb_cache_header, fixed_crc));
}

static inline void frame_head_fill(lb_archive_frame_head *head, uint32_t length, uint16_t kind, uint32_t body_crc) {
    head->length = length;
    head->kind = kind;
    head->reserved = 0;
    head->body_crc = body_crc;
    head->head_crc = lb_crc32c(0, head, offsetof(lb_archive_frame_head, head_crc));
}

static inline int frame_head_valid(const lb_archive_frame_head *head) {
    return head->reserved == 0 &&
           head->head_crc == lb_crc32c(0, head, offsetof(lb_archive_frame_head, head_crc)) &&
           (head->kind == LB_CACHE_FRAME_MESSAGE || head->kind == LB_CACHE_FRAME_WRAP);
}

/* cache.c */
void lb_cc_unregister_open(lb_cache *c);

/* cache_check.c */
uint64_t lb_cc_intact_message(const uint8_t *data, uint64_t available, uint64_t offset, uint64_t *sequence);
int lb_cc_message_at(int fd, uint64_t region, uint64_t available, uint64_t position, uint64_t *sequence, uint64_t *end);
int lb_cc_append_position(uint64_t last, uint64_t tail, uint64_t region);
int lb_cc_moving_fields_agree(int fd, const lb_cache_header *h, uint64_t region, uint64_t available, uint64_t *first_kept);

/* cache_reader.c */
int lb_cc_reader_open(const char *path, int writer_may_be_alive, lb_cache_reader **out);

#endif
