/*
 * The one HTTP layer of the uploader and the exporters: libcurl (Debian: libcurl4-openssl-dev)
 * behind a small C contract in liburing's manner (0 or -errno, words in lb_http_exchange_error()).
 *
 * Why libcurl, not AsyncHTTPClient (measured, docs/ARCHITECTURE.md "HTTP"): a resumable upload
 * learns its upload URL from an interim 104 response that arrives while the body is being sent, and
 * AsyncHTTPClient 1.37 drops every 1xx but 101; libcurl hands interim heads to a callback. libcurl
 * also adds no Swift build time (AsyncHTTPClient and its NIO, TLS and HTTP/2 packages: 118 s of
 * clean debug build, again under ThreadSanitizer), and `curl -T` is the rate to match.
 *
 *     lb_http_connection *connection;           // one keep-alive connection, one exchange at a time
 *     lb_http_connection_open(&connection);
 *     struct lb_http_request request = { .method = "PUT", .url = url, .body_fd = fd,
 *                                        .body_length = size, .content_length = size,
 *                                        .check = LB_CONTENT_CHECK_SHA256, ... };
 *     lb_http_exchange *exchange;
 *     lb_http_exchange_create(&request, &exchange);
 *     int rc = lb_http_exchange_perform(connection, exchange);   // blocks; any thread may cancel
 *     int status = lb_http_exchange_status(exchange);
 *     lb_http_exchange_free(exchange);
 *
 * A file body is read with pread in 256 KiB steps, so memory never grows with the file. Its
 * content check (logbook_content_check.h) sees every byte before libcurl does, the bytes before
 * `body_offset` included (read, checked, not sent), and the last bytes are handed over only once
 * the whole content has passed: a body whose bytes are not what its key names never arrives whole.
 */
#ifndef LOGBOOK_HTTP_H
#define LOGBOOK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "logbook_content_check.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lb_http_connection lb_http_connection;
typedef struct lb_http_exchange lb_http_exchange;

/* A keep-alive connection (a libcurl easy handle and its connection cache): used by one exchange at
 * a time, reused by the next to the same server. -ENOMEM, or -EIO when libcurl cannot start. */
int lb_http_connection_open(lb_http_connection **out);
void lb_http_connection_close(lb_http_connection *connection);

struct lb_http_request {
    const char *method;              /* "PUT", "POST", "PATCH", "HEAD", ... */
    const char *url;                 /* http:// or https:// only; redirects are never followed */
    const char *const *headers;      /* "Name: value" each; framing headers are the layer's own */
    size_t header_count;
    int body_fd;                     /* the body's file (pread, never moved), or -1 */
    const void *body_bytes;          /* with body_fd -1: the body in memory, copied (NULL: none) */
    uint64_t body_offset;            /* the first byte sent: the content before it is only checked */
    uint64_t body_length;            /* bytes sent, from body_offset */
    uint64_t content_length;         /* the whole content (checks read it all) */
    int check;                       /* enum lb_content_check_kind */
    uint8_t sha256[32];              /* LB_CONTENT_CHECK_SHA256: the content's digest */
    const void *expected_prefix;     /* LB_CONTENT_CHECK_ARCHIVE: the header the key was read from */
    size_t expected_prefix_length;
    uint32_t connect_timeout_ms;     /* 0: 30 s */
    uint32_t stall_timeout_ms;       /* the body sends no byte for this long, or the whole answer
                                        does not come within this long of the request's end (a
                                        final head before it ends that): -ETIMEDOUT; 0: neither */
    size_t response_body_limit;      /* bytes of the answer's body read and kept: past them the
                                        body is not read (the answer ends there, the connection is
                                        closed), so that no answer holds an exchange */
};

/* Called on the performing thread for each interim (1xx) response, with its status and its header
 * lines ("Name: value\r\n" each): a resumable upload's 104 carries the upload URL. */
typedef void (*lb_http_interim_handler)(void *context, int status, const char *headers, size_t length);

/* Copies what it needs of the request (the strings, the headers, the expected prefix, a body in
 * memory): the request may go once this returns. A body's fd must stay open until the exchange is
 * freed. */
int lb_http_exchange_create(const struct lb_http_request *request, lb_http_exchange **out);
void lb_http_exchange_set_interim_handler(lb_http_exchange *exchange, lb_http_interim_handler handler, void *context);

/* Sends the request and reads the answer on the calling thread. 0: an answer arrived (any status).
 * Otherwise: -ECONNREFUSED (could not connect), -EHOSTUNREACH (the name did not resolve),
 * -ECONNRESET (the connection was lost), -ETIMEDOUT (connect or stall timeout, or an answer that
 * did not end in time), -ECANCELED,
 * -EBADMSG (the content failed its check: lb_http_exchange_error says where; nothing after the
 * failing bytes was sent), -EIO (the body's file could not be read, or it ended early): only these
 * two are the body's; -EMSGSIZE (an answer head, interim or final, over 100 KiB: libcurl's bound
 * for one header line, and this layer's for a whole head; lb_http_exchange_status then says the
 * status of that head, 0 when its status line was not read), -ENOMEM, -EPROTO (a malformed answer,
 * a TLS failure, or any other failure of libcurl), -EINVAL (a bad URL or method). */
int lb_http_exchange_perform(lb_http_connection *connection, lb_http_exchange *exchange);

/* From any thread: the exchange ends with -ECANCELED at its next step (within about a second). */
void lb_http_exchange_cancel(lb_http_exchange *exchange);
/* From any thread: body bytes handed to the connection so far, in this exchange. */
uint64_t lb_http_exchange_bytes_sent(const lb_http_exchange *exchange);

/* The final answer's status (0 without one; after -EMSGSIZE, the status of the head refused). */
int lb_http_exchange_status(const lb_http_exchange *exchange);
/* The final answer's header lines ("Name: value\r\n" each, status line excluded). */
const char *lb_http_exchange_headers(const lb_http_exchange *exchange, size_t *length);
/* The answer's body, up to response_body_limit bytes (a longer one was not read further). */
const void *lb_http_exchange_body(const lb_http_exchange *exchange, size_t *length);
/* What went wrong, in words ("" when nothing did). */
const char *lb_http_exchange_error(const lb_http_exchange *exchange);
void lb_http_exchange_free(lb_http_exchange *exchange);

#ifdef __cplusplus
}
#endif

#endif
