/* The HTTP layer over libcurl (logbook_http.h). */
#define _GNU_SOURCE
#include "logbook_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* HEAD_LIMIT: the most bytes one answer head (interim or final: its status line and header lines)
 * may take, libcurl's own bound for one header line (CURL_MAX_HTTP_HEADER, 100 KiB). A longer
 * head fails the exchange with -EMSGSIZE: libcurl refuses such a line anyway (CURLE_OUT_OF_MEMORY
 * before 8.6, CURLE_TOO_LARGE since), and many shorter lines are refused here alike. */
enum { READ_STEP = 256 << 10, HEAD_LIMIT = 100 << 10 };

struct lb_http_connection {
    CURL *curl;
};

struct text {
    char *bytes;
    size_t length, capacity;
};

struct lb_http_exchange {
    char *method, *url;
    struct curl_slist *headers;
    int body_fd;
    uint8_t *body_bytes;           /* a copy of an in-memory body */
    uint64_t body_offset, body_length, content_length;
    int check_kind;
    uint8_t sha256[32];
    uint8_t prefix[72];
    size_t prefix_length;
    uint32_t connect_timeout_ms, stall_timeout_ms;
    size_t response_body_limit;
    lb_http_interim_handler interim;
    void *interim_context;

    lb_content_check check;
    int check_ready;
    uint64_t sent;                 /* body bytes handed to libcurl (from body_offset) */
    uint8_t *buffer;               /* READ_STEP bytes read ahead of libcurl */
    size_t buffer_at, buffer_have;
    _Atomic uint64_t sent_shared;
    _Atomic int cancelled;
    _Atomic int performed;         /* released by the performing thread when it is done */
    int has_body;
    int stalled;                   /* the body did not move for stall_timeout_ms */
    int answer_late;               /* the answer did not end within stall_timeout_ms of the request */
    int body_capped;               /* the answer's body passed response_body_limit: not read further */
    int read_failure;              /* -EBADMSG or -EIO from the read callback */
    int final_head_seen;           /* a final (non-1xx) head arrived */
    int in_head;                   /* between a head's status line and its end */
    size_t head_bytes;             /* the bytes of the head being read, its status line included */
    int head_too_large;            /* a head passed HEAD_LIMIT: the exchange ends */
    int out_of_memory;             /* a head or the body could not be kept */
    uint64_t last_progress_ns;     /* the body's last move (or the start) */
    uint64_t answer_started_ns;    /* when the request was all sent, or a final head came first */
    curl_off_t last_up;

    int status;
    int head_status;               /* the status of the head being read */
    struct text head;              /* its header lines */
    struct text final_head;
    struct text body;
    char error[CURL_ERROR_SIZE + 200];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_result;
static void global_init(void) { global_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int append(struct text *text, const void *bytes, size_t length, size_t limit) {
    if (text->length + length > limit) length = limit > text->length ? limit - text->length : 0;
    if (length == 0) return 0;
    if (text->length + length + 1 > text->capacity) {
        size_t capacity = (text->length + length + 1) * 2;
        if (capacity > limit + 1) capacity = limit + 1;
        char *grown = realloc(text->bytes, capacity);
        if (!grown) return -ENOMEM;
        text->bytes = grown;
        text->capacity = capacity;
    }
    memcpy(text->bytes + text->length, bytes, length);
    text->length += length;
    text->bytes[text->length] = 0;
    return 0;
}

int lb_http_connection_open(lb_http_connection **out) {
    pthread_once(&global_once, global_init);
    if (global_result != CURLE_OK) return -EIO;
    lb_http_connection *connection = calloc(1, sizeof *connection);
    if (!connection) return -ENOMEM;
    connection->curl = curl_easy_init();
    if (!connection->curl) {
        free(connection);
        return -EIO;
    }
    *out = connection;
    return 0;
}

void lb_http_connection_close(lb_http_connection *connection) {
    if (!connection) return;
    curl_easy_cleanup(connection->curl);
    free(connection);
}

int lb_http_exchange_create(const struct lb_http_request *request, lb_http_exchange **out) {
    if (!request->method || !request->url || request->body_offset > request->content_length ||
        request->body_length > request->content_length - request->body_offset ||
        request->expected_prefix_length > sizeof(((lb_http_exchange *)0)->prefix)) {
        return -EINVAL;
    }
    lb_http_exchange *exchange = calloc(1, sizeof *exchange);
    if (!exchange) return -ENOMEM;
    exchange->method = strdup(request->method);
    exchange->url = strdup(request->url);
    int failed = !exchange->method || !exchange->url;
    for (size_t i = 0; i < request->header_count && !failed; i++) {
        struct curl_slist *grown = curl_slist_append(exchange->headers, request->headers[i]);
        if (grown) exchange->headers = grown; else failed = 1;
    }
    /* Framing is the layer's: no 100-continue round trip (and no one-second wait for a server that
     * never answers it). */
    struct curl_slist *grown = failed ? NULL : curl_slist_append(exchange->headers, "Expect:");
    if (grown) exchange->headers = grown; else failed = 1;
    if (failed) {
        lb_http_exchange_free(exchange);
        return -ENOMEM;
    }
    exchange->body_fd = request->body_fd;
    if (request->body_fd < 0 && request->body_bytes && request->content_length) {
        exchange->body_bytes = malloc(request->content_length ? request->content_length : 1);
        if (!exchange->body_bytes) {
            lb_http_exchange_free(exchange);
            return -ENOMEM;
        }
        memcpy(exchange->body_bytes, request->body_bytes, request->content_length);
    }
    exchange->body_offset = request->body_offset;
    exchange->body_length = request->body_length;
    exchange->content_length = request->content_length;
    exchange->check_kind = request->check;
    memcpy(exchange->sha256, request->sha256, 32);
    if (request->expected_prefix_length) memcpy(exchange->prefix, request->expected_prefix, request->expected_prefix_length);
    exchange->prefix_length = request->expected_prefix_length;
    exchange->connect_timeout_ms = request->connect_timeout_ms ? request->connect_timeout_ms : 30000;
    exchange->stall_timeout_ms = request->stall_timeout_ms;
    exchange->response_body_limit = request->response_body_limit;
    *out = exchange;
    return 0;
}

void lb_http_exchange_set_interim_handler(lb_http_exchange *exchange, lb_http_interim_handler handler, void *context) {
    exchange->interim = handler;
    exchange->interim_context = context;
}

static void observe(const lb_http_exchange *exchange);

void lb_http_exchange_free(lb_http_exchange *exchange) {
    if (!exchange) return;
    observe(exchange);
    free(exchange->method);
    free(exchange->url);
    curl_slist_free_all(exchange->headers);
    free(exchange->buffer);
    free(exchange->body_bytes);
    free(exchange->head.bytes);
    free(exchange->final_head.bytes);
    free(exchange->body.bytes);
    if (exchange->check_ready) lb_content_check_free(&exchange->check);
    free(exchange);
}

void lb_http_exchange_cancel(lb_http_exchange *exchange) { atomic_store(&exchange->cancelled, 1); }
uint64_t lb_http_exchange_bytes_sent(const lb_http_exchange *exchange) {
    return atomic_load_explicit(&((lb_http_exchange *)exchange)->sent_shared, memory_order_relaxed);
}
/* The answer is read on another thread than the one that performed the exchange: acquiring what
 * the performing thread released orders its writes before these reads. */
static void observe(const lb_http_exchange *exchange) {
    (void)atomic_load_explicit(&((lb_http_exchange *)exchange)->performed, memory_order_acquire);
}

int lb_http_exchange_status(const lb_http_exchange *exchange) {
    observe(exchange);
    return exchange->status;
}
const char *lb_http_exchange_headers(const lb_http_exchange *exchange, size_t *length) {
    observe(exchange);
    *length = exchange->final_head.length;
    return exchange->final_head.bytes ? exchange->final_head.bytes : "";
}
const void *lb_http_exchange_body(const lb_http_exchange *exchange, size_t *length) {
    observe(exchange);
    *length = exchange->body.length;
    return exchange->body.bytes ? (const void *)exchange->body.bytes : (const void *)"";
}
const char *lb_http_exchange_error(const lb_http_exchange *exchange) {
    observe(exchange);
    return exchange->error;
}

/* Bytes [from, from + length) of the content, from the file or from memory. -EIO when the file
 * ends early or cannot be read. */
static int read_content(lb_http_exchange *exchange, uint8_t *into, size_t length, uint64_t from) {
    if (exchange->body_fd < 0) {
        memcpy(into, exchange->body_bytes + from, length);
        return 0;
    }
    size_t done = 0;
    while (done < length) {
        ssize_t n = pread(exchange->body_fd, into + done, length - done, (off_t)(from + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(exchange->error, sizeof exchange->error, "the content cannot be read at byte %llu: %s",
                     (unsigned long long)(from + done), strerror(errno));
            return -EIO;
        }
        if (n == 0) {
            snprintf(exchange->error, sizeof exchange->error,
                     "the content ends at byte %llu, not at the %llu bytes its key names: it changed after it was submitted",
                     (unsigned long long)(from + done), (unsigned long long)exchange->content_length);
            return -EIO;
        }
        done += (size_t)n;
    }
    return 0;
}

static int check_failed(lb_http_exchange *exchange) {
    snprintf(exchange->error, sizeof exchange->error, "its content is not what its key names (%s): not sent",
             lb_content_check_reason(&exchange->check));
    return -EBADMSG;
}

/* (Re)starts the check and the reading at body_offset: the bytes before it are read and checked. */
static int rewind_body(lb_http_exchange *exchange) {
    if (exchange->check_ready) lb_content_check_free(&exchange->check);
    exchange->check_ready = 1;
    int rc = lb_content_check_init(&exchange->check, exchange->check_kind, exchange->content_length, exchange->sha256,
                                   exchange->prefix_length ? exchange->prefix : NULL, exchange->prefix_length,
                                   exchange->body_fd);
    if (rc == -EBADMSG) return check_failed(exchange);
    if (rc) return rc;
    exchange->sent = 0;
    exchange->buffer_at = exchange->buffer_have = 0;
    for (uint64_t at = 0; at < exchange->body_offset;) {
        if (atomic_load(&exchange->cancelled)) return -ECANCELED;
        size_t step = exchange->body_offset - at < READ_STEP ? (size_t)(exchange->body_offset - at) : READ_STEP;
        if ((rc = read_content(exchange, exchange->buffer, step, at))) return rc;
        if (lb_content_check_update(&exchange->check, exchange->buffer, step)) return check_failed(exchange);
        at += step;
    }
    return 0;
}

/* Refills the read-ahead buffer with the next step, checked before libcurl sees it; the last step
 * passes only once the whole content did. */
static int refill(lb_http_exchange *exchange) {
    uint64_t from = exchange->body_offset + exchange->sent + exchange->buffer_have;
    uint64_t left = exchange->body_offset + exchange->body_length - from;
    size_t step = left < READ_STEP ? (size_t)left : READ_STEP;
    int rc = read_content(exchange, exchange->buffer, step, from);
    if (rc) return rc;
    if (lb_content_check_update(&exchange->check, exchange->buffer, step)) return check_failed(exchange);
    if (from + step == exchange->content_length && lb_content_check_finish(&exchange->check)) return check_failed(exchange);
    exchange->buffer_at = 0;
    exchange->buffer_have = step;
    return 0;
}

static size_t on_read(char *into, size_t size, size_t count, void *context) {
    lb_http_exchange *exchange = context;
    size_t room = size * count;
    if (atomic_load(&exchange->cancelled)) return CURL_READFUNC_ABORT;
    if (exchange->buffer_at == exchange->buffer_have) {
        exchange->sent += exchange->buffer_have;
        exchange->buffer_have = exchange->buffer_at = 0;
        if (exchange->sent == exchange->body_length) return 0;
        int rc = refill(exchange);
        if (rc) {
            exchange->read_failure = rc;
            return CURL_READFUNC_ABORT;
        }
    }
    size_t n = exchange->buffer_have - exchange->buffer_at < room ? exchange->buffer_have - exchange->buffer_at : room;
    memcpy(into, exchange->buffer + exchange->buffer_at, n);
    exchange->buffer_at += n;
    atomic_store_explicit(&exchange->sent_shared, exchange->sent + exchange->buffer_at, memory_order_relaxed);
    return n;
}

/* libcurl rewinds the body when it sends the request again (a reused connection that the server
 * had closed): the check starts over with it. */
static int on_seek(void *context, curl_off_t offset, int origin) {
    lb_http_exchange *exchange = context;
    if (origin != SEEK_SET || offset != 0) return CURL_SEEKFUNC_CANTSEEK;
    int rc = rewind_body(exchange);
    if (rc) {
        exchange->read_failure = rc;
        return CURL_SEEKFUNC_FAIL;
    }
    atomic_store(&exchange->sent_shared, 0);
    return CURL_SEEKFUNC_OK;
}

static size_t on_header(char *bytes, size_t size, size_t count, void *context) {
    lb_http_exchange *exchange = context;
    size_t length = size * count;
    if (length >= 5 && memcmp(bytes, "HTTP/", 5) == 0) {
        const char *space = memchr(bytes, ' ', length);
        exchange->head_status = space && space + 4 <= bytes + length ? atoi(space + 1) : 0;
        exchange->head.length = 0;
        exchange->in_head = 1;
        exchange->head_bytes = length;
        return length;
    }
    exchange->head_bytes += length;
    if (exchange->head_bytes > HEAD_LIMIT) {
        exchange->head_too_large = 1;
        return 0;
    }
    if (length <= 2 && (length == 0 || bytes[0] == '\r' || bytes[0] == '\n')) {
        exchange->in_head = 0;
        exchange->head_bytes = 0;  /* a chunked body's trailer, if any, is bounded on its own */
        int status = exchange->head_status;
        if (status >= 100 && status < 200) {
            if (exchange->interim) {
                exchange->interim(exchange->interim_context, status, exchange->head.bytes ? exchange->head.bytes : "",
                                  exchange->head.length);
            }
        } else {
            exchange->final_head_seen = 1;
            exchange->final_head.length = 0;
            if (append(&exchange->final_head, exchange->head.bytes ? exchange->head.bytes : "", exchange->head.length, HEAD_LIMIT)) {
                exchange->out_of_memory = 1;
                return 0;
            }
        }
        exchange->head.length = 0;
        return length;
    }
    if (append(&exchange->head, bytes, length, HEAD_LIMIT)) {
        exchange->out_of_memory = 1;
        return 0;
    }
    return length;
}

/* An answer's body is kept up to response_body_limit bytes, and then not read at all: the answer
 * is its status, its headers and that much of its body (a server that sends more, or trickles it,
 * cannot hold the exchange). The connection is closed. */
static size_t on_body(char *bytes, size_t size, size_t count, void *context) {
    lb_http_exchange *exchange = context;
    size_t length = size * count;
    if (exchange->body.length + length > exchange->response_body_limit) {
        append(&exchange->body, bytes, length, exchange->response_body_limit);
        exchange->body_capped = 1;
        return 0;
    }
    if (append(&exchange->body, bytes, length, exchange->response_body_limit)) {
        exchange->out_of_memory = 1;
        return 0;
    }
    return length;
}

/* The exchange's two bounds (stall_timeout_ms, the caller's timeout). While the body is being sent,
 * it must move: no byte sent for that long is a stall (what the server sends meanwhile, 1xx heads
 * one after another, is no progress). Once the body is all sent (at once for a request without
 * one), or a final head came before its end, the whole answer must arrive within that long: a
 * server trickling its head or body, or 104s, one byte at a time cannot hold the exchange longer. */
static int on_progress(void *context, curl_off_t down_total, curl_off_t down, curl_off_t up_total, curl_off_t up) {
    (void)down_total;
    (void)down;
    (void)up_total;
    lb_http_exchange *exchange = context;
    if (atomic_load(&exchange->cancelled)) return 1;
    if (!exchange->stall_timeout_ms) return 0;
    uint64_t now = now_ns(), bound = (uint64_t)exchange->stall_timeout_ms * 1000000u;
    int sending = exchange->has_body && (uint64_t)up < exchange->body_length && !exchange->final_head_seen;
    if (sending) {
        if (up != exchange->last_up || exchange->last_progress_ns == 0) {
            exchange->last_up = up;
            exchange->last_progress_ns = now;
        } else if (now - exchange->last_progress_ns > bound) {
            exchange->stalled = 1;
            return 1;
        }
        return 0;
    }
    if (exchange->answer_started_ns == 0) exchange->answer_started_ns = now;
    if (now - exchange->answer_started_ns > bound) {
        exchange->answer_late = 1;
        return 1;
    }
    return 0;
}

static int failure(lb_http_exchange *exchange, CURLcode code, const char *detail) {
    const char *words;
    int rc;
    switch (code) {
    case CURLE_COULDNT_CONNECT: rc = -ECONNREFUSED; words = "could not connect to the server"; break;
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY:
        rc = -EHOSTUNREACH; words = "the server's name did not resolve"; break;
    case CURLE_OPERATION_TIMEDOUT: rc = -ETIMEDOUT; words = "timed out"; break;
    case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
        rc = -ECONNRESET; words = "the connection was lost"; break;
    case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER: case CURLE_SSL_CACERT_BADFILE: case CURLE_SSL_ISSUER_ERROR:
        rc = -EPROTO; words = "the TLS connection failed"; break;
    case CURLE_URL_MALFORMAT: case CURLE_UNSUPPORTED_PROTOCOL: rc = -EINVAL; words = "the URL cannot be used"; break;
    case CURLE_WEIRD_SERVER_REPLY: rc = -EPROTO; words = "the server's response was malformed"; break;
    /* -EIO and -EBADMSG are the body's own (read_failure): any other failure is the exchange's, so
     * that the uploader retries it rather than taking the content for damaged. */
    default: rc = -EPROTO; words = curl_easy_strerror(code); break;
    }
    snprintf(exchange->error, sizeof exchange->error, "%s (%s)", words, detail && *detail ? detail : curl_easy_strerror(code));
    return rc;
}

static int perform(lb_http_connection *connection, lb_http_exchange *exchange);

/* Whether the exchange failed on an answer head too large: refused by on_header (HEAD_LIMIT), or
 * a line of it by libcurl (out of memory, or "too large" since 8.6) before the final head ended. */
static int head_refused(const lb_http_exchange *exchange, CURLcode code) {
    if (exchange->head_too_large) return 1;
#if CURL_AT_LEAST_VERSION(8, 6, 0)
    if (code == CURLE_TOO_LARGE && !exchange->final_head_seen) return 1;
#endif
    return code == CURLE_OUT_OF_MEMORY && !exchange->final_head_seen && !exchange->out_of_memory;
}

int lb_http_exchange_perform(lb_http_connection *connection, lb_http_exchange *exchange) {
    int rc = perform(connection, exchange);
    atomic_store_explicit(&exchange->performed, 1, memory_order_release);
    return rc;
}

static int perform(lb_http_connection *connection, lb_http_exchange *exchange) {
    CURL *curl = connection->curl;
    curl_easy_reset(curl);
    char detail[CURL_ERROR_SIZE] = "";
    int has_body = strcmp(exchange->method, "HEAD") != 0 && strcmp(exchange->method, "GET") != 0;
    exchange->status = 0;
    exchange->has_body = has_body;
    exchange->stalled = exchange->answer_late = exchange->body_capped = exchange->final_head_seen = 0;
    exchange->in_head = exchange->head_too_large = exchange->out_of_memory = 0;
    exchange->head_bytes = 0;
    exchange->head_status = 0;
    exchange->read_failure = 0;
    exchange->last_progress_ns = exchange->answer_started_ns = 0;
    exchange->last_up = 0;
    exchange->error[0] = 0;
    exchange->final_head.length = exchange->body.length = exchange->head.length = 0;
    if (has_body) {
        if (!exchange->buffer && !(exchange->buffer = malloc(READ_STEP))) return -ENOMEM;
        int rc = rewind_body(exchange);
        if (rc) return rc;
    }
    curl_easy_setopt(curl, CURLOPT_URL, exchange->url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, exchange->headers);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)exchange->connect_timeout_ms);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, exchange);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, exchange);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, exchange);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, NULL);
    if (has_body) {
        curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, (long)READ_STEP);
        curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)exchange->body_length);
        curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(curl, CURLOPT_READDATA, exchange);
        curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(curl, CURLOPT_SEEKDATA, exchange);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, exchange->method);
    } else if (strcmp(exchange->method, "HEAD") == 0) {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    }
    CURLcode code = curl_easy_perform(curl);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && exchange->body_capped)) {
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        exchange->status = (int)status;
        return 0;
    }
    if (exchange->read_failure) return exchange->read_failure;
    if (head_refused(exchange, code)) {
        /* The status of the head refused (0: its status line was not read) is the exchange's. */
        exchange->status = exchange->in_head ? exchange->head_status : 0;
        if (exchange->status > 0) {
            snprintf(exchange->error, sizeof exchange->error, "the server's answer (HTTP %d) has a head larger than %d KiB: not read",
                     exchange->status, HEAD_LIMIT >> 10);
        } else {
            snprintf(exchange->error, sizeof exchange->error, "the server's answer has a head larger than %d KiB: not read",
                     HEAD_LIMIT >> 10);
        }
        return -EMSGSIZE;
    }
    if (exchange->out_of_memory || code == CURLE_OUT_OF_MEMORY) {
        snprintf(exchange->error, sizeof exchange->error, "out of memory while reading the answer");
        return -ENOMEM;
    }
    if (code == CURLE_ABORTED_BY_CALLBACK || atomic_load(&exchange->cancelled)) {
        if (exchange->stalled) {
            snprintf(exchange->error, sizeof exchange->error, "timed out (no progress for %u ms)", exchange->stall_timeout_ms);
            return -ETIMEDOUT;
        }
        if (exchange->answer_late) {
            snprintf(exchange->error, sizeof exchange->error, "timed out (the answer did not end within %u ms of the request)",
                     exchange->stall_timeout_ms);
            return -ETIMEDOUT;
        }
        snprintf(exchange->error, sizeof exchange->error, "cancelled");
        return -ECANCELED;
    }
    return failure(exchange, code, detail);
}
