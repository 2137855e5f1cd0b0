/* The OpenMP engine of preprocessing: loops over pixels that call the shared
 * per-pixel math of pipeline/preprocess/preprocess_kernels.h (the CUDA twin is
 * pipeline/preprocess/preprocess_cuda.cu). */
#include "pipeline/preprocess/preprocess_cpu.h"

void kr_preprocess_cpu(const kr_preprocess_params *pp, const kr_frame *frame, int threads,
                       kr_pyramid *pyr)
{
    const kr_preprocess_depth_params dp = pp->depth;
    const float tol = pp->downsample_tol;
    const float disc = pp->discontinuity;
    const uint16_t *raw = frame->raw;
    int valid_points[KR_MAX_LEVELS] = {0}, valid_normals[KR_MAX_LEVELS] = {0};
    /* Each level's slice of the ray table when kr_preprocess built one (a
     * lens with distortion): the same bits as undistorting inline. */
    const float *rays[KR_MAX_LEVELS] = {0};
    if (pyr->rays) {
        const float *r = pyr->rays;
        for (int l = 0; l < pyr->levels; l++) {
            rays[l] = r;
            r += 2 * (size_t)pyr->level[l].width * (size_t)pyr->level[l].height;
        }
    }

    /* One parallel region for the whole pyramid: each level's loop ends in a
     * barrier, so level l+1 reads a finished level l. */
#pragma omp parallel num_threads(threads)
    {
        const kr_cloud *c0 = &pyr->level[0];
#pragma omp for schedule(static)
        for (int v = 0; v < c0->height; v++) {
            if (rays[0])
                for (int u = 0; u < c0->width; u++)
                    kr_preprocess_level0_pixel_rays(raw, c0->width, u, v, &dp, rays[0], c0->points);
            else
                for (int u = 0; u < c0->width; u++)
                    kr_preprocess_level0_pixel(raw, c0->width, u, v, &dp, &c0->intrinsics,
                                               c0->points);
        }

        for (int l = 1; l < pyr->levels; l++) {
            const kr_cloud *f = &pyr->level[l - 1], *c = &pyr->level[l];
#pragma omp for schedule(static)
            for (int v = 0; v < c->height; v++) {
                if (rays[l])
                    for (int u = 0; u < c->width; u++)
                        kr_preprocess_downsample_pixel_rays(f->points, f->width, c->width, u, v,
                                                            tol, rays[l], c->points);
                else
                    for (int u = 0; u < c->width; u++)
                        kr_preprocess_downsample_pixel(f->points, f->width, c->width, u, v, tol,
                                                       &c->intrinsics, c->points);
            }
        }

        /* Normals of different levels are independent (all points exist by
         * now), so threads move on without waiting and add their counts at
         * the end. */
        for (int l = 0; l < pyr->levels; l++) {
            const kr_cloud *c = &pyr->level[l];
            const float reach = kr_preprocess_level_normal_reach(pp, &c->intrinsics);
            int my_points = 0, my_normals = 0;
#pragma omp for schedule(static) nowait
            for (int v = 0; v < c->height; v++) {
                for (int u = 0; u < c->width; u++) {
                    my_normals += kr_preprocess_normal_pixel(c->points, c->width, c->height, u, v,
                                                             disc, reach, c->normals);
                    my_points +=
                        c->points[3 * ((size_t)v * (size_t)c->width + (size_t)u) + 2] > 0.0f;
                }
            }
#pragma omp atomic
            valid_points[l] += my_points;
#pragma omp atomic
            valid_normals[l] += my_normals;
        }
    }
    for (int l = 0; l < pyr->levels; l++) {
        pyr->level[l].valid_points = valid_points[l];
        pyr->level[l].valid_normals = valid_normals[l];
    }
}
