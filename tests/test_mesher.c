/* The surface thread inside a run (pipeline/mesher.c, kinreg run --mesh):
 * the tracker hands frames over while the thread fuses them, and the mesh
 * is written when the run ends. Labelled threads, so the TSan pass watches
 * the hand-over (tests/CMakeLists.txt). The mesh's geometry is checked
 * against the scene in tests/test_surface.c (run_writes_the_tracked_surface,
 * through the program). */
#include "kr_test.h"

#include <stdlib.h>

#include "core/ply.h"
#include "kinreg/pipeline.h"

KR_LABELS("threads");

KR_TEST(mesher, a_run_writes_its_mesh_in_colour)
{
    char path[512];
    snprintf(path, sizeof path, "%s/mesher.ply", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.duration_s = 0.5;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.mesh_path = path;
    cfg.surface.voxel_size = 0.02f;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    kr_pipeline_destroy(&p);
    printf("    %llu frames tracked, %llu fused into the surface, %llu skipped; %zu vertices\n",
           (unsigned long long)st.frames_out, (unsigned long long)st.mesh_frames,
           (unsigned long long)st.mesh_skipped, st.mesh_vertices);
    CHECK(st.mesh_frames >= 1);
    CHECK(st.mesh_frames + st.mesh_skipped <= st.frames_out);
    CHECK(!st.mesh_save_failed);
    kr_ply_points ply;
    if (kr_ply_read(path, &ply) == KR_OK) {
        CHECK_EQ(ply.n, st.mesh_vertices);
        CHECK(ply.rgb != NULL); /* the synthetic source has colour */
        kr_ply_points_free(&ply);
    } else {
        kr_test_fail(__FILE__, __LINE__, "no mesh: %s", kr_last_error());
    }

    /* An output that cannot be written is the run's error and its flag. */
    snprintf(path, sizeof path, "%s/no-such-dir/mesher.ply", kr_test_tmpdir());
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_STATUS(kr_pipeline_run(p), KR_ERR_IO);
    kr_pipeline_get_stats(p, &st);
    CHECK(st.mesh_save_failed);
    kr_pipeline_destroy(&p);
}
