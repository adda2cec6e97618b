/* Archive files for Benchmarks/upload.sh: a lossless bundle with an archiver that rolls files of
 * FILE_MIB MiB, logging records of about 100 bytes until BYTES of them went to the archive, with
 * compression off (plain .lba files) or at LEVEL (.lba.zst).
 *   make_archives DIR BYTES FILE_MIB LEVEL */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logbook.h"
#include "logbook_archive.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: make_archives DIR BYTES FILE_MIB LEVEL\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench.logbook", argv[1]);
    unsigned long long bytes = strtoull(argv[2], NULL, 10);
    lb_options options;
    lb_options_init(&options);
    options.capacity = 64u << 20;
    options.wrap_policy = LB_WRAP_LOSSLESS;
    options.lossless_wait_ms = 60000;
    lb_archive_options archive;
    lb_archive_options_init(&archive);
    archive.quota = 0;
    archive.max_files = 0;
    archive.max_file_size = strtoull(argv[3], NULL, 10) << 20;
    archive.compression_level = atoi(argv[4]);
    lb_bundle *bundle;
    int rc = lb_bundle_open_archived(path, &options, &archive, &bundle);
    if (rc) {
        fprintf(stderr, "open: %s\n", strerror(-rc));
        return 1;
    }
    lb_logger *log;
    lb_logger_register(bundle, "bench", &log);
    lb_counters counters = { 0 };
    for (long i = 0; counters.bytes < bytes; i++) {
        LB_INFO(log, "request {} from {} took {} ms ok={}", i, "/v1/items/upload", 12.5 + (double)(i % 977), (bool)(i & 1));
        if ((i & 0xffff) == 0) lb_bundle_counters(bundle, &counters);
    }
    lb_bundle_close(bundle);
    return 0;
}
