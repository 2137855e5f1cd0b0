/* The kinreg program's subcommands. Each parses its own options (getopt_long),
 * prints --help, and returns the process exit code:
 * 0 success, 1 runtime failure, 2 usage error (see KR_EXIT_* below). */
#ifndef KINREG_TOOLS_CLI_H
#define KINREG_TOOLS_CLI_H

#include <stdio.h>

enum {
    KR_EXIT_OK = 0,
    KR_EXIT_FAILURE = 1,
    KR_EXIT_USAGE = 2,
    KR_EXIT_STALLED = 3 /* live sensor stopped delivering frames */
};

/* Shared by run and demo (tools/cmd_run.c). */
#include <stdbool.h>
#include "kinreg/pipeline.h"
int kr_exit_code(kr_status s);
kr_status kr_run_pipeline(kr_pipeline_config *cfg, const char *who, bool quiet, kr_pipeline **out,
                          kr_pipeline_stats *stats);
/* Seconds between progress lines when stderr is not a terminal (--progress),
 * 0 for none. */
extern double kr_progress_interval_s;
/* Parses --progress SEC; returns 0, or -1 after printing one line. */
int kr_progress_option(const char *arg);

int kr_cmd_run(int argc, char **argv);
int kr_cmd_demo(int argc, char **argv);
int kr_cmd_sub(int argc, char **argv);
int kr_cmd_view(int argc, char **argv);
int kr_cmd_eval(int argc, char **argv);
int kr_cmd_bench(int argc, char **argv);
int kr_cmd_record(int argc, char **argv);
int kr_cmd_convert(int argc, char **argv);
int kr_cmd_devices(int argc, char **argv);
int kr_cmd_register(int argc, char **argv);
int kr_cmd_refine(int argc, char **argv);
int kr_cmd_keygen(int argc, char **argv);

#endif
