/*
 * logbook_files.h — how every Logbook module writes files: only in a directory this user owns and
 * nobody else can write to, only relative to that directory's descriptor, never through a
 * symlink, never blocking on a FIFO, new files created exclusively, replacements atomic. The core
 * (bundles, the archiver, the reader) and the modules above it (the uploader's spool, the message
 * cache) use these, so that one set of rules holds for every file. See "Safe by default" in
 * docs/ARCHITECTURE.md. Every function returns a descriptor or 0, or -errno; on failure the ones
 * given a path leave a sentence in lb_error_detail() (logbook.h).
 */
#ifndef LOGBOOK_FILES_H
#define LOGBOOK_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Checks an open directory to write in: a directory this user owns that no other user (nor a
 * group other than this user's own) can write to. 0, or -ENOTDIR / -EPERM with a detail naming
 * `role` ("bundle directory") and `path`. */
int lb_dir_check_private(int dir_fd, const char *role, const char *path);

/* Opens directory `path` to write in (O_DIRECTORY | O_CLOEXEC), creating its last component 0700
 * when `create` and it is missing, then lb_dir_check_private. The path is resolved one component
 * at a time: a symlink anywhere on it is followed only when this user or root owns it (-ELOOP
 * otherwise). The descriptor, or -errno with a detail. */
int lb_dir_open_private(const char *path, const char *role, int create);

/* lb_dir_open_private with the mode of the directories it creates (0700 or 0750; set exactly,
 * whatever the umask) and, with `create_parents`, every missing component of the path created so,
 * not only the last. */
int lb_dir_open_private_mode(const char *path, const char *role, int create, int create_parents,
                             mode_t mode);

/* Sets the mode of an open file or directory this user owns to `mode` exactly (fchmod), unless it
 * has it already. 0 or -errno. */
int lb_fd_set_mode(int fd, mode_t mode);

/* Opens `name` in `dir_fd` with `flags` (O_RDONLY, O_RDWR, optionally O_CREAT) plus O_CLOEXEC,
 * O_NOFOLLOW and O_NONBLOCK (a FIFO never blocks the open; the flag is cleared again unless the
 * caller asked for it): the descriptor, -ENOENT, -ELOOP for a symlink, -EINVAL for anything but a
 * regular file. With `dir_path`, a failure other than -ENOENT sets a detail naming the file. */
int lb_file_open_at(int dir_fd, const char *name, int flags, const char *dir_path);

/* Checks that an open file has exactly one name (st_nlink 1) before it is written or its mode set:
 * a hard link planted as a bundle file would otherwise change a file elsewhere. 0, or -EMLINK
 * (or -errno of fstat) with a detail naming `dir_path`/`name`. */
int lb_file_check_single_link(int fd, const char *dir_path, const char *name);

/* lb_file_open_at for a file Logbook writes or gives a mode (a bundle's lock, ring, meta, mirror,
 * durable), then lb_file_check_single_link: -EMLINK when another name reaches it. `dir_path` is
 * required. */
int lb_file_open_own_at(int dir_fd, const char *name, int flags, const char *dir_path);

/* Creates `name` in `dir_fd` afresh: removes whatever has the name (a symlink itself, never its
 * target), then O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600. The descriptor, or -errno with a detail. */
int lb_file_create_at(int dir_fd, const char *name, const char *dir_path);

/* Replaces `name` in `dir_fd` with `length` bytes, atomically and durably: writes "name.new"
 * (lb_file_create_at), fsyncs it, renames it over `name` and fsyncs the directory. After a crash
 * at any moment `name` holds either its old bytes or the new ones (a leftover "name.new" is
 * removed by the next replacement). 0, or -errno with a detail. */
int lb_file_replace_at(int dir_fd, const char *name, const void *bytes, size_t length,
                       const char *dir_path);

/* Takes the exclusive OFD lock of an open file (F_OFD_SETLK on the whole file): per open file
 * description, so a second opener in the same process conflicts too, and it dies with its holder.
 * 0, -EWOULDBLOCK when another holds it, or -errno. Closing the descriptor releases it. */
int lb_file_lock_exclusive(int fd);

/* Sets the extended attribute `name` (e.g. "user.logbook.delivered") of an open file: 0, or
 * -errno (-ENOTSUP where the file system has no such attributes). */
int lb_file_attribute_set(int fd, const char *name, const void *value, size_t length);

/* Reads the extended attribute `name` of an open file into `value`: its length, or -errno
 * (-ENODATA when it has none, -ERANGE when longer than `capacity`). */
ssize_t lb_file_attribute_get(int fd, const char *name, void *value, size_t capacity);

/* Archive file names (logbook_format.h), one rule for the archiver, the reader and the uploader. */
#define LB_ARCHIVE_NAME_MAX 40u

typedef enum lb_archive_name_kind {
    LB_ARCHIVE_NAME_NONE = 0,      /* not an archive file */
    LB_ARCHIVE_NAME_COMPLETE = 1,  /* archive-NNNNNNNNNN.lba */
    LB_ARCHIVE_NAME_WRITING = 2,   /* archive-NNNNNNNNNN.lba.writing */
    LB_ARCHIVE_NAME_UNSYNCED = 3,  /* archive-NNNNNNNNNN.lba.unsynced: complete, fsync failed */
    LB_ARCHIVE_NAME_COMPRESSED = 4,  /* archive-NNNNNNNNNN.lba.zst: complete, compressed */
    LB_ARCHIVE_NAME_COMPRESSING = 5, /* archive-NNNNNNNNNN.lba.zst.writing: never read; deleted
                                        by the next archiver */
} lb_archive_name_kind;

/* What `name` says of a file, and its number. */
lb_archive_name_kind lb_archive_name_parse(const char *name, uint64_t *number);
void lb_archive_name_format(char out[LB_ARCHIVE_NAME_MAX], uint64_t number, lb_archive_name_kind kind);

/* Leaves a sentence (printf format) for lb_error_detail() (logbook.h) on this thread: what a
 * failed open found wrong, in words. For the modules above the core (the cache). */
void lb_error_detail_set(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Forgets this thread's detail (an open call does so first). */
void lb_error_detail_clear(void);

/* CRC-32C (Castagnoli) of `length` bytes, continuing from `crc` (0 to start): the checksum of
 * every Logbook format. */
uint32_t lb_crc32c(uint32_t crc, const void *data, size_t length);

#ifdef __cplusplus
}
#endif

#endif
