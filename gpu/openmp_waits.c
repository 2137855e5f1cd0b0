/* OpenMP's idle-thread waiting for programs that embed libkinreg (device.h).
 *
 * The pipeline runs threads of its own (capture, model rebuilds, publisher)
 * beside its OpenMP teams. libgomp's default lets idle team threads spin
 * between parallel regions, which takes those threads' cores: measured on the
 * 2-core development machine, `kinreg demo` ran at 35 frames/s spinning and 41
 * passive. libgomp reads OMP_WAIT_POLICY once, when it is loaded, before any
 * code of this library runs, so the library cannot change it in place: it
 * offers the program's re-execution (kr_openmp_prefer_passive) and says once
 * when a CPU device is created under a spinning policy. */
#include "kinreg/device.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

bool kr_openmp_waits_passive(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    const char *spin = getenv("GOMP_SPINCOUNT");
    return (policy && strcasecmp(policy, "passive") == 0) || (spin && strcmp(spin, "0") == 0);
}

bool kr_openmp_wait_policy_chosen(void)
{
    return getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT");
}

kr_status kr_openmp_prefer_passive(char **argv)
{
    if (kr_openmp_wait_policy_chosen()) return KR_OK; /* the user's choice stands */
    if (!argv || !argv[0])
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_openmp_prefer_passive: pass main's argv to re-execute with");
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    /* Only reached when exec failed (no /proc): go on with the default. */
    unsetenv("OMP_WAIT_POLICY");
    return kr_error(KR_ERR_UNSUPPORTED,
                    "cannot re-execute /proc/self/exe with OMP_WAIT_POLICY=passive: set it in the "
                    "environment before the program starts");
}
