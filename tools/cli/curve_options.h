/* The publisher's CURVE and limit options of `kinreg run` (and demo):
 * --curve-secret, --curve-allow and --max-subscribers, a table of their own
 * (options.h) that the pipeline's includes; they fill a kr_publisher_config.
 * Key files are read as the options are parsed, so a bad one stops the
 * command before anything starts. */
#ifndef KINREG_TOOLS_CLI_CURVE_OPTIONS_H
#define KINREG_TOOLS_CLI_CURVE_OPTIONS_H

#include "options.h"

extern const kr_option_table kr_curve_option_table;

#endif
