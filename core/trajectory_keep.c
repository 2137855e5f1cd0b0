/* Bounded trajectory history (kinreg/trajectory.h): a long session keeps its
 * last poses in memory, not every pose since the start. Trimming happens in
 * one move each time the history doubles, so each pose costs O(1)
 * amortised and the arrays never grow past 2·keep. */
#include "kinreg/trajectory.h"

#include <string.h>

void kr_trajectory_keep_last(kr_trajectory *traj, size_t keep)
{
    if (!traj || keep == 0 || traj->count < 2 * keep) return;
    size_t drop = traj->count - keep;
    memmove(traj->stamps, traj->stamps + drop, keep * sizeof *traj->stamps);
    memmove(traj->poses, traj->poses + drop, keep * sizeof *traj->poses);
    traj->count = keep;
}
