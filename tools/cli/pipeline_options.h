/* Command-line options shared by `kinreg run`, `demo` and `bench`: they only
 * fill a kr_pipeline_config (DESIGN.md §7.4). Tables of options.h. */
#ifndef KINREG_TOOLS_CLI_PIPELINE_OPTIONS_H
#define KINREG_TOOLS_CLI_PIPELINE_OPTIONS_H

#include "kinreg/pipeline.h"
#include "options.h"

/* The pipeline's help variants: with the output options (run, demo), or
 * without them for bench, which takes but does not use them. */
#define KR_PIPELINE_HELP_OUTPUTS KR_HELP_DEFAULT
#define KR_PIPELINE_HELP_NO_OUTPUTS 2u

/* Source, outputs and compute: fills a kr_pipeline_config. Includes
 * kr_curve_option_table (curve_options.h) and kr_synthetic_option_table. */
extern const kr_option_table kr_pipeline_option_table;
/* The synthetic source's length and losses (--duration, --jumps,
 * --jump-angle, --jump-distance, --covered, --covered-frames): fills a
 * kr_source_config; no help lines of its own (each command words them). */
extern const kr_option_table kr_synthetic_option_table;

/* --intrinsics NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3] into a source config (run,
 * record, convert and register alike). Returns 1, or -1 on a bad value (line
 * printed). */
int kr_intrinsics_option(kr_source_config *src, const char *arg);

#endif
