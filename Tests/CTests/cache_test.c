/* cache_test.c — the message cache's C API from C (logbook_cache.h): order, overwrite and
 * reject, too large, wrap-around with varied sizes, remove_through, limits by count, threads,
 * reopen and resize, one writer at a time, a 200-cycle SIGKILL loop, damage (header, truncation,
 * random bit flips) skipped, reported and rebuilt, a hard link planted as the cache refused.
 * CACHE_TEST_SEED repeats a run of bit flips. */
#define _GNU_SOURCE
#include "logbook.h"
#include "logbook_cache.h"
#include "check.h"
#include "logbook_files.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void message_text(char *out, size_t size, uint64_t n) {
    /* varied sizes: 0 to ~700 bytes */
    size_t length = (n * 37) % 700;
    if (length >= size) length = size - 1;
    for (size_t i = 0; i < length; i++) out[i] = (char)('a' + (n + i) % 26);
    out[length] = 0;
}

/* Reads every message: each must be the expected text of its number (carried in its first bytes). */
static uint64_t read_all(const char *path, uint64_t *first, uint64_t *last, int *bad) {
    /* Set before the open: a cache not created yet (its writer killed first) holds nothing and
     * nothing bad (an unset `bad` failed the kill loop when a slow disk delayed the creation). */
    *bad = 0;
    lb_cache_reader *r;
    if (lb_cache_reader_open(path, &r) != 0) return 0;
    lb_cache_message m;
    uint64_t count = 0, previous = 0;
    while (lb_cache_reader_next(r, &m) == 1) {
        uint64_t n;
        if (m.length < 8) { (*bad)++; continue; }
        memcpy(&n, m.bytes, 8);
        char expected[800];
        message_text(expected, sizeof expected, n);
        if (m.length != 8 + strlen(expected) || memcmp(m.bytes + 8, expected, m.length - 8) != 0) (*bad)++;
        if (count && n != previous + 1) (*bad)++;
        if (!count) *first = n;
        previous = n;
        *last = n;
        count++;
    }
    *bad += (int)lb_cache_reader_issue_count(r);
    lb_cache_reader_close(r);
    return count;
}

static int append_numbered(lb_cache *c, uint64_t n) {
    char buffer[808];
    memcpy(buffer, &n, 8);
    message_text(buffer + 8, 800, n);
    return lb_cache_append(c, buffer, 8 + strlen(buffer + 8), NULL);
}


/* Opens `name` in the test directory (its path left in `path`, the options in `o`) with
 * `maximum_bytes` (0: the default), appends messages 1..count, and returns it open. */
static lb_cache *open_filled(char path[300], const char *name, uint64_t maximum_bytes, uint64_t count, lb_cache_options *o) {
    snprintf(path, 300, "%s/%s", dir, name);
    lb_cache_options_init(o);
    if (maximum_bytes) o->maximum_bytes = maximum_bytes;
    lb_cache *c = NULL;
    CHECK(lb_cache_open(path, o, &c) == 0);
    if (!c) exit(1);
    for (uint64_t n = 1; n <= count; n++) CHECK(append_numbered(c, n) == 0);
    return c;
}

static void test_overwrite_and_order(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "overwrite.cache", 64 << 10, 5000, &o);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.next_sequence == 5000);
    CHECK(s.evicted_overwrite + s.messages == 5000);
    CHECK(s.used_bytes <= s.region_size);
    uint64_t first = 0, last = 0;
    int bad;
    uint64_t count = read_all(path, &first, &last, &bad);
    CHECK(bad == 0);
    CHECK(last == 5000);
    CHECK(count == s.messages && count > 50);
    CHECK(first == 5001 - count);
    /* remove_through: the consumer's cursor */
    CHECK(lb_cache_remove_through(c, s.head_sequence + 9) == 0);
    lb_cache_stats t;
    lb_cache_stats_get(c, &t);
    CHECK(t.messages == s.messages - 10 && t.removed == 10);
    /* too large */
    char *huge = calloc(1, 64 << 10);
    CHECK(lb_cache_append(c, huge, 64 << 10, NULL) == -EMSGSIZE);
    free(huge);
    /* one writer at a time */
    lb_cache *second;
    CHECK(lb_cache_open(path, &o, &second) == -EWOULDBLOCK);
    CHECK(lb_cache_close(c) == 0);
    /* reopen: the same messages, the sequence goes on */
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(append_numbered(c, 5001) == 0);
    count = read_all(path, &first, &last, &bad);
    CHECK(bad == 0 && last == 5001);
    lb_cache_close(c);
}

static void test_reject_when_full(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/reject.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 16 << 10;
    o.overwrite = 0;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    uint64_t n = 1;
    int rc;
    while ((rc = append_numbered(c, n)) == 0) n++;
    CHECK(rc == -ENOSPC);
    uint64_t first, last;
    int bad;
    CHECK(read_all(path, &first, &last, &bad) == n - 1 && first == 1 && bad == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(lb_cache_remove_through(c, s.head_sequence + 4) == 0);  /* room again */
    CHECK(append_numbered(c, n) == 0);
    lb_cache_close(c);
}

static void test_count_limit(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/count.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_count = 10;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 25; n++) CHECK(append_numbered(c, n) == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.messages == 10 && s.evicted_count == 15);
    uint64_t first, last;
    int bad;
    CHECK(read_all(path, &first, &last, &bad) == 10 && first == 16 && last == 25 && bad == 0);
    lb_cache_close(c);
}

typedef struct { lb_cache *c; uint32_t thread, appends; } job;

static void *appender(void *argument) {
    job *j = argument;
    for (uint32_t i = 0; i < j->appends; i++) {
        uint32_t payload[2] = {j->thread, i};
        if (lb_cache_append(j->c, payload, sizeof payload, NULL) != 0) failed++;
    }
    return NULL;
}

static void test_threads(int power) {
    char path[300];
    snprintf(path, sizeof path, "%s/threads-%d.cache", dir, power);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 8 << 20;
    if (power) o.durability = LB_CACHE_DURABLE_POWER;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    pthread_t threads[8];
    job jobs[8];
    int count = power ? 4 : 8;
    uint32_t appends = power ? 500 : 20000; /* power: one sync per group of appends */
    for (int t = 0; t < count; t++) {
        jobs[t] = (job){c, (uint32_t)t, appends};
        pthread_create(&threads[t], NULL, appender, &jobs[t]);
    }
    for (int t = 0; t < count; t++) pthread_join(threads[t], NULL);
    lb_cache_close(c);
    lb_cache_reader *r;
    CHECK(lb_cache_reader_open(path, &r) == 0);
    uint32_t next[8] = {0};
    lb_cache_message m;
    uint64_t total = 0, sequence = 0;
    int order_ok = 1;
    while (lb_cache_reader_next(r, &m) == 1) {
        uint32_t payload[2];
        memcpy(payload, m.bytes, 8);
        if (m.length != 8 || payload[0] >= 8 || payload[1] != next[payload[0]] || m.sequence != sequence) order_ok = 0;
        else next[payload[0]]++;
        sequence++;
        total++;
    }
    CHECK(order_ok);
    CHECK(total == (uint64_t)count * appends);
    CHECK(lb_cache_reader_issue_count(r) == 0);
    lb_cache_reader_close(r);
}

static void test_damage_is_skipped_and_reported(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "damage.cache", 0, 100, &o);
    lb_cache_close(c);
    int fd = open(path, O_RDWR);
    unsigned char byte;
    off_t at = LB_CACHE_HEADER_SIZE + 3000;  /* somewhere inside the region's frames */
    pread(fd, &byte, 1, at);
    byte ^= 0x40;
    pwrite(fd, &byte, 1, at);
    close(fd);
    lb_cache_reader *r;
    CHECK(lb_cache_reader_open(path, &r) == 0);
    lb_cache_message m;
    int count = 0;
    while (lb_cache_reader_next(r, &m) == 1) count++;
    CHECK(count == 99);  /* one message lost to the flipped bit, the rest read back */
    CHECK(lb_cache_reader_issue_count(r) >= 1);
    lb_cache_reader_close(r);
}

/* Reopened with another maximum: the newest messages that fit are kept, in order, the sequence
 * goes on, and the dropped ones are counted. */
static void test_resize_keeps_the_newest(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "resize.cache", 256 << 10, 1000, &o);
    lb_cache_stats before;
    lb_cache_stats_get(c, &before);
    lb_cache_close(c);
    o.maximum_bytes = 64 << 10;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats after;
    lb_cache_stats_get(c, &after);
    CHECK(after.messages < before.messages && after.messages > 20);
    CHECK(after.evicted_overwrite == before.evicted_overwrite + (before.messages - after.messages));
    CHECK(after.next_sequence == before.next_sequence);
    CHECK(append_numbered(c, 1001) == 0);  /* full after the resize: the oldest makes room */
    lb_cache_stats_get(c, &after);
    lb_cache_close(c);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 64 << 10);
    uint64_t first, last;
    int bad;
    uint64_t count = read_all(path, &first, &last, &bad);
    CHECK(bad == 0);
    CHECK(last == 1001);
    CHECK(count == after.messages);
    CHECK(first == 1002 - count);
    o.maximum_bytes = 1 << 20;  /* and larger again: everything kept */
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_close(c);
    CHECK(read_all(path, &first, &last, &bad) == count && bad == 0);
}

/* SIGKILLs of a child appending (varied sizes, a 256 KiB cache): overwriting, or refusing when
 * full with the child as its own consumer (on ENOSPC it removes the oldest 40 and goes on). After
 * each kill, every append the child saw return is read back unless the child removed it, in one
 * unbroken run, nothing invalid. The kill lands after a random number of the child's reports
 * (its pipe, one page, keeps it at most 256 reports ahead), not after a time; one cycle in ten
 * kills it within a few milliseconds of its start (while it opens or recovers the file). */
static void test_kill_loop(int cycles, int overwrite) {
    char path[300];
    snprintf(path, sizeof path, "%s/kill-%d.cache", dir, overwrite);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 256 << 10;
    o.overwrite = (uint32_t)overwrite;
    uint64_t next = 1, removed = 0; /* message numbers (sequence + 1) */
    unsigned seed = 7;
    for (int cycle = 0; cycle < cycles; cycle++) {
        int channel[2];
        if (pipe(channel) != 0) { failed++; return; }
        fcntl(channel[0], F_SETPIPE_SZ, 4096);
        pid_t child = fork();
        if (child == 0) {
            close(channel[0]);
            lb_cache *c;
            if (lb_cache_open(path, &o, &c) != 0) _exit(3);
            for (uint64_t n = next;; n++) {
                int rc;
                while ((rc = append_numbered(c, n)) == -ENOSPC) {
                    lb_cache_stats s;
                    lb_cache_stats_get(c, &s);
                    uint64_t through = s.head_sequence + 40; /* a sequence: message number - 1 */
                    if (lb_cache_remove_through(c, through) != 0) _exit(6);
                    uint64_t said[2] = {1, through + 1};
                    if (write(channel[1], said, 16) != 16) _exit(5);
                }
                if (rc != 0) _exit(4);
                uint64_t said[2] = {0, n};
                if (write(channel[1], said, 16) != 16) _exit(5); /* returned: it must be read back */
            }
        }
        close(channel[1]);
        uint64_t said[2], returned = next - 1;
        if (cycle % 10 == 9) {
            usleep(rand_r(&seed) % 3000);
        } else {
            /* 1 to 3,000 appends: the 256 KiB cache (about 650 messages) fills and wraps. */
            int reports = 1 + rand_r(&seed) % 3000;
            for (int seen = 0; seen < reports && read(channel[0], said, 16) == 16; seen++) {
                if (said[0] == 0) returned = said[1];
                else removed = said[1];
            }
        }
        kill(child, SIGKILL);
        int status;
        waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        while (read(channel[0], said, 16) == 16) {
            if (said[0] == 0) returned = said[1];
            else removed = said[1];
        }
        close(channel[0]);
        uint64_t first = 0, last = 0;
        int bad;
        uint64_t count = read_all(path, &first, &last, &bad);
        CHECK(bad == 0);
        CHECK(returned == 0 || count > 0);
        /* everything returned is there (last may be one more: appended, killed before it said so) */
        CHECK(count == 0 || (last >= returned && last <= returned + 1));
        /* and nothing but what the child removed is missing before it (a removal it was killed in
         * may have taken more) */
        if (!overwrite) CHECK(count == 0 || first <= removed + 1 + 41);
        if (count) next = last + 1;
    }
}

static int copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char buffer[65536];
    ssize_t n;
    int ok = in >= 0 && out >= 0;
    while (ok && (n = read(in, buffer, sizeof buffer)) > 0) ok = write(out, buffer, (size_t)n) == n;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return ok ? 0 : -1;
}

static void poke(const char *path, off_t at, const void *bytes, size_t length) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, bytes, length, at) == (ssize_t)length);
    close(fd);
}

static void flip(const char *path, off_t at, unsigned char mask) {
    unsigned char byte = 0;
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pread(fd, &byte, 1, at) == 1);
    byte ^= mask;
    CHECK(pwrite(fd, &byte, 1, at) == 1);
    close(fd);
}

static uint32_t crc_of_fixed_part(const lb_cache_header *h) { return lb_crc32c(0, h, 60); }

/* A damaged header is not a reason to delete: the reader scans, the writer rebuilds, the
 * sequence goes on. A file that is not a cache, or of another version, is refused and left alone. */
static void test_header_damage_is_recovered(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "header.cache", 0, 100, &o);
    lb_cache_close(c);
    flip(path, 20, 0x01); /* created_wall_ns: the fixed part's checksum fails */
    uint64_t first = 0, last = 0;
    int bad;
    lb_cache_reader *r;
    CHECK(lb_cache_reader_open(path, &r) == 0);
    CHECK(lb_cache_reader_issue_count(r) == 1);
    lb_cache_reader_close(r);
    CHECK(read_all(path, &first, &last, &bad) == 100 && first == 1 && last == 100 && bad == 1);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.rebuilds == 1 && s.messages == 100 && s.next_sequence == 100);
    CHECK(append_numbered(c, 101) == 0);
    lb_cache_close(c);
    CHECK(read_all(path, &first, &last, &bad) == 101 && last == 101 && bad == 0);

    /* head and tail out of bounds (the moving fields carry no checksum) */
    uint64_t huge = UINT64_MAX / 2;
    poke(path, offsetof(lb_cache_header, tail), &huge, 8);
    CHECK(read_all(path, &first, &last, &bad) == 101 && last == 101 && bad == 1);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats_get(c, &s);
    /* The damage counters are moving fields too: with the others disagreeing they start again
     * (the rebuild of the fixed part's damage before is not believed; this one is counted). */
    CHECK(s.rebuilds == 1 && s.messages == 101);
    lb_cache_close(c);

    /* another format version (its checksum right): refused, not rebuilt */
    lb_cache_header h;
    int fd = open(path, O_RDONLY);
    CHECK(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
    close(fd);
    h.format_version = 2;
    h.fixed_crc = crc_of_fixed_part(&h);
    poke(path, 0, &h, 64);
    CHECK(lb_cache_open(path, &o, &c) == -EPROTO);
    CHECK(lb_cache_reader_open(path, &r) == -EPROTO);
    /* not a cache at all: refused and left as it is */
    char text[] = "not a cache, a user's file";
    char other[300];
    snprintf(other, sizeof other, "%s/text.file", dir);
    fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, text, sizeof text) == (ssize_t)sizeof text);
    close(fd);
    CHECK(lb_cache_open(other, &o, &c) == -EPROTO);
    struct stat st;
    CHECK(stat(other, &st) == 0 && st.st_size == (off_t)sizeof text);
}

/* The bytes a message of number n takes in the region (frame head, prefix, padding). */
static uint64_t frame_bytes(uint64_t n) {
    char text[800];
    message_text(text, sizeof text, n);
    return 16 + ((16 + 8 + strlen(text) + 7) & ~(uint64_t)7);
}

/* Truncated at any point: what lies before the cut reads back, the cut is reported, and the
 * writer rebuilds the file to its size. */
static void test_truncation(void) {
    char path[300], copy[300];
    snprintf(path, sizeof path, "%s/truncate.cache", dir);
    snprintf(copy, sizeof copy, "%s/truncate-copy.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    uint64_t used = 0;
    for (uint64_t n = 1; n <= 1000; n++) {
        CHECK(append_numbered(c, n) == 0);
        used += frame_bytes(n);
    }
    lb_cache_close(c);
    unsigned seed = 11;
    for (int round = 0; round < 40; round++) {
        uint64_t cut = round == 0 ? 0 : round == 1 ? 100 : LB_CACHE_HEADER_SIZE + (uint64_t)rand_r(&seed) % (used + 64);
        CHECK(copy_file(path, copy) == 0);
        CHECK(truncate(copy, (off_t)cut) == 0);
        uint64_t expected = 0, at = 0;
        for (uint64_t n = 1; n <= 1000 && cut >= LB_CACHE_HEADER_SIZE + at + frame_bytes(n); n++) {
            at += frame_bytes(n);
            expected++;
        }
        uint64_t first = 0, last = 0;
        int bad = 0;
        uint64_t count = read_all(copy, &first, &last, &bad);
        if (cut < 8) { /* not even the magic: not a cache */
            lb_cache_reader *r;
            CHECK(lb_cache_reader_open(copy, &r) == -EPROTO);
            continue;
        }
        CHECK(count == expected);
        CHECK(count == 0 || (first == 1 && last == expected));
        CHECK(bad >= 1); /* the cut is reported */
        CHECK(lb_cache_open(copy, &o, &c) == 0);
        lb_cache_stats s;
        lb_cache_stats_get(c, &s);
        CHECK(s.messages == expected);
        CHECK(append_numbered(c, 5000) == 0);
        lb_cache_close(c);
        struct stat st;
        CHECK(stat(copy, &st) == 0 && (uint64_t)st.st_size == o.maximum_bytes);
        CHECK(read_all(copy, &first, &last, &bad) == expected + 1);
    }
}

/* Random bytes flipped in the region and the header's fixed part of a cache that has wrapped
 * many times: never a crash, never an invalid or out-of-order message, each flipped byte costs
 * at most one message, and the writer goes on. */
static void test_random_corruption(int rounds) {
    char path[300], copy[300];
    snprintf(path, sizeof path, "%s/corrupt.cache", dir);
    snprintf(copy, sizeof copy, "%s/corrupt-copy.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 64 << 10;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 3000; n++) CHECK(append_numbered(c, n) == 0);
    lb_cache_close(c);
    uint64_t first, last;
    int bad;
    uint64_t base = read_all(path, &first, &last, &bad);
    CHECK(bad == 0 && last == 3000 && base > 100);
    unsigned seed = getenv("CACHE_TEST_SEED") ? (unsigned)atoi(getenv("CACHE_TEST_SEED")) : (unsigned)getpid();
    printf("random corruption seed %u (CACHE_TEST_SEED)\n", seed);
    for (int round = 0; round < rounds; round++) {
        CHECK(copy_file(path, copy) == 0);
        int flips = 1 + rand_r(&seed) % 8, counter_hit = 0;
        for (int i = 0; i < flips; i++) {
            int where = rand_r(&seed) % 8; /* the fixed part, the moving fields (which no CRC covers), the region */
            off_t at = where == 0 ? (off_t)(rand_r(&seed) % 60)
                       : where == 1 ? (off_t)(64 + rand_r(&seed) % (int)(sizeof(lb_cache_header) - 64))
                                              : (off_t)(LB_CACHE_HEADER_SIZE + (uint64_t)rand_r(&seed) % (o.maximum_bytes - LB_CACHE_HEADER_SIZE));
            unsigned char mask = (unsigned char)(1u << (rand_r(&seed) % 8));
            flip(copy, at, mask);
            counter_hit |= at >= (off_t)offsetof(lb_cache_header, messages) && at < (off_t)offsetof(lb_cache_header, evicted_overwrite);
            if (getenv("CACHE_TEST_VERBOSE")) printf("round %d flip at %lld mask %u\n", round, (long long)at, mask);
        }
        uint64_t count = read_all(copy, &first, &last, &bad);
        /* read_all counts a wrong message or order as bad, along with the reported issues: so
         * compare the messages themselves through a second pass */
        lb_cache_reader *r;
        int rc = lb_cache_reader_open(copy, &r);
        if (rc == -EPROTO) continue; /* the magic was hit: not a cache any more, and said so */
        CHECK(rc == 0);
        lb_cache_message m;
        uint64_t previous = 0, valid = 0;
        int wrong = 0;
        while (lb_cache_reader_next(r, &m) == 1) {
            uint64_t n;
            char expected[800];
            memcpy(&n, m.bytes, m.length >= 8 ? 8 : 0);
            message_text(expected, sizeof expected, n);
            if (m.length < 8 || m.length != 8 + strlen(expected) || memcmp(m.bytes + 8, expected, m.length - 8) ||
                m.sequence + 1 != n || (valid && m.sequence <= previous))
                wrong++;
            previous = m.sequence;
            valid++;
        }
        lb_cache_reader_close(r);
        CHECK(wrong == 0);
        CHECK(valid == count);
        CHECK(count + (uint64_t)flips >= base);
        if (count + (uint64_t)flips < base) printf("round %d: %d flips, %llu of %llu\n", round, flips, (unsigned long long)count, (unsigned long long)base);
        CHECK(lb_cache_open(copy, &o, &c) == 0);
        for (uint64_t n = 0; n < 50; n++) CHECK(append_numbered(c, 10000 + n) == 0);
        lb_cache_stats s;
        lb_cache_stats_get(c, &s);
        lb_cache_close(c);
        uint64_t after = read_all(copy, &first, &last, &bad);
        CHECK(after >= 50 && last == 10049);
        /* the count is exact but for messages damage hid, at most one per flipped byte */
        /* (a bit flipped in the messages counter itself to a smaller value goes unseen: it decides
         * nothing but the count limit) */
        CHECK(counter_hit || (s.messages + (uint64_t)flips >= after && after + (uint64_t)flips >= s.messages));
        if (!counter_hit && !(s.messages + (uint64_t)flips >= after && after + (uint64_t)flips >= s.messages)) printf("messages %llu after %llu flips %d\n", (unsigned long long)s.messages, (unsigned long long)after, flips);
    }
}

/* A creation killed midway leaves NAME.new: the next open removes it and creates the cache. One
 * still held (locked) by its creator is another process's creation: EWOULDBLOCK, not removed. */
static void test_leftover_temporary_file(void) {
    char path[300], temporary[310];
    snprintf(path, sizeof path, "%s/leftover.cache", dir);
    snprintf(temporary, sizeof temporary, "%s.new", path);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && write(fd, "half", 4) == 4);
    close(fd);
    lb_cache_options o;
    lb_cache_options_init(&o);
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(access(temporary, F_OK) != 0);
    CHECK(append_numbered(c, 1) == 0);
    lb_cache_close(c);

    char other[300], other_temporary[310];
    snprintf(other, sizeof other, "%s/creating.cache", dir);
    snprintf(other_temporary, sizeof other_temporary, "%s.new", other);
    fd = open(other_temporary, O_RDWR | O_CREAT | O_EXCL, 0600);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fd >= 0 && fcntl(fd, F_OFD_SETLK, &lock) == 0);
    CHECK(lb_cache_open(other, &o, &c) == -EWOULDBLOCK);
    CHECK(access(other_temporary, F_OK) == 0);
    close(fd);
    CHECK(lb_cache_open(other, &o, &c) == 0);
    lb_cache_close(c);
}

/* A hard link planted as the cache file (to a cache elsewhere, the victim) is never written: the
 * open is refused with -EMLINK and a detail naming it, and the victim keeps its bytes. (The outside
 * test of issue 42 found the cache file without the check the bundle files have.) Once the other
 * name is gone, the cache opens again. */
static void test_hard_linked_cache_file_is_refused(void) {
    char victim[300], path[300], command[800];
    lb_cache_options o;
    lb_cache *c = open_filled(victim, "victim.cache", 64 << 10, 20, &o);
    lb_cache_close(c);
    snprintf(path, sizeof path, "%s/linked.cache", dir);
    CHECK(link(victim, path) == 0);
    snprintf(command, sizeof command, "cp '%s' '%s.copy'", victim, victim);
    CHECK(system(command) == 0);
    for (int size = 0; size < 2; size++) {   /* the same size, and one that would rebuild it */
        o.maximum_bytes = size ? 128 << 10 : 64 << 10;
        c = NULL;
        int rc = lb_cache_open(path, &o, &c);
        CHECK(rc == -EMLINK);
        CHECK(strstr(lb_error_detail(), "hard links") && strstr(lb_error_detail(), "linked.cache"));
        if (c) {  /* what an open that let it through would do next */
            append_numbered(c, 21);
            lb_cache_close(c);
        }
    }
    snprintf(command, sizeof command, "cmp -s '%s' '%s.copy'", victim, victim);
    CHECK(system(command) == 0);  /* not written through */
    CHECK(unlink(victim) == 0);
    c = NULL;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    if (c) lb_cache_close(c);
}

/* The header's moving fields carry no CRC; each is checked against the others and against the
 * frames at head and last_frame, so one flipped bit there costs nothing: the reader scans, the
 * writer rebuilds, the sequence goes on. (Found by the adversarial run: a bit flipped in
 * head_sequence hid every message, later appends too, without an issue.) */
static void test_moving_fields_damage(void) {
    /* last_frame flipped into the middle of a frame points at no frame head, which proves nothing
     * (a damaged frame looks the same); it hides nothing either, and the next append rewrites it */
    struct { off_t at; uint64_t add; unsigned char mask; const char *what; } cases[] = {
        {offsetof(lb_cache_header, head_sequence) + 2, 0, 0x40, "head_sequence bit"},
        {offsetof(lb_cache_header, head_sequence), 8, 0, "head_sequence + 8"},
        {offsetof(lb_cache_header, next_sequence), 8, 0, "next_sequence + 8"},
        {offsetof(lb_cache_header, messages) + 4, 0, 0x01, "messages bit"},
        {offsetof(lb_cache_header, message_bytes) + 7, 0, 0x10, "message_bytes bit"},
        {offsetof(lb_cache_header, last_frame) + 1, 0, 0x02, "last_frame bit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[300], name[64];
        snprintf(name, sizeof name, "moving-%zu.cache", i);
        lb_cache_options o;
        lb_cache *c = open_filled(path, name, 64 << 10, 10, &o);
        lb_cache_stats sound;
        lb_cache_stats_get(c, &sound);
        lb_cache_close(c);
        if (cases[i].mask) flip(path, cases[i].at, cases[i].mask);
        else {
            uint64_t value = 0;
            int fd = open(path, O_RDWR);
            CHECK(fd >= 0 && pread(fd, &value, 8, cases[i].at) == 8);
            value += cases[i].add;
            CHECK(pwrite(fd, &value, 8, cases[i].at) == 8);
            close(fd);
        }
        uint64_t first = 0, last = 0;
        int bad = 0;
        uint64_t count = read_all(path, &first, &last, &bad);
        if (count != 10 || first != 1 || last != 10 || bad > 1) printf("%s: read %llu (%llu..%llu), %d issues\n", cases[i].what,
                                                                         (unsigned long long)count, (unsigned long long)first, (unsigned long long)last, bad);
        int lenient = strcmp(cases[i].what, "last_frame bit") == 0;
        /* counters that cannot be decide nothing a reader reads: read as they are, recounted by
         * the writer (a reader that scanned for them brought removed messages back) */
        int counter = strncmp(cases[i].what, "message", 7) == 0;
        CHECK(count == 10 && first == 1 && last == 10 &&
              (counter ? bad == 0 : (bad == 1 || (lenient && bad == 0)))); /* all back, the header reported */
        CHECK(lb_cache_open(path, &o, &c) == 0);
        lb_cache_stats s;
        lb_cache_stats_get(c, &s);
        if (!((s.rebuilds == (counter ? 0u : 1u) || lenient) && s.messages == 10 && s.head_sequence == 0)) printf("%s: rebuilds %llu messages %llu head %llu next %llu\n", cases[i].what, (unsigned long long)s.rebuilds, (unsigned long long)s.messages, (unsigned long long)s.head_sequence, (unsigned long long)s.next_sequence);
        CHECK((s.rebuilds == (counter ? 0u : 1u) || lenient) && s.messages == 10 && s.head_sequence == 0);
        CHECK(s.message_bytes == sound.message_bytes);
        CHECK(append_numbered(c, 11) == 0);
        lb_cache_stats_get(c, &s);
        /* The sequence goes on after the last message kept, or after the header's next_sequence
         * when that is higher: a high-water mark damage cannot lower (a number once returned is
         * never given again), so a damaged one that grew only makes the sequence jump. */
        /* head_sequence is one too (the sequence after every message removed): a bit that raised it
         * makes the sequence jump there */
        uint64_t expected_next = strcmp(cases[i].what, "next_sequence + 8") == 0 ? 19u
                                 : strcmp(cases[i].what, "head_sequence bit") == 0 ? (UINT64_C(0x40) << 16) + 1 : 11u;
        if (s.next_sequence != expected_next)
            printf("%s: next sequence %llu\n", cases[i].what, (unsigned long long)s.next_sequence);
        CHECK(s.next_sequence == expected_next);
        lb_cache_close(c);
        CHECK(read_all(path, &first, &last, &bad) == 11 && last == 11 && bad == 0);
    }
}

/* head moved into the middle of the first frame (an intact frame straddles it): the header is
 * not trusted, the region is scanned from the head frame's sequence, and nothing is lost; the
 * writer rebuilds. (The adversarial run found the first message dropped for good.) */
static void test_head_moved_into_a_frame(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "head-moved.cache", 64 << 10, 10, &o);
    lb_cache_close(c);
    uint64_t head = 0;
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pread(fd, &head, 8, offsetof(lb_cache_header, head)) == 8);
    head += 8;
    CHECK(pwrite(fd, &head, 8, offsetof(lb_cache_header, head)) == 8);
    close(fd);
    uint64_t first = 0, last = 0;
    int bad = 0;
    CHECK(read_all(path, &first, &last, &bad) == 10 && first == 1 && last == 10 && bad == 1);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.rebuilds == 1 && s.messages == 10);
    CHECK(append_numbered(c, 11) == 0);
    lb_cache_close(c);
    CHECK(read_all(path, &first, &last, &bad) == 11 && first == 1 && last == 11 && bad == 0);
}

/* An age limit past what int64 holds is no limit (found by the adversarial run: UINT64_MAX removed
 * messages a microsecond old). */
static void test_huge_age_limit_keeps_everything(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/age.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_age_ns = UINT64_MAX;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 3; n++) CHECK(append_numbered(c, n) == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.messages == 3 && s.evicted_age == 0);
    lb_cache_close(c);
    o.maximum_bytes = UINT64_MAX;
    CHECK(lb_cache_open(path, &o, &c) == -EINVAL);
}

static uint64_t header_field(const char *path, size_t offset) {
    uint64_t value = 0;
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && pread(fd, &value, 8, (off_t)offset) == 8);
    close(fd);
    return value;
}

/* What a kill leaves mid-eviction and mid-removal, drawn by hand (the states the second
 * adversarial run produced): nothing lost, nothing reported as damage, counters made whole by the
 * next writer, and a sequence whose message was handed out never used again. */
static void test_kill_residue(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "residue.cache", 64 << 10, 10, &o);
    lb_cache_close(c);
    /* an eviction cut short: head past the first frame, counters and head_sequence not yet */
    uint64_t head = header_field(path, offsetof(lb_cache_header, head)) + frame_bytes(1);
    poke(path, offsetof(lb_cache_header, head), &head, 8);
    uint64_t first = 0, last = 0;
    int bad = 0;
    CHECK(read_all(path, &first, &last, &bad) == 9 && first == 2 && last == 10 && bad == 0);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.rebuilds == 0 && s.messages == 9 && s.head_sequence == 1 && s.next_sequence == 10);
    CHECK(s.evicted_overwrite + s.evicted_count + s.evicted_age + s.removed == 1); /* counted once */
    /* the last message removed, cut short: head at the tail, head_sequence not yet moved */
    CHECK(lb_cache_remove_through(c, 9) == 0);
    lb_cache_close(c);
    uint64_t lagging = 9;
    poke(path, offsetof(lb_cache_header, head_sequence), &lagging, 8);
    CHECK(read_all(path, &first, &last, &bad) == 0 && bad == 0);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    uint64_t sequence = 0;
    CHECK(lb_cache_append(c, "x", 1, &sequence) == 0);
    CHECK(sequence == 10); /* 9 was handed out: never again */
    lb_cache_close(c);

    /* tail and last_frame both moved by 8 (two fields, no kill does that): rebuilt, nothing lost */
    c = open_filled(path, "tail-moved.cache", 64 << 10, 10, &o);
    lb_cache_close(c);
    uint64_t tail = header_field(path, offsetof(lb_cache_header, tail)) + 8;
    uint64_t newest = header_field(path, offsetof(lb_cache_header, last_frame)) + 8;
    poke(path, offsetof(lb_cache_header, tail), &tail, 8);
    poke(path, offsetof(lb_cache_header, last_frame), &newest, 8);
    CHECK(read_all(path, &first, &last, &bad) == 10 && last == 10 && bad == 1);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats_get(c, &s);
    CHECK(s.rebuilds == 1 && s.messages == 10);
    CHECK(append_numbered(c, 11) == 0);
    lb_cache_close(c);
    CHECK(read_all(path, &first, &last, &bad) == 11 && last == 11 && bad == 0);
}

typedef struct { lb_cache *c; _Atomic int stop; uint64_t appended; } fork_job;

static void *fork_appender(void *argument) {
    fork_job *j = argument;
    while (!atomic_load(&j->stop)) {
        if (append_numbered(j->c, j->appended + 1) != 0) failed++;
        else j->appended++;
    }
    return NULL;
}

/* fork() while another thread appends (it may hold the cache's lock): the child's writes are
 * refused at once, never deadlocked and never mixed into the parent's file; closing in the child
 * frees memory only; the parent's messages all read back, in order. */
static void test_fork_while_appending(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "fork.cache", 1 << 20, 0, &o);
    fork_job job = {c, 0, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, fork_appender, &job);
    for (int round = 0; round < 20; round++) {
        usleep(2000);
        pid_t child = fork();
        if (child == 0) {
            alarm(10); /* a hang is a failure, not a stuck test */
            int ok = lb_cache_append(c, "x", 1, NULL) == -EBADF && lb_cache_remove_through(c, UINT64_MAX) == -EBADF &&
                     lb_cache_sync(c) == -EBADF && lb_cache_close(c) == 0;
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        CHECK(child > 0 && waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&job.stop, 1);
    pthread_join(thread, NULL);
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    CHECK(s.next_sequence == job.appended);
    CHECK(append_numbered(c, job.appended + 1) == 0); /* the parent still writes */
    lb_cache_close(c);
    uint64_t first = 0, last = 0;
    int bad = 0;
    uint64_t count = read_all(path, &first, &last, &bad);
    CHECK(bad == 0 && last == job.appended + 1 && count == last - first + 1);
}


static lb_cache_stats stats_of(lb_cache *c) {
    lb_cache_stats s;
    lb_cache_stats_get(c, &s);
    return s;
}

/* A rebuild for damage starts the damage counters from 0, as the other counters: they are moving
 * fields, and with the moving fields disagreeing they may hold anything. (The fourth outside test
 * found `rebuilds` and `damage_found` keeping random 64-bit values, e.g. 17209541751804380807,
 * after a rebuild of a header whose fixed part was sound.) */
static void test_rebuild_starts_the_damage_counters_from_zero(void) {
    char path[300];
    lb_cache_options o;
    lb_cache *c = open_filled(path, "damage-counters.cache", 64 << 10, 40, &o);
    lb_cache_close(c);
    uint64_t random_rebuilds = UINT64_C(17209541751804380807), random_damage = UINT64_C(0x9e3779b97f4a7c15);
    poke(path, offsetof(lb_cache_header, rebuilds), &random_rebuilds, 8);
    poke(path, offsetof(lb_cache_header, damage_found), &random_damage, 8);
    uint64_t huge = UINT64_MAX / 2;  /* the tail out of bounds: the moving fields disagree */
    poke(path, offsetof(lb_cache_header, tail), &huge, 8);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    if (!c) return;
    lb_cache_stats s = stats_of(c);
    if (s.rebuilds != 1 || s.damage_found > 2)
        printf("after a rebuild: rebuilds %llu, damage found %llu\n", (unsigned long long)s.rebuilds,
               (unsigned long long)s.damage_found);
    CHECK(s.rebuilds == 1);
    CHECK(s.damage_found >= 1 && s.damage_found <= 2);  /* the header the reader's scan reported */
    CHECK(s.messages == 40);
    lb_cache_close(c);
}

/* ---- readers while the writer wraps ---- */

/* What the second outside test found after a rebuild: the header the writer wrote was itself
 * reported damaged (its high-water next_sequence above the newest message: sequence_floor now
 * says so), an append that removed every message left head_sequence behind the message at head,
 * and counters that could not be were believed until a reader scanned and brought removed messages
 * back. Each: read clean, nothing lost, nothing back, no sequence twice. */
static uint64_t issues_of(const char *path, uint64_t *count, uint64_t *first, uint64_t *last) {
    lb_cache_reader *r;
    if (lb_cache_reader_open(path, &r) != 0) return 99;
    lb_cache_message m;
    *count = 0;
    while (lb_cache_reader_next(r, &m) == 1) {
        if (!*count) *first = m.sequence;
        *last = m.sequence;
        (*count)++;
    }
    uint64_t issues = lb_cache_reader_issue_count(r);
    lb_cache_reader_close(r);
    return issues;
}

static void test_rebuilt_header_reads_clean(void) {
    char path[300];
    lb_cache_options o;
    uint64_t count, first, last;
    /* a cut file, rebuilt: the sequence goes on after the old next_sequence, and readers of the
     * rebuilt file (and after the next append) see no damage */
    lb_cache *c = open_filled(path, "cut-rebuilt.cache", 32 << 10, 200, &o);
    lb_cache_stats before = stats_of(c);
    lb_cache_close(c);
    CHECK(truncate(path, 6500) == 0);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(stats_of(c).rebuilds == 1 && stats_of(c).next_sequence == before.next_sequence);
    lb_cache_close(c);
    CHECK(issues_of(path, &count, &first, &last) == 0 && count > 0 && last + 1 < before.next_sequence);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    uint64_t sequence = 0;
    CHECK(lb_cache_append(c, "after", 5, &sequence) == 0 && sequence == before.next_sequence);
    lb_cache_close(c);
    CHECK(issues_of(path, &count, &first, &last) == 0 && last == sequence);

    /* a raised next_sequence (rebuilt from a scan), then an append that removes every message to
     * make room: head_sequence is the new message's */
    snprintf(path, sizeof path, "%s/floor-evicts-all.cache", dir);
    lb_cache_options_init(&o);
    o.maximum_bytes = 8192;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    static uint8_t big[2000];
    for (int i = 0; i < 6; i++) CHECK(lb_cache_append(c, big, 900, NULL) == 0);
    lb_cache_close(c);
    uint64_t raised = header_field(path, offsetof(lb_cache_header, next_sequence)) + 4000;
    poke(path, offsetof(lb_cache_header, next_sequence), &raised, 8);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(stats_of(c).rebuilds == 1 && stats_of(c).next_sequence == raised);
    CHECK(lb_cache_append(c, big, sizeof big, &sequence) == 0 && sequence == raised);
    CHECK(stats_of(c).head_sequence <= sequence);
    lb_cache_close(c);
    CHECK(issues_of(path, &count, &first, &last) == 0 && last == raised);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(stats_of(c).rebuilds == 1); /* sound: not rebuilt again */
    lb_cache_close(c);

    /* message_bytes as large as the region (its checksum-free field crafted): not believed, not
     * damage; the writer recounts it, and removed messages stay removed */
    snprintf(path, sizeof path, "%s/counters.cache", dir);
    lb_cache_options_init(&o);
    o.maximum_bytes = 16 << 10;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 0; n < 30; n++) CHECK(append_numbered(c, n) == 0);
    CHECK(lb_cache_remove_through(c, 19) == 0);
    before = stats_of(c);
    lb_cache_close(c);
    uint64_t region = header_field(path, offsetof(lb_cache_header, region_size));
    poke(path, offsetof(lb_cache_header, message_bytes), &region, 8);
    CHECK(issues_of(path, &count, &first, &last) == 0 && count == 10 && first == 20);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    lb_cache_stats s = stats_of(c);
    CHECK(s.rebuilds == 0 && s.message_bytes == before.message_bytes && s.messages == 10);
    CHECK(append_numbered(c, 30) == 0);
    lb_cache_close(c);
    CHECK(issues_of(path, &count, &first, &last) == 0 && count == 11 && first == 20 && last == 30);

    /* every message removed, then next_sequence damaged beyond belief (2^62): the rebuilt cache
     * goes on after head_sequence (the third run gave sequence 0 again) */
    snprintf(path, sizeof path, "%s/emptied.cache", dir);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 0; n < 50; n++) CHECK(append_numbered(c, n) == 0);
    CHECK(lb_cache_remove_through(c, 49) == 0);
    lb_cache_close(c);
    uint64_t unbelievable = UINT64_C(1) << 62;
    poke(path, offsetof(lb_cache_header, next_sequence), &unbelievable, 8);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    CHECK(lb_cache_append(c, "x", 1, &sequence) == 0 && sequence == 50);
    lb_cache_close(c);

    /* head moved back 8 bytes into the frame before (whose end is damaged too: it is no intact
     * frame the head would lie inside), head_sequence lowered to match: the shape of a damaged
     * head frame. The writer steps over it at open (counted as damage) instead of every reader
     * reporting it until eviction reaches it. */
    snprintf(path, sizeof path, "%s/head-back.cache", dir);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 0; n < 30; n++) CHECK(append_numbered(c, n) == 0);
    CHECK(lb_cache_remove_through(c, 9) == 0);
    lb_cache_close(c);
    uint64_t head = header_field(path, offsetof(lb_cache_header, head)) - 8;
    uint64_t first_kept = header_field(path, offsetof(lb_cache_header, head_sequence)) - 1;
    static const uint8_t junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    poke(path, (off_t)(LB_CACHE_HEADER_SIZE + head % header_field(path, offsetof(lb_cache_header, region_size))), junk, 8);
    poke(path, offsetof(lb_cache_header, head), &head, 8);
    poke(path, offsetof(lb_cache_header, head_sequence), &first_kept, 8);
    CHECK(lb_cache_open(path, &o, &c) == 0);
    s = stats_of(c);
    CHECK(s.damage_found == 1 && s.messages == 20 && s.head_sequence == 10);
    lb_cache_close(c);
    CHECK(issues_of(path, &count, &first, &last) == 0 && count == 20 && first == 10 && last == 29);
}


/* What one read returned, checked message by message: every message's bytes are those of its
 * number (its sequence + `delta`), sequences rise, and every gap is the OVERTAKEN issue recorded
 * just before the message after it (its first and count exactly the gap's). */
typedef struct read_result {
    uint64_t count, first, last; /* sequences */
    uint64_t missed;             /* what OVERTAKEN issues account for */
    uint64_t covered_through;    /* the newest sequence returned or accounted for (+1; 0: none) */
    unsigned overtaken, bad;     /* bad: wrong bytes, disorder, a gap no issue names, other issues */
} read_result;

static read_result read_checked(const char *path, uint64_t delta, unsigned slowness) {
    read_result out = {0};
    lb_cache_reader *r;
    if (lb_cache_reader_open(path, &r) != 0) {
        out.bad++;
        return out;
    }
    lb_cache_message m;
    size_t issues_seen = 0;
    int rc;
    while ((rc = lb_cache_reader_next(r, &m)) == 1) {
        uint64_t n = m.sequence + delta;
        char expected[800];
        message_text(expected, sizeof expected, n);
        uint64_t carried = 0;
        if (m.length >= 8) memcpy(&carried, m.bytes, 8);
        if (m.length != 8 + strlen(expected) || carried != n || memcmp(m.bytes + 8, expected, m.length - 8) != 0) out.bad++;
        size_t issues = lb_cache_reader_issue_count(r);
        if (!out.count && issues == issues_seen + 1) { /* removed between the open and the first copy */
            lb_cache_issue issue;
            if (lb_cache_reader_issue(r, issues - 1, &issue) != 0 || issue.kind != LB_CACHE_ISSUE_OVERTAKEN ||
                issue.missed_first + issue.missed != m.sequence)
                out.bad++;
            else {
                out.missed += issue.missed;
                out.overtaken++;
                issues_seen = issues;
            }
        }
        if (out.count && m.sequence != out.last + 1) {
            lb_cache_issue issue;
            if (m.sequence <= out.last || issues != issues_seen + 1 || lb_cache_reader_issue(r, issues - 1, &issue) != 0 ||
                issue.kind != LB_CACHE_ISSUE_OVERTAKEN || issue.missed_first != out.last + 1 ||
                issue.missed != m.sequence - out.last - 1)
                out.bad++;
            else {
                out.missed += issue.missed;
                out.overtaken++;
                issues_seen = issues;
            }
        }
        if (issues != issues_seen) out.bad++; /* an issue without a gap */
        issues_seen = issues;
        if (!out.count) out.first = m.sequence;
        out.last = m.sequence;
        out.covered_through = m.sequence + 1;
        out.count++;
        for (unsigned i = 0; i < slowness; i++) (void)lb_crc32c(i, m.bytes, m.length); /* a slow consumer */
    }
    if (rc != 0) out.bad++;
    for (size_t i = issues_seen; i < lb_cache_reader_issue_count(r); i++) { /* at the end: one gap, the last */
        lb_cache_issue issue;
        lb_cache_reader_issue(r, i, &issue);
        if (issue.kind != LB_CACHE_ISSUE_OVERTAKEN || i + 1 != lb_cache_reader_issue_count(r) ||
            (out.count && issue.missed_first != out.last + 1) || !issue.missed)
            out.bad++;
        else {
            out.missed += issue.missed;
            out.overtaken++;
            out.covered_through = issue.missed_first + issue.missed;
        }
    }
    lb_cache_reader_close(r);
    return out;
}


/* Readers whose oldest message is at each offset a frame can start at (0 and 32 to 4088 of a
 * 4 KiB region: a first message of 8j + 32 bytes, removed, moves the head there), reading across
 * the region's end and its wrap frame: one reads while the writer is idle, is lapped by it before
 * it goes on; another is lapped before its first call. Both return exactly what the cache held
 * when they copied it: no message missing, none twice, none altered, no issue. */
static void test_readers_at_every_start_offset(void) {
    char path[300];
    unsigned exact = 0, lapped_before_start = 0, checks_failed = 0;
    for (uint64_t j = 0; j <= 508; j++) {
        snprintf(path, sizeof path, "%s/wrap-%llu.cache", dir, (unsigned long long)j);
        lb_cache_options o;
        lb_cache_options_init(&o);
        o.maximum_bytes = 8192; /* a 4 KiB region */
        lb_cache *c;
        CHECK(lb_cache_open(path, &o, &c) == 0);
        if (!c) return;
        static uint8_t filler[4096];
        CHECK(lb_cache_append(c, filler, 8 * j, NULL) == 0); /* sequence 0: a frame of 8j + 32 bytes */
        CHECK(lb_cache_remove_through(c, 0) == 0);
        uint64_t n = 1; /* numbered messages carry their sequence */
        while (stats_of(c).used_bytes < 2048 + 1024 * (j % 2)) CHECK(append_numbered(c, n++) == 0);
        lb_cache_stats before = stats_of(c);
        lb_cache_reader *early, *lapped;
        CHECK(lb_cache_reader_open(path, &early) == 0);
        CHECK(lb_cache_reader_open(path, &lapped) == 0);
        lb_cache_message m;
        uint64_t expected = before.head_sequence, count = 0;
        int ok = 1;
        CHECK(lb_cache_reader_next(early, &m) == 1); /* copies the region */
        ok &= m.sequence == expected++;
        count++;
        /* the writer laps the region 0 to 3 times (about 11 messages a lap) */
        for (uint64_t more = (j * 7) % 40; more; more--) CHECK(append_numbered(c, n++) == 0);
        while (lb_cache_reader_next(early, &m) == 1) {
            ok &= m.sequence == expected++;
            count++;
        }
        ok &= count == before.messages && expected == before.next_sequence && lb_cache_reader_issue_count(early) == 0;
        exact += (unsigned)ok;
        if (!ok) checks_failed++;
        lb_cache_reader_close(early);
        lb_cache_stats after = stats_of(c);
        uint64_t first = 0;
        count = 0;
        ok = 1;
        while (lb_cache_reader_next(lapped, &m) == 1) {
            if (!count) first = expected = m.sequence;
            ok &= m.sequence == expected++;
            count++;
        }
        /* begins at the oldest message left, naming those it had when it was opened (exactly);
         * ends at the end it was opened with, or (when the writer passed that end) at the newest
         * published now */
        lb_cache_issue missed = {0};
        size_t issues = lb_cache_reader_issue_count(lapped);
        ok &= count > 0 && first == after.head_sequence && (expected == before.next_sequence || expected == after.next_sequence);
        if (first > before.head_sequence)
            ok &= issues == 1 && lb_cache_reader_issue(lapped, 0, &missed) == 0 && missed.kind == LB_CACHE_ISSUE_OVERTAKEN &&
                  missed.missed_first == before.head_sequence && missed.missed == first - before.head_sequence;
        else
            ok &= issues == 0;
        lapped_before_start += first > before.head_sequence;
        if (!ok) checks_failed++;
        lb_cache_reader_close(lapped);
        lb_cache_close(c);
        read_result again = read_checked(path, 0, 0);
        CHECK(again.bad == 0 && again.count == after.messages && again.first == after.head_sequence);
        unlink(path);
    }
    CHECK(checks_failed == 0);
    CHECK(exact == 509);
    CHECK(lapped_before_start > 400); /* the cases were the ones meant */
    printf("readers at every start offset: %u exact, %u lapped before their first call\n", exact, lapped_before_start);
}

/* A cache larger than a reader's copy (4 MiB): a reader that stops after its first copy while the
 * writer laps the cache, or a consumer removes messages, goes on at the oldest message left and
 * names every message it missed; nothing it returns is altered, nothing is returned twice. */
static void test_overtaken_reader_says_what_it_missed(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/overtaken.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = (12 << 20) + 4096;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    if (!c) return;
    uint64_t n = 0;
    while (stats_of(c).evicted_overwrite == 0) CHECK(append_numbered(c, n++) == 0); /* full */
    /* how far the writer goes while the reader waits: within the reader's copy (nothing missed),
     * past it (a gap), past the reader's end (the end read again), a lap and a half, removal */
    const uint64_t lead[] = {100, 15000, 40000, 50000, 60000};
    for (int k = 0; k < 6; k++) {
        lb_cache_stats before = stats_of(c);
        lb_cache_reader *r;
        CHECK(lb_cache_reader_open(path, &r) == 0);
        lb_cache_message m;
        CHECK(lb_cache_reader_next(r, &m) == 1 && m.sequence == before.head_sequence);
        if (k < 5)
            for (uint64_t i = 0; i < lead[k]; i++) CHECK(append_numbered(c, n++) == 0);
        else
            CHECK(lb_cache_remove_through(c, before.head_sequence + 20000) == 0);
        uint64_t last = m.sequence, count = 1, missed = 0, bad = 0;
        size_t issues_seen = 0;
        while (lb_cache_reader_next(r, &m) == 1) {
            char expected[800];
            message_text(expected, sizeof expected, m.sequence);
            uint64_t carried;
            memcpy(&carried, m.bytes, 8);
            if (carried != m.sequence || m.length != 8 + strlen(expected) || memcmp(m.bytes + 8, expected, m.length - 8)) bad++;
            size_t issues = lb_cache_reader_issue_count(r);
            if (m.sequence != last + 1) {
                lb_cache_issue issue;
                if (issues != issues_seen + 1 || lb_cache_reader_issue(r, issues - 1, &issue) != 0 ||
                    issue.kind != LB_CACHE_ISSUE_OVERTAKEN || issue.missed_first != last + 1 ||
                    issue.missed != m.sequence - last - 1)
                    bad++;
                else
                    missed += issue.missed;
            } else if (issues != issues_seen)
                bad++;
            issues_seen = issues;
            last = m.sequence;
            count++;
        }
        lb_cache_stats after = stats_of(c);
        CHECK(bad == 0 && issues_seen == lb_cache_reader_issue_count(r));
        CHECK(count + missed == last - before.head_sequence + 1);
        if (k == 0) CHECK(missed == 0 && last + 1 == before.next_sequence);
        if (k >= 1) CHECK(missed > 0);
        if (k == 1 || k == 5) CHECK(last + 1 == before.next_sequence); /* the end it was opened with */
        if (k == 2 || k == 3 || k == 4) CHECK(last + 1 == after.next_sequence && last + 1 > before.next_sequence); /* passed: read again */
        lb_cache_reader_close(r);
    }
    lb_cache_close(c);
    unlink(path);
}

/* The writer appends without pause while readers read again and again: two threads of this
 * process and a reader process, on a 64 KiB cache (each read copies it whole) and a 9 MiB one
 * (read in 4 MiB copies, with slow consumers that the writer overtakes). Every read is checked
 * message by message (read_checked); none is empty or ends before what was published when it
 * was opened, unless an issue accounts for what it did not return. Bounded by reads, not time. */
typedef struct wrap_reader {
    const char *path;
    unsigned reads, slowness;
    _Atomic unsigned *done;
    unsigned bad, empty, short_reads, overtaken;
    lb_cache_reader *probe;
} wrap_reader;

static void read_repeatedly(wrap_reader *w) {
    for (unsigned i = 0; i < w->reads; i++) {
        /* what was published before the read began: the reader must cover it */
        lb_cache_header h;
        int fd = open(w->path, O_RDONLY);
        uint64_t published = 0;
        if (fd >= 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && atomic_load(&h.next_sequence))
            published = atomic_load(&h.next_sequence) - 1; /* the newest may be in the making */
        if (fd >= 0) close(fd);
        read_result got = read_checked(w->path, 0, w->slowness);
        w->bad += got.bad;
        w->overtaken += got.overtaken;
        if (!got.count && !got.overtaken) w->empty++;
        if (got.covered_through < published) w->short_reads++;
    }
}

static void *reader_thread(void *argument) {
    wrap_reader *w = argument;
    read_repeatedly(w);
    atomic_fetch_add(w->done, 1);
    return NULL;
}

static void readers_while_wrapping(const char *name, uint64_t maximum_bytes, unsigned reads, unsigned slowness) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = maximum_bytes;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    if (!c) return;
    uint64_t n = 0;
    while (stats_of(c).evicted_overwrite == 0) CHECK(append_numbered(c, n++) == 0);
    int report[2];
    if (pipe(report) != 0) { failed++; return; }
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        _Atomic unsigned ignored = 0;
        wrap_reader w = {path, reads, slowness, &ignored, 0, 0, 0, 0, NULL};
        read_repeatedly(&w);
        unsigned said[4] = {w.bad, w.empty, w.short_reads, w.overtaken};
        _exit(write(report[1], said, sizeof said) == (ssize_t)sizeof said ? 0 : 1);
    }
    close(report[1]);
    _Atomic unsigned done = 0;
    wrap_reader readers[2];
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) {
        readers[t] = (wrap_reader){path, reads, slowness * (unsigned)t, &done, 0, 0, 0, 0, NULL};
        pthread_create(&threads[t], NULL, reader_thread, &readers[t]);
    }
    unsigned said[4] = {0};
    int child_done = 0;
    fcntl(report[0], F_SETFL, O_NONBLOCK);
    /* the writer goes on until every reader is done */
    while (atomic_load(&done) < 2 || !child_done) {
        for (int i = 0; i < 16; i++) CHECK(append_numbered(c, n++) == 0);
        if (!child_done && read(report[0], said, sizeof said) == (ssize_t)sizeof said) child_done = 1;
    }
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    int status;
    waitpid(child, &status, 0);
    close(report[0]);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unsigned bad = said[0], empty = said[1], short_reads = said[2], overtaken = said[3];
    for (int t = 0; t < 2; t++) {
        bad += readers[t].bad;
        empty += readers[t].empty;
        short_reads += readers[t].short_reads;
        overtaken += readers[t].overtaken;
    }
    CHECK(bad == 0);
    CHECK(empty == 0);
    CHECK(short_reads == 0);
    printf("%s: %u reads while %llu appends, %u overtaken and said so, %u bad, %u empty, %u short\n", name,
           3 * reads, (unsigned long long)n, overtaken, bad, empty, short_reads);
    lb_cache_close(c);
    unlink(path);
}

int main(int argc, char **argv) {
    int made = argc <= 1;
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
        mkdir(dir, 0700);
    } else {
        snprintf(dir, sizeof dir, "/tmp/logbook-cache-test-XXXXXX");
        if (!mkdtemp(dir)) return 2;
    }
    test_overwrite_and_order();
    test_reject_when_full();
    test_count_limit();
    test_threads(0);
    test_threads(1);
    test_damage_is_skipped_and_reported();
    test_resize_keeps_the_newest();
    test_leftover_temporary_file();
    test_hard_linked_cache_file_is_refused();
    test_header_damage_is_recovered();
    test_moving_fields_damage();
    test_head_moved_into_a_frame();
    test_kill_residue();
    test_huge_age_limit_keeps_everything();
    test_truncation();
    test_random_corruption(300);
    test_fork_while_appending();
    test_rebuilt_header_reads_clean();
    test_rebuild_starts_the_damage_counters_from_zero();
    test_readers_at_every_start_offset();
    test_overtaken_reader_says_what_it_missed();
    readers_while_wrapping("wrapping-small.cache", 64 << 10, 300, 0);
    readers_while_wrapping("wrapping-large.cache", (9 << 20) + 4096, 8, 8);
    test_kill_loop(200, 1);
    test_kill_loop(100, 0);
    printf("%d passed, %d failed\n", passed, failed);
    if (made && !failed) {
        char command[300];
        snprintf(command, sizeof command, "rm -rf '%s'", dir);
        if (system(command) != 0) printf("could not remove %s\n", dir);
    }
    return failed ? 1 : 0;
}
