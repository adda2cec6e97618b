/* replay.c — runs the fuzz target (fuzz_reader.c) over files, without libFuzzer: the committed
 * corpus (Tests/Fuzz/corpus: minimised inputs, crashes found once included) is replayed by every
 * test run, under AddressSanitizer and UndefinedBehaviorSanitizer (CProgramTests). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(data);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    return 0;
}

int main(int argc, char **argv) {
    int replayed = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            if (replay_file(argv[i]) == 0) replayed++;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (replay_file(path) == 0) replayed++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", replayed);
    return replayed > 0 ? 0 : 1;
}
