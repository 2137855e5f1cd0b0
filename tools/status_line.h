/* The live status line on a terminal during long runs, and the end summary. */
#ifndef KINREG_TOOLS_STATUS_LINE_H
#define KINREG_TOOLS_STATUS_LINE_H

#include <stdbool.h>

#include "kinreg/pipeline.h"

typedef struct {
    bool enabled;     /* stderr is a terminal and --quiet was not given */
    double last_print;
    unsigned total;   /* frames expected, 0 when unknown */
} kr_status_line;

void kr_status_line_init(kr_status_line *line, bool quiet, unsigned total);
/* A kr_frame_callback: redraws at most 5 times a second. */
void kr_status_line_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user);
/* Clears the line and prints the run summary to stderr. */
void kr_status_line_finish(kr_status_line *line, const kr_pipeline_stats *st);

#endif
