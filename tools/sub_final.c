/* The held trajectory of kinreg sub --final (tools/sub_final.h). */
#include "sub_final.h"

#include <stdlib.h>
#include <string.h>

/* The first position whose frame is not below `frame`. */
static size_t lower_bound(const sub_final *f, uint64_t frame)
{
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->poses[mid].frame_index < frame) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

bool sub_final_hold(sub_final *f, const kr_pose_msg *m)
{
    if (m->topic != KR_TOPIC_POSE && m->topic != KR_TOPIC_FINAL) return true;
    if (f->failed) return false;
    /* Pose messages come in frame order: the search ends at the end. */
    size_t at = lower_bound(f, m->frame_index);
    if (at < f->count && f->poses[at].frame_index == m->frame_index) {
        f->replaced += m->topic == KR_TOPIC_FINAL && f->poses[at].topic != KR_TOPIC_FINAL;
        f->poses[at] = *m;
        return true;
    }
    if (f->count == f->capacity) {
        size_t cap = f->capacity ? 2 * f->capacity : 1024;
        kr_pose_msg *grown = realloc(f->poses, cap * sizeof *grown);
        if (!grown) {
            f->failed = true;
            return false;
        }
        f->poses = grown;
        f->capacity = cap;
    }
    memmove(&f->poses[at + 1], &f->poses[at], (f->count - at) * sizeof *f->poses);
    f->poses[at] = *m;
    f->count++;
    return true;
}

void sub_final_free(sub_final *f)
{
    free(f->poses);
    memset(f, 0, sizeof *f);
}
