/* Command-line options shared by `kinreg record` and `kinreg convert`: they
 * fill a source config and a recorder config (DESIGN.md §7.4). */
#ifndef KINREG_TOOLS_RECORD_OPTIONS_H
#define KINREG_TOOLS_RECORD_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "kinreg/recorder.h"
#include "kinreg/source.h"

typedef struct {
    kr_source_config source;     /* uri left for the command to set */
    kr_recorder_config recorder; /* format, overwrite */
    bool format_given;           /* -f was on the command line */
    bool quiet;
} kr_record_options;

/* Parses argv; `who` prefixes messages ("kinreg record"). Returns -1 when the
 * command should go on (optind then indexes the first operand), else the exit
 * code to return at once (0 after --help, 2 on a usage error). */
int kr_record_parse_options(int argc, char **argv, const char *who, void (*help)(FILE *out),
                            kr_record_options *o);

/* Help text for the shared options. */
void kr_record_options_help(FILE *out);

#endif
