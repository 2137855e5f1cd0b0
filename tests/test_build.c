/* The build itself: a second configure of the same tree changes no compile
 * flags, so `scripts/setup.sh test` after `setup.sh demo` builds nothing again. */
#include "kr_test.h"

#include <stdlib.h>

KR_TEST(build, a_second_configure_changes_no_compile_flags)
{
    /* `scripts/setup.sh test` after `setup.sh demo` rebuilt everything: the
     * second configure moved libzmq's -isystem flag and changed every
     * compile line. Configure a fresh tree twice (about 15 s on the 2-core
     * machine, configure only); the flags must not move. */
    char dir[700], cmd[8192];
    snprintf(dir, sizeof dir, "%s/reconfigure", kr_test_tmpdir());
    const char *nvcc_path = "PATH=\"$PATH:/usr/local/cuda/bin\"";
    snprintf(
        cmd, sizeof cmd,
        "%s '%s' -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON > /dev/null 2>&1 && "
        "find '%s' -name flags.make | sort | xargs cat > '%s/first.txt' && "
        "%s '%s' -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON > /dev/null 2>&1 && "
        "find '%s' -name flags.make | sort | xargs cat > '%s/second.txt' && "
        "cmp -s '%s/first.txt' '%s/second.txt'",
        nvcc_path, KINREG_CMAKE_COMMAND, KINREG_SOURCE_DIR, dir, dir, kr_test_tmpdir(), nvcc_path,
        KINREG_CMAKE_COMMAND, KINREG_SOURCE_DIR, dir, dir, kr_test_tmpdir(), kr_test_tmpdir(),
        kr_test_tmpdir());
    CHECK_MSG(system(cmd) == 0,
              "the second configure changed the compile flags (diff %s/first.txt second.txt)",
              kr_test_tmpdir());
}
