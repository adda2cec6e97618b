/*
 * logbook_gzip.h — compressed export bodies (Content-Encoding: gzip, RFC 1952, over the system's
 * zlib; Content-Encoding: zstd, RFC 8878, over libzstd): one whole body in, one malloc'ed body out.
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

/* Compresses `length` bytes into one zstd frame at `level` (1 fastest ... 19 smallest) with its
 * content size and checksum, and returns the malloc'ed result in *out (free() it) and its size in
 * *out_length: 0, or -ENOMEM/-EINVAL. */
int lb_zstd(const void *bytes, size_t length, int level, uint8_t **out, size_t *out_length);

#ifdef __cplusplus
}
#endif

#endif
