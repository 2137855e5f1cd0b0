/* Files in and out.
 *
 * In: opening an input file without hanging on it. fopen() of a named pipe
 * waits for a writer (forever, if nobody writes; no signal can end the wait
 * in a thread that has SIGINT blocked), and a device or directory holds no
 * data to read: every file kinreg reads (frames, indexes, scans, scan sets,
 * trajectories, intrinsics) must be a regular file.
 *
 * Out: a file written whole or not at all. The content goes to a temporary
 * file beside the target (same directory, so the rename cannot cross file
 * systems), every write is checked, and only a complete file is renamed into
 * place: a full disk, a file-size limit or a crash never leaves a truncated
 * file, and never harms the file that was there before. Targets that are not
 * regular files (/dev/null, /dev/stdout, a named pipe) are written in place. */
#ifndef KINREG_CORE_FILES_H
#define KINREG_CORE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kinreg/status.h"

/* fopen(path, "rb") for a regular file: opened without blocking, checked with
 * fstat, then read normally. NULL on failure, with `why` (size bytes) saying
 * why: the system's reason, or that the path is a named pipe, device or
 * directory. */
FILE *kr_fopen_regular(const char *path, char *why, size_t size);

/* The same, as a status naming `what` and the path: KR_ERR_IO. */
kr_status kr_open_input(const char *path, const char *what, FILE **out);

typedef struct {
    FILE *f;          /* write here (stdio buffered) */
    char *path;       /* the target */
    char *tmp;        /* the temporary beside it, NULL when writing in place */
    const char *what; /* for messages, e.g. "the model" */
} kr_output;

/* Opens `path` for writing `what` (a noun for messages: "the trajectory").
 * KR_ERR_IO naming the path and cause when the directory does not exist or is
 * not writable. The new file gets the permissions fopen would give it. */
kr_status kr_output_open(kr_output *o, const char *path, const char *what, bool binary);

/* Flushes and closes the file and renames it into place. Any write error
 * since the open (a full disk, EFBIG past a file-size limit, EIO) is
 * KR_ERR_IO naming the path and the cause; the temporary is then removed
 * and an existing file at `path` is left as it was. Frees o's strings. */
kr_status kr_output_commit(kr_output *o);

/* Gives the file up: the temporary is removed, `path` is untouched. */
void kr_output_abort(kr_output *o);

#endif
