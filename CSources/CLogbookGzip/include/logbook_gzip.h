/*
 * logbook_gzip.h — gzip (RFC 1952) for export bodies (Content-Encoding: gzip), over the system's
 * zlib. WORK IN PROGRESS (issue 14; docs/EXPORT-PLAN.md).
 */
#ifndef LOGBOOK_GZIP_H
#define LOGBOOK_GZIP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compresses `length` bytes into a gzip member at `level` (1 fastest ... 9 smallest) and returns
 * the malloc'ed result in *out (free() it) and its size in *out_length: 0, or -ENOMEM/-EINVAL. */
int lb_gzip(const void *bytes, size_t length, int level, uint8_t **out, size_t *out_length);

#ifdef __cplusplus
}
#endif

#endif
