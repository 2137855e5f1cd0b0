/* Filling in lost stretches once the run has ended (pipeline/lost_fill.h). */
#include "pipeline/lost_fill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kr_lost_keep_init(kr_lost_keep *k, size_t max_depth)
{
    memset(k, 0, sizeof *k);
    k->max_depth = max_depth;
}

kr_status kr_lost_keep_add(kr_lost_keep *k, size_t index, kr_frame *frame, bool has_depth)
{
    if (k->count == k->capacity) {
        size_t cap = k->capacity ? 2 * k->capacity : 64;
        kr_lost_frame *grown = realloc(k->frames, cap * sizeof *grown);
        if (!grown)
            return kr_error(KR_ERR_NOMEM,
                            "out of memory keeping lost frame %zu for the final trajectory", index);
        k->frames = grown;
        k->capacity = cap;
    }
    kr_lost_frame *f = &k->frames[k->count++];
    f->index = index;
    f->frame = *frame;
    f->frame.rgb = NULL; /* the caller keeps (and releases) the colour */
    f->covered = !has_depth;
    f->placed = KR_LOST_KEPT;
    if (has_depth && k->max_depth > 0) {
        frame->raw = NULL; /* the keep owns the samples now */
        k->with_depth++;
    } else {
        f->frame.raw = NULL; /* nothing kept: the caller releases the frame */
        if (has_depth) k->dropped++;
    }
    while (k->with_depth > k->max_depth) {
        while (!k->frames[k->oldest].frame.raw)
            k->oldest++;
        kr_frame_release(&k->frames[k->oldest].frame);
        k->frames[k->oldest].frame.raw = NULL;
        k->with_depth--;
        k->dropped++;
    }
    return KR_OK;
}

void kr_lost_keep_free(kr_lost_keep *k)
{
    for (size_t i = 0; i < k->count; i++)
        kr_frame_release(&k->frames[i].frame);
    free(k->frames);
    memset(k, 0, sizeof *k);
}

typedef struct {
    kr_lost_keep *k;
    kr_device *dev;
    const kr_kdtree *model;
    const kr_preprocess_config *pc;
    const kr_intrinsics *K;
    const kr_track_config *tc;
    double max_elapsed_s;
    const atomic_bool *cancel;
    kr_pyramid *pyr;
    kr_trajectory *traj;
    kr_lost_fill_counts *counts;
} fill_context;

/* Tracks the frame in c->pyr from `seed`; true when the result passes the
 * gates, its motion measured from the seed over `dt`. */
static kr_status track_judged(const fill_context *c, const kr_pose *seed, double dt,
                              kr_track_result *r, bool *good)
{
    *good = false;
    kr_status st = kr_track_frame_on(c->dev, c->model, c->pyr, seed, c->tc, r);
    if (st != KR_OK) return st;
    kr_track_quality q = kr_track_quality_of(r, seed, dt);
    *good = r->state != KR_TRACK_LOST && kr_track_classify(&q, c->tc) == KR_TRACK_GOOD;
    return KR_OK;
}

/* Tracks the stretch's frames with depth backwards from the pose after it,
 * until one fails the gates or has lost its depth; known[j] marks the
 * stretch's j-th frame (1-based) placed. As live tracking extrapolates the
 * motion forwards, each frame is first seeded by the motion of the two
 * frames after it run backwards, T_k = T_k+1 · (T_k+2⁻¹ T_k+1) (a fast
 * camera: TUM at every 8th frame), then, failing that, by T_k+1 itself. */
static kr_status track_backwards(const fill_context *c, size_t s, size_t n, bool *known)
{
    size_t after = c->k->frames[s + n - 1].index + 1;
    kr_pose next = c->traj->poses[after], next2 = next;
    double next_stamp = c->traj->stamps[after];
    /* The frame after that is known unless it is LOST itself (the keep's
     * next stretch) or beyond the run. */
    bool velocity = after + 1 < c->traj->count &&
                    !(s + n < c->k->count && c->k->frames[s + n].index == after + 1);
    /* ... and the step between them one the camera can make: a jump is no
     * velocity (live tracking starts from rest after one too). */
    if (velocity) {
        next2 = c->traj->poses[after + 1];
        double dt = c->traj->stamps[after + 1] - next_stamp;
        velocity = dt > 0 && kr_track_within_reach(c->tc, &next2, &next, dt);
    }
    for (size_t j = n; j >= 1; j--) {
        kr_lost_frame *f = &c->k->frames[s + j - 1];
        if (f->covered) { /* interpolated afterwards, if it can be */
            velocity = false;
            continue;
        }
        if (!f->frame.raw) break; /* dropped: the chain ends here */
        if (c->cancel && atomic_load(c->cancel)) break;
        kr_status st = kr_preprocess(c->dev, c->pc, &f->frame, c->K, c->pyr);
        if (st != KR_OK) return st;
        double dt = fmin(fmax(fabs(next_stamp - f->frame.timestamp), 0.01), c->max_elapsed_s);
        kr_track_result r;
        bool good = false;
        if (velocity) {
            kr_pose inv = kr_pose_inv(&next2), v = kr_pose_mul(&inv, &next);
            kr_pose seed = kr_pose_mul(&next, &v);
            if ((st = track_judged(c, &seed, dt, &r, &good)) != KR_OK) return st;
        }
        if (!good && (st = track_judged(c, &next, dt, &r, &good)) != KR_OK) return st;
        if (!good) break;
        c->traj->poses[f->index] = r.pose;
        f->placed = KR_LOST_TRACKED;
        f->track = r;
        known[j] = true;
        next2 = next;
        next = r.pose;
        next_stamp = f->frame.timestamp;
        velocity = true;
        c->counts->tracked++;
    }
    return KR_OK;
}

/* Places each run of covered frames whose neighbours are both known, when
 * the camera can have moved from one to the other in the time between. */
static void interpolate_covered(const fill_context *c, size_t s, size_t n, const bool *known)
{
    size_t first = c->k->frames[s].index;
    for (size_t j = 1; j <= n; j++) {
        if (known[j] || !c->k->frames[s + j - 1].covered) continue;
        size_t b = j;
        while (b <= n && !known[b] && c->k->frames[s + b - 1].covered)
            b++;
        size_t a = j - 1;
        if (known[a] && known[b]) {
            /* Positions 0 and n + 1 are the frames around the stretch. */
            size_t ia = first - 1 + a, ib = first - 1 + b;
            const kr_pose *pa = &c->traj->poses[ia], *pb = &c->traj->poses[ib];
            double ta = c->traj->stamps[ia], tb = c->traj->stamps[ib];
            if (tb > ta && kr_track_within_reach(c->tc, pa, pb, tb - ta)) {
                kr_pose from = *pa, to = *pb;
                for (size_t i = ia + 1; i < ib; i++) {
                    c->traj->poses[i] =
                        kr_pose_interpolate(&from, &to, (c->traj->stamps[i] - ta) / (tb - ta));
                    c->k->frames[s + (i - first)].placed = KR_LOST_INTERPOLATED;
                }
                c->counts->interpolated += ib - ia - 1;
            }
        }
        j = b;
    }
}

/* The stretch frames[s .. s + n − 1]: consecutive LOST frames. */
static kr_status fill_stretch(const fill_context *c, size_t s, size_t n)
{
    size_t first = c->k->frames[s].index, after = c->k->frames[s + n - 1].index + 1;
    /* A run that ended lost has no pose after the stretch to start from. */
    if (after >= c->traj->count) return KR_OK;
    bool *known = calloc(n + 2, sizeof *known);
    if (!known) return kr_error(KR_ERR_NOMEM, "out of memory filling in %zu lost frames", n);
    known[0] = first > 0;
    known[n + 1] = true;
    kr_status st = track_backwards(c, s, n, known);
    if (st == KR_OK) interpolate_covered(c, s, n, known);
    free(known);
    return st;
}

kr_status kr_lost_fill(kr_lost_keep *k, kr_device *dev, const kr_kdtree *model,
                       const kr_preprocess_config *pc, const kr_intrinsics *K,
                       const kr_track_config *tc, double max_elapsed_s, const atomic_bool *cancel,
                       kr_pyramid *pyr, kr_trajectory *traj, kr_lost_fill_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    fill_context c = {k, dev, model, pc, K, tc, max_elapsed_s, cancel, pyr, traj, counts};
    for (size_t i = 0; i < k->count; i++)
        k->frames[i].placed = KR_LOST_KEPT;
    for (size_t s = 0; s < k->count;) {
        size_t n = 1;
        while (s + n < k->count && k->frames[s + n].index == k->frames[s + n - 1].index + 1)
            n++;
        kr_status st = fill_stretch(&c, s, n);
        if (st != KR_OK) return st;
        s += n;
    }
    return KR_OK;
}
