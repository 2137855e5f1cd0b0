/* A progress line for a command's long phases (refine's reading, placing and
 * iterations): on a terminal it is redrawn in place at most 5 times a
 * second; into a file or a pipe, where "\r" redraws pile up unread on one
 * line, a whole line is written when a phase begins and then at most every
 * KR_PROGRESS_INTERVAL_S seconds, so a log shows the command alive. */
#ifndef KINREG_TOOLS_CLI_PROGRESS_LINE_H
#define KINREG_TOOLS_CLI_PROGRESS_LINE_H

#include <stdbool.h>

typedef struct {
    bool enabled;      /* not --quiet */
    bool terminal;     /* stderr is a terminal */
    double last;       /* when the last line was drawn (0: never) */
    bool drawn;        /* a line stands on a terminal, to be cleared */
    const char *phase; /* of the last line drawn */
} kr_progress_line;

void kr_progress_line_init(kr_progress_line *p, bool enabled);
/* Draws the line when it is time to: at once when `phase` (a constant such
 * as "reading") differs from the last line's, else after the interval. */
void kr_progress_line_say(kr_progress_line *p, const char *phase, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears a line standing on the terminal, before other output. */
void kr_progress_line_clear(kr_progress_line *p);

#endif
