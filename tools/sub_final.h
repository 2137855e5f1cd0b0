/* kinreg sub --final: the trajectory as the publisher knows it at the end.
 *
 * A LOST frame's `pose` message carries a prediction; with the final
 * trajectory on, the publisher sends the frames it placed after the run
 * again as `final` messages, after the last `pose` message
 * (docs/PROTOCOL.md, "Final poses"). This holds every pose message by
 * frame and lets a `final` message replace its frame's, so that the lines
 * printed once the stream has ended are the final trajectory — what
 * `kinreg run --trajectory-final FILE` writes on the publisher's side. */
#ifndef KINREG_TOOLS_SUB_FINAL_H
#define KINREG_TOOLS_SUB_FINAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/transport.h"

typedef struct {
    kr_pose_msg *poses; /* by frame index, ascending, one per frame */
    size_t count, capacity;
    uint64_t replaced; /* frames whose pose a `final` message replaced */
    bool failed;       /* out of memory: later messages were not held */
} sub_final;

/* Holds a `pose` or `final` message (others are ignored): a frame's newest
 * message replaces what was held for it. False once out of memory. */
bool sub_final_hold(sub_final *f, const kr_pose_msg *m);
void sub_final_free(sub_final *f);

#endif
