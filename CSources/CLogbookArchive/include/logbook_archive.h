/*
 * logbook_archive.h — the archiver: every sealed chunk of the ring persisted into rolling archive
 * files by a background thread (io_uring, or pwritev where io_uring is unavailable).
 *
 *     lb_options options; lb_options_init(&options);
 *     options.wrap_policy = LB_WRAP_LOSSLESS;        // never reuse a chunk before it is archived
 *     lb_archive_options archive; lb_archive_options_init(&archive);
 *     archive.on_roll = upload_later;                // a complete file, ready to ship
 *     lb_bundle *bundle;
 *     if (lb_bundle_open_archived("app.logbook", &options, &archive, &bundle) != 0) ...
 *     ...
 *     lb_bundle_close(bundle);                       // archives every chunk, completes the
 *                                                    // file being written (on_roll), stops
 *
 * A chunk is marked archived in the ring only after its write completed; every archived chunk
 * carries a CRC-32C; a file ends with an END frame and is fsynced before it is renamed complete,
 * and the directory is fsynced after every create and rename. Opening a bundle after a crash
 * first archives what the ring holds that was not archived, recognising chunks whose write
 * completed just before the crash (no duplicates), and archives again every chunk marked archived
 * whose copy is missing or damaged (a deleted or damaged archive file never lets the ring reuse
 * the only copy of a chunk).
 * The file format is in logbook_format.h and docs/FORMAT.md.
 */
#ifndef LOGBOOK_ARCHIVE_H
#define LOGBOOK_ARCHIVE_H

#include "logbook.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A complete archive file, as passed to the roll callback. */
typedef struct lb_archive_file {
    const char *path;             /* absolute or as given: directory + name; valid during the call */
    uint64_t number;              /* from the name: files are numbered in the order written */
    uint64_t bytes;
    uint64_t chunks;
    uint64_t first_sequence;      /* lowest and highest chunk sequence it holds (0 when none) */
    uint64_t last_sequence;
    int64_t created_wall_ns;
    uint64_t records;             /* records in its chunks */
    uint64_t uncompressed_bytes;  /* the same as bytes, unless compressed (path ends .lba.zst):
                                     then bytes are on disk, these what it decompresses to */
} lb_archive_file;

/* Called after a file is complete (fsynced and renamed) under its final name: on the archiver
 * thread, or with compression on (the default), on the compression thread once the .lba.zst is in
 * place and the .lba deleted (a file that cannot be compressed is announced as .lba). It must not
 * block for long: the archiver persists nothing while it runs (with compression, nothing is
 * compressed). It may call anything except
 * lb_bundle_close / lb_archive_roll / lb_archive_sync of the same bundle. It also runs on the
 * opening thread, inside lb_bundle_open_archived, when the chunks a crashed run left in the ring
 * fill files before the open returns: the callback then has no bundle handle yet, and must not
 * use one from an earlier open. */
typedef void (*lb_archive_roll_callback)(void *context, const lb_archive_file *file);

typedef struct lb_archive_options {
    const char *directory;        /* NULL: "<bundle>/archive". Another directory is linked from
                                     there (a symlink named "archive") so readers find it */
    uint64_t max_file_size;       /* a file rolls before it would grow past this; default 16 MiB;
                                     at least 64 KiB */
    uint64_t roll_interval_ms;    /* a file rolls when this old (and not empty); default 24 h;
                                     0: never by age */
    uint32_t max_files;           /* complete files kept, oldest deleted first; default 16;
                                     0: no limit. Retention counts and deletes only this
                                     bundle's files: a file whose header names another ring (a
                                     directory shared by mistake) is left alone */
    uint32_t backend;             /* 0: io_uring when available; LB_ARCHIVE_BACKEND_PWRITE forces
                                     the fallback (so does LOGBOOK_ARCHIVE_BACKEND=pwrite) */
    uint64_t quota;               /* bytes on disk of all archive files together (compressed
                                     ones count their compressed bytes), the file being written
                                     included; oldest complete files deleted first; default 256 MiB;
                                     0: no limit. Must be at least max_file_size. A file that must
                                     go before it was compressed is announced (on_roll) as .lba
                                     first */
    lb_archive_roll_callback on_roll;
    void *on_roll_context;
    /* Wall clock for age rolling, in ns since the epoch (NULL: CLOCK_REALTIME). Tests inject one. */
    int64_t (*clock)(void *context);
    void *clock_context;
    /* zstd level complete files are compressed with (archive-N.lba.zst, read like the .lba),
     * by a second thread, off the logging path; default 1 (fastest; higher levels cost far more
     * time for little on Logbook's records, see BENCHMARKS.md); 0: files stay uncompressed.
     * Negative levels are zstd's faster ones. Complete .lba files of this bundle an earlier run
     * left (or that a crash left before their compression) are compressed after the open. */
    int32_t compression_level;
} lb_archive_options;

/* Defaults for binary chunks: 16 MiB files (256 chunks of 64 KiB, about 350,000 typical records;
 * few enough files to list and upload, small enough to upload on a poor link), rolled after 24 h,
 * 16 files within a 256 MiB quota. CocoaLumberjack's text defaults (1 MB, 24 h, 5 files, 20 MB)
 * would hold 16 chunks per file and roll every few seconds under load. */
void lb_archive_options_init(lb_archive_options *options);

/* lb_bundle_open plus an archiver. The archiver recovers the archive directory (cutting an
 * incomplete last frame left by a crash) and archives what the ring holds before this returns,
 * so the records of a crashed run are in the archive before new ones are logged. Returns the
 * errors of lb_bundle_open, -EINVAL for bad archive options (max_file_size under 64 KiB, a quota
 * under max_file_size), or -errno when the archive directory cannot be made or opened (-ENOTDIR:
 * "archive" exists and is no directory; -ENOENT: a dangling "archive" symlink). The archive
 * directory is held to the bundle directory's rules (lb_bundle_open): owned by this user, not
 * writable by others (-EPERM), a symlink on a custom one's path followed only if this user or
 * root owns it (-ELOOP); archive files are created exclusively and opened without following
 * symlinks.
 * lb_error_detail() names the option or the directory that failed, and why. */
int lb_bundle_open_archived(const char *path, const lb_options *options,
                            const lb_archive_options *archive, lb_bundle **out);

/* Rolls the file being written now (when it holds any chunk): seals every thread's chunk, archives
 * everything sealed, completes the file and calls on_roll (with compression: once it and any file
 * before it are compressed, or announced uncompressed by retention; files completed after it, by
 * writers logging on, are not waited for). -ENOTSUP without an archiver, -EBADF
 * after lb_bundle_shutdown. */
int lb_archive_roll(lb_bundle *bundle);

/* Seals every thread's chunk, waits until every sealed chunk is archived and the current file is
 * fsynced (the records logged before the call survive power loss). Returns 0, the archiver's
 * error (e.g. -ENOSPC), -ETIMEDOUT after timeout_ms (0: wait without limit), -EBADF after
 * lb_bundle_shutdown, -ENOTSUP without an archiver. */
int lb_archive_sync(lb_bundle *bundle, uint32_t timeout_ms);

typedef struct lb_archive_stats {
    uint32_t backend;             /* lb_archive_backend */
    int32_t last_error;           /* -errno of the last failure, 0 after a success */
    uint64_t failures;
    uint64_t chunks_archived;     /* by this archiver since open */
    uint64_t bytes_archived;      /* chunk bytes (frames) written since open */
    uint64_t files_rolled;        /* since open */
    uint64_t files_deleted;       /* by count or quota, since open */
    uint64_t files;               /* complete files in the directory now */
    uint64_t directory_bytes;     /* complete files plus the file being written */
    uint64_t lag_chunks;          /* sealed chunks not yet archived */
    uint64_t lag_bytes;
    uint64_t files_compressed;    /* since open */
    uint64_t compression_failures;/* files left uncompressed (damaged, or an error: see last_error) */
    uint64_t compression_pending; /* complete files waiting for compression now */
    uint64_t bytes_before_compression; /* of the files compressed since open */
    uint64_t bytes_after_compression;
} lb_archive_stats;

int lb_archive_stats_get(lb_bundle *bundle, lb_archive_stats *out);

#ifdef __cplusplus
}
#endif
#endif
