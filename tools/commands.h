/* The kinreg program's subcommands. Each parses its options with its option
 * table (tools/cli/options.h), prints --help, and returns the process exit
 * status (tools/cli/exit_codes.h). */
#ifndef KINREG_TOOLS_COMMANDS_H
#define KINREG_TOOLS_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "kinreg/pipeline.h"
#include "tools/cli/exit_codes.h"
#include "tools/cli/status_options.h"

/* Shared by run and demo (tools/cmd_run.c). */
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
int kr_cmd_mesh(int argc, char **argv);

#endif
