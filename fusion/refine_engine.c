/* The refinement's engine dispatcher (fusion/refine_engine.h). */
#include "fusion/refine_engine.h"

#include <stdlib.h>

#include "gpu/device_internal.h"
#include "gpu/refine_gpu.h"

struct kr_refine_engine {
    kr_backend backend;
    kr_gpu_refine *gpu; /* CUDA */
};

kr_status kr_refine_engine_create(kr_refine_engine **out, kr_device *dev)
{
    kr_refine_engine *e = calloc(1, sizeof *e);
    if (!e) return kr_error(KR_ERR_NOMEM, "refine: no memory for an engine");
    e->backend = dev ? kr_device_backend(dev) : KR_BACKEND_CPU;
    if (e->backend == KR_BACKEND_CUDA) {
        kr_status s = kr_gpu_refine_create(&e->gpu, kr_device_gpu(dev));
        if (s != KR_OK) {
            free(e);
            return s;
        }
    }
    *out = e;
    return KR_OK;
}

void kr_refine_engine_destroy(kr_refine_engine **eng)
{
    if (!eng || !*eng) return;
    kr_gpu_refine_destroy(&(*eng)->gpu);
    free(*eng);
    *eng = NULL;
}

kr_backend kr_refine_engine_backend(const kr_refine_engine *eng)
{
    return eng->backend;
}

kr_status kr_refine_engine_field(kr_refine_engine *eng, kr_dfield *f, const float *xyz, size_t n,
                                 size_t stride, float h, int band, double subset, unsigned seed)
{
    if (eng->backend != KR_BACKEND_CUDA)
        return kr_dfield_build(f, xyz, n, stride, h, band, subset, seed);
    kr_dfield g;
    kr_status s = kr_dfield_build_bricks(&g, xyz, n, stride, h, band);
    if (s != KR_OK) return s;
    kr_df_field view = kr_dfield_view(&g);
    s = kr_gpu_refine_fill(eng->gpu, &view, g.bricks, band, xyz, n, stride, g.values);
    if (s == KR_OK) s = kr_dfield_collect(&g, subset, seed);
    if (s != KR_OK) {
        kr_dfield_free(&g);
        return s;
    }
    *f = g;
    return KR_OK;
}

kr_status kr_refine_engine_load(kr_refine_engine *eng, const kr_refine_problem *pb)
{
    if (eng->backend != KR_BACKEND_CUDA) return KR_OK;
    kr_gpu_refine_view *v = malloc(sizeof *v * (size_t)pb->views);
    if (!v) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", pb->views);
    for (int k = 0; k < pb->views; k++)
        v[k] = (kr_gpu_refine_view){.field = kr_dfield_view(&pb->fields[k]),
                                    .bricks = pb->fields[k].bricks,
                                    .grid = pb->fields[k].grid,
                                    .grid_val = pb->fields[k].grid_val,
                                    .n_grid = pb->fields[k].n_grid};
    kr_status s = kr_gpu_refine_load(eng->gpu, v, pb->views);
    free(v);
    return s;
}

kr_status kr_refine_engine_eval(kr_refine_engine *eng, const kr_refine_problem *pb,
                                const kr_df_pose *poses, const int *pairs, int npairs,
                                kr_df_acc *acc)
{
    if (eng->backend == KR_BACKEND_CUDA)
        return kr_gpu_refine_eval(eng->gpu, pb->star, pb->gauge, pb->huber, pb->cap, poses, pairs,
                                  npairs, acc);
    return kr_refine_eval_cpu(pb, poses, pairs, npairs, acc);
}
