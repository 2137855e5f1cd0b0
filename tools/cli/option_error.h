/* One line for an option getopt refused, instead of the whole help text. */
#ifndef KINREG_TOOLS_CLI_OPTION_ERROR_H
#define KINREG_TOOLS_CLI_OPTION_ERROR_H

#include <stdio.h>

/* Call with opterr = 0 and an optstring that starts with ':' after
 * getopt_long returned '?' or ':' (`opt`). Prints, e.g.,
 *   kinreg run: unknown option '--vox' (see 'kinreg run --help')
 *   kinreg run: option '--voxel' needs a value (see 'kinreg run --help')
 * `command` is the subcommand's name ("run"). Returns KR_EXIT_USAGE. */
int kr_option_error(const char *command, int argc, char **argv, int opt);

#endif
