/* The live view when kinreg was built without libmicrohttpd: the commands
 * exist and say how to get it. */
#include <stdio.h>

#include "tools/cli/exit_codes.h"
#include "view.h"

static void unavailable(const char *who)
{
    fprintf(stderr,
            "%s: this kinreg was built without the live view: install libmicrohttpd-dev "
            "(scripts/setup.sh does) and rebuild\n",
            who);
}

int kr_view_start(kr_view **out, const kr_view_config *cfg, const char *who)
{
    (void)out;
    (void)cfg;
    unavailable(who);
    return KR_EXIT_FAILURE;
}

void kr_view_stop(kr_view **view)
{
    (void)view;
}

int kr_view_port(const kr_view *view)
{
    (void)view;
    return 0;
}

int kr_cmd_view(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    unavailable("kinreg view");
    return KR_EXIT_FAILURE;
}
