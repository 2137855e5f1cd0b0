/* Shared by the libFuzzer harnesses: most kinreg parsers read a path (or a
 * directory holding a fixed file name), so each input is written to a file
 * in a private directory first. The directory lives as long as the process;
 * logging is silenced so that warnings about odd input do not flood the
 * fuzzer's output. */
#ifndef KINREG_TESTS_FUZZ_INPUT_H
#define KINREG_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinreg/source.h"
#include "kinreg/status.h"

static void fuzz_quiet_log(kr_log_level level, const char *message, void *user)
{
    (void)level, (void)message, (void)user;
}

static char fuzz_dir_path[256];

static void fuzz_remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}

/* The private directory, created on first use. */
static const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/kinreg-fuzz-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir_path)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_remove_dir);
    kr_log_set(KR_LOG_ERROR, fuzz_quiet_log, NULL);
    return fuzz_dir_path;
}

/* Writes the input as fuzz_dir()/name and returns its path (static buffer). */
static const char *fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror("fuzz: writing the input");
        abort();
    }
    return path;
}

/* Opens fuzz_dir() as a `SCHEME:DIR` source, as `kinreg run` would, and reads
 * its first frame (whose file is usually missing: an error, not a crash). */
static inline void fuzz_open_source(const char *scheme, const char *intrinsics)
{
    char uri[600];
    snprintf(uri, sizeof uri, "%s:%s", scheme, fuzz_dir());
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.intrinsics = intrinsics;
    kr_source *src = NULL;
    if (kr_source_create(&src, &cfg) == KR_OK) {
        kr_frame frame;
        if (kr_source_read(src, &frame) == KR_OK) kr_frame_release(&frame);
        kr_source_destroy(&src);
    }
}

#endif
