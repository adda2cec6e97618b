/* files.c — the files Logbook writes and reads (logbook_files.h): checked private directories,
 * opens relative to them that never follow a symlink nor block on a FIFO, exclusive creation,
 * atomic replacement, OFD locks, extended attributes, and full pread/pwrite. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- I/O ---- */
char *lb_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* ---- files Logbook writes: only in a directory this user owns and nobody else can write to, and
 * only relative to that directory's descriptor, never through a symlink, never blocking on a FIFO,
 * new files created exclusively. Once the directory is checked, nobody but this user (and root)
 * can plant anything in it. ---- */
static const char *file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

int lb_dir_check_private(int dir_fd, const char *role, const char *path) {
    struct stat st;
    if (fstat(dir_fd, &st) != 0) {
        int err = errno;
        lb_error_detail_set("%s '%s': %s", role, path, strerror(err));
        return -err;
    }
    if (!S_ISDIR(st.st_mode)) {
        lb_error_detail_set("%s '%s' is %s, not a directory", role, path, file_type_name(st.st_mode));
        return -ENOTDIR;
    }
    uid_t me = geteuid();
    if (st.st_uid != me) {
        lb_error_detail_set("%s '%s' is owned by uid %u, not by this user (uid %u): refusing to write "
                            "into a directory another user controls", role, path,
                            (unsigned)st.st_uid, (unsigned)me);
        return -EPERM;
    }
    /* Group-writable is accepted only for this user's own group (user private groups). */
    if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid())) {
        lb_error_detail_set("%s '%s' is writable by %s (mode %04o): another user could plant files in "
                            "it; chmod go-w it or choose another directory", role, path,
                            (st.st_mode & S_IWOTH) ? "every user" : "its group",
                            (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

/* Path resolution for the directories Logbook writes in, one component at a time (openat with
 * O_NOFOLLOW), so that a symlink anywhere on the way is followed only when this user or root made
 * it: one planted by someone else in /tmp or any directory others can write to must not redirect
 * where Logbook writes, however the path is spelled ("dir/link", "dir/link/", "dir/link/.",
 * "dir/link/sub/.."). */
typedef struct path_walk {
    const char *role;       /* "bundle directory" */
    const char *path;       /* as the caller gave it, for messages */
    int symlinks;           /* followed so far (at most 40, as the kernel) */
    int create_parents;     /* create every missing component, not only the last */
    mode_t mode;            /* of the directories created */
} path_walk;

static int walk_fail(path_walk *w, int at, int err, const char *what, const char *prefix, int length) {
    if (at >= 0) close(at);
    /* The component that failed ends the path as given: name the path once. */
    if (prefix == w->path && strspn(w->path + length, "/.") == strlen(w->path + length)) {
        if (what) lb_error_detail_set("%s '%s' %s", w->role, w->path, what);
        else if (err == ENOTDIR) lb_error_detail_set("%s '%s' is not a directory", w->role, w->path);
        else lb_error_detail_set("%s '%s': %s", w->role, w->path, strerror(err));
        return -err;
    }
    if (what)
        lb_error_detail_set("%s '%s': '%.*s' %s", w->role, w->path, length, prefix, what);
    else if (err == ENOTDIR)
        lb_error_detail_set("%s '%s': '%.*s' is not a directory", w->role, w->path, length, prefix);
    else
        lb_error_detail_set("%s '%s': '%.*s': %s", w->role, w->path, length, prefix, strerror(err));
    return -err;
}

/* Opens directory `rest` relative to `at` (consumed), creating its last component (mode
 * w->mode) when `create` and it is missing, and every missing component with w->create_parents.
 * `display` is the text `rest` lies in, for messages. */
static int walk_from(path_walk *w, int at, const char *display, const char *rest, int create) {
    char component[NAME_MAX + 1];
    for (;;) {
        while (*rest == '/') rest++;
        if (!*rest) return at;
        const char *end = strchr(rest, '/');
        if (!end) end = rest + strlen(rest);
        size_t length = (size_t)(end - rest);
        int prefix = (int)(end - display);
        if (length > NAME_MAX) return walk_fail(w, at, ENAMETOOLONG, NULL, display, prefix);
        memcpy(component, rest, length);
        component[length] = 0;
        rest = end;
        const char *after = rest;
        while (*after == '/') after++;
        int last = !*after;
        if (strcmp(component, ".") == 0) continue;
        int fd;
        do fd = openat(at, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0 && errno == ENOENT && create && (last || w->create_parents)) {
            if (mkdirat(at, component, w->mode) != 0 && errno != EEXIST)
                return walk_fail(w, at, errno, NULL, display, prefix);
            fd = openat(at, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            /* Made by this user: its mode exactly, whatever the umask took away. */
            if (fd >= 0 && lb_fd_set_mode(fd, w->mode) != 0) {
                int err = errno;
                close(fd);
                return walk_fail(w, at, err, NULL, display, prefix);
            }
        }
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            int err = errno;
            struct stat st;
            if (fstatat(at, component, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode))
                return walk_fail(w, at, err, NULL, display, prefix);
            if (st.st_uid != geteuid() && st.st_uid != 0)
                return walk_fail(w, at, ELOOP,
                                 "is a symbolic link that neither this user nor root owns: not followed",
                                 display, prefix);
            if (++w->symlinks > 40) return walk_fail(w, at, ELOOP, NULL, display, prefix);
            char target[PATH_MAX];
            ssize_t n = readlinkat(at, component, target, sizeof target - 1);
            if (n < 0) return walk_fail(w, at, errno, NULL, display, prefix);
            target[n] = 0;
            int start = target[0] == '/' ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                         : fcntl(at, F_DUPFD_CLOEXEC, 0);
            if (start < 0) return walk_fail(w, at, errno, NULL, display, prefix);
            fd = walk_from(w, start, target, target, 0);  /* a dangling link is not created */
            if (fd < 0) {
                close(at);
                return fd;
            }
        } else if (fd < 0) {
            return walk_fail(w, at, errno, NULL, display, prefix);
        }
        close(at);
        at = fd;
    }
}

int lb_fd_set_mode(int fd, mode_t mode) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    if ((st.st_mode & 07777) == mode) return 0;
    return fchmod(fd, mode) == 0 ? 0 : -errno;
}

int lb_dir_open_private(const char *path, const char *role, int create) {
    return lb_dir_open_private_mode(path, role, create, 0, 0700);
}

int lb_dir_open_private_mode(const char *path, const char *role, int create, int create_parents,
                             mode_t mode) {
    path_walk w = {role, path, 0, create_parents, mode};
    if (!*path) {
        lb_error_detail_set("%s: the path is empty", role);
        return -ENOENT;
    }
    int start = open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (start < 0) {
        int err = errno;
        lb_error_detail_set("%s '%s': %s", role, path, strerror(err));
        return -err;
    }
    int fd = walk_from(&w, start, path, path, create);
    if (fd < 0) return fd;
    int rc = lb_dir_check_private(fd, role, path);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int lb_file_open_at(int dir_fd, const char *name, int flags, const char *dir_path) {
    int fd;
    do fd = openat(dir_fd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        if (err == EISDIR || err == ENXIO) {
            /* A directory opened for writing, or a socket: not a regular file either. */
            if (dir_path)
                lb_error_detail_set("'%s/%s' is %s, not a regular file", dir_path, name,
                                    err == EISDIR ? "a directory" : "a socket or device without a reader");
            return -EINVAL;
        }
        if (dir_path && err == ELOOP)
            lb_error_detail_set("'%s/%s' is a symbolic link: not followed", dir_path, name);
        else if (dir_path && err != ENOENT)
            lb_error_detail_set("'%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (dir_path)
            lb_error_detail_set("'%s/%s' is %s, not a regular file", dir_path, name,
                                file_type_name(st.st_mode));
        close(fd);
        return -EINVAL;
    }
    if (flags & O_NONBLOCK) return fd;
    /* O_NONBLOCK means nothing for a regular file, but it stays off the caller's descriptor. */
    int status = fcntl(fd, F_GETFL);
    if (status >= 0) fcntl(fd, F_SETFL, status & ~O_NONBLOCK);
    return fd;
}

int lb_file_check_single_link(int fd, const char *dir_path, const char *name) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        lb_error_detail_set("'%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    if (st.st_nlink <= 1) return 0;  /* 0: removed since it was opened; nothing else reaches it */
    lb_error_detail_set("'%s/%s' has %llu hard links: a file another name reaches is never written "
                        "or given the bundle's mode; remove the other links (or this name)",
                        dir_path, name, (unsigned long long)st.st_nlink);
    return -EMLINK;
}

int lb_file_open_own_at(int dir_fd, const char *name, int flags, const char *dir_path) {
    int fd = lb_file_open_at(dir_fd, name, flags, dir_path);
    if (fd < 0) return fd;
    int rc = lb_file_check_single_link(fd, dir_path, name);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int lb_file_lock_exclusive(int fd) {
    struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &region) == 0) return 0;
    return (errno == EAGAIN || errno == EACCES) ? -EWOULDBLOCK : -errno;
}

int lb_file_attribute_set(int fd, const char *name, const void *value, size_t length) {
    return fsetxattr(fd, name, value, length, 0) == 0 ? 0 : -errno;
}

ssize_t lb_file_attribute_get(int fd, const char *name, void *value, size_t capacity) {
    ssize_t n = fgetxattr(fd, name, value, capacity);
    return n >= 0 ? n : -errno;
}

int lb_file_replace_at(int dir_fd, const char *name, const void *bytes, size_t length,
                       const char *dir_path) {
    char temporary[NAME_MAX + 1];
    if (snprintf(temporary, sizeof temporary, "%s.new", name) >= (int)sizeof temporary) {
        lb_error_detail_set("'%s/%s': the name is too long", dir_path, name);
        return -ENAMETOOLONG;
    }
    int fd = lb_file_create_at(dir_fd, temporary, dir_path);
    if (fd < 0) return fd;
    int rc = lb_pwrite_full(fd, bytes, length, 0);
    if (!rc && fsync(fd) != 0) rc = -errno;
    close(fd);
    if (!rc && renameat(dir_fd, temporary, dir_fd, name) != 0) rc = -errno;
    if (rc) {
        lb_error_detail_set("cannot replace '%s/%s': %s", dir_path, name, strerror(-rc));
        unlinkat(dir_fd, temporary, 0);
        return rc;
    }
    if (fsync(dir_fd) != 0) {
        rc = -errno;
        lb_error_detail_set("cannot sync the directory of '%s/%s': %s", dir_path, name, strerror(-rc));
    }
    return rc;
}

int lb_file_create_at(int dir_fd, const char *name, const char *dir_path) {
    /* A leftover of a crash (or anything else under this name) goes first; unlinkat removes a
     * symlink itself, never its target. */
    if (unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT && errno != EISDIR) {
        int err = errno;
        lb_error_detail_set("cannot remove '%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    int fd;
    do fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        lb_error_detail_set("cannot create '%s/%s': %s", dir_path, name, strerror(err));
        return -err;
    }
    return fd;
}

ssize_t lb_pread_full(int fd, void *buffer, size_t length, uint64_t offset) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = pread(fd, (uint8_t *)buffer + done, length - done, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int lb_pwrite_full(int fd, const void *buffer, size_t length, uint64_t offset) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = pwrite(fd, (const uint8_t *)buffer + done, length - done, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        done += (size_t)n;
    }
    return 0;
}

int lb_file_range_is_zero(int fd, uint64_t from, uint64_t to) {
    uint8_t block[4096];
    while (from < to) {
        size_t want = to - from < sizeof block ? (size_t)(to - from) : sizeof block;
        ssize_t n = lb_pread_full(fd, block, want, from);
        if (n <= 0) return n == 0;  /* the file ended: nothing more to look at */
        for (ssize_t i = 0; i < n; i++)
            if (block[i]) return 0;
        from += (uint64_t)n;
    }
    return 1;
}
