/* Jumps and covered stretches of the synthetic camera.
 *
 * Jumps come in pairs: the camera jumps away from its smooth path by a
 * random rigid motion (rotation about its own centre and a translation, each
 * between half and all of the configured maximum) and, at the next jump,
 * back onto the path. So every jump is as large as drawn, and the camera never
 * wanders off the scene however many jumps there are. A covered stretch is a
 * run of frames whose depth is all invalid (a hand over the sensor); the
 * camera keeps moving meanwhile. */
#include "capture/synthetic_loss.h"

#include <math.h>
#include <stdlib.h>

#include "capture/synthetic_rng.h"

enum { EVENT_JUMP = 1, EVENT_COVER = 2 };

static void random_unit(uint64_t *rng, double v[3])
{
    /* Uniform on the sphere: z uniform in [−1, 1], azimuth uniform. */
    double z = kr_rng_range(rng, -1, 1), phi = kr_rng_range(rng, 0, 2 * M_PI);
    double r = sqrt(fmax(0, 1 - z * z));
    v[0] = r * cos(phi);
    v[1] = r * sin(phi);
    v[2] = z;
}

static kr_pose random_jump(uint64_t *rng, double max_angle, double max_distance)
{
    double axis[3], dir[3];
    random_unit(rng, axis);
    random_unit(rng, dir);
    double angle = kr_rng_range(rng, 0.5, 1.0) * max_angle;
    double dist = kr_rng_range(rng, 0.5, 1.0) * max_distance;
    double x[6] = {angle * axis[0], angle * axis[1], angle * axis[2], 0, 0, 0};
    kr_pose J = kr_pose_exp(x);
    for (int i = 0; i < 3; i++)
        J.t[i] = dist * dir[i];
    return J;
}

kr_status kr_synth_loss_apply(const kr_source_config *cfg, uint64_t seed, unsigned frames,
                              kr_pose *poses, bool *covered)
{
    int jumps = cfg->jumps, covers = cfg->covered;
    if (jumps < 0 || covers < 0 || (covers > 0 && cfg->covered_frames < 1))
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic: %d jumps, %d covered stretches of %d frames: counts must be "
                        ">= 0 and a stretch at least 1 frame",
                        jumps, covers, cfg->covered_frames);
    if (jumps > 0 && (!(cfg->jump_angle_deg >= 0) || !(cfg->jump_distance_m >= 0) ||
                      cfg->jump_angle_deg > 180 || !isfinite(cfg->jump_distance_m)))
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic: jump angle %g deg and distance %g m: use 0..180 deg and >= 0 m",
                        cfg->jump_angle_deg, cfg->jump_distance_m);
    int events = jumps + covers;
    if (events == 0) return KR_OK;
    /* Each event gets a slot of the sequence; it must hold a covered stretch
     * and leave frames to track between events. */
    double slot = (double)frames / (events + 1);
    int cover_len = covers ? cfg->covered_frames : 0;
    if (slot < 2.0 * cover_len + 8)
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic: %d jumps and %d covered stretches of %d frames do not fit into "
                        "%u frames: use fewer events or a longer --duration",
                        jumps, covers, cover_len, frames);
    int *kind = malloc((size_t)events * sizeof *kind);
    if (!kind) return kr_error(KR_ERR_NOMEM, "synthetic: out of memory placing %d events", events);
    for (int e = 0; e < events; e++)
        kind[e] = e < jumps ? EVENT_JUMP : EVENT_COVER;
    uint64_t rng = seed ^ 0x1055e5ULL;
    for (int e = events - 1; e > 0; e--) { /* Fisher-Yates: interleave the kinds */
        int k = (int)(kr_rng_uniform(&rng) * (e + 1));
        int tmp = kind[e];
        kind[e] = kind[k];
        kind[k] = tmp;
    }

    const double max_angle = cfg->jump_angle_deg * M_PI / 180;
    kr_pose offset = kr_pose_identity();
    int jump_no = 0;
    unsigned from = frames; /* the current offset applies from this frame on */
    for (int e = 0; e < events; e++) {
        double jitter = kr_rng_range(&rng, -0.25, 0.25) * (slot - cover_len);
        unsigned at = (unsigned)floor((e + 1) * slot + jitter);
        if (at < 1) at = 1;
        /* Frames up to this event keep the offset set by the last jump. */
        for (unsigned i = from; i < at && i < frames; i++)
            poses[i] = kr_pose_mul(&poses[i], &offset);
        if (kind[e] == EVENT_JUMP) {
            offset = jump_no++ % 2 == 0 ? random_jump(&rng, max_angle, cfg->jump_distance_m)
                                        : kr_pose_identity();
        } else {
            for (int k = 0; k < cover_len && at + (unsigned)k < frames; k++)
                covered[at + (unsigned)k] = true;
        }
        from = at;
    }
    for (unsigned i = from; i < frames; i++)
        poses[i] = kr_pose_mul(&poses[i], &offset);
    free(kind);
    return KR_OK;
}
