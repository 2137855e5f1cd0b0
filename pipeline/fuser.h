/* Fusion on a thread of its own: the tracker hands over a tracked frame's
 * cloud and goes on with the next frame while the voxel map integrates it
 * (and gathers a snapshot when one is due). Used with the CUDA backend, where
 * tracking takes well under a millisecond and fusion on the host would
 * otherwise be most of a frame's time. One job in flight at a time. */
#ifndef KINREG_PIPELINE_FUSER_H
#define KINREG_PIPELINE_FUSER_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/model.h"
#include "kinreg/pose.h"
#include "kinreg/pyramid.h"

typedef struct kr_fuser kr_fuser;

kr_status kr_fuser_create(kr_fuser **out, kr_model *model);

/* Waits until the job in flight (if any) is done and returns its status;
 * a failure's message is set on the calling thread. */
kr_status kr_fuser_wait(kr_fuser *f);

/* Starts a job after waiting for the previous one: integrate `cloud` (NULL:
 * nothing to integrate) at `pose` as frame `frame`, then request a snapshot
 * when `snapshot`. The cloud's buffers must stay untouched until the next
 * kr_fuser_wait or kr_fuser_post returns. */
kr_status kr_fuser_post(kr_fuser *f, const kr_cloud *cloud, const kr_pose *pose, uint64_t frame,
                        bool snapshot);

/* Finishes the job in flight and stops the thread. */
void kr_fuser_destroy(kr_fuser **f);

#endif
