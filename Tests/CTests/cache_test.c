/* cache_test.c — the message cache's C API from C (logbook_cache.h): order, overwrite and
 * reject, too large, wrap-around with varied sizes, remove_through, limits by count, threads,
 * reopen, one writer at a time, damage skipped and reported. WORK IN PROGRESS (issue 13). */
#define _GNU_SOURCE
#include "logbook_cache.h"
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
    lb_cache_reader *r;
    if (lb_cache_reader_open(path, &r) != 0) return 0;
    lb_cache_message m;
    uint64_t count = 0, previous = 0;
    *bad = 0;
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

static void test_overwrite_and_order(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/overwrite.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 64 << 10;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 5000; n++) CHECK(append_numbered(c, n) == 0);
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

typedef struct { lb_cache *c; uint32_t thread; } job;

static void *appender(void *argument) {
    job *j = argument;
    for (uint32_t i = 0; i < 20000; i++) {
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
    int count = power ? 2 : 8;
    for (int t = 0; t < count; t++) {
        jobs[t] = (job){c, (uint32_t)t};
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
    CHECK(total == (uint64_t)count * 20000);
    CHECK(lb_cache_reader_issue_count(r) == 0);
    lb_cache_reader_close(r);
}

static void test_damage_is_skipped_and_reported(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/damage.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 100; n++) CHECK(append_numbered(c, n) == 0);
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
    snprintf(path, sizeof path, "%s/resize.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 256 << 10;
    lb_cache *c;
    CHECK(lb_cache_open(path, &o, &c) == 0);
    for (uint64_t n = 1; n <= 1000; n++) CHECK(append_numbered(c, n) == 0);
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

/* 200 SIGKILLs of a child appending (varied sizes, a 256 KiB cache that overwrites): after each,
 * every append the child saw return is read back (or was evicted, counted), nothing invalid. */
static void test_kill_loop(int cycles) {
    char path[300];
    snprintf(path, sizeof path, "%s/kill.cache", dir);
    lb_cache_options o;
    lb_cache_options_init(&o);
    o.maximum_bytes = 256 << 10;
    uint64_t next = 1;
    unsigned seed = 7;
    for (int cycle = 0; cycle < cycles; cycle++) {
        int channel[2];
        if (pipe(channel) != 0) { failed++; return; }
        pid_t child = fork();
        if (child == 0) {
            close(channel[0]);
            lb_cache *c;
            if (lb_cache_open(path, &o, &c) != 0) _exit(3);
            for (uint64_t n = next;; n++) {
                if (append_numbered(c, n) != 0) _exit(4);
                if (write(channel[1], &n, 8) != 8) _exit(5);  /* returned: it must be read back */
            }
        }
        close(channel[1]);
        usleep(1000 + rand_r(&seed) % 20000);
        kill(child, SIGKILL);
        int status;
        waitpid(child, &status, 0);
        uint64_t n, returned = next - 1;
        while (read(channel[0], &n, 8) == 8) returned = n;
        close(channel[0]);
        uint64_t first = 0, last = 0;
        int bad;
        uint64_t count = read_all(path, &first, &last, &bad);
        CHECK(bad == 0);
        /* everything returned is there (last may be one more: appended, killed before it said so) */
        CHECK(count == 0 || (last >= returned && last <= returned + 1));
        if (count) next = last + 1;
    }
}

int main(int argc, char **argv) {
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
    test_kill_loop(200);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
