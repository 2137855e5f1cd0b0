/* Layout of the synthetic room. Objects stay in two zones the camera never
 * enters: a central zone (a table with things on it and objects on the floor
 * around it, within ~1.45 m of the centre, all lower than the camera) and a
 * wall zone (cabinets and a pillar against the walls opposite and beside the
 * camera's arc), so the camera can neither start inside nor pass through
 * anything. Planes in three directions (floor, walls, box faces) plus curved
 * surfaces constrain all six degrees of freedom. */
#include "capture/synthetic_scene.h"

#include <math.h>
#include <string.h>

#include "capture/synthetic_rng.h"

static void add(kr_synth_scene *s, kr_synth_kind kind, double x, double y, double z, double hx,
                double hy, double hz, double yaw)
{
    if (s->count >= KR_SYNTH_MAX_PRIMS) return;
    s->prims[s->count++] = (kr_synth_prim){kind, {x, y, z}, {hx, hy, hz}, yaw};
}

/* A box resting on the surface at height `base`. */
static void add_box(kr_synth_scene *s, double x, double y, double base, double sx, double sy,
                    double sz, double yaw)
{
    add(s, KR_SYNTH_BOX, x, y, base + sz / 2, sx / 2, sy / 2, sz / 2, yaw);
}

static void add_cylinder(kr_synth_scene *s, double x, double y, double base, double r, double h)
{
    add(s, KR_SYNTH_CYLINDER, x, y, base + h / 2, r, r, h / 2, 0);
}

static void add_sphere(kr_synth_scene *s, double x, double y, double base, double r)
{
    add(s, KR_SYNTH_SPHERE, x, y, base + r, r, r, r, 0);
}

static void table(kr_synth_scene *s, uint64_t *rng, double *top)
{
    double cx = kr_rng_range(rng, -0.1, 0.1), cy = kr_rng_range(rng, -0.1, 0.1);
    double lx = kr_rng_range(rng, 1.1, 1.3), ly = kr_rng_range(rng, 0.7, 0.85);
    double h = kr_rng_range(rng, 0.72, 0.78), th = 0.04, leg = 0.05, inset = 0.07;
    add_box(s, cx, cy, h - th, lx, ly, th, 0);
    for (int i = 0; i < 4; i++) {
        double sx = (i & 1) ? 1 : -1, sy = (i & 2) ? 1 : -1;
        add_box(s, cx + sx * (lx / 2 - inset), cy + sy * (ly / 2 - inset), 0, leg, leg, h - th, 0);
    }
    *top = h;
    /* Things on the table, one per quadrant so they never overlap. */
    double qx = lx / 4, qy = ly / 4;
    add_sphere(s, cx - qx + kr_rng_range(rng, -0.05, 0.05), cy + qy, h,
               kr_rng_range(rng, 0.09, 0.13));
    add_box(s, cx + qx, cy + qy + kr_rng_range(rng, -0.03, 0.03), h, kr_rng_range(rng, 0.18, 0.28),
            kr_rng_range(rng, 0.14, 0.22), kr_rng_range(rng, 0.12, 0.25),
            kr_rng_range(rng, -0.8, 0.8));
    add_cylinder(s, cx + qx + kr_rng_range(rng, -0.05, 0.05), cy - qy, h,
                 kr_rng_range(rng, 0.04, 0.07), kr_rng_range(rng, 0.15, 0.3));
    add_box(s, cx - qx, cy - qy, h, kr_rng_range(rng, 0.25, 0.35), kr_rng_range(rng, 0.15, 0.22),
            kr_rng_range(rng, 0.04, 0.08), kr_rng_range(rng, -0.4, 0.4));
}

/* Floor objects around the table, at azimuths away from the camera's arc
 * (which spans about -140°..-40° around the centre). */
static void floor_objects(kr_synth_scene *s, uint64_t *rng)
{
    static const double az_deg[] = {-5, 50, 120, 185};
    for (int i = 0; i < 4; i++) {
        double az = (az_deg[i] + kr_rng_range(rng, -8, 8)) * M_PI / 180;
        double r = kr_rng_range(rng, 1.05, 1.2);
        double x = r * cos(az), y = r * sin(az);
        switch (i) {
        case 0:
            add_box(s, x, y, 0, kr_rng_range(rng, 0.35, 0.5), kr_rng_range(rng, 0.3, 0.45),
                    kr_rng_range(rng, 0.3, 0.5), kr_rng_range(rng, 0, M_PI));
            break;
        case 1:
            add_cylinder(s, x, y, 0, kr_rng_range(rng, 0.14, 0.2), kr_rng_range(rng, 0.45, 0.7));
            break;
        case 2:
            add_sphere(s, x, y, 0, kr_rng_range(rng, 0.16, 0.24));
            break;
        default:
            add_box(s, x, y, 0, kr_rng_range(rng, 0.3, 0.45), kr_rng_range(rng, 0.3, 0.45),
                    kr_rng_range(rng, 0.25, 0.45), kr_rng_range(rng, 0, M_PI));
            /* A ball resting on top of the box adds a curved surface high up. */
            add_sphere(s, x, y, s->prims[s->count - 1].c[2] * 2, 0.1);
        }
    }
}

/* Cabinets against the far wall and the side walls, and a pillar in a far corner. */
static void wall_objects(kr_synth_scene *s, uint64_t *rng)
{
    const double *lo = s->room_min, *hi = s->room_max;
    double d = kr_rng_range(rng, 0.35, 0.5);
    double w = kr_rng_range(rng, 0.8, 1.1);
    add_box(s, kr_rng_range(rng, -1.4, -0.6), hi[1] - d / 2, 0, w, d, kr_rng_range(rng, 0.8, 1.3),
            0);
    w = kr_rng_range(rng, 0.5, 0.8);
    add_box(s, kr_rng_range(rng, 0.5, 1.2), hi[1] - 0.2, 0, w, 0.4, kr_rng_range(rng, 0.4, 0.7), 0);
    d = kr_rng_range(rng, 0.35, 0.5);
    add_box(s, hi[0] - d / 2, kr_rng_range(rng, -0.5, 0.5), 0, d, kr_rng_range(rng, 0.7, 1.0),
            kr_rng_range(rng, 0.9, 1.6), 0);
    d = kr_rng_range(rng, 0.4, 0.6);
    add_box(s, lo[0] + d / 2, kr_rng_range(rng, 0.0, 0.8), 0, d, kr_rng_range(rng, 0.6, 0.9),
            kr_rng_range(rng, 0.5, 0.9), 0);
    double r = kr_rng_range(rng, 0.15, 0.22);
    double side = kr_rng_uniform(rng) < 0.5 ? -1 : 1;
    double px = side > 0 ? hi[0] - r - 0.1 : lo[0] + r + 0.1;
    add_cylinder(s, px, hi[1] - r - 0.1, 0, r, kr_rng_range(rng, 1.2, 1.9));
}

void kr_synth_scene_build(uint64_t seed, kr_synth_scene *s)
{
    uint64_t rng = seed ^ 0x5ce2e5eedULL;
    memset(s, 0, sizeof *s);
    double hx = kr_rng_range(&rng, 2.6, 3.0), hy = kr_rng_range(&rng, 2.5, 2.8);
    s->room_min[0] = -hx;
    s->room_min[1] = -hy;
    s->room_min[2] = 0;
    s->room_max[0] = hx;
    s->room_max[1] = hy;
    s->room_max[2] = kr_rng_range(&rng, 2.5, 2.8);
    s->ceiling = true;
    double top;
    table(s, &rng, &top);
    s->target[0] = 0;
    s->target[1] = 0.15; /* a little behind the table, so the far objects are in view */
    s->target[2] = top;
    floor_objects(s, &rng);
    wall_objects(s, &rng);
}

double kr_synth_prim_radius(const kr_synth_prim *p)
{
    switch (p->kind) {
    case KR_SYNTH_SPHERE:
        return p->half[0];
    case KR_SYNTH_CYLINDER:
        return sqrt(p->half[0] * p->half[0] + p->half[2] * p->half[2]);
    default:
        return sqrt(p->half[0] * p->half[0] + p->half[1] * p->half[1] + p->half[2] * p->half[2]);
    }
}

void kr_synth_colour(int prim, int face, uint8_t rgb[3])
{
    static const uint8_t palette[8][3] = {{200, 40, 40},  {40, 160, 60},  {40, 70, 200},
                                          {220, 180, 30}, {160, 50, 170}, {30, 170, 180},
                                          {230, 110, 20}, {110, 110, 110}};
    static const uint8_t tints[6][3] = {{150, 120, 90},  {235, 225, 205}, {205, 225, 235},
                                        {225, 235, 205}, {235, 205, 225}, {245, 245, 245}};
    const uint8_t *c = prim >= 0 ? palette[prim % 8] : tints[(face % 6 + 6) % 6];
    for (int k = 0; k < 3; k++)
        rgb[k] = c[k];
}
