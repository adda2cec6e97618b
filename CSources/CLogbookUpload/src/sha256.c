/* SHA-256 as FIPS 180-4 section 6.2 specifies it, with the x86 SHA extensions where the CPU has
 * them; both paths are checked against its vectors and sha256sum
 * (Tests/LogbookUploadTests/SHA256Tests.swift, which switches with lb_sha256_use_portable). */
#include "logbook_sha256.h"
#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotate_right(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void compress_portable(uint32_t state[8], const uint8_t *block) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotate_right(w[i - 15], 7) ^ rotate_right(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotate_right(w[i - 2], 17) ^ rotate_right(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
        uint32_t choice = (e & f) ^ (~e & g);
        uint32_t t1 = h + s1 + choice + round_constants[i] + w[i];
        uint32_t s0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
        uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + majority;
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* The SHA extensions (Intel since Goldmont and Ice Lake, AMD since Zen): sha256rnds2 does two
 * rounds, sha256msg1/msg2 the message schedule, four words per vector. The state is kept as the
 * instructions want it, ABEF and CDGH. Vector g holds words 4g..4g+3; from g = 4 on,
 * W[t] = σ1(W[t−2]) + W[t−7] + σ0(W[t−15]) + W[t−16] is msg2(msg1(X[g−4], X[g−3]) + the words
 * t−7.. (alignr of X[g−1] and X[g−2]), X[g−1]). */
__attribute__((target("sha,sse4.1,ssse3")))
static void compress_blocks_sha_extensions(uint32_t state[8], const uint8_t *data, size_t blocks) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; blocks > 0; blocks--, data += 64) {
        __m128i abef_before = abef, cdgh_before = cdgh;
        __m128i x[16];
        for (int g = 0; g < 16; g++) {
            if (g < 4) {
                x[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), byte_swap);
            } else {
                __m128i partial = _mm_add_epi32(_mm_sha256msg1_epu32(x[g - 4], x[g - 3]),
                                                _mm_alignr_epi8(x[g - 1], x[g - 2], 4));
                x[g] = _mm_sha256msg2_epu32(partial, x[g - 1]);
            }
            __m128i words = _mm_add_epi32(x[g], _mm_loadu_si128((const __m128i *)&round_constants[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, words);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(words, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_before);
        cdgh = _mm_add_epi32(cdgh, cdgh_before);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int has_sha_extensions(void) {
    static int known = -1;  /* a benign race: every thread computes the same answer */
    if (known < 0) {
        unsigned a, b, c, d;
        int sse = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_1) && (c & bit_SSSE3);
        int sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
        known = sse && sha;
    }
    return known;
}
#endif

static _Atomic int portable_only;

void lb_sha256_use_portable(int portable) { portable_only = portable != 0; }

int lb_sha256_accelerated(void) {
#if defined(__x86_64__)
    return !portable_only && has_sha_extensions();
#else
    return 0;
#endif
}

static void compress_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
#if defined(__x86_64__)
    if (!portable_only && has_sha_extensions()) {
        compress_blocks_sha_extensions(state, data, blocks);
        return;
    }
#endif
    for (; blocks > 0; blocks--, data += 64) compress_portable(state, data);
}

void lb_sha256_init(lb_sha256 *hash) {
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(hash->state, initial, sizeof initial);
    hash->length = 0;
    hash->pending_count = 0;
}

void lb_sha256_update(lb_sha256 *hash, const void *bytes, size_t length) {
    const uint8_t *input = bytes;
    hash->length += length;
    if (hash->pending_count > 0) {
        size_t take = 64 - hash->pending_count;
        if (take > length) take = length;
        memcpy(hash->pending + hash->pending_count, input, take);
        hash->pending_count += (uint32_t)take;
        input += take;
        length -= take;
        if (hash->pending_count < 64) return;
        compress_blocks(hash->state, hash->pending, 1);
        hash->pending_count = 0;
    }
    size_t blocks = length / 64;
    compress_blocks(hash->state, input, blocks);
    input += 64 * blocks;
    length -= 64 * blocks;
    if (length > 0) memcpy(hash->pending, input, length);
    hash->pending_count = (uint32_t)length;
}

void lb_sha256_final(lb_sha256 *hash, uint8_t digest[32]) {
    uint64_t bits = hash->length * 8;
    uint8_t tail[128] = {0};
    size_t count = hash->pending_count;
    memcpy(tail, hash->pending, count);
    tail[count] = 0x80;
    size_t total = count + 1 + 8 <= 64 ? 64 : 128;
    for (int i = 0; i < 8; i++) tail[total - 1 - i] = (uint8_t)(bits >> (8 * i));
    compress_blocks(hash->state, tail, total / 64);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(hash->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(hash->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(hash->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)hash->state[i];
    }
}
