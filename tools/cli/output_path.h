/* Output paths checked before any work starts, so a long or live run is not
 * lost to a typo in the last file it writes. A path refused here is a usage
 * error, as a bad option value is: the commands exit with status 2. */
#ifndef KINREG_TOOLS_CLI_OUTPUT_PATH_H
#define KINREG_TOOLS_CLI_OUTPUT_PATH_H

#include <stdbool.h>

/* True when `path` can be created or overwritten: it is not a directory, its
 * directory exists and is writable, and an existing file is writable. Else
 * prints one line naming `who`, the option, the path and the reason, e.g.
 *   kinreg run: --save-model /nodir/x.ply cannot be written: no directory /nodir
 * and returns false. Nothing is created. */
bool kr_output_writable(const char *who, const char *option, const char *path);

/* The same for an output directory (a recording): an existing directory must
 * be writable, a missing one must have a writable parent (it is created
 * later). `what` names it in the message ("DIR", "OUTPUT"). */
bool kr_output_dir_writable(const char *who, const char *what, const char *dir);

#endif
