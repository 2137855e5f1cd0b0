/* Handheld-like camera motion. The sweep (~0.25 m/s mean, ~0.4 m/s peak at a
 * 1.75 m radius, ±~45° of arc) dominates translation; look-at turning plus a
 * few degrees of wobble at 0.3-1 Hz give ~15-25 deg/s of rotation. All terms
 * are sinusoids, so the motion is smooth (no jerks a tracker could not
 * follow) yet never repeats exactly within a sequence. */
#include "capture/synthetic_path.h"

#include <math.h>

#include "capture/synthetic_rng.h"

static kr_synth_wave wave(uint64_t *rng, double amp_lo, double amp_hi, double hz_lo, double hz_hi)
{
    kr_synth_wave w;
    w.amp = kr_rng_range(rng, amp_lo, amp_hi);
    w.omega = 2 * M_PI * kr_rng_range(rng, hz_lo, hz_hi);
    w.phase = kr_rng_range(rng, 0, 2 * M_PI);
    return w;
}

static double at(const kr_synth_wave *w, double t)
{
    return w->amp * sin(w->omega * t + w->phase);
}

void kr_synth_path_init(kr_synth_path *p, uint64_t seed, const double centre[3])
{
    uint64_t rng = seed ^ 0xca3e7a9a7ULL;
    for (int i = 0; i < 3; i++)
        p->centre[i] = centre[i];
    p->azimuth0 = -M_PI / 2; /* the camera side of the room is -y */
    p->radius0 = 1.75;
    p->height0 = 1.45;
    /* One slow sweep every ~22-28 s, plus a slower drift. The amplitudes keep
     * the azimuth within ±0.84 rad, the arc the scene layout leaves free. */
    p->azimuth[0] = wave(&rng, 0.65, 0.78, 1.0 / 28, 1.0 / 22);
    p->azimuth[1] = wave(&rng, 0.03, 0.06, 0.08, 0.12);
    p->radius = wave(&rng, 0.08, 0.12, 0.05, 0.09);
    p->height = wave(&rng, 0.05, 0.09, 0.06, 0.1);
    for (int a = 0; a < 3; a++) {
        p->shake[a][0] = wave(&rng, 0.008, 0.015, 0.4, 0.7);
        p->shake[a][1] = wave(&rng, 0.004, 0.008, 0.9, 1.3);
        p->look[a] = wave(&rng, 0.06, 0.12, 0.05, 0.12);
        p->tilt[a][0] = wave(&rng, 3.0 * M_PI / 180, 4.5 * M_PI / 180, 0.25, 0.5);
        p->tilt[a][1] = wave(&rng, 1.0 * M_PI / 180, 1.8 * M_PI / 180, 0.6, 1.0);
    }
}

static void normalize3(double v[3])
{
    double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; i++)
        v[i] /= n;
}

static void cross3(const double a[3], const double b[3], double out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

kr_pose kr_synth_path_pose(const kr_synth_path *p, double t)
{
    double az = p->azimuth0 + at(&p->azimuth[0], t) + at(&p->azimuth[1], t);
    double r = p->radius0 + at(&p->radius, t);
    double pos[3] = {p->centre[0] + r * cos(az), p->centre[1] + r * sin(az),
                     p->height0 + at(&p->height, t)};
    double look[3];
    for (int a = 0; a < 3; a++) {
        pos[a] += at(&p->shake[a][0], t) + at(&p->shake[a][1], t);
        look[a] = p->centre[a] + at(&p->look[a], t);
    }

    /* Look-at frame: z forward, x right, y down (x × y = z). */
    double f[3] = {look[0] - pos[0], look[1] - pos[1], look[2] - pos[2]}, up[3] = {0, 0, 1};
    double right[3], down[3];
    normalize3(f);
    cross3(f, up, right);
    normalize3(right);
    cross3(f, right, down);
    kr_pose base = {{right[0], down[0], f[0], right[1], down[1], f[1], right[2], down[2], f[2]},
                    {pos[0], pos[1], pos[2]}};

    /* Hand tremor: a small rotation in the camera frame. */
    double x[6] = {0};
    for (int a = 0; a < 3; a++)
        x[a] = at(&p->tilt[a][0], t) + at(&p->tilt[a][1], t);
    kr_pose wobble = kr_pose_exp(x);
    kr_pose out = kr_pose_mul(&base, &wobble);
    kr_pose_orthonormalize(&out);
    return out;
}
