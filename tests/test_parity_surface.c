/* Parity: the surface fused and meshed on the device (fusion/surface/
 * surface_cuda.cu) against the CPU engine, fed the same clouds and colours
 * at the same poses. Both run the same per-voxel and per-cube math
 * (surface_kernels.h, surface_mesh_kernels.h; the CUDA file never fuses
 * products into multiply-adds, IEEE division and sqrt), so the voxels must
 * agree bit for bit, and so must the meshes, the coarse ones too: the same
 * vertices in the same order, the same colours, the same triangles. Skips cleanly without a CUDA
 * device (CTest label gpu). */
#include "kr_test.h"
#include "parity.h"

#include <stdlib.h>
#include <string.h>

#include "fusion/surface/surface_internal.h"
#include "kinreg/preprocess.h"
#include "kinreg/surface.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* Fuses the first `frames` frames of synthetic:1 at their true poses. */
static kr_surface *fuse_frames(const kr_device *engine, float voxel, int frames)
{
    kr_surface_config cfg;
    kr_surface_config_default(&cfg);
    cfg.voxel_size = voxel;
    kr_surface *s = NULL;
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = "synthetic:1";
    sc.max_frames = frames;
    sc.colour = true;
    kr_source *src = NULL;
    kr_device *cpu = kr_parity_make_device(KR_BACKEND_CPU);
    kr_status st = kr_surface_create(&s, &cfg);
    if (st == KR_OK && engine) st = kr_surface_fuse_on(s, engine);
    if (st == KR_OK) st = kr_source_create(&src, &sc);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    pc.levels = 1;
    kr_pyramid pyr = {0};
    kr_frame frame;
    while (st == KR_OK && cpu && (st = kr_source_read(src, &frame)) == KR_OK) {
        kr_intrinsics k = kr_source_intrinsics(src);
        st = kr_preprocess(cpu, &pc, &frame, &k, &pyr);
        if (st == KR_OK)
            st = kr_surface_integrate(s, &pyr.level[0], frame.rgb,
                                      &kr_source_groundtruth(src)->poses[frame.index]);
        kr_frame_release(&frame);
    }
    kr_pyramid_free(&pyr);
    kr_source_destroy(&src);
    kr_device_destroy(&cpu);
    if (st != KR_END) {
        kr_test_fail(__FILE__, __LINE__, "fusing on %s: %s", engine ? "the device" : "the CPU",
                     kr_last_error());
        kr_surface_destroy(&s);
    }
    return s;
}

static void same_surface(float voxel, int frames)
{
    kr_device *cpu, *cuda;
    if (!kr_parity_devices(&cpu, &cuda)) return;
    kr_surface *host = fuse_frames(NULL, voxel, frames), *dev = fuse_frames(cuda, voxel, frames);
    if (!host || !dev) {
        kr_surface_destroy(&host);
        kr_surface_destroy(&dev);
        return;
    }
    REQUIRE(host->n_blocks == dev->n_blocks);
    size_t n = host->n_blocks, differ = 0;
    kr_surface_voxel *down = malloc(n * KR_SURFACE_BLOCK_VOXELS * sizeof *down);
    REQUIRE(down != NULL);
    CHECK_OK(kr_surface_cuda_download_range(dev->gpu, 0, n, down));
    for (size_t b = 0; b < n; b++)
        differ += memcmp(kr_surface_block_voxels(host, b), down + b * KR_SURFACE_BLOCK_VOXELS,
                         KR_SURFACE_BLOCK_VOXELS * sizeof *down) != 0;
    printf("    %d frames at %.0f mm: %zu blocks, %zu differ\n", frames, voxel * 1e3, n, differ);
    CHECK_EQ(differ, 0);
    free(down);

    /* The meshes, full and coarse: the device averages its own voxels
     * (factors that divide the block) as the host averages its. */
    for (int factor = 1; factor <= 4; factor *= 2) {
        kr_mesh a = {0}, b = {0};
        CHECK_OK(kr_surface_extract_coarse(host, factor, &a));
        CHECK_OK(kr_surface_extract_coarse(dev, factor, &b));
        printf("    meshes x%d: %zu and %zu vertices, %zu and %zu triangles\n", factor,
               a.n_vertices, b.n_vertices, a.n_faces, b.n_faces);
        CHECK(a.n_vertices == b.n_vertices && a.n_faces == b.n_faces && a.n_faces > 100);
        if (a.n_vertices == b.n_vertices && a.n_faces == b.n_faces) {
            CHECK(!memcmp(a.xyz, b.xyz, 3 * a.n_vertices * sizeof *a.xyz));
            CHECK(!memcmp(a.normals, b.normals, 3 * a.n_vertices * sizeof *a.normals));
            CHECK(!memcmp(a.faces, b.faces, 3 * a.n_faces * sizeof *a.faces));
            CHECK(a.rgb && b.rgb && !memcmp(a.rgb, b.rgb, 3 * a.n_vertices));
        }
        kr_mesh_free(&a);
        kr_mesh_free(&b);
    }
    kr_surface_destroy(&host);
    kr_surface_destroy(&dev);
}

KR_TEST(parity_surface, fused_voxels_and_mesh_match_bit_for_bit)
{
    same_surface(0.01f, 20);
    same_surface(0.005f, 10);
}

/* The device engine is chosen only for an empty volume. */
KR_TEST(parity_surface, device_only_while_empty)
{
    kr_device *cpu, *cuda;
    if (!kr_parity_devices(&cpu, &cuda)) return;
    kr_surface *s = fuse_frames(NULL, 0.02f, 2);
    REQUIRE(s != NULL);
    CHECK_EQ(kr_surface_fuse_on(s, cuda), KR_ERR_INVALID_ARG);
    CHECK_EQ(kr_surface_fuse_on(s, cpu), KR_ERR_INVALID_ARG);
    kr_surface_destroy(&s);
}
