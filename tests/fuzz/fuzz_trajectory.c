/* TUM trajectory files (core/trajectory.c: groundtruth.txt, kinreg's own
 * output, `kinreg eval` inputs). */
#include <math.h>

#include "fuzz_input.h"
#include "kinreg/trajectory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("trajectory.txt", data, size);
    kr_trajectory traj = {0};
    if (kr_trajectory_read_tum(path, &traj) == KR_OK) {
        for (size_t i = 0; i < traj.count; i++)
            if (!isfinite(traj.stamps[i])) abort(); /* the reader refuses non-finite stamps */
    }
    kr_trajectory_free(&traj);
    return 0;
}
