/* The live status line during long runs, and the end summary. On a terminal
 * it is redrawn in place and fits the terminal's width; when stderr is a file
 * or a pipe, a plain progress line is printed every few seconds instead. */
#ifndef KINREG_TOOLS_CLI_STATUS_LINE_H
#define KINREG_TOOLS_CLI_STATUS_LINE_H

#include <stdbool.h>
#include <stddef.h>

#include "kinreg/pipeline.h"

#define KR_PROGRESS_INTERVAL_S 5.0 /* default for output that is not a terminal */

typedef struct {
    bool enabled;    /* --quiet was not given */
    bool terminal;   /* stderr is a terminal: redraw in place */
    double interval; /* seconds between lines when not a terminal; 0 = none */
    double last_print;
    unsigned total; /* frames expected, 0 when unknown */
} kr_status_line;

void kr_status_line_init(kr_status_line *line, bool quiet, unsigned total);
/* A kr_frame_callback: redraws at most 5 times a second on a terminal, else
 * prints a line every `interval` seconds. */
void kr_status_line_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user);
/* Clears the line and prints the run summary to stderr. */
void kr_status_line_finish(kr_status_line *line, const kr_pipeline_stats *st);

/* The status text for a terminal `width` columns wide: every field when it
 * fits, else a shorter form, else cut; never more than width - 1 characters
 * (the last column would wrap on some terminals). */
void kr_status_line_format(char *buf, size_t size, int width, const kr_frame_result *r,
                           const kr_pipeline_stats *st, unsigned total);
/* Columns of the terminal on stderr: TIOCGWINSZ, else $COLUMNS, else 80. */
int kr_terminal_width(void);

#endif
