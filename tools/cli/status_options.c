/* The status line's options (status_options.h). */
#include "status_options.h"

#include <string.h>

#include "common_options.h"
#include "kinreg/status.h"

static bool log_level_option(const char *arg, int *level)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(arg, names[i])) {
            *level = i;
            return true;
        }
    return false;
}

#define STATUS_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no status line"))                           \
    OPT(PROGRESS, (0, "progress", "SEC", KR_REAL(0, 86400, "seconds", "0 = no progress lines")),   \
        o->progress_s = v,                                                                         \
        KR_HELP("when stderr is not a terminal, a progress line every SEC\n"                       \
                "seconds (default 5; 0 = none)"))                                                  \
    OPT(LOG_LEVEL,                                                                                 \
        ('v', "log-level", "LEVEL", KR_CHOICE("expected error, warning, info or debug")),          \
        KR_REFUSE_UNLESS(log_level_option(arg, &o->log_level)),                                    \
        KR_HELP("messages shown: error, warning, info (default: what the run\n"                    \
                "is doing at its end, e.g. the refiner's last window) or debug;\n"                 \
                "-q: warning"))
KR_OPTION_TABLE(kr_status_option_table, STATUS_OPTIONS, kr_status_options, o, "kinreg");

void kr_status_options_apply(const kr_status_options *o)
{
    int level = o->log_level >= 0 ? o->log_level : o->quiet ? KR_LOG_WARN : KR_LOG_INFO;
    kr_log_set((kr_log_level)level, NULL, NULL);
}
