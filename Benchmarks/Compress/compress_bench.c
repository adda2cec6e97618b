/* compress_bench.c — compression of archive files per zstd level, for Benchmarks/compress.sh.
 * Takes an archive directory (plain .lba or compressed .lba.zst files: those are decompressed
 * first, through the reader's archive source), then for each level runs the archiver's own
 * compression job (lb_compressor_run: plan, compress in ~1 MiB frames, decompress and compare every
 * frame, write, fsync) on every file, ROUNDS times, and prints one Markdown row per level: the
 * ratio, the job's rate in MB/s of uncompressed input (median of rounds), and zstd's decompression
 * rate of the frames. Usage: compress_bench ARCHIVE_DIR ROUNDS LEVEL... */
#define _GNU_SOURCE
#include "../../CSources/CLogbook/src/internal.h"
#include "../../CSources/CLogbookArchive/src/compress.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int rounds = atoi(argv[2]);
    char work[] = "/var/tmp/logbook-compress-bench.XXXXXX";
    if (!mkdtemp(work)) return 1;
    int work_fd = open(work, O_RDONLY | O_DIRECTORY);
    /* The plain files, numbered 1..n in the work directory. */
    DIR *d = opendir(argv[1]);
    if (!d) return 1;
    struct dirent *e;
    uint64_t files = 0, plain_bytes = 0;
    while ((e = readdir(d))) {
        uint64_t number;
        lb_archive_name_kind kind = lb_archive_name_parse(e->d_name, &number);
        if (kind != LB_ARCHIVE_NAME_COMPLETE && kind != LB_ARCHIVE_NAME_COMPRESSED) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        int fd = open(path, O_RDONLY);
        struct stat st;
        fstat(fd, &st);
        lb_archive_source src;
        if (lb_archive_source_open(&src, fd, (uint64_t)st.st_size, NULL, NULL, NULL) != 0) return 1;
        uint8_t *bytes = malloc(src.size);
        if (lb_archive_source_read(&src, bytes, src.size, 0) != (ssize_t)src.size) return 1;
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, ++files, LB_ARCHIVE_NAME_COMPLETE);
        int out = openat(work_fd, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (lb_pwrite_full(out, bytes, src.size, 0) != 0) return 1;
        close(out);
        plain_bytes += src.size;
        free(bytes);
        lb_archive_source_close(&src);
        close(fd);
    }
    closedir(d);
    printf("| level | ratio | compression job (MB/s) | decompression (MB/s) |\n|---:|---:|---:|---:|\n");
    for (int arg = 3; arg < argc; arg++) {
        int level = atoi(argv[arg]);
        lb_compressor *c = lb_compressor_create(level);
        double *rates = calloc((size_t)rounds, sizeof *rates), *drates = calloc((size_t)rounds, sizeof *drates);
        uint64_t packed = 0;
        for (int round = 0; round < rounds; round++) {
            packed = 0;
            double spent = 0, dspent = 0;
            for (uint64_t n = 1; n <= files; n++) {
                lb_compress_result result;
                const char *why;
                double start = now_s();
                if (lb_compressor_run(c, work_fd, n, &result, &why) != 0) {
                    fprintf(stderr, "file %llu: %s\n", (unsigned long long)n, why);
                    return 1;
                }
                spent += now_s() - start;
                packed += result.compressed_bytes;
                /* Decompression of the frames, as a reader does it (no I/O: from memory). */
                char name[LB_ARCHIVE_NAME_MAX];
                lb_archive_name_format(name, n, LB_ARCHIVE_NAME_COMPRESSING);
                int fd = openat(work_fd, name, O_RDONLY);
                struct stat st;
                fstat(fd, &st);
                lb_archive_source src;
                lb_archive_source_open(&src, fd, (uint64_t)st.st_size, NULL, NULL, NULL);
                /* In chunk-sized reads into one buffer, as the reader reads chunks. */
                enum { PIECE = 64 << 10 };
                uint8_t *back = malloc(PIECE);
                start = now_s();
                for (uint64_t at = 0; at < src.size; at += PIECE) {
                    size_t want = src.size - at < PIECE ? (size_t)(src.size - at) : PIECE;
                    if (lb_archive_source_read(&src, back, want, at) != (ssize_t)want) return 1;
                }
                dspent += now_s() - start;
                free(back);
                lb_archive_source_close(&src);
                close(fd);
                unlinkat(work_fd, name, 0);
            }
            rates[round] = plain_bytes / spent / 1e6;
            drates[round] = plain_bytes / dspent / 1e6;
        }
        qsort(rates, (size_t)rounds, sizeof *rates, compare_double);
        qsort(drates, (size_t)rounds, sizeof *drates, compare_double);
        printf("| %d | %.2f | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) |\n", level, (double)plain_bytes / packed,
               rates[rounds / 2], rates[0], rates[rounds - 1], drates[rounds / 2], drates[0], drates[rounds - 1]);
        fflush(stdout);
        free(rates);
        free(drates);
        lb_compressor_free(c);
    }
    fprintf(stderr, "%llu files, %.1f MB uncompressed\n", (unsigned long long)files, plain_bytes / 1e6);
    char command[200];
    snprintf(command, sizeof command, "rm -rf '%s'", work);
    return system(command) == 0 ? 0 : 1;
}
