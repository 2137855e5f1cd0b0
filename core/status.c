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

/* Length (2..4) of the well-formed UTF-8 sequence at s, 0 when the bytes
 * there are not one (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF). s[0] >= 0x80. */
static size_t utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n = c >= 0xC2 && c < 0xE0   ? 2
               : c >= 0xE0 && c < 0xF0 ? 3
               : c >= 0xF0 && c < 0xF5 ? 4
                                       : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

/* Messages quote what files and peers said (a line of a .conf, a file name
 * from depth.txt): their control characters (an escape sequence that would
 * retitle or clear the user's terminal, a newline that would forge a second
 * message; C1 controls such as CSI, U+009B, as UTF-8 or as a lone byte)
 * become '?', and so does every byte that is not part of valid UTF-8. Other
 * UTF-8 text passes unchanged. */
static void printable(char *text)
{
    unsigned char *s = (unsigned char *)text;
    while (*s) {
        if (*s < 0x20 || *s == 0x7f) {
            *s++ = '?';
            continue;
        }
        if (*s < 0x80) {
            s++;
            continue;
        }
        size_t n = utf8_length(s);
        if (n == 0) {
            *s++ = '?';
        } else if (n == 2 && s[0] == 0xC2 && s[1] < 0xA0) { /* U+0080..U+009F */
            s[0] = s[1] = '?';
            s += 2;
        } else {
            s += n;
        }
    }
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
