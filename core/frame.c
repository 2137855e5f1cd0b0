/* Frame lifetime and the monotonic clock. */
#include "kinreg/frame.h"

#include <stdlib.h>
#include <time.h>

void kr_frame_release(kr_frame *frame)
{
    if (!frame) return;
    free(frame->raw);
    free(frame->rgb);
    frame->raw = NULL;
    frame->rgb = NULL;
}

double kr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
