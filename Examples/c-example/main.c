/* c-example: a C program that logs through logbook.h only.
 *
 *   make -C CSources O=/tmp/logbook-c      (the writer library needs libc only)
 *   cc -O2 -pthread -I CSources/CLogbook/include Examples/c-example/main.c \
 *      /tmp/logbook-c/liblogbook.a -o c-example
 *   ./c-example /tmp/c.logbook && logbook show /tmp/c.logbook
 */
#include "logbook.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static lb_logger *net, *db;

static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (int i = 0; i < 1000; i++) {
        double ms = (double)(i % 97) / 10.0;
        LB_INFO(net, "worker {} request {} took {} ms ok={}", id, i, ms, (_Bool)(i % 7 != 0));
        if (i % 250 == 0) LB_DEBUG(db, "worker {} checkpoint {} path {}", id, i, "/var/lib/x");
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BUNDLE\n", argv[0]);
        return 2;
    }
    lb_options options;
    lb_options_init(&options);
    options.capacity = 4u << 20;
    options.chunk_size = 16u << 10;
    lb_bundle *bundle;
    int rc = lb_bundle_open(argv[1], &options, &bundle);
    if (rc != 0) {
        fprintf(stderr, "lb_bundle_open %s: %s\n", argv[1], strerror(-rc));
        return 1;
    }
    if (lb_logger_register(bundle, "net", &net) != 0 || lb_logger_register(bundle, "db", &db) != 0) {
        fprintf(stderr, "lb_logger_register failed\n");
        return 1;
    }
    LB_NOTICE(net, "c-example starting with {} threads", 2);
    pthread_t threads[2];
    for (long i = 0; i < 2; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    lb_logger_set_min_level(db, LB_LEVEL_OFF);
    LB_DEBUG(db, "never recorded {}", 1);
    LB_WARNING(net, "done: {} records", 2001);

    lb_counters counters;
    lb_bundle_counters(bundle, &counters);
    printf("c-example: %llu records, %llu dropped\n", (unsigned long long)counters.records,
           (unsigned long long)counters.dropped);
    return lb_bundle_close(bundle) == 0 ? 0 : 1;
}
