/* Status strings, per-thread error details and the log sink. */
#include "kinreg/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kr_strerror(kr_status status)
{
    switch (status) {
#define KR_STATUS_CASE(name, value, text)                                                          \
    case name:                                                                                     \
        return text;
        KR_STATUS_LIST(KR_STATUS_CASE)
#undef KR_STATUS_CASE
    }
    return "unknown status";
}

static _Thread_local char last_error[1024];

/* Messages quote what files and peers said (a line of a .conf, a file name
 * from depth.txt): their control characters (an escape sequence that would
 * retitle or clear the user's terminal, a newline that would forge a second
 * message) become '?'. UTF-8 text passes unchanged. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

const char *kr_last_error(void)
{
    return last_error;
}

kr_status kr_error(kr_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    printable(last_error);
    return status;
}

void kr_error_clear(void)
{
    last_error[0] = '\0';
}

static kr_log_level log_level = KR_LOG_WARN;
static kr_log_fn log_fn;
static void *log_user;

void kr_log_set(kr_log_level level, kr_log_fn fn, void *user)
{
    log_level = level;
    log_fn = fn;
    log_user = user;
}

void kr_log(kr_log_level level, const char *fmt, ...)
{
    if (level > log_level) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printable(msg);
    if (log_fn) {
        log_fn(level, msg, log_user);
        return;
    }
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "kinreg: %s: %s\n", names[level], msg);
}
