/* The live refiner with the CUDA engine: the pipeline on the GPU, its
 * refiner thread on a CUDA device of its own (DESIGN.md §2). Skips without
 * a GPU; runs on the GPU machine (label gpu). */
#include "kr_test.h"

#include <math.h>

#include "kinreg/eval.h"
#include "kinreg/pipeline.h"
#include "parity.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* The synthetic source tracked and refined on the GPU: windows are refined
 * by the CUDA engine without failures, the refined trajectory has one pose
 * per frame, and it stays within the refiner's resolution of the tracked
 * one's ATE (as on the CPU, tests/test_refiner.c). */
KR_TEST(gpu_refiner, pipeline_refines_on_the_gpu)
{
    PARITY_NEED();
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.device.backend = KR_BACKEND_CUDA;
    cfg.source.max_frames = 300;
    cfg.refine.enabled = true;
    cfg.refine.window = 4;
    cfg.refine.every = 2;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    REQUIRE(gt != NULL);
    kr_ate tracked = {0}, refined = {0};
    CHECK_OK(kr_eval_ate(gt, kr_pipeline_trajectory(p), 0, &tracked));
    CHECK_OK(kr_eval_ate(gt, kr_pipeline_refined_trajectory(p), 0, &refined));
    printf("    %llu frames, %.1f frames/s, %llu keyframes, %llu windows (%llu moved them), last "
           "%.0f ms; ATE tracked %.2f mm, refined %.2f mm\n",
           (unsigned long long)st.frames_out, st.fps, (unsigned long long)st.keyframes,
           (unsigned long long)st.refinements, (unsigned long long)st.refine_corrections,
           st.refine_ms_last, 1e3 * tracked.rmse, 1e3 * refined.rmse);
    CHECK_EQ(st.frames_out, 300);
    CHECK_GE(st.refinements, 1);
    CHECK_EQ(st.refine_failures, 0);
    CHECK_EQ(kr_pipeline_refined_trajectory(p)->count, 300);
    CHECK_LE(tracked.rmse, 0.01);
    CHECK_LE(refined.rmse, tracked.rmse + cfg.refine.min_correction);
    kr_pipeline_destroy(&p);
}
