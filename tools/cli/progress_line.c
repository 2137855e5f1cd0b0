/* Progress line of long phases (progress_line.h). */
#include "progress_line.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kinreg/frame.h" /* kr_now */
#include "status_line.h"  /* KR_PROGRESS_INTERVAL_S */

void kr_progress_line_init(kr_progress_line *p, bool enabled)
{
    p->enabled = enabled;
    p->terminal = isatty(STDERR_FILENO);
    p->last = 0;
    p->drawn = false;
    p->phase = NULL;
}

void kr_progress_line_say(kr_progress_line *p, const char *phase, const char *format, ...)
{
    if (!p->enabled) return;
    double now = kr_now();
    double every = p->terminal ? 0.2 : KR_PROGRESS_INTERVAL_S;
    bool same = p->phase && phase && !strcmp(p->phase, phase);
    if (same && now - p->last < every) return;
    p->last = now;
    p->phase = phase;
    va_list ap;
    va_start(ap, format);
    if (p->terminal) fputs("\r\033[K", stderr);
    vfprintf(stderr, format, ap);
    va_end(ap);
    if (!p->terminal) fputc('\n', stderr);
    p->drawn = p->terminal;
    fflush(stderr);
}

void kr_progress_line_clear(kr_progress_line *p)
{
    if (p->drawn) fputs("\r\033[K", stderr);
    p->drawn = false;
}
