/* The refinement's engine dispatcher (pipeline/refine/refine_engine.h): the OpenMP
 * loops, or the CUDA twin on one device or several. With several devices each
 * gets its own context (stream) and every view's fields, evaluates its share
 * of the grid points, and the per-pair sums are added here. kr_refine builds
 * the fields on the devices (kr_refine_engine_prepare / _build_level, at the
 * end of this file): each device builds its views' fields and copies the
 * others'; kr_refine_engine_field / _load remain for host-built fields.
 *
 * What lets the split scale (the first version ran slower on two H200 than
 * on one): the devices' contexts are made, and each level's fields loaded, by
 * one host thread per device at the same time instead of one device after the
 * other; the fields are built on the devices, each its share of the views;
 * and an evaluation is enqueued on every
 * device before any is waited for (kr_refine_cuda_eval_start/finish, staged
 * in page-locked memory), so the devices compute together without a thread
 * team per evaluation. */
#include "pipeline/refine/refine_engine.h"

#include <stdio.h>
#include <stdlib.h>

#include "pipeline/refine/refine_partition.h"
#include "gpu/engine.h"
#include "pipeline/refine/refine_fields_cuda.h"
#include "pipeline/refine/refine_cuda.h"
#include "pipeline/refine/refine_solve_cuda.h"
#include "kinreg/refine.h"

struct kr_refine_engine {
    kr_backend backend;
    int n_gpu;                /* CUDA: devices the sums are split over */
    kr_refine_cuda **gpu;     /* one per device */
    kr_gpu_context **own_ctx; /* contexts created here (NULL: the kr_device's) */
    const kr_refine_acc **dev_sums; /* per device: its sums of the evaluation in hand */
    /* Fields built on the devices (kr_refine_engine_prepare): one set per
     * device, and each view's summary per slot. */
    kr_refine_cuda_fields **fields;
    int views;
    int own_context;         /* the fields work on a twin of the kr_device's context */
    kr_gpu_context *dev_ctx; /* the kr_device's context */
    kr_refine_cuda_field_info *info[2];
    int rank, ranks; /* this process's share of the grid points */
    bool staged;     /* fields go from device to device through the host */
    kr_refine_device_solver *solver; /* made at the first kr_refine_engine_solver */
    bool solver_tried;
};

/* Runs job(eng, d, arg) for every device d, one host thread each (a CUDA
 * call that waits then waits for its own device only); the first failure's
 * status and message are kept (messages are per thread). */
static kr_status each_device(kr_refine_engine *eng, int n,
                             kr_status (*job)(kr_refine_engine *, int, void *), void *arg)
{
    if (n == 1) return job(eng, 0, arg);
    kr_status s = KR_OK;
    char why[512] = "";
#pragma omp parallel for num_threads(n) schedule(static, 1)
    for (int d = 0; d < n; d++) {
        kr_status sd = job(eng, d, arg);
        if (sd != KR_OK)
#pragma omp critical(kr_refine_engine_error)
            if (s == KR_OK) {
                s = sd;
                snprintf(why, sizeof why, "%s", kr_last_error());
            }
    }
    return s == KR_OK ? KR_OK : kr_error(s, "%s", why);
}

typedef struct {
    kr_device *dev;
    const int *devices;
    int n_devices;
} create_arg;

static kr_status create_one(kr_refine_engine *e, int d, void *arg)
{
    const create_arg *a = arg;
    kr_gpu_context *ctx = kr_device_gpu(a->dev);
    kr_status s = KR_OK;
    if (a->n_devices > 0) {
        s = kr_gpu_context_create(&e->own_ctx[d], a->devices[d]);
        ctx = e->own_ctx[d];
    }
    if (s == KR_OK) s = kr_refine_cuda_create(&e->gpu[d], ctx);
    return s;
}

kr_status kr_refine_engine_create(kr_refine_engine **out, kr_device *dev, const int *devices,
                                  int n_devices)
{
    kr_refine_engine *e = calloc(1, sizeof *e);
    if (!e) return kr_error(KR_ERR_NOMEM, "refine: no memory for an engine");
    e->backend = dev ? kr_device_backend(dev) : KR_BACKEND_CPU;
    if (e->backend != KR_BACKEND_CUDA) {
        if (n_devices > 0) {
            free(e);
            return kr_error(KR_ERR_INVALID_ARG,
                            "refine: %d CUDA devices named but the backend is cpu; use the cuda "
                            "backend",
                            n_devices);
        }
        *out = e;
        return KR_OK;
    }
    e->n_gpu = n_devices > 0 ? n_devices : 1;
    /* On the kr_device's own context (the pipeline's), whose scratch another
     * thread may use, the fields' tree builds get a context of their own. */
    e->own_context = n_devices == 0;
    e->dev_ctx = kr_device_gpu(dev);
    e->gpu = calloc((size_t)e->n_gpu, sizeof *e->gpu);
    e->own_ctx = calloc((size_t)e->n_gpu, sizeof *e->own_ctx);
    e->dev_sums = calloc((size_t)e->n_gpu, sizeof *e->dev_sums);
    kr_status s =
        e->gpu && e->own_ctx && e->dev_sums ? KR_OK : kr_error(KR_ERR_NOMEM, "refine: no memory");
    /* Making a context initialises its device (tenths of a second each). */
    create_arg a = {dev, devices, n_devices};
    if (s == KR_OK) s = each_device(e, e->n_gpu, create_one, &a);
    if (s != KR_OK) {
        kr_refine_engine_destroy(&e);
        return s;
    }
    *out = e;
    return KR_OK;
}

void kr_refine_engine_destroy(kr_refine_engine **eng)
{
    if (!eng || !*eng) return;
    kr_refine_engine *e = *eng;
    for (int d = 0; d < e->n_gpu; d++) {
        /* The refine engine reads the fields: it goes first. */
        if (e->gpu) kr_refine_cuda_destroy(&e->gpu[d]);
        if (e->fields) kr_refine_cuda_fields_destroy(&e->fields[d]);
        if (e->own_ctx) kr_gpu_context_destroy(&e->own_ctx[d]);
    }
    kr_refine_device_solver_destroy(&e->solver);
    free(e->gpu);
    free(e->fields);
    free(e->info[0]);
    free(e->info[1]);
    free(e->own_ctx);
    free(e->dev_sums);
    free(e);
    *eng = NULL;
}

void kr_refine_engine_stage_copies(kr_refine_engine *eng, bool staged)
{
    eng->staged = staged;
}

kr_backend kr_refine_engine_backend(const kr_refine_engine *eng)
{
    return eng->backend;
}

kr_refine_device_solver *kr_refine_engine_solver(kr_refine_engine *eng)
{
    if (eng->backend != KR_BACKEND_CUDA) return NULL;
    if (!eng->solver_tried) {
        eng->solver_tried = true;
        const kr_gpu_context *ctx =
            eng->own_ctx && eng->own_ctx[0] ? eng->own_ctx[0] : eng->dev_ctx;
        /* None (no cuSOLVER, no room): the host solves, and the run's
         * solver name (kr_refine_result.solver) says so. */
        (void)kr_refine_device_solver_create(&eng->solver, kr_gpu_context_device(ctx));
    }
    return eng->solver;
}

int kr_refine_engine_devices(const kr_refine_engine *eng)
{
    return eng->backend == KR_BACKEND_CUDA ? eng->n_gpu : 0;
}

kr_status kr_refine_engine_field(kr_refine_engine *eng, kr_dfield *f, const float *xyz,
                                 const float *normals, size_t n, size_t stride, float h, int band,
                                 double subset, unsigned seed)
{
    (void)eng;
    if (normals) return kr_dfield_build_signed(f, xyz, normals, n, stride, h, band, subset, seed);
    return kr_dfield_build(f, xyz, n, stride, h, band, subset, seed);
}

/* Device d's copy of a level: every view's field (its grid points may land
 * in any of them) and its share of each view's grid points. */
static kr_status load_one(kr_refine_engine *eng, int d, void *arg)
{
    const kr_refine_problem *pb = arg;
    kr_refine_cuda_view *v = malloc(sizeof *v * (size_t)pb->views);
    if (!v) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", pb->views);
    for (int k = 0; k < pb->views; k++) {
        const kr_dfield *f = &pb->fields[k];
        size_t lo, hi;
        kr_refine_share(f->n_grid, d, eng->n_gpu, &lo, &hi);
        v[k] = (kr_refine_cuda_view){.field = kr_dfield_lookup_of(f),
                                     .bricks = f->bricks,
                                     .grid = f->grid + 3 * lo,
                                     .grid_val = f->grid_val + lo,
                                     .n_grid = hi - lo};
    }
    kr_status s = kr_refine_cuda_load(eng->gpu[d], v, pb->views);
    free(v);
    return s;
}

static kr_status use_level(kr_refine_engine *eng, int slot);

kr_status kr_refine_engine_load(kr_refine_engine *eng, const kr_refine_problem *pb)
{
    if (eng->backend != KR_BACKEND_CUDA) return KR_OK;
    if (pb->device_level) return use_level(eng, pb->device_level - 1);
    return each_device(eng, eng->n_gpu, load_one, (void *)pb);
}

static kr_status eval_devices(kr_refine_engine *eng, const kr_refine_problem *pb,
                              const kr_refine_posef *poses, const int *pairs, int npairs,
                              kr_refine_acc *acc)
{
    int D = eng->n_gpu;
    /* Enqueue on every device, then wait for each: they compute together. */
    kr_status s = KR_OK;
    for (int d = 0; d < D; d++) {
        kr_status sd = kr_refine_cuda_eval_start(eng->gpu[d], pb->star, pb->gauge, pb->huber,
                                                 pb->cap, poses, pairs, npairs);
        if (s == KR_OK) s = sd;
    }
    /* Then added straight from each device's page-locked sums, pairs split
     * over the host's threads: tens of MB an evaluation for a long sequence,
     * which one thread copying and adding took 40 ms over. Each pair adds
     * the devices in order, so the result does not depend on the thread
     * count. */
    const kr_refine_acc **sums = eng->dev_sums;
    for (int d = 0; d < D; d++) {
        kr_status sd = kr_refine_cuda_eval_wait(eng->gpu[d], &sums[d]);
        if (s == KR_OK) s = sd;
    }
    if (s != KR_OK) return s;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < npairs; p++) {
        kr_refine_acc_zero(&acc[p]);
        for (int d = 0; d < D; d++)
            kr_refine_acc_add(&acc[p], &sums[d][p]);
    }
    return KR_OK;
}

kr_status kr_refine_engine_eval(kr_refine_engine *eng, const kr_refine_problem *pb,
                                const kr_refine_posef *poses, const int *pairs, int npairs,
                                kr_refine_acc *acc)
{
    if (eng->backend != KR_BACKEND_CUDA) return kr_refine_eval_cpu(pb, poses, pairs, npairs, acc);
    if (eng->n_gpu == 1)
        return kr_refine_cuda_eval(eng->gpu[0], pb->star, pb->gauge, pb->huber, pb->cap, poses,
                                   pairs, npairs, acc);
    return eval_devices(eng, pb, poses, pairs, npairs, acc);
}

/* Device-built fields (refine_engine.h). Which device builds view k: k mod
 * D, so that each device builds about V/D fields and evaluates the grid
 * points of those views (the views of a scan are alike). The fields are
 * exchanged (every device samples every view's field), the grid points are
 * not: exchanging fields costs one copy per view and device per level, while
 * building every field on every device would leave the fields' time the same
 * for any number of devices. */
static int owner(const kr_refine_engine *eng, int k)
{
    return k % eng->n_gpu;
}

int kr_refine_engine_device_fields(const kr_refine_engine *eng)
{
    return eng->backend == KR_BACKEND_CUDA;
}

struct kr_refine_cuda_fields *kr_refine_engine_gpu_fields(kr_refine_engine *eng, int d)
{
    return eng->fields && d >= 0 && d < eng->n_gpu ? eng->fields[d] : NULL;
}

typedef struct {
    const kr_refine_view *views;
    int signed_fields;
} prepare_arg;

static kr_status prepare_one(kr_refine_engine *eng, int d, void *arg)
{
    const prepare_arg *a = arg;
    kr_status s = KR_OK;
    /* On the context device d's sums run on (its stream orders the two). */
    if (!eng->fields[d])
        s = eng->own_ctx[d]
                ? kr_refine_cuda_fields_create(&eng->fields[d], eng->own_ctx[d], eng->views, 0)
                : kr_refine_cuda_fields_create(&eng->fields[d], eng->dev_ctx, eng->views,
                                               eng->own_context);
    for (int k = d; k < eng->views && s == KR_OK; k += eng->n_gpu)
        s = kr_refine_cuda_fields_points(eng->fields[d], k, a->views[k].xyz, a->views[k].n,
                                         a->signed_fields);
    return s;
}

kr_status kr_refine_engine_prepare(kr_refine_engine *eng, const kr_refine_view *views, int V,
                                   int signed_fields)
{
    if (eng->backend != KR_BACKEND_CUDA)
        return kr_error(KR_ERR_INVALID_ARG, "refine: the CPU engine builds its fields on the host");
    if (eng->fields && eng->views != V)
        return kr_error(KR_ERR_INVALID_ARG, "refine: the engine was prepared for %d views, not %d",
                        eng->views, V);
    if (!eng->fields) {
        eng->fields = calloc((size_t)eng->n_gpu, sizeof *eng->fields);
        eng->info[0] = calloc((size_t)V, sizeof *eng->info[0]);
        eng->info[1] = calloc((size_t)V, sizeof *eng->info[1]);
        if (!eng->fields || !eng->info[0] || !eng->info[1])
            return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views' device fields", V);
        eng->views = V;
    }
    prepare_arg a = {views, signed_fields};
    return each_device(eng, eng->n_gpu, prepare_one, &a);
}

typedef struct {
    int slot;
    const size_t *stride;
    float h;
    int band;
    double subset;
    unsigned seed;
} build_arg;

static kr_status build_one(kr_refine_engine *eng, int d, void *arg)
{
    const build_arg *a = arg;
    kr_status s = KR_OK;
    for (int k = d; k < eng->views && s == KR_OK; k += eng->n_gpu)
        s = kr_refine_cuda_fields_build(eng->fields[d], a->slot, k, a->stride[k], a->h, a->band,
                                        a->subset, a->seed + (unsigned)k, &eng->info[a->slot][k]);
    return s;
}

/* Device d: the others' fields of the slot, then the level in its engine. */
static kr_status exchange_one(kr_refine_engine *eng, int d, void *arg)
{
    int slot = *(const int *)arg;
    kr_status s = KR_OK;
    for (int k = 0; k < eng->views && s == KR_OK; k++)
        if (owner(eng, k) != d)
            s = kr_refine_cuda_fields_copy(eng->fields[d], eng->fields[owner(eng, k)], slot, k,
                                           eng->staged);
    return s;
}

static kr_status use_one(kr_refine_engine *eng, int d, void *arg)
{
    int slot = *(const int *)arg;
    kr_refine_cuda_view *v = malloc(sizeof *v * (size_t)eng->views);
    if (!v) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", eng->views);
    kr_status s = KR_OK;
    for (int k = 0; k < eng->views && s == KR_OK; k++) {
        kr_refine_cuda_field_info in;
        s = kr_refine_cuda_fields_info(eng->fields[d], slot, k, &in);
        if (s != KR_OK) break;
        v[k] = (kr_refine_cuda_view){.field = in.field, .bricks = in.bricks};
        /* This process's share of the view's grid points, on the device
         * that built it. */
        if (owner(eng, k) == d && in.grid) {
            size_t lo, hi;
            kr_refine_share(in.n_grid, eng->rank, eng->ranks, &lo, &hi);
            v[k].grid = in.grid + 3 * lo;
            v[k].grid_val = in.grid_val + lo;
            v[k].n_grid = hi - lo;
        }
    }
    if (s == KR_OK) s = kr_refine_cuda_use(eng->gpu[d], v, eng->views);
    free(v);
    return s;
}

kr_status kr_refine_engine_build_level(kr_refine_engine *eng, int slot, const size_t *stride,
                                       float h, int band, double subset, unsigned seed, int rank,
                                       int ranks, kr_dfield *fields)
{
    if (!eng->fields || slot < 0 || slot > 1 || ranks < 1 || rank < 0 || rank >= ranks)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: device fields: prepare the views first (slot %d, rank %d of %d)",
                        slot, rank, ranks);
    eng->rank = rank;
    eng->ranks = ranks;
    build_arg a = {slot, stride, h, band, subset, seed};
    kr_status s = each_device(eng, eng->n_gpu, build_one, &a);
    if (s == KR_OK && eng->n_gpu > 1) s = each_device(eng, eng->n_gpu, exchange_one, &slot);
    if (s != KR_OK) return s;
    for (int k = 0; k < eng->views; k++) {
        const kr_refine_cuda_field_info *in = &eng->info[slot][k];
        kr_dfield f = {.h = h, .band = band, .bricks = in->bricks, .n_grid = in->n_grid};
        for (int x = 0; x < 3; x++) {
            f.lo[x] = in->lo[x];
            f.hi[x] = in->hi[x];
        }
        fields[k] = f;
    }
    return KR_OK;
}

static kr_status use_level(kr_refine_engine *eng, int slot)
{
    if (!eng->fields)
        return kr_error(KR_ERR_INVALID_ARG, "refine: no device fields were built for this level");
    return each_device(eng, eng->n_gpu, use_one, &slot);
}
