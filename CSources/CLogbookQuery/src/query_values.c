/* query_values.c — the values of the `records` columns that are made rather than copied: level
 * names, times as text, and the arguments, metadata and error as JSON (the same values as
 * `logbook show --json` writes: numbers as numbers, a non-finite float as a string, bytes as hex,
 * a redacted value as null). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "query_internal.h"

static const char *const level_names[8] = {NULL, "trace", "debug", "info", "notice", "warning", "error", "critical"};

const char *lb_q_level_name(int level) { return level >= 1 && level <= 7 ? level_names[level] : NULL; }

int lb_query_level_from_name(const char *name) {
    if (!name) return 0;
    for (int level = 1; level <= 7; level++)
        if (strcasecmp(name, level_names[level]) == 0) return level;
    return 0;
}

void lb_q_time_text(int64_t wall_ns, char out[96]) {
    int64_t seconds = wall_ns / 1000000000, fraction = wall_ns % 1000000000;
    if (fraction < 0) {
        fraction += 1000000000;
        seconds -= 1;
    }
    time_t t = (time_t)seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, 96, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)fraction);
}

static int digits(const char **p, int count, int *value) {
    *value = 0;
    for (int i = 0; i < count; i++, (*p)++) {
        if (!isdigit((unsigned char)**p)) return -1;
        *value = *value * 10 + (**p - '0');
    }
    return 0;
}

int lb_q_parse_time(const char *text, int64_t *wall_ns) {
    const char *p = text;
    int year, month, day, hour = 0, minute = 0, second = 0;
    if (digits(&p, 4, &year) || *p++ != '-' || digits(&p, 2, &month) || *p++ != '-' || digits(&p, 2, &day)) return -1;
    int64_t fraction = 0, offset = 0;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (digits(&p, 2, &hour) || *p++ != ':' || digits(&p, 2, &minute) || *p++ != ':' || digits(&p, 2, &second))
            return -1;
        if (*p == '.') {
            p++;
            int n = 0;
            for (; isdigit((unsigned char)*p); p++, n++)
                if (n < 9) fraction = fraction * 10 + (*p - '0');
            if (n == 0) return -1;
            for (; n < 9; n++) fraction *= 10;
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om;
            if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om)) return -1;
            offset = sign * ((int64_t)oh * 3600 + om * 60);
        } else if (*p != '\0') {
            return -1;
        }
    }
    if (*p != '\0' || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
        return -1;
    struct tm tm = {.tm_year = year - 1900, .tm_mon = month - 1, .tm_mday = day, .tm_hour = hour, .tm_min = minute,
                    .tm_sec = second};
    time_t t = timegm(&tm);
    struct tm check;
    /* A day the month has (timegm would take 30 February for 2 March). */
    if (!gmtime_r(&t, &check) || check.tm_mday != day || check.tm_mon != month - 1) return -1;
    int64_t seconds = (int64_t)t - offset, ns;
    if (__builtin_mul_overflow(seconds, (int64_t)1000000000, &ns) || __builtin_add_overflow(ns, fraction, &ns))
        return -2;   /* a time Logbook cannot name: before 1677 or after 2262 */
    *wall_ns = ns;
    return 0;
}

/* ---- text ---- */

void lb_q_text_free(lb_q_text *text) {
    free(text->bytes);
    *text = (lb_q_text){0};
}

static void reserve(lb_q_text *t, size_t more) {
    if (t->failed || t->length + more + 1 <= t->capacity) return;
    size_t capacity = t->capacity ? t->capacity : 256;
    while (capacity < t->length + more + 1) capacity *= 2;
    char *bigger = realloc(t->bytes, capacity);
    if (!bigger) {
        t->failed = 1;
        return;
    }
    t->bytes = bigger;
    t->capacity = capacity;
}

static void put(lb_q_text *t, const char *bytes, size_t length) {
    reserve(t, length);
    if (t->failed) return;
    memcpy(t->bytes + t->length, bytes, length);
    t->length += length;
    t->bytes[t->length] = '\0';
}

static void puts_(lb_q_text *t, const char *s) { put(t, s, strlen(s)); }

/* The length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one. */
static size_t utf8_sequence(const uint8_t *p, size_t left) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || n > left) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;   /* overlong */
    if (c == 0xED && p[1] > 0x9F) return 0;   /* surrogates */
    if (c == 0xF0 && p[1] < 0x90) return 0;   /* overlong */
    if (c == 0xF4 && p[1] > 0x8F) return 0;   /* above U+10FFFF */
    return n;
}

/* The bytes one U+FFFD replaces at an invalid sequence: its maximal subpart, as Unicode (and
 * Swift's String(decoding:)) count it: a lead byte and the continuation bytes that could still
 * have completed it; one byte when the lead cannot begin a sequence. */
static size_t invalid_prefix(const uint8_t *p, size_t left) {
    uint8_t c = p[0];
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    size_t k = 1;
    for (; n && k < n && k < left; k++) {
        uint8_t lo = 0x80, hi = 0xBF;
        if (k == 1) {
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
            else if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        }
        if (p[k] < lo || p[k] > hi) break;
    }
    return k;
}

int lb_q_is_utf8(const uint8_t *bytes, size_t length) {
    for (size_t i = 0; i < length;) {
        if (bytes[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = utf8_sequence(bytes + i, length - i);
        if (n == 0) return 0;
        i += n;
    }
    return 1;
}

/* UTF-8, with invalid sequences as U+FFFD (as Swift's String(decoding:) reads them); with JSON
 * string escapes when `json`. */
static void put_text(lb_q_text *t, const uint8_t *bytes, size_t length, int json) {
    reserve(t, length + 2);
    for (size_t i = 0; i < length && !t->failed;) {
        /* A run of printable ASCII that needs no escape: one copy. */
        size_t run = i;
        while (run < length && bytes[run] >= 0x20 && bytes[run] < 0x80 && bytes[run] != '"' && bytes[run] != '\\') run++;
        if (run > i) {
            put(t, (const char *)bytes + i, run - i);
            i = run;
            continue;
        }
        uint8_t c = bytes[i];
        if (json && (c < 0x20 || c == '"' || c == '\\')) {
            char escape[8];
            switch (c) {
            case '"': puts_(t, "\\\""); break;
            case '\\': puts_(t, "\\\\"); break;
            case '\n': puts_(t, "\\n"); break;
            case '\r': puts_(t, "\\r"); break;
            case '\t': puts_(t, "\\t"); break;
            default:
                snprintf(escape, sizeof escape, "\\u%04x", c);
                puts_(t, escape);
            }
            i++;
            continue;
        }
        size_t n = utf8_sequence(bytes + i, length - i);
        if (n == 0) {
            put(t, "\xEF\xBF\xBD", 3);
            i += invalid_prefix(bytes + i, length - i);
        } else {
            put(t, (const char *)bytes + i, n);
            i += n;
        }
    }
}

void lb_q_text_utf8(lb_q_text *out, const uint8_t *bytes, size_t length) {
    out->length = 0;
    out->failed = 0;
    reserve(out, length);
    if (out->bytes) out->bytes[0] = '\0';
    put_text(out, bytes, length, 0);
}

/* A double in the fewest digits that read back as it (Swift's description prints the same value). */
static void put_double(lb_q_text *t, double value, int single) {
    char text[40];
    if (isnan(value)) {
        puts_(t, "\"nan\"");
        return;
    }
    if (isinf(value)) {
        puts_(t, value > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    for (int precision = single ? 6 : 15; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, value);
        if (single ? (float)strtod(text, NULL) == (float)value : strtod(text, NULL) == value) break;
    }
    /* A float stays one in JSON (53.0, not 53: json_extract types it REAL), as Swift writes it. */
    if (!strpbrk(text, ".en")) strcat(text, ".0");
    puts_(t, text);
}

/* ---- arguments as JSON ---- */

/* An integer in decimal, without printf (the dearest part of a row's JSON otherwise). */
static void put_unsigned(lb_q_text *t, uint64_t value, int negative) {
    char text[24];
    char *p = text + sizeof text;
    do {
        *--p = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    if (negative) *--p = '-';
    put(t, p, (size_t)(text + sizeof text - p));
}

static void put_scalar(lb_q_text *t, const lb_arg *a) {
    char text[32];
    switch (a->type) {
    case LB_ARG_BOOL: puts_(t, a->value.b ? "true" : "false"); return;
    case LB_ARG_I8: case LB_ARG_I16: case LB_ARG_I32: case LB_ARG_I64: case LB_ARG_INT:
        put_unsigned(t, a->value.i < 0 ? 0 - (uint64_t)a->value.i : (uint64_t)a->value.i, a->value.i < 0);
        return;
    case LB_ARG_U8: case LB_ARG_U16: case LB_ARG_U32: case LB_ARG_U64: case LB_ARG_UINT:
        put_unsigned(t, a->value.u, 0);
        return;
    case LB_ARG_F32: put_double(t, a->value.f, 1); return;
    case LB_ARG_F64: put_double(t, a->value.f, 0); return;
    case LB_ARG_STRING: case LB_ARG_STATIC_STRING:
        put(t, "\"", 1);
        put_text(t, a->bytes, a->length, 1);
        put(t, "\"", 1);
        return;
    case LB_ARG_BYTES:
        put(t, "\"", 1);
        for (uint32_t i = 0; i < a->length; i++) {
            snprintf(text, sizeof text, "%02x", a->bytes[i]);
            put(t, text, 2);
        }
        put(t, "\"", 1);
        return;
    default: puts_(t, "null"); return;   /* redacted */
    }
}

static int is_tail(uint8_t type) { return type == LB_ARG_METADATA || type == LB_ARG_ERROR; }

void lb_q_args_json(const lb_entry *e, lb_q_text *t) {
    t->length = 0;
    t->failed = 0;
    put(t, "[", 1);
    uint32_t offset = 0;
    lb_arg a;
    for (int first = 1; lb_arg_next(e->args, e->args_length, &offset, &a) == 1 && !is_tail(a.type); first = 0) {
        if (!first) put(t, ",", 1);
        put_scalar(t, &a);
    }
    put(t, "]", 1);
}

/* A metadata value at *offset (a scalar, or a list or map and what it holds), depth-limited. */
static int put_value(lb_q_text *t, const lb_entry *e, uint32_t *offset, int depth);

/* Moves *offset past one value (a scalar, or a list or map and what it holds). */
static int skip_value(const lb_entry *e, uint32_t *offset, int depth) {
    lb_arg a;
    if (depth > (int)LB_ARG_MAX_DEPTH || lb_arg_next(e->args, e->args_length, offset, &a) != 1) return -1;
    uint64_t items = a.type == LB_ARG_LIST ? a.value.u : a.type == LB_ARG_MAP ? 2 * a.value.u : 0;
    for (uint64_t i = 0; i < items; i++)
        if (skip_value(e, offset, depth + 1) != 0) return -1;
    return 0;
}

static int same_key(const lb_arg *a, const lb_arg *b) {
    return a->length == b->length && (a->length == 0 || memcmp(a->bytes, b->bytes, a->length) == 0);
}

/* Whether the key at pair `index` appears again in a later pair (readers keep the last value). */
static int repeated_later(const lb_entry *e, uint32_t after_value, const lb_arg *key, uint64_t left, int depth) {
    uint32_t offset = after_value;
    for (uint64_t i = 0; i < left; i++) {
        lb_arg other;
        if (lb_arg_next(e->args, e->args_length, &offset, &other) != 1) return 0;
        if (same_key(key, &other)) return 1;
        if (skip_value(e, &offset, depth) != 0) return 0;
    }
    return 0;
}

static int put_pairs(lb_q_text *t, const lb_entry *e, uint32_t *offset, uint64_t count, int depth) {
    put(t, "{", 1);
    int first = 1;
    for (uint64_t i = 0; i < count; i++) {
        lb_arg key;
        if (lb_arg_next(e->args, e->args_length, offset, &key) != 1) return -1;
        int text = key.type == LB_ARG_STRING || key.type == LB_ARG_STATIC_STRING;
        if (!text) key.length = 0;
        uint32_t value_at = *offset;
        if (skip_value(e, offset, depth) != 0) return -1;
        if (repeated_later(e, *offset, &key, count - i - 1, depth)) continue;
        if (!first) put(t, ",", 1);
        first = 0;
        if (text) {
            put_scalar(t, &key);
        } else {
            put(t, "\"\"", 2);
        }
        put(t, ":", 1);
        if (put_value(t, e, &value_at, depth) != 0) return -1;
    }
    put(t, "}", 1);
    return 0;
}

static int put_value(lb_q_text *t, const lb_entry *e, uint32_t *offset, int depth) {
    lb_arg a;
    if (depth > (int)LB_ARG_MAX_DEPTH || lb_arg_next(e->args, e->args_length, offset, &a) != 1) return -1;
    if (a.type == LB_ARG_MAP) return put_pairs(t, e, offset, a.value.u, depth + 1);
    if (a.type != LB_ARG_LIST) {
        put_scalar(t, &a);
        return 0;
    }
    put(t, "[", 1);
    for (uint64_t i = 0; i < a.value.u; i++) {
        if (i > 0) put(t, ",", 1);
        if (put_value(t, e, offset, depth + 1) != 0) return -1;
    }
    put(t, "]", 1);
    return 0;
}

void lb_q_tail(const lb_entry *e, uint32_t tail_offset, lb_q_text *metadata, lb_q_text *error_type,
               lb_q_text *error_message, int *has_error) {
    metadata->length = error_type->length = error_message->length = 0;
    metadata->failed = error_type->failed = error_message->failed = 0;
    *has_error = 0;
    uint32_t offset = tail_offset;
    lb_arg a;
    int wrote_metadata = 0;
    while (lb_arg_next(e->args, e->args_length, &offset, &a) == 1) {
        if (a.type == LB_ARG_METADATA && !wrote_metadata) {
            wrote_metadata = put_pairs(metadata, e, &offset, a.value.u, 1) == 0;
            if (!wrote_metadata) break;   /* damaged: shown as no metadata */
        } else if (a.type == LB_ARG_ERROR && a.value.u == 2) {
            lb_arg type, message;
            if (lb_arg_next(e->args, e->args_length, &offset, &type) != 1 ||
                lb_arg_next(e->args, e->args_length, &offset, &message) != 1)
                break;
            put_text(error_type, type.bytes, type.bytes ? type.length : 0, 0);
            put_text(error_message, message.bytes, message.bytes ? message.length : 0, 0);
            *has_error = 1;
        } else {
            break;
        }
    }
    if (!wrote_metadata || metadata->failed) {
        metadata->length = 0;
        metadata->failed = 0;
        put(metadata, "{}", 2);
    }
    reserve(error_type, 0);
    reserve(error_message, 0);
    if (error_type->bytes) error_type->bytes[error_type->length] = '\0';
    if (error_message->bytes) error_message->bytes[error_message->length] = '\0';
}

/* ---- json_extract(metadata, '$.key') without parsing the whole object ---- */

static const char *json_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* Past a string starting at its opening quote; *escaped says whether it holds a backslash. */
static const char *json_string_end(const char *p, const char *end, int *escaped) {
    *escaped = 0;
    for (p++; p < end; p++) {
        if (*p == '\\') {
            *escaped = 1;
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* Past one value (any JSON value, nested ones whole). */
static const char *json_value_end(const char *p, const char *end) {
    if (p >= end) return NULL;
    int escaped;
    if (*p == '"') return json_string_end(p, end, &escaped);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < end; p++) {
            if (*p == '"') {
                p = json_string_end(p, end, &escaped);
                if (!p) return NULL;
                p--;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') p++;
    return p;
}

int lb_q_json_member(const char *json, size_t length, const char *key, size_t key_length, lb_q_json_value *out) {
    const char *p = json, *end = json + length;
    p = json_space(p, end);
    if (p >= end || *p != '{') return -1;
    p = json_space(p + 1, end);
    if (p < end && *p == '}') return 0;
    while (p < end) {
        if (*p != '"') return -1;
        int escaped;
        const char *key_end = json_string_end(p, end, &escaped);
        if (!key_end || escaped) return -1;
        int match = (size_t)(key_end - p - 2) == key_length && memcmp(p + 1, key, key_length) == 0;
        p = json_space(key_end, end);
        if (p >= end || *p != ':') return -1;
        p = json_space(p + 1, end);
        const char *value_end = json_value_end(p, end);
        if (!value_end) return -1;
        if (match) {
            size_t n = (size_t)(value_end - p);
            if (*p == '"') {
                if (!json_string_end(p, end, &escaped) || escaped) return -1;
                *out = (lb_q_json_value){.type = SQLITE_TEXT, .text = p + 1, .length = n - 2};
            } else if (n == 4 && memcmp(p, "true", 4) == 0) {
                *out = (lb_q_json_value){.type = SQLITE_INTEGER, .integer = 1};
            } else if (n == 5 && memcmp(p, "false", 5) == 0) {
                *out = (lb_q_json_value){.type = SQLITE_INTEGER, .integer = 0};
            } else if (n == 4 && memcmp(p, "null", 4) == 0) {
                *out = (lb_q_json_value){.type = SQLITE_NULL};
            } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
                char number[64];
                if (n >= sizeof number) return -1;
                memcpy(number, p, n);
                number[n] = '\0';
                char *stop;
                if (!strpbrk(number, ".eE")) {
                    errno = 0;
                    long long value = strtoll(number, &stop, 10);
                    if (*stop != '\0') return -1;
                    if (errno != ERANGE) {
                        *out = (lb_q_json_value){.type = SQLITE_INTEGER, .integer = value};
                        return 1;
                    }
                }
                double value = strtod(number, &stop);
                if (*stop != '\0') return -1;
                *out = (lb_q_json_value){.type = SQLITE_FLOAT, .real = value};
            } else {
                return -1;   /* an object or array: SQLite's json_extract says it (as JSON) */
            }
            return 1;
        }
        p = json_space(value_end, end);
        if (p < end && *p == '}') return 0;
        if (p >= end || *p != ',') return -1;
        p = json_space(p + 1, end);
    }
    return -1;
}

void lb_q_result_text(sqlite3_context *ctx, const char *text, size_t length, lb_q_text *scratch) {
    if (!text) return sqlite3_result_null(ctx);
    if (lb_q_is_utf8((const uint8_t *)text, length)) return sqlite3_result_text(ctx, text, (int)length, SQLITE_TRANSIENT);
    lb_q_text_utf8(scratch, (const uint8_t *)text, length);
    if (scratch->failed) return sqlite3_result_error_nomem(ctx);
    sqlite3_result_text(ctx, scratch->bytes, (int)scratch->length, SQLITE_TRANSIENT);
}
