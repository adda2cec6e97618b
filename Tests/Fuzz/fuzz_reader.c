/* fuzz_reader: libFuzzer target for the decoder. The input is split into a meta file and a ring
 * file (first byte pair = meta length / 16), written into a scratch bundle, and read completely:
 * scan, every entry, every argument, site and logger look-ups, verify, ring info. A first byte
 * pair of 0xFF 0xFF makes the rest one archive file instead, read on its own. Any crash, hang,
 * leak or sanitizer report is a bug. Run with scripts/fuzz; Tests/Fuzz/replay.c replays the
 * committed corpus (Tests/Fuzz/corpus) in the normal test run. */
#define _GNU_SOURCE
#include "logbook.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void write_file(const char *name, const uint8_t *bytes, size_t length) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    while (length) {
        ssize_t n = write(fd, bytes, length);
        if (n <= 0) abort();
        bytes += n;
        length -= (size_t)n;
    }
    close(fd);
}

/* The streaming pass: every argument touched inside the visitor (its bytes are valid only there),
 * the filter's callback asked, and a stop after some entries (chosen by the input). */
typedef struct stream_probe {
    lb_reader *reader;
    size_t visited, stop_after;
} stream_probe;

static int accept_site(void *context, const struct lb_site_info *site, const char *logger) {
    (void)context;
    return (site ? (int)strlen(site->template_text) : 0) + (logger ? (int)strlen(logger) : 1) > 0;
}

static int visit_entry(void *context, const lb_entry *e) {
    stream_probe *probe = context;
    uint32_t off = 0;
    lb_arg arg;
    while (lb_arg_next(e->args, e->args_length, &off, &arg) == 1) {
        if (arg.bytes && arg.length) {
            volatile uint8_t sink = arg.bytes[arg.length - 1];
            (void)sink;
        }
    }
    (void)lb_reader_site(probe->reader, e->session, e->site_id);
    return ++probe->visited == probe->stop_after;
}

static void stream_once(const char *path, uint8_t knob) {
    lb_reader *r;
    if (lb_reader_open(path, &r) != 0) return;
    lb_read_filter filter = {0};
    if (knob & 1) filter.min_level = LB_LEVEL_INFO;
    if (knob & 2) filter.accept = accept_site;
    if (knob & 4) filter.until_ns = INT64_MAX;
    stream_probe probe = {r, 0, (size_t)(knob >> 3)};
    for (int pass = 0; pass < 2; pass++)
        if (lb_reader_stream(r, (knob & 7) ? &filter : NULL, visit_entry, &probe) < 0) break;
    lb_verify_summary summary;
    (void)lb_reader_verify(r, &summary);
    (void)lb_reader_window_peak(r);
    lb_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        const char *scratch = getenv("LOGBOOK_FUZZ_DIR");  /* set by scripts/fuzz */
        if (scratch) snprintf(dir, sizeof dir, "%s", scratch);
        else snprintf(dir, sizeof dir, "/tmp/logbook-fuzz-%d", (int)getpid());
        mkdir(dir, 0700);
    }
    if (size < 2) return 0;
    int archive = data[0] == 0xFF && data[1] == 0xFF;
    size_t meta_length = ((size_t)data[0] | (size_t)data[1] << 8) * 16;
    data += 2;
    size -= 2;
    char path[512];
    if (archive) {
        write_file("archive-0000000001.lba", data, size);
        snprintf(path, sizeof path, "%s/archive-0000000001.lba", dir);
    } else {
        if (meta_length > size) meta_length = size;
        write_file("meta", data, meta_length);
        write_file("ring", data + meta_length, size - meta_length);
        snprintf(path, sizeof path, "%s", dir);
    }

    stream_once(path, size ? data[size - 1] : 0);
    lb_reader *r;
    if (lb_reader_open(path, &r) != 0) return 0;
    for (int pass = 0; pass < 2; pass++) {
        if (lb_reader_scan(r) < 0) break;
        for (size_t i = 0; i < lb_reader_entry_count(r); i++) {
            lb_entry e;
            lb_reader_entry(r, i, &e);
            const lb_site_info *site = lb_reader_site(r, e.session, e.site_id);
            if (site && strlen(site->template_text) > (1u << 20)) abort();
            (void)lb_reader_logger_name(r, e.session, e.logger_id);
            uint32_t off = 0;
            lb_arg arg;
            while (lb_arg_next(e.args, e.args_length, &off, &arg) == 1) {
                if (arg.bytes && arg.length) {
                    volatile uint8_t sink = arg.bytes[arg.length - 1];
                    (void)sink;
                }
            }
        }
    }
    lb_verify_summary summary;
    (void)lb_reader_verify(r, &summary);
    (void)lb_reader_overwritten(r);
    for (size_t i = 0; i < lb_reader_issue_count(r); i++) {
        lb_issue issue;
        lb_reader_issue(r, i, &issue);
        if (strlen(issue.reason) + strlen(issue.file) > (1u << 16)) abort();
    }
    lb_ring_info info;
    (void)lb_reader_ring_info(r, &info);
    lb_archive_info archive_info;
    (void)lb_reader_archive_info(r, &archive_info);
    lb_reader_close(r);
    return 0;
}
