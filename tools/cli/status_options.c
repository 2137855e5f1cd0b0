/* The status line's options (status_options.h). */
#include "status_options.h"

#include "common_options.h"

#define STATUS_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no status line"))                           \
    OPT(PROGRESS, (0, "progress", "SEC", KR_REAL(0, 86400, "seconds", "0 = no progress lines")),   \
        o->progress_s = v,                                                                         \
        KR_HELP("when stderr is not a terminal, a progress line every SEC\n"                       \
                "seconds (default 5; 0 = none)"))
KR_OPTION_TABLE(kr_status_option_table, STATUS_OPTIONS, kr_status_options, o, "kinreg");
