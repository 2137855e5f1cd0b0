/* Command-line options shared by `kinreg record` and `kinreg convert`: they
 * fill a source config and a recorder config (DESIGN.md §7.4). A table of
 * options.h; it includes the synthetic source's (pipeline_options.h). */
#ifndef KINREG_TOOLS_CLI_RECORD_OPTIONS_H
#define KINREG_TOOLS_CLI_RECORD_OPTIONS_H

#include <stdbool.h>

#include "kinreg/recorder.h"
#include "kinreg/source.h"
#include "options.h"

typedef struct {
    kr_source_config source;     /* uri left for the command to set */
    kr_recorder_config recorder; /* format, overwrite */
    bool format_given;           /* -f was on the command line */
    bool quiet;
} kr_record_options;

/* The defaults: source and recorder as their config_default functions say. */
void kr_record_options_default(kr_record_options *o);

/* "options:" to "formats:", with -h; messages name the command. */
extern const kr_option_table kr_record_option_table;

#endif
