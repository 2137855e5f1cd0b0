/* kinreg run — placeholder until its owner lands it. */
#include <stdio.h>

#include "cli.h"

int kr_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kinreg run: not built yet\n");
    return KR_EXIT_FAILURE;
}
