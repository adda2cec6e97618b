/*
 * SHA-256 (FIPS 180-4) for the uploader: the default identifier of a spooled item is the hash of
 * its content, so the same file submitted twice, or again after a relaunch, is one item with one
 * Idempotency-Key. In C because hashing a file is the uploader's one hot loop, and an unoptimised
 * (debug) Swift build runs it at a few MB/s; the package has no crypto dependency.
 *
 *     lb_sha256 hash;
 *     lb_sha256_init(&hash);
 *     lb_sha256_update(&hash, bytes, length);    // any number of times
 *     uint8_t digest[32];
 *     lb_sha256_final(&hash, digest);
 */
#ifndef LOGBOOK_SHA256_H
#define LOGBOOK_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lb_sha256 {
    uint32_t state[8];
    uint64_t length;       /* bytes hashed so far */
    uint8_t pending[64];   /* the start of a block not complete yet */
    uint32_t pending_count;
} lb_sha256;

void lb_sha256_init(lb_sha256 *hash);
void lb_sha256_update(lb_sha256 *hash, const void *bytes, size_t length);
/* Writes the 32-byte digest; the hash must be initialised again before another use. */
void lb_sha256_final(lb_sha256 *hash, uint8_t digest[32]);

/* Whether the x86 SHA extensions do the rounds (1), or portable C (0). */
int lb_sha256_accelerated(void);

/* For tests: 1 makes every hash use the portable rounds, 0 goes back to the fastest. */
void lb_sha256_use_portable(int portable);

#ifdef __cplusplus
}
#endif

#endif
