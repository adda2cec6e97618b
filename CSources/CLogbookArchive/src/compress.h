/* compress.h — archive files compressed with zstd (compress.c); private to the archiver. */
#ifndef LOGBOOK_COMPRESS_H
#define LOGBOOK_COMPRESS_H

#include <stdint.h>

typedef struct lb_compressor lb_compressor;

typedef struct lb_compress_result {
    uint64_t compressed_bytes, uncompressed_bytes, frames;
} lb_compress_result;

/* Whether `level` is 0 (no compression) or a zstd level this libzstd has. */
int lb_compressor_level_valid(int level);
lb_compressor *lb_compressor_create(int level);
void lb_compressor_free(lb_compressor *compressor);

/* Compresses complete file `number` of the directory (archive-N.lba) into archive-N.lba.zst.writing,
 * fsynced, every data frame checked against the original. The caller renames it and deletes the
 * .lba. 0, or -errno with *why (the .zst.writing is removed again); -EPROTO for a damaged file,
 * which stays uncompressed. */
int lb_compressor_run(lb_compressor *compressor, int dir_fd, uint64_t number,
                      lb_compress_result *out, const char **why);

#endif
