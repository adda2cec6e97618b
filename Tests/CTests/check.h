/* check.h — the one assertion of the C test programs: CHECK(cond) counts a pass or a failure and
 * names a failure (file, line, condition) on stderr; each program prints "N passed, N failed" at
 * the end, which CProgramTests reads. Included once per program. */
#ifndef LOGBOOK_TEST_CHECK_H
#define LOGBOOK_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (cond) passed++;                                                        \
        else {                                                                     \
            failed++;                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                          \
    } while (0)

#endif
