/* Loops in C over the C API, so that "C API called from C" is measured without Swift around it. */
#ifndef BENCH_SUPPORT_H
#define BENCH_SUPPORT_H
#include <stdint.h>
#include "logbook.h"

/* Logs `count` records "request {} took {} ms ok={}" (int64, double, bool) through LB_INFO. */
void bench_c_log(lb_logger *logger, uint64_t count);

/* The same with the logger switched off: the cost of a disabled call. */
void bench_c_log_disabled(lb_logger *logger, uint64_t count);

/* Two threads each logging `count_per_thread` records; returns elapsed nanoseconds. */
uint64_t bench_c_log_two_threads(lb_logger *logger, uint64_t count_per_thread);
#endif
