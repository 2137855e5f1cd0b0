/* The synthetic room loop that the signed-field tests refine
 * (test_refine_signed.c on the CPU, test_gpu_refine_devices.c split over
 * devices): its views, a seeded start, and the settings that bring it back.
 * Header-only because the runner globs only test_*.c. */
#ifndef KR_ROOM_FIXTURE_H
#define KR_ROOM_FIXTURE_H

#include <math.h>

#include "kr_test.h"

#include "kinreg/scan.h"
#include "kinreg/refine.h"

/* V views of 160×120 around the room, their true poses, and a start moved
 * from the truth by 0.2° and 5 mm in each axis's spread (view 0, the gauge,
 * kept). The caller frees xyz[k]. */
static inline kr_status room_fixture(int V, float **xyz, size_t *n, kr_refine_view *views,
                                     kr_pose *truth, kr_pose *start)
{
    kr_status st = kr_scan_synthetic_room(V, 160, 120, 0, 1, xyz, n, truth);
    if (st != KR_OK) return st;
    unsigned s = 3;
    for (int k = 0; k < V; k++) {
        views[k] = (kr_refine_view){xyz[k], n[k]};
        double x[6] = {0};
        for (int i = 0; i < 6 && k; i++)
            x[i] = (i < 3 ? 0.2 * M_PI / 180 : 0.005) * kr_nrand(&s) / sqrt(3.0);
        kr_pose d = kr_pose_exp(x);
        start[k] = kr_pose_mul(&d, &truth[k]);
    }
    return KR_OK;
}

/* Signed fields on one 2 cm grid. A loop of views that each overlap only
 * part of the room needs every grid point: on a fifth of them (the default
 * subset, chosen for the bunny's band-2 finest grid) the 24-view loop ends
 * at 1.02 mm. */
static inline void room_refine_config(kr_refine_config *cfg)
{
    kr_refine_config_default(cfg);
    cfg->cell = 0.02;
    cfg->levels = 1;
    cfg->signed_field = true;
    cfg->subset = 1;
}

#endif
