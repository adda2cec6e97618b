/* gzip members over zlib (logbook_gzip.h). */
#include "logbook_gzip.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

int lb_gzip(const void *bytes, size_t length, int level, uint8_t **out, size_t *out_length) {
    if ((!bytes && length) || !out || !out_length || level < 1 || level > 9) return -EINVAL;
    if (length > UINT32_MAX / 2) return -EMSGSIZE; /* zlib counts in 32 bits */
    z_stream z = {0};
    /* windowBits 15 + 16: a gzip header and trailer instead of zlib's */
    if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -ENOMEM;
    size_t capacity = deflateBound(&z, (uLong)length) + 32;
    uint8_t *buffer = malloc(capacity);
    if (!buffer) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)bytes;
    z.avail_in = (uInt)length;
    z.next_out = buffer;
    z.avail_out = (uInt)capacity;
    int rc = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buffer);
        return -EINVAL;
    }
    *out = buffer;
    *out_length = capacity - z.avail_out;
    return 0;
}
