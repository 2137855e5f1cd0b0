/* The publisher's CURVE and limit options of `kinreg run` (and demo): a
 * block of its own beside the shared pipeline options. */
#ifndef KINREG_TOOLS_CURVE_OPTIONS_H
#define KINREG_TOOLS_CURVE_OPTIONS_H

#include <stdio.h>

#include "kinreg/pipeline.h"

#define KR_CURVE_LONG_OPTIONS                                                                      \
    {"curve-secret", required_argument, 0, 1100}, {"curve-allow", required_argument, 0, 1101},     \
    {                                                                                              \
        "max-subscribers", required_argument, 0, 1102                                              \
    }

/* Applies one of them: 1 handled, 0 not one of these, -1 bad value (one
 * line printed). Key files are read here, so a bad one stops the command
 * before anything starts. */
int kr_curve_option(kr_pipeline_config *cfg, int opt, const char *arg);
void kr_curve_options_help(FILE *out);

#endif
