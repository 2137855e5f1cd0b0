/* Opening libfreenect safely. The real library talks to USB; its fakenect
 * twin replays a dump through the same API but calls exit() on a missing
 * FAKENECT_PATH or file and assert()s on depth formats it lacks, so before
 * touching it kinreg checks everything fakenect would die on. */
#ifndef KINREG_CAPTURE_FREENECT_CONTEXT_H
#define KINREG_CAPTURE_FREENECT_CONTEXT_H

#include <libfreenect.h>
#include <stdbool.h>
#include <stddef.h>

#include "kinreg/kinect.h"

/* True when the libfreenect loaded into this process is fakenect. */
bool kr_freenect_is_fakenect(void);

/* Under fakenect: FAKENECT_PATH is set, its INDEX.txt is readable and every
 * file it lists exists, depth frames with their full size. Fills `path` and
 * the number of depth frames. KR_ERR_IO / KR_ERR_FORMAT naming the problem. */
kr_status kr_freenect_check_replay(char *path, size_t path_size, unsigned *depth_frames);

/* freenect_init with libfreenect's log routed to kr_log and only the camera
 * subdevice claimed (the motor and audio are not needed). Under fakenect the
 * replay is checked first (kr_freenect_check_replay) and `replay_path`,
 * `replay_frames` describe it; otherwise they are "" and 0. */
kr_status kr_freenect_context_open(freenect_context **ctx, char *replay_path, size_t path_size,
                                   unsigned *replay_frames);

#endif
