/* Command-line options shared by `kinreg run`, `demo` and `bench`: they only
 * fill a kr_pipeline_config (DESIGN.md §7.4). */
#ifndef KINREG_TOOLS_PIPELINE_OPTIONS_H
#define KINREG_TOOLS_PIPELINE_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "curve_options.h"
#include "kinreg/pipeline.h"

/* Long options understood by kr_pipeline_option(); each command appends its own. */
#define KR_PIPELINE_LONG_OPTIONS                                                                   \
    {"source", required_argument, 0, 's'}, {"backend", required_argument, 0, 'b'},                 \
        {"publish", required_argument, 0, 'p'}, {"trajectory", required_argument, 0, 't'},         \
        {"save-model", required_argument, 0, 'm'}, {"rate", required_argument, 0, 'r'},            \
        {"intrinsics", required_argument, 0, 1001}, {"depth-scale", required_argument, 0, 1002},   \
        {"skip-bad", no_argument, 0, 1003}, {"frames", required_argument, 0, 'n'},                 \
        {"max-frames", required_argument, 0, 'n'}, {"deterministic", no_argument, 0, 1023},        \
        {"finest-level", required_argument, 0, 1004}, {"voxel", required_argument, 0, 1005},       \
        {"seed", required_argument, 0, 1006}, {"duration", required_argument, 0, 1007},            \
        {"threads", required_argument, 0, 1008}, {"exact-nn", no_argument, 0, 1009},               \
        {"active-window", required_argument, 0, 1010},                                             \
        {"rebuild-every", required_argument, 0, 1011}, {"gate", required_argument, 0, 1012},       \
        {"iterations", required_argument, 0, 1013}, {"depth-mode", required_argument, 0, 1020},    \
        {"stall-timeout", required_argument, 0, 1021},                                             \
        {"wait-subscriber", required_argument, 0, 1022},                                           \
        {"depth-step", required_argument, 0, 1014}, {"every", required_argument, 0, 1030},         \
        {"stride", required_argument, 0, 1030}, {"jumps", required_argument, 0, 1031},             \
        {"jump-angle", required_argument, 0, 1032}, {"jump-distance", required_argument, 0, 1033}, \
        {"covered", required_argument, 0, 1034}, {"covered-frames", required_argument, 0, 1035},   \
        {"recover", required_argument, 0, 1036}, {"recover-after", required_argument, 0, 1037},    \
        {"recover-radius", required_argument, 0, 1038},                                            \
        {"model-period", required_argument, 0, 1040},                                              \
        {"model-points", required_argument, 0, 1041}, {"refine", required_argument, 0, 1050},      \
        {"refine-window", required_argument, 0, 1051},                                             \
        {"refine-every", required_argument, 0, 1052},                                              \
        {"refine-refuse", required_argument, 0, 1054},                                             \
        {"trajectory-refined", required_argument, 0, 1053},                                        \
        {"trajectory-final", required_argument, 0, 1055},                                          \
        {"fill-frames", required_argument, 0, 1056}, {"fill", required_argument, 0, 1057},         \
        {"model-memory", required_argument, 0, 1060}, KR_CURVE_LONG_OPTIONS

#define KR_PIPELINE_SHORT_OPTIONS "s:b:p:t:m:r:n:"

/* A command's own options beside the shared ones. */
typedef struct {
    const struct option *longopts; /* terminated by {0, 0, 0, 0}; may be NULL */
    const char *shortopts;         /* getopt letters, e.g. "o:q" */
    /* Applies one of them; returns 0, or -1 on a bad value (message printed). */
    int (*apply)(int opt, const char *arg, void *user);
    void *user;
    void (*help)(FILE *out);
} kr_command_options;

/* Parses argv for run, demo and bench: shared options fill cfg, the
 * command's own go to own->apply, -h/--help prints own->help. Returns -1 when
 * the command should go on (optind then indexes the first operand), else the
 * exit code to return at once. */
int kr_parse_command(int argc, char **argv, kr_pipeline_config *cfg, const kr_command_options *own);

/* Help text for the shared options. */
void kr_pipeline_options_help(FILE *out);
/* The same; without the output options (-r -t -m -p --wait-subscriber) when
 * `outputs` is false, for bench, which does not use them. */
void kr_pipeline_options_help_for(FILE *out, bool outputs);

/* Applies option `opt` with argument `arg`. Returns 1 when handled, 0 when the
 * option is not a pipeline option, -1 on a bad value (message printed). */
int kr_pipeline_option(kr_pipeline_config *cfg, int opt, const char *arg);

/* --intrinsics NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3] into a source config (run,
 * record and convert alike). Returns 1, or -1 on a bad value (line printed). */
int kr_intrinsics_option(kr_source_config *src, const char *arg);

#endif
