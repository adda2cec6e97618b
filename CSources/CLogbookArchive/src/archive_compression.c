/* archive_compression.c — the compression thread: complete files compressed oldest first,
 * committed by rename, announced through on_roll once, by their final name. */
#define _GNU_SOURCE
#include "archiver_internal.h"

/* A file left uncompressed: said on stderr (once per streak of failures; a damaged file always),
 * counted in compression_failures. Archiving goes on: the .lba is whole, and announced. */
static int compress_failed(archiver *a, const char *name, const char *why, int rc) {
    int say = rc == -EPROTO || !a->compress_error_reported;
    a->compress_error_reported = 1;
    if (say)
        fprintf(stderr, "logbook: archiver: %s/%s stays uncompressed: %s%s%s (the next open tries "
                        "again)\n", a->dir, name, why ? why : "", why ? ": " : "", strerror(-rc));
    return rc;
}

/* Puts the compressed copy of file `number` in place (files_lock held, so that retention cannot
 * delete the file meanwhile): renamed, the directory fsynced, and only then the .lba deleted, so
 * that a crash at any moment leaves one complete file. 0 when the file is compressed now. */
static int commit_compressed(archiver *a, uint64_t number) {
    char plain[LB_ARCHIVE_NAME_MAX], partial[LB_ARCHIVE_NAME_MAX], final[LB_ARCHIVE_NAME_MAX];
    lb_archive_name_format(plain, number, LB_ARCHIVE_NAME_COMPLETE);
    lb_archive_name_format(partial, number, LB_ARCHIVE_NAME_COMPRESSING);
    lb_archive_name_format(final, number, LB_ARCHIVE_NAME_COMPRESSED);
    if (renameat(a->dir_fd, partial, a->dir_fd, final) != 0) {
        int rc = -errno;
        unlinkat(a->dir_fd, partial, 0);
        return compress_failed(a, plain, "cannot rename the compressed copy", rc);
    }
    if (fsync_dir(a) != 0) {
        /* The rename may not last: the .lba stays too (the next open keeps one of the two). */
        compress_failed(a, final, "fsync of the directory failed", -errno);
        return 0;
    }
    /* Not fsynced again: should the delete not last, the next open finds both and deletes the
     * .lba then. */
    unlinkat(a->dir_fd, plain, 0);
    a->compress_error_reported = 0;
    return 0;
}

/* The compression thread runs at idle priority (SCHED_IDLE): only on a core nothing else wants, so
 * that it never preempts a logging thread (measured: with a normal priority the logging thread of
 * a 2-core machine was switched out 8x as often, and paid +21% per record against +14% for the
 * archiver alone). A compressor starved this way only delays compression: retention still holds
 * the quota (it announces and deletes files not compressed yet). Whoever waits for it (a roll, a
 * close) lends it a normal priority meanwhile. */
void lb_ar_compression_priority(archiver *a, int urgent) {
    struct sched_param param = {0};
    pthread_setschedparam(a->compress_thread, urgent ? SCHED_OTHER : SCHED_IDLE, &param);
}

void *lb_ar_compress_main(void *arg) {
    archiver *a = arg;
    pthread_mutex_lock(&a->files_lock);
    for (;;) {
        complete_file *f = NULL;
        for (size_t i = 0; i < a->file_count && !f; i++)
            if (a->files[i].pending) f = &a->files[i];
        if (!f) {
            if (a->compress_stop) break;
            pthread_cond_wait(&a->compress_wake, &a->files_lock);
            continue;
        }
        f->pending = 0;
        f->compressing = 1;
        uint64_t number = f->number;
        pthread_mutex_unlock(&a->files_lock);

        char plain[LB_ARCHIVE_NAME_MAX], partial[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(plain, number, LB_ARCHIVE_NAME_COMPLETE);
        lb_archive_name_format(partial, number, LB_ARCHIVE_NAME_COMPRESSING);
        lb_compress_result result;
        const char *why = NULL;
        int rc = lb_compressor_run(a->compressor, a->dir_fd, number, &result, &why);

        pthread_mutex_lock(&a->files_lock);
        f = lb_ar_find_file(a, number);  /* the list may have moved */
        if (!f || f->retired) {
            /* Retention needed the room first: it announced the .lba and deleted it (perhaps
             * before the compressor could open it). */
            if (!rc) unlinkat(a->dir_fd, partial, 0);
            if (f) f->compressing = 0;
            pthread_cond_broadcast(&a->compress_done);
            continue;
        }
        if (rc) compress_failed(a, plain, why, rc);
        if (!rc) rc = commit_compressed(a, number);
        f->compressing = 0;
        if (!rc) {
            f->compressed = 1;
            f->uncompressed_bytes = f->bytes;
            f->bytes = result.compressed_bytes;
        }
        f->announcing = 1;
        complete_file announced = *f;
        lb_ar_publish_directory_stats_compressed(a);
        pthread_mutex_unlock(&a->files_lock);

        pthread_mutex_lock(&a->lock);
        if (!rc) {
            a->stats.files_compressed++;
            a->stats.bytes_before_compression += result.uncompressed_bytes;
            a->stats.bytes_after_compression += result.compressed_bytes;
        } else {
            a->stats.compression_failures++;
        }
        pthread_mutex_unlock(&a->lock);
        /* Announced by its final name: compressed, or (compression failed) the .lba. */
        char name[LB_ARCHIVE_NAME_MAX];
        lb_archive_name_format(name, number, lb_ar_file_kind(&announced));
        lb_ar_announce(a, &announced, name);

        pthread_mutex_lock(&a->files_lock);
        f = lb_ar_find_file(a, number);
        f->announcing = 0;
        f->announced = 1;
        pthread_cond_broadcast(&a->compress_done);
        /* Retention runs on the archiver thread (it owns the file being written). */
        atomic_store(&a->retention_due, 1);
        wake(a);
    }
    pthread_mutex_unlock(&a->files_lock);
    return NULL;
}

/* Lets the compression thread finish what is pending, and joins it. */
void lb_ar_stop_compression(archiver *a) {
    lb_ar_compression_priority(a, 1);
    pthread_mutex_lock(&a->files_lock);
    a->compress_stop = 1;
    pthread_cond_signal(&a->compress_wake);
    pthread_mutex_unlock(&a->files_lock);
    pthread_join(a->compress_thread, NULL);
    a->compress_started = 0;
}

/* Waits until the files complete now (the one a roll just completed and those before it) are
 * announced: lb_archive_roll returns after its file's on_roll. Files completed later (a writer
 * logging on) are not waited for: that wait could last as long as the writer does. */
void lb_ar_wait_compressed(archiver *a) {
    if (!a->compress_started) return;
    pthread_mutex_lock(&a->files_lock);
    uint64_t newest = a->file_count ? a->files[a->file_count - 1].number : 0;
    if (!a->waiting_for_compression++) lb_ar_compression_priority(a, 1);
    for (;;) {
        int waiting = 0;
        for (size_t i = 0; i < a->file_count && !waiting && a->files[i].number <= newest; i++)
            waiting = !a->files[i].announced;
        if (!waiting) break;
        pthread_cond_wait(&a->compress_done, &a->files_lock);
    }
    if (!--a->waiting_for_compression) lb_ar_compression_priority(a, 0);
    pthread_mutex_unlock(&a->files_lock);
}
