/* A receiver that is not the bottleneck: HTTP/1.1 on 127.0.0.1, a thread per connection, every
 * request's body read (Content-Length or chunked) and discarded, answered 201 with keep-alive;
 * `Expect: 100-continue` is answered at once. Prints its port, then serves until stdin closes.
 * Counts the body bytes it took and prints the total to stderr at the end. With a second argument,
 * appends each Content-Length body to that file as it arrives: its arrival (u64, CLOCK_REALTIME
 * ns), its length (u32), its bytes, little-endian (Benchmarks/follow_latency.py reads them).
 *   cc -O2 -pthread Benchmarks/Upload/sink.c -o sink && ./sink 0 [SAVE] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { BUFFER = 1 << 20, HEAD_MAX = 64 << 10 };
static atomic_ullong body_bytes;
static FILE *saved;
static pthread_mutex_t saved_lock = PTHREAD_MUTEX_INITIALIZER;

struct connection { int fd; char *buffer; size_t have, at; };

/* Fills the buffer with more bytes (compacting it first); 0 at the end of the stream. */
static ssize_t more(struct connection *c) {
    if (c->at > 0) {
        memmove(c->buffer, c->buffer + c->at, c->have - c->at);
        c->have -= c->at;
        c->at = 0;
    }
    if (c->have == BUFFER) return -1;
    ssize_t n;
    do n = recv(c->fd, c->buffer + c->have, BUFFER - c->have, 0); while (n < 0 && errno == EINTR);
    if (n > 0) c->have += (size_t)n;
    return n;
}

static int send_all(int fd, const char *text) {
    size_t length = strlen(text);
    while (length > 0) {
        ssize_t n = send(fd, text, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        text += n;
        length -= (size_t)n;
    }
    return 0;
}

/* Discards `length` body bytes (copied to `copy` when it is not NULL). */
static int discard(struct connection *c, unsigned long long length, char *copy) {
    while (length > 0) {
        size_t available = c->have - c->at;
        if (available == 0) {
            c->have = c->at = 0;
            if (more(c) <= 0) return -1;
            continue;
        }
        size_t take = available < length ? available : (size_t)length;
        if (copy) {
            memcpy(copy, c->buffer + c->at, take);
            copy += take;
        }
        c->at += take;
        length -= take;
        atomic_fetch_add_explicit(&body_bytes, take, memory_order_relaxed);
    }
    return 0;
}

/* A line ending in CRLF, from the buffer (NUL-terminated in place); NULL at the end. */
static char *line(struct connection *c) {
    for (;;) {
        char *start = c->buffer + c->at;
        char *end = memmem(start, c->have - c->at, "\r\n", 2);
        if (end) {
            *end = 0;
            c->at = (size_t)(end + 2 - c->buffer);
            return start;
        }
        if (more(c) <= 0) return NULL;
    }
}

static void *serve(void *argument) {
    struct connection c = { .fd = (int)(intptr_t)argument, .buffer = malloc(BUFFER) };
    for (;;) {
        char *request = line(&c);
        if (!request) break;
        if (*request == 0) continue;
        unsigned long long length = 0;
        int chunked = 0, expect = 0, head = !strncmp(request, "HEAD ", 5);
        for (char *field; (field = line(&c)) && *field;) {
            if (!strncasecmp(field, "content-length:", 15)) length = strtoull(field + 15, NULL, 10);
            else if (!strncasecmp(field, "transfer-encoding:", 18) && strcasestr(field, "chunked")) chunked = 1;
            else if (!strncasecmp(field, "expect:", 7) && strcasestr(field, "100-continue")) expect = 1;
        }
        if (expect && send_all(c.fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
        int failed = 0;
        if (chunked) {
            for (;;) {
                char *size = line(&c);
                if (!size) { failed = 1; break; }
                unsigned long long n = strtoull(size, NULL, 16);
                if (n == 0) {
                    for (char *trailer; (trailer = line(&c)) && *trailer;) {}
                    break;
                }
                if (discard(&c, n, NULL) || !line(&c)) { failed = 1; break; }
            }
        } else if (!head) {
            char *copy = saved && length < (1ull << 31) ? malloc(length + 1) : NULL;
            failed = discard(&c, length, copy);
            if (copy && !failed) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                uint64_t arrival = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
                uint32_t size = (uint32_t)length;
                pthread_mutex_lock(&saved_lock);
                fwrite(&arrival, sizeof arrival, 1, saved);
                fwrite(&size, sizeof size, 1, saved);
                fwrite(copy, 1, length, saved);
                fflush(saved);
                pthread_mutex_unlock(&saved_lock);
            }
            free(copy);
        }
        if (failed || send_all(c.fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")) break;
    }
    close(c.fd);
    free(c.buffer);
    return NULL;
}

static void *accept_loop(void *argument) {
    int listener = (int)(intptr_t)argument;
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return NULL;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t thread;
        if (pthread_create(&thread, NULL, serve, (void *)(intptr_t)fd) == 0) pthread_detach(thread);
        else close(fd);
    }
}

int main(int argc, char **argv) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                   .sin_port = htons(argc > 1 ? (uint16_t)atoi(argv[1]) : 0) };
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 128)) {
        perror("sink");
        return 1;
    }
    if (argc > 2 && !(saved = fopen(argv[2], "wb"))) {
        perror("sink");
        return 1;
    }
    socklen_t size = sizeof address;
    getsockname(listener, (struct sockaddr *)&address, &size);
    printf("%d\n", ntohs(address.sin_port));
    fflush(stdout);
    pthread_t thread;
    pthread_create(&thread, NULL, accept_loop, (void *)(intptr_t)listener);
    char ignored[64];
    while (read(0, ignored, sizeof ignored) > 0) {}
    fprintf(stderr, "sink: %llu body bytes\n", (unsigned long long)atomic_load(&body_bytes));
    return 0;
}
