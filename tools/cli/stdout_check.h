/* The program's standard output, checked (issue 30, item 1).
 *
 * Every command prints its results with printf to stdout. A write that
 * fails there (a full disk, a file-size limit, /dev/full, an I/O error) used
 * to be lost: the command still said what it had done and exited 0. Now:
 *
 *   - main() calls kr_stdout_init() first: SIGXFSZ is ignored, so a file-size
 *     limit (ulimit -f) makes write() fail with EFBIG instead of killing the
 *     program, and stdout becomes a stream whose writes go to descriptor 1
 *     through a function that keeps the first failure's errno (stdio's own
 *     error flag says only that something failed, not what);
 *   - streaming commands (kinreg sub) call kr_stdout_flush() after each line
 *     and stop at the first failure;
 *   - main() ends with kr_stdout_close(), which flushes and closes stdout and
 *     turns any failure into one line naming the output and the cause and
 *     exit status 4 (KR_EXIT_OUTPUT).
 *
 * When standard output is a regular file, a failure cuts it back to where
 * the last complete flush had left it: `kinreg sub > poses.txt` keeps whole
 * lines only (kinreg eval still reads it), and a one-shot report (eval,
 * refine --json) is in the file whole or not at all.
 *
 * The message names what standard output was: the file it was redirected to
 * (`kinreg eval: cannot write to standard output (/mnt/full/ate.txt): No space
 * left on device`), "a pipe" or the terminal. A reader that goes away (EPIPE)
 * still ends the program by SIGPIPE, quietly, as Unix tools do. */
#ifndef KINREG_TOOLS_CLI_STDOUT_CHECK_H
#define KINREG_TOOLS_CLI_STDOUT_CHECK_H

#include <stdbool.h>

/* Call once, first thing in main (before any output). */
void kr_stdout_init(void);

/* Flushes stdout; true when everything written so far reached descriptor 1.
 * On the first failure prints `WHO: cannot write to standard output (WHAT):
 * CAUSE` once and returns false (and false from then on). */
bool kr_stdout_flush(const char *who);

/* At exit: flushes and closes stdout. Returns `code` when everything was
 * written, else says why (once) and returns `code` if it already reports a
 * failure, KR_EXIT_OUTPUT (4) if it was 0. */
int kr_stdout_close(const char *who, int code);

#endif
