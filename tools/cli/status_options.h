/* -q/--quiet, --progress SEC and -v/--log-level of the commands that run a
 * pipeline with the status line (run, demo): a table of options.h. */
#ifndef KINREG_TOOLS_CLI_STATUS_OPTIONS_H
#define KINREG_TOOLS_CLI_STATUS_OPTIONS_H

#include <stdbool.h>

#include "options.h"
#include "status_line.h"

typedef struct {
    bool quiet;        /* no status line */
    double progress_s; /* seconds between progress lines when stderr is not a terminal, 0 = none */
    int log_level;     /* kr_log_level of the library's messages; -1 = info, or warning with -q */
} kr_status_options;

#define KR_STATUS_OPTIONS_DEFAULT                                                                  \
    {                                                                                              \
        false, KR_PROGRESS_INTERVAL_S, -1                                                          \
    }

/* Sets the library's log level from the options (kr_log_set). */
void kr_status_options_apply(const kr_status_options *o);

extern const kr_option_table kr_status_option_table;

#endif
