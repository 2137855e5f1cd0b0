/* The kinreg program's subcommands. Each parses its options with its option
 * table (tools/cli/options.h), prints --help, and returns the process exit code:
 * 0 success, 1 runtime failure, 2 usage error, 3 sensor stalled, 4 an output
 * file could not be written (see KR_EXIT_* below). */
#ifndef KINREG_TOOLS_CLI_H
#define KINREG_TOOLS_CLI_H

#include <stdio.h>

enum {
    KR_EXIT_OK = 0,
    KR_EXIT_FAILURE = 1,
    KR_EXIT_USAGE = 2,
    KR_EXIT_STALLED = 3, /* live sensor stopped delivering frames */
    KR_EXIT_OUTPUT = 4   /* an output file (trajectory, model) could not be written */
};

/* Shared by run and demo (tools/cmd_run.c). */
#include <stdbool.h>
#include "kinreg/pipeline.h"
#include "tools/cli/status_options.h"
int kr_exit_code(kr_status s);
/* Runs the pipeline with the status line `status` asks for (-q, --progress). */
kr_status kr_run_pipeline(kr_pipeline_config *cfg, const char *who, const kr_status_options *status,
                          kr_pipeline **out, kr_pipeline_stats *stats);

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
