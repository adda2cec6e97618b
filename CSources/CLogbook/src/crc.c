/* crc.c — CRC-32C (Castagnoli) for headers, meta entries, chunks and archived frames, and the
 * page check of records that cross a page: never on the record hot path. */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

/* ---- CRC-32C (Castagnoli): headers, meta entries and archived frames; never on the record hot
 * path. The SSE4.2 crc32 instruction where the CPU has it, a table otherwise. The instruction has
 * a latency of 3 cycles and a throughput of 1: the archiver, which checksums every chunk it
 * persists, runs three independent streams over three adjacent blocks and joins their CRCs with
 * the "shift by n zero bytes" operator (a linear map over GF(2), tabulated once for each block
 * size), which triples the speed on large buffers (Benchmarks/crc.sh). ---- */
#define CRC_POLY 0x82F63B78u   /* reflected Castagnoli polynomial */
#define CRC_LONG 8192u          /* block sizes of the three streams */
#define CRC_SHORT 256u

static uint32_t crc_table[256];
static uint32_t crc_shift_long[4][256], crc_shift_short[4][256];
static int crc_hardware;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* A 32x32 matrix over GF(2) (one column per bit) times a vector. */
static uint32_t gf2_times(const uint32_t *matrix, uint32_t vector) {
    uint32_t sum = 0;
    for (; vector; vector >>= 1, matrix++)
        if (vector & 1) sum ^= *matrix;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(matrix, matrix[n]);
}

/* The operator that appends `length` zero bytes to a CRC register, as four byte tables. */
static void crc_shift_table(uint32_t table[4][256], size_t length) {
    uint32_t odd[32], even[32];
    odd[0] = CRC_POLY;  /* one zero bit */
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    gf2_square(even, odd);  /* two zero bits */
    gf2_square(odd, even);  /* four */
    uint32_t *op = odd;     /* squared once more per halving of `length` (bytes: 8 bits) */
    for (;;) {
        gf2_square(even, odd);  /* 8 zero bits = 1 byte, then 2, 4, ... bytes */
        length >>= 1;
        if (!length) { op = even; break; }
        gf2_square(odd, even);
        length >>= 1;
        if (!length) { op = odd; break; }
    }
    for (uint32_t n = 0; n < 256; n++) {
        table[0][n] = gf2_times(op, n);
        table[1][n] = gf2_times(op, n << 8);
        table[2][n] = gf2_times(op, n << 16);
        table[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF] ^
           table[3][crc >> 24];
}

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_table[i] = c;
    }
    crc_shift_table(crc_shift_long, CRC_LONG);
    crc_shift_table(crc_shift_short, CRC_SHORT);
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
#include <nmmintrin.h>
/* Three streams over blocks A, B, C of `block` bytes: crc(A B C) = shift(shift(crcA) ^ crcB) ^ crcC,
 * where B's and C's registers start at 0 (the CRC is linear in its input). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                              size_t length) {
    uint64_t c0 = crc;
    while (length && ((uintptr_t)p & 7u)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        length--;
    }
    static const size_t blocks[2] = {CRC_LONG, CRC_SHORT};
    for (int size = 0; size < 2; size++) {
        size_t block = blocks[size];
        while (length >= 3 * block) {
            uint64_t c1 = 0, c2 = 0;
            const uint8_t *end = p + block;
            do {
                uint64_t a, b, d;
                memcpy(&a, p, 8);
                memcpy(&b, p + block, 8);
                memcpy(&d, p + 2 * block, 8);
                c0 = _mm_crc32_u64(c0, a);
                c1 = _mm_crc32_u64(c1, b);
                c2 = _mm_crc32_u64(c2, d);
                p += 8;
            } while (p < end);
            uint32_t (*shift)[256] = size == 0 ? crc_shift_long : crc_shift_short;
            c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;
            c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * block;
            length -= 3 * block;
        }
    }
    while (length >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c0 = _mm_crc32_u64(c0, v);
        p += 8;
        length -= 8;
    }
    while (length--) c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return (uint32_t)c0;
}
#endif

/* The table-driven CRC, also the reference the tests compare the fast path with. */
uint32_t lb_crc32c_portable(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    while (length--) crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t lb_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_hardware) return ~crc32c_sse42(~crc, data, length);
#endif
    return lb_crc32c_portable(crc, data, length);
}

uint32_t lb_ring_header_crc(const lb_ring_header *header) {
    return lb_crc32c(0, header, __builtin_offsetof(lb_ring_header, header_crc));
}

uint32_t lb_record_page_check(uint64_t sequence, uint64_t word, const uint8_t *record, uint32_t length) {
    uint64_t head[2] = {sequence, word};
    uint32_t crc = lb_crc32c(0, head, sizeof head);
    return lb_crc32c(crc, record + 8, length - 8);
}

uint32_t lb_chunk_crc(const lb_chunk_header *chunk) {
    uint32_t crc = lb_crc32c(0, &chunk->magic, 4);
    return lb_crc32c(crc, &chunk->sequence,
                     __builtin_offsetof(lb_chunk_header, header_crc) -
                         __builtin_offsetof(lb_chunk_header, sequence));
}
