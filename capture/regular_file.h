/* Opening an input file without hanging on it. fopen() of a named pipe waits
 * for a writer (forever, if nobody writes; no signal can end the wait in a
 * thread that has SIGINT blocked), and a device or directory gives no frame:
 * a source's index and frame files must be regular files. */
#ifndef KINREG_CAPTURE_REGULAR_FILE_H
#define KINREG_CAPTURE_REGULAR_FILE_H

#include <stddef.h>
#include <stdio.h>

/* fopen(path, "rb") for a regular file: opened without blocking, checked with
 * fstat, then read normally. NULL on failure, with `why` (size bytes) saying
 * why: the system's reason, or that the path is a named pipe, device or
 * directory. */
FILE *kr_fopen_regular(const char *path, char *why, size_t size);

#endif
