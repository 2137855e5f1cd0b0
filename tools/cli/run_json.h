/* The run's summary as one JSON object (`kinreg run --json`, `kinreg demo
 * --json`): the figures of the run summary on stderr, under the names of the
 * one vocabulary (frames LOST, loss events, recovery searches). */
#ifndef KINREG_TOOLS_CLI_RUN_JSON_H
#define KINREG_TOOLS_CLI_RUN_JSON_H

#include <stdio.h>

#include "kinreg/pipeline.h"

/* Writes the members of the object, without its braces, so that a command
 * adds its own ("ate_rmse_m" in demo): `"source":...,"backend":...,...`.
 * `source` and `backend` are printed as JSON strings; `error` is NULL when
 * the run ended well, else the message it ended with. */
void kr_run_json_members(FILE *f, const char *source, const char *backend,
                         const kr_pipeline_stats *st, const char *error);

#endif
