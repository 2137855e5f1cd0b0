/* kinreg sub — placeholder until its owner lands it. */
#include <stdio.h>

#include "cli.h"

int kr_cmd_sub(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kinreg sub: not built yet\n");
    return KR_EXIT_FAILURE;
}
