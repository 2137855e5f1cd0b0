/* kinreg view — serve the live view of a pose stream in the browser. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tools/cli/option_error.h"
#include "tools/view/view.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void help(FILE *out)
{
    fprintf(
        out,
        "usage: kinreg view [OPTIONS] ENDPOINT\n\n"
        "Serves a live view of the pose stream at ENDPOINT (e.g. tcp://127.0.0.1:5555, as given "
        "to\n"
        "`kinreg run --publish`) in the browser: the model points shaded by normal, the camera\n"
        "frustum, the trajectory coloured by tracking state, counters and a plot of inlier "
        "fraction\n"
        "and RMS residual. Open the address it prints. Many browsers may watch at once; a slow "
        "one\n"
        "loses events, never the tracker's time. Ctrl-C stops.\n\n"
        "      --http [ADDR:]PORT  where to serve (default 127.0.0.1:8080; PORT 0 = any free "
        "port)\n"
        "      --view-public       allow an ADDR other than loopback (e.g. 0.0.0.0:8080): the "
        "scan\n"
        "                          is then visible to anyone who can reach the port\n"
        "      --three-dir DIR     three.js from DIR (default /usr/share/javascript/three,\n"
        "                          Debian's libjs-three)\n"
        "  -h, --help              this text\n\n"
        "In one process: kinreg run --view [ADDR:]PORT ... (see kinreg run --help).\n");
}

int kr_cmd_view(int argc, char **argv)
{
    enum { OPT_HTTP = 256, OPT_PUBLIC, OPT_THREE };
    static const struct option longopts[] = {{"http", required_argument, 0, OPT_HTTP},
                                             {"view-public", no_argument, 0, OPT_PUBLIC},
                                             {"three-dir", required_argument, 0, OPT_THREE},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    kr_view_config cfg = {.http = "127.0.0.1:8080"};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_HTTP:
            cfg.http = optarg;
            break;
        case OPT_PUBLIC:
            cfg.public_bind = true;
            break;
        case OPT_THREE:
            cfg.three_dir = optarg;
            break;
        case 'h':
            help(stdout);
            return KR_EXIT_OK;
        default:
            return kr_option_error(argv[0], argc, argv, opt);
        }
    }
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
