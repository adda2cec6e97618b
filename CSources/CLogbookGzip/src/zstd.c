/* zstd frames over libzstd (logbook_gzip.h). */
#include "logbook_gzip.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <zstd.h>

int lb_zstd(const void *bytes, size_t length, int level, uint8_t **out, size_t *out_length) {
    if ((!bytes && length) || !out || !out_length || level < 1 || level > 19) return -EINVAL;
    size_t capacity = ZSTD_compressBound(length);
    if (ZSTD_isError(capacity)) return -EMSGSIZE;
    uint8_t *buffer = malloc(capacity ? capacity : 1);
    if (!buffer) return -ENOMEM;
    ZSTD_CCtx *context = ZSTD_createCCtx();
    if (!context) {
        free(buffer);
        return -ENOMEM;
    }
    /* The frame says its size and carries a checksum: a receiver can check what it decompressed. */
    ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
    size_t written = ZSTD_compress2(context, buffer, capacity, bytes ? bytes : "", length);
    ZSTD_freeCCtx(context);
    if (ZSTD_isError(written)) {
        free(buffer);
        return -EINVAL;
    }
    *out = buffer;
    *out_length = written;
    return 0;
}
