/* crc_test: the CRC-32C of the core (three SSE4.2 streams joined by shift tables where the CPU
 * has SSE4.2) against the table-driven reference and the standard check value, for every
 * alignment and for lengths around each block boundary. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include "../../CSources/CLogbook/src/internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

int main(void) {
    CHECK(lb_crc32c(0, "123456789", 9) == 0xE3069283u);  /* the CRC-32C check value */
    CHECK(lb_crc32c_portable(0, "123456789", 9) == 0xE3069283u);
    enum { SIZE = 3 * 8192 * 2 + 3 * 256 * 3 + 64 };
    uint8_t *buffer = malloc(SIZE + 16);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < SIZE + 16; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buffer[i] = (uint8_t)x;
    }
    size_t lengths[] = {0, 1, 7, 8, 9, 255, 256, 767, 768, 769, 3 * 256 + 8, 24575, 24576, 24577,
                        24576 + 768, 49152 + 5, 65536, SIZE};
    int mismatches = 0;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t align = 0; align < 16; align++)
            for (uint32_t seed = 0; seed < 3; seed++) {
                size_t n = lengths[l] + align > SIZE + 16 ? SIZE + 16 - align : lengths[l];
                uint32_t init = seed * 0x9E3779B9u;
                if (lb_crc32c(init, buffer + align, n) != lb_crc32c_portable(init, buffer + align, n))
                    mismatches++;
            }
    CHECK(mismatches == 0);
    /* Chaining: the CRC of two pieces equals the CRC of the whole. */
    CHECK(lb_crc32c(lb_crc32c(0, buffer, 30000), buffer + 30000, 20000) == lb_crc32c(0, buffer, 50000));
    free(buffer);
    printf("crc: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
