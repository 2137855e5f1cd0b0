/* kinreg view — serve the live view of a pose stream in the browser. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "tools/view/view.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

#define VIEW_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                \
    TEXT(KR_HELP("usage: kinreg view [OPTIONS] ENDPOINT\n\n"                                       \
                 "Serves a live view of the pose stream at ENDPOINT (e.g. tcp://127.0.0.1:5555, "  \
                 "as given to\n"                                                                   \
                 "`kinreg run --publish`) in the browser: the model points shaded by normal, "     \
                 "the camera\n"                                                                    \
                 "frustum, the trajectory coloured by tracking state, counters and a plot of "     \
                 "inlier fraction\n"                                                               \
                 "and RMS residual. Open the address it prints. Many browsers may watch at "       \
                 "once; a slow one\n"                                                              \
                 "loses events, never the tracker's time. Ctrl-C stops.\n\n"))                     \
    OPT(HTTP, (0, "http", "[ADDR:]PORT", KR_TEXT), cfg->http = arg,                                \
        KR_HELP("where to serve (default 127.0.0.1:8080; PORT 0 = any free port)"))                \
    OPT(VIEW_PUBLIC, KR_OPT_VIEW_PUBLIC, cfg->public_bind = true,                                  \
        KR_HELP("allow an ADDR other than loopback (e.g. 0.0.0.0:8080): the scan\n"                \
                "is then visible to anyone who can reach the port"))                               \
    OPT(THREE_DIR, (0, "three-dir", "DIR", KR_TEXT), cfg->three_dir = arg,                         \
        KR_HELP("three.js from DIR (default /usr/share/javascript/three,\n"                        \
                "Debian's libjs-three)"))                                                          \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nIn one process: kinreg run --view [ADDR:]PORT ... (see kinreg run "            \
                 "--help).\n"))
KR_OPTION_TABLE(view_option_table, VIEW_OPTIONS, kr_view_config, cfg, NULL);

static const kr_command view_command = {"view", &view_option_table, KR_HELP_LAYOUT_DEFAULT, 0,
                                        NULL};

int kr_cmd_view(int argc, char **argv)
{
    kr_view_config cfg = {.http = "127.0.0.1:8080"};
    int prc = kr_command_parse(&view_command, argc, argv, &cfg);
    if (prc >= 0) return prc;
    if (optind != argc - 1) {
        fprintf(
            stderr,
            "kinreg view: expected one ENDPOINT to subscribe to, e.g. tcp://127.0.0.1:5555 (see "
            "kinreg view --help)\n");
        return KR_EXIT_USAGE;
    }
    cfg.endpoint = argv[optind];
    kr_view *view = NULL;
    int rc = kr_view_start(&view, &cfg, "kinreg view");
    if (rc) return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    while (!stop_requested)
        usleep(200000); /* a signal ends the sleep early */
    kr_view_stop(&view);
    return KR_EXIT_OK;
}
