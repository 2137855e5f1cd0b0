/* The kinreg program's exit statuses: 0 success, 1 runtime failure, 2 usage
 * error, 3 sensor stalled, 4 an output file could not be written. */
#ifndef KINREG_TOOLS_CLI_EXIT_CODES_H
#define KINREG_TOOLS_CLI_EXIT_CODES_H

#include "kinreg/status.h"

enum {
    KR_EXIT_OK = 0,
    KR_EXIT_FAILURE = 1,
    KR_EXIT_USAGE = 2,
    KR_EXIT_STALLED = 3, /* live sensor stopped delivering frames */
    KR_EXIT_OUTPUT = 4   /* an output file (trajectory, model) could not be written */
};

/* The exit status of a run that ended with `s`: a stop (Ctrl-C) is success. */
int kr_exit_code(kr_status s);

#endif
