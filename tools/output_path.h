/* Output paths checked before any work starts, so a long or live run is not
 * lost to a typo in the last file it writes. */
#ifndef KINREG_TOOLS_OUTPUT_PATH_H
#define KINREG_TOOLS_OUTPUT_PATH_H

#include <stdbool.h>

/* True when `path` can be created or overwritten: it is not a directory, its
 * directory exists and is writable, and an existing file is writable. Else
 * prints one line naming `who`, the option, the path and the reason, e.g.
 *   kinreg run: --save-model /nodir/x.ply cannot be written: no directory /nodir
 * and returns false. Nothing is created. */
bool kr_output_writable(const char *who, const char *option, const char *path);

#endif
