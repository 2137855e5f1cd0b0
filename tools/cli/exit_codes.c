/* The program's exit statuses (tools/cli/exit_codes.h). */
#include "tools/cli/exit_codes.h"

int kr_exit_code(kr_status s)
{
    if (s == KR_OK || s == KR_ERR_INTERRUPTED) return KR_EXIT_OK;
    if (s == KR_ERR_STALLED) return KR_EXIT_STALLED;
    return KR_EXIT_FAILURE;
}
