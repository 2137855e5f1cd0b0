/* The basin check of a fast camera (kr_recover_basin_check): a model fused
 * from the synthetic scan's true poses, and one frame tracked from a
 * prediction that overshot the true pose (as where a fast camera turns
 * back), from a prediction that fails outright, and from the true pose
 * itself. The truth is the source's ground truth. */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>

#include "kinreg/device.h"
#include "kinreg/model.h"
#include "kinreg/pipeline.h"
#include "kinreg/preprocess.h"
#include "pipeline/recover/recover.h"

typedef struct {
    kr_device *dev;
    kr_model *model;
    kr_model_snapshot *snap;
    kr_pyramid pyr;
    kr_pose truth, previous; /* the checked frame's true pose, and the frame's before */
    kr_track_config tc;
} scene;

/* Frames 0..FRAME-1 fused at their true poses (every 2nd), frame FRAME
 * preprocessed for the check. */
#define FRAME 40

static bool scene_open(scene *sc)
{
    memset(sc, 0, sizeof *sc);
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    CHECK_OK(kr_device_create(&sc->dev, &dc));
    kr_source_config scfg;
    kr_source_config_default(&scfg);
    scfg.uri = "synthetic:1";
    scfg.duration_s = 2;
    kr_source *src = NULL;
    CHECK_OK(kr_source_create(&src, &scfg));
    kr_model_config mc;
    kr_model_config_default(&mc);
    mc.background = false;
    CHECK_OK(kr_model_create(&sc->model, &mc));
    if (!sc->dev || !src || !sc->model) {
        kr_source_destroy(&src);
        return false;
    }
    const kr_trajectory *gt = kr_source_groundtruth(src);
    const kr_intrinsics K = kr_source_intrinsics(src);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_track_config_default(&sc->tc);
    kr_pose g0inv = kr_pose_inv(&gt->poses[0]);
    bool ok = gt->count > FRAME;
    for (size_t k = 0; ok && k <= FRAME; k++) {
        kr_frame f;
        if (kr_source_read(src, &f) != KR_OK) {
            ok = false;
            break;
        }
        kr_pose rel = kr_pose_mul(&g0inv, &gt->poses[k]);
        if (k % 2 && k != FRAME) {
            kr_frame_release(&f);
            continue;
        }
        kr_status s = kr_preprocess(sc->dev, &pc, &f, &K, &sc->pyr);
        kr_frame_release(&f);
        CHECK_OK(s);
        if (s != KR_OK)
            ok = false;
        else if (k < FRAME)
            CHECK_OK(kr_model_integrate(sc->model, &sc->pyr.level[sc->tc.finest_level], &rel, k));
        if (k == FRAME - 2) sc->previous = rel;
        if (k == FRAME) sc->truth = rel;
    }
    kr_source_destroy(&src);
    if (ok) {
        CHECK_OK(kr_model_request_snapshot(sc->model, FRAME - 1));
        sc->snap = kr_model_snapshot_acquire(sc->model);
        ok = sc->snap != NULL;
    }
    return ok;
}

static void scene_close(scene *sc)
{
    if (sc->snap) kr_model_snapshot_release(&sc->snap);
    kr_pyramid_free(&sc->pyr);
    kr_model_destroy(&sc->model);
    kr_device_destroy(&sc->dev);
}

static double distance(const kr_pose *a, const kr_pose *b, double *deg)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    return sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]);
}

/* `shift` metres along the camera's own x axis (sideways, along the
 * scene's walls) from `pose`. */
static kr_pose shifted(const kr_pose *pose, double shift)
{
    kr_pose p = *pose;
    for (int i = 0; i < 3; i++)
        p.t[i] += pose->R[3 * i] * shift;
    return p;
}

KR_TEST(recovery_basin, keeps_the_better_basin_of_prediction_and_last_pose)
{
    scene sc;
    if (!scene_open(&sc)) {
        scene_close(&sc);
        return;
    }
    const kr_kdtree *tree = kr_model_snapshot_tree(sc.snap);
    double deg, m;

    /* The prediction is the truth: the solution stays there, nothing more
     * is tracked, and the result is plain tracking's. */
    kr_track_result plain, io;
    CHECK_OK(kr_track_frame_on(sc.dev, tree, &sc.pyr, &sc.truth, &sc.tc, &plain));
    io = plain;
    bool from_last = true;
    CHECK_OK(kr_recover_basin_check(sc.dev, tree, &sc.pyr, &sc.truth, &sc.previous, &sc.tc, &io,
                                    &from_last));
    CHECK(!from_last);
    CHECK_LT(distance(&plain.pose, &io.pose, &deg), 1e-9);

    /* A prediction that overshot by 25 cm sideways (a fast camera that
     * turned back): whatever Newton from it found, the checked result is
     * the truth's basin, and a result from the prediction that was off
     * has been replaced by the one from the last pose. */
    kr_pose over = shifted(&sc.truth, 0.25);
    kr_track_result first;
    CHECK_OK(kr_track_frame_on(sc.dev, tree, &sc.pyr, &over, &sc.tc, &first));
    io = first;
    CHECK_OK(kr_recover_basin_check(sc.dev, tree, &sc.pyr, &over, &sc.previous, &sc.tc, &io,
                                    &from_last));
    double first_deg, first_m = distance(&sc.truth, &first.pose, &first_deg);
    m = distance(&sc.truth, &io.pose, &deg);
    printf("    overshoot 25 cm: from the prediction %.1f cm / %.1f deg off (%s, %.2f inliers), "
           "checked %.2f cm / %.2f deg off (%s)\n",
           100 * first_m, first_deg, kr_track_state_name(first.state), first.inlier_fraction,
           100 * m, deg, from_last ? "from the last pose" : "from the prediction");
    CHECK_LT(m, 0.01);
    CHECK_LT(deg, 1.0);
    CHECK(io.state != KR_TRACK_LOST);
    if (first.state == KR_TRACK_LOST || first_m > 0.03) CHECK(from_last);

    /* A prediction a metre off: tracking from it fails, the last pose's
     * result replaces it. */
    kr_pose far = shifted(&sc.truth, 1.0);
    CHECK_OK(kr_track_frame_on(sc.dev, tree, &sc.pyr, &far, &sc.tc, &io));
    CHECK_OK(
        kr_recover_basin_check(sc.dev, tree, &sc.pyr, &far, &sc.previous, &sc.tc, &io, &from_last));
    CHECK(from_last);
    CHECK(io.state == KR_TRACK_GOOD);
    CHECK_LT(distance(&sc.truth, &io.pose, &deg), 0.01);

    /* No velocity (the prediction is the last pose): nothing to compare. */
    io = plain;
    CHECK_OK(kr_recover_basin_check(sc.dev, tree, &sc.pyr, &sc.previous, &sc.previous, &sc.tc, &io,
                                    &from_last));
    CHECK(!from_last);

    CHECK(kr_recover_basin_check(NULL, tree, &sc.pyr, &over, &sc.previous, &sc.tc, &io,
                                 &from_last) == KR_ERR_INVALID_ARG);
    scene_close(&sc);
}
