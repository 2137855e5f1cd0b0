/* A file the program writes itself (`kinreg bench --json FILE`), whole or not
 * at all: the library's kr_output (core/files.h) for the program, which may
 * use only the public API. The content goes to FILE.tmp-XXXXXX beside the
 * target, every write is checked, and only a complete file is renamed into
 * place, so a full disk, a file-size limit or a crash never leaves a
 * truncated file and never harms the file that was there before. Targets
 * that are not regular files (/dev/null, /dev/stdout, a named pipe) are
 * written in place. */
#ifndef KINREG_TOOLS_CLI_OUTPUT_FILE_H
#define KINREG_TOOLS_CLI_OUTPUT_FILE_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
    FILE *f;          /* write here */
    char *path;       /* the target */
    char *tmp;        /* the temporary beside it, NULL when writing in place */
    const char *what; /* for messages: "the JSON report" */
} kr_output_file;

/* Opens `path` for writing `what`. False after printing
 * `WHO: cannot write WHAT to PATH: CAUSE`. */
bool kr_output_file_open(kr_output_file *o, const char *who, const char *what, const char *path);

/* Flushes, closes and renames into place. False after printing one line
 * naming the path and the cause (the temporary is removed, an existing file
 * is left as it was). */
bool kr_output_file_commit(kr_output_file *o, const char *who);

/* Gives the file up: the temporary is removed, the target untouched. */
void kr_output_file_abort(kr_output_file *o);

#endif
