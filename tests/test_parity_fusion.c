/* Parity: the voxel map on the device (fusion/voxel_map_cuda.cu) against the host map
 * (fusion/voxel_map.c) fed the same clouds at the same poses, the model
 * fusing on the device against the model fusing on the host (memory cap and
 * eviction included, and the PLY it saves), and the whole CUDA pipeline's
 * ATE against the CPU pipeline's. Skips cleanly without a CUDA device (CTest
 * label gpu).
 *
 * Tolerances. Both maps fuse each voxel's samples in pixel order with the
 * same per-sample math (fusion/voxel_kernels.h; products never fused into
 * multiply-adds, IEEE division and sqrt), and the device gives new voxels
 * record indices in first-pixel order as the host's inserts do: the maps
 * must hold the same voxels in the same order with the same keys and
 * last-seen frames; points, normals and weights are checked to 1e-6 (the
 * largest difference is printed; 0 expected). The pipelines: the CUDA tracker agrees with the CPU
 * tracker to 1e-5 per frame, not bit for bit, so over a whole run the
 * trajectories drift apart slightly: ATE within 0.05 cm (issue 8). */
#include "kr_test.h"
#include "parity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/voxel_map.h"
#include "gpu/engine.h"
#include "fusion/voxel_map_cuda.h"
#include "kinreg/eval.h"
#include "kinreg/model.h"
#include "kinreg/pipeline.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* ---- the clouds both engines are fed ------------------------------------------ */

/* Level `level` of the first `frames` frames of `uri`, preprocessed on the
 * CPU. Each engine's run reads them again (the sources and the per-pixel
 * preprocessing are deterministic), so that no run holds every frame. */
typedef struct {
    int frames, level;
    kr_source *src;
    kr_intrinsics K;
    kr_pyramid pyr;
    int read;
} clouds;

static bool clouds_open(clouds *c, const char *uri, int frames, int level)
{
    memset(c, 0, sizeof *c);
    c->frames = frames;
    c->level = level;
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = uri;
    kr_status st = kr_source_create(&c->src, &sc);
    CHECK_OK(st);
    if (st == KR_OK) c->K = kr_source_intrinsics(c->src);
    return st == KR_OK;
}

/* The next cloud, or NULL at the end (of the frames, or of the source when
 * `to_the_end` is false; else the end of the source is a failure). */
static const kr_cloud *clouds_next(clouds *c, kr_device *cpu, bool to_the_end)
{
    kr_frame fr;
    if (c->read >= c->frames) return NULL;
    kr_status st = kr_source_read(c->src, &fr);
    if (to_the_end) CHECK_OK(st);
    if (st != KR_OK) return NULL;
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    st = kr_preprocess(cpu, &pc, &fr, &c->K, &c->pyr);
    kr_frame_release(&fr);
    CHECK_OK(st);
    if (st != KR_OK) return NULL;
    c->read++;
    return &c->pyr.level[c->level];
}

static void clouds_close(clouds *c)
{
    kr_pyramid_free(&c->pyr);
    kr_source_destroy(&c->src);
}

/* ---- the voxel maps -------------------------------------------------------------- */

/* `frames` frames of `uri`, level `level` of each, fused into a host map
 * and a device map at the same drifting poses (a path need not be the true
 * one for parity; it moves samples across voxel borders). */
typedef struct {
    const char *uri;
    int frames, level;
    bool geometric;
    kr_device *cpu;
    kr_voxel_map *host;
    kr_gpu_context *ctx;
    kr_voxel_map_cuda *dmap;
} maps_in;

static kr_pose drift(int f)
{
    double w[6] = {0.003 * f, -0.002 * f, 0.001 * f, 0.004 * f, 0.002 * f, -0.003 * f};
    return kr_pose_exp(w);
}

/* The records in order: keys and last-seen frames, and each voxel's point,
 * normal and weight (one float an element: as before, each is checked on
 * its own). */
static void put_voxels(kr_parity_out *out, const kr_voxel *v, size_t n)
{
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys), *seen = malloc((n ? n : 1) * sizeof *seen);
    double *values = kr_parity_put(out, 7 * n, 1, "point normal weight");
    for (size_t i = 0; keys && seen && values && i < n; i++) {
        keys[i] = v[i].key;
        seen[i] = v[i].last_seen;
        for (int a = 0; a < 3; a++) {
            values[7 * i + a] = v[i].point[a];
            values[7 * i + 3 + a] = v[i].normal[a];
        }
        values[7 * i + 6] = v[i].weight;
    }
    if (keys) kr_parity_put_u64(out, "keys", keys, n);
    if (seen) kr_parity_put_u64(out, "last seen", seen, n);
    kr_parity_put_scalar(out, "voxels", (double)n);
    free(keys);
    free(seen);
}

static bool host_map(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    maps_in *in = fixture;
    kr_voxel_map_config vc = {0.015f, 64.0f, in->geometric};
    kr_status st = kr_voxel_map_create(&in->host, &vc);
    CHECK_OK(st);
    clouds c;
    if (st != KR_OK || !clouds_open(&c, in->uri, in->frames, in->level)) return false;
    const kr_cloud *cl;
    for (int f = 0; (cl = clouds_next(&c, cpu, false)); f++) {
        kr_pose pose = drift(f);
        CHECK_OK(kr_voxel_map_integrate(in->host, cl, &pose, (uint64_t)f));
    }
    clouds_close(&c);
    size_t n = kr_voxel_map_size(in->host);
    kr_voxel *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return false;
    for (size_t i = 0; i < n; i++)
        v[i] = *kr_voxel_map_at(in->host, i);
    put_voxels(out, v, n);
    free(v);
    return true;
}

static bool device_map(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    maps_in *in = fixture;
    kr_status st = kr_gpu_context_twin(kr_device_gpu(dev), &in->ctx);
    CHECK_OK(st);
    if (st == KR_OK)
        CHECK_OK(st = kr_voxel_map_cuda_create(in->ctx, 0.015f, 64.0f, in->geometric, &in->dmap));
    clouds c;
    if (st != KR_OK || !clouds_open(&c, in->uri, in->frames, in->level)) return false;
    const kr_cloud *cl;
    for (int f = 0; (cl = clouds_next(&c, in->cpu, false)); f++) {
        kr_pose pose = drift(f);
        float R[9], t[3];
        for (int k = 0; k < 9; k++)
            R[k] = (float)pose.R[k];
        for (int k = 0; k < 3; k++)
            t[k] = (float)pose.t[k];
        CHECK_OK(kr_voxel_map_cuda_integrate(in->dmap, cl->points, cl->normals, (size_t)cl->width,
                                             (size_t)cl->height, false, R, t, (uint64_t)f));
    }
    clouds_close(&c);
    size_t n = kr_voxel_map_cuda_size(in->dmap);
    kr_voxel *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return false;
    st = n ? kr_voxel_map_cuda_download(in->dmap, v) : KR_OK;
    CHECK_OK(st);
    if (st == KR_OK) put_voxels(out, v, n);
    free(v);
    return st == KR_OK;
}

/* The gathers of both maps since frame *arg (the host's by scan: record
 * order, the device's order); a negative *arg counts back from the frames
 * asked for. */
static uint64_t since_of(const maps_in *in, const void *arg)
{
    int since = *(const int *)arg;
    if (since < 0) since = in->frames > -since ? in->frames + since : 0;
    return (uint64_t)since;
}

static void put_gather(kr_parity_out *out, float *p, float *n, size_t k)
{
    kr_parity_put_scalar(out, "gathered", (double)k);
    kr_parity_put_f(out, "points", p, 3 * k, 1);
    kr_parity_put_f(out, "normals", n, 3 * k, 1);
    free(p);
    free(n);
}

static bool host_gather(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)cpu;
    maps_in *in = fixture;
    float *p = NULL, *n = NULL;
    size_t c = 0, k = 0;
    kr_status st = kr_voxel_map_gather_scan(in->host, since_of(in, arg), &p, &n, &c, &k);
    CHECK_OK(st);
    CHECK(k > 0);
    put_gather(out, p, n, k);
    return st == KR_OK;
}

static bool device_gather(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    maps_in *in = fixture;
    float *p = NULL, *n = NULL;
    size_t c = 0, k = 0;
    kr_status st = kr_voxel_map_cuda_gather(in->dmap, since_of(in, arg), &p, &n, &c, &k);
    CHECK_OK(st);
    put_gather(out, p, n, k);
    return st == KR_OK;
}

/* The same voxels in the same order with the same keys and last-seen
 * frames, values within 1e-6; gathers point for point, normals NaN alike
 * where they cancel. */
static const int last_ten = -10, all_frames = 0;
static const kr_parity_step maps_steps[] = {
    {.name = "voxel maps",
     .cpu = host_map,
     .cuda = device_map,
     .checks = {PARITY_CHECK("voxels", KR_PARITY_BITS, 0), PARITY_CHECK("keys", KR_PARITY_BITS, 0),
                PARITY_CHECK("last seen", KR_PARITY_BITS, 0),
                PARITY_CHECK("point normal weight", KR_PARITY_ABS, 1e-6, .nan_equal = true)},
     .cpu_name = "host",
     .cuda_name = "device"},
    {.name = "gather of the last ten frames",
     .cpu = host_gather,
     .cuda = device_gather,
     .arg = &last_ten,
     .checks = {PARITY_CHECK("gathered", KR_PARITY_BITS, 0),
                PARITY_CHECK("points", KR_PARITY_BITS, 0),
                PARITY_CHECK("normals", KR_PARITY_BITS, 0, .nan_equal = true)},
     .cpu_name = "host",
     .cuda_name = "device"},
    {.name = "gather of every frame",
     .cpu = host_gather,
     .cuda = device_gather,
     .arg = &all_frames,
     .checks = {PARITY_CHECK("gathered", KR_PARITY_BITS, 0),
                PARITY_CHECK("points", KR_PARITY_BITS, 0),
                PARITY_CHECK("normals", KR_PARITY_BITS, 0, .nan_equal = true)},
     .cpu_name = "host",
     .cuda_name = "device"},
};

static void fuse_both(const char *uri, int frames, int level, bool geometric)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
    maps_in in = {.uri = uri, .frames = frames, .level = level, .geometric = geometric, .cpu = cpu};
    kr_parity_run(maps_steps, sizeof maps_steps / sizeof *maps_steps, &in);
    kr_voxel_map_cuda_destroy(&in.dmap);
    kr_voxel_map_destroy(&in.host);
    kr_gpu_context_destroy(&in.ctx);
}

KR_TEST(parity_fusion, synthetic_same_voxels)
{
    PARITY_NEED();
    fuse_both("synthetic", 40, 1, true);
    fuse_both("synthetic", 10, 0, false);
}

KR_TEST(parity_fusion, tum_same_voxels)
{
    PARITY_NEED();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
    char uri[2100];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    fuse_both(uri, 30, 0, true);
}

/* ---- the model fusing on the device ------------------------------------------------ */

enum { MODEL_FRAMES = 60 };

typedef struct {
    kr_model_config mc;
    kr_device *cpu;
    kr_model *host, *device;
} models_in;

/* A fast drift: the camera leaves what it saw, so old voxels go. */
static kr_pose fast_drift(int f)
{
    double w[6] = {0.01 * f, 0.02 * f, -0.01 * f, 0.05 * f, -0.02 * f, 0.03 * f};
    return kr_pose_exp(w);
}

/* The model's size after each frame, and what it evicted. */
static bool fuse_model(kr_model **model, const models_in *in, kr_device *on, kr_parity_out *out)
{
    kr_status st = kr_model_create(model, &in->mc);
    CHECK_OK(st);
    if (st == KR_OK && on) CHECK_OK(st = kr_model_fuse_on(*model, on));
    clouds c;
    if (st != KR_OK || !clouds_open(&c, "synthetic", MODEL_FRAMES, 0)) return false;
    double *sizes = kr_parity_put(out, MODEL_FRAMES, 1, "size after each frame");
    int f = 0;
    for (const kr_cloud *cl; sizes && (cl = clouds_next(&c, in->cpu, true)); f++) {
        kr_pose pose = fast_drift(f);
        CHECK_OK(kr_model_integrate(*model, cl, &pose, (uint64_t)f));
        sizes[f] = (double)kr_model_size(*model);
    }
    clouds_close(&c);
    if (f != MODEL_FRAMES) return false;
    kr_parity_put_scalar(out, "evicted", (double)kr_model_evicted(*model));
    return true;
}

static bool host_model(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)cpu, (void)arg;
    models_in *in = fixture;
    bool ok = fuse_model(&in->host, in, NULL, out);
    if (ok) CHECK_GT(kr_model_evicted(in->host), 0);
    if (ok)
        printf("    cap %zu voxels: %zu kept, %llu evicted on the host\n",
               kr_model_max_voxels(&in->mc), kr_model_size(in->host),
               (unsigned long long)kr_model_evicted(in->host));
    return ok;
}

static bool device_model(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    models_in *in = fixture;
    return fuse_model(&in->device, in, dev, out);
}

/* Snapshots of both: the same number of active points. */
static bool put_snapshot(kr_model *m, kr_parity_out *out)
{
    CHECK_OK(kr_model_request_snapshot(m, MODEL_FRAMES - 1));
    kr_model_snapshot *snap = kr_model_snapshot_acquire(m);
    CHECK(snap != NULL);
    if (!snap) return false;
    kr_parity_put_scalar(out, "snapshot points",
                         (double)kr_kdtree_size(kr_model_snapshot_tree(snap)));
    kr_model_snapshot_release(&snap);
    return true;
}

static bool host_snapshot(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)cpu, (void)arg;
    return put_snapshot(((models_in *)fixture)->host, out);
}

static bool device_snapshot(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    return put_snapshot(((models_in *)fixture)->device, out);
}

/* The PLY each saves, byte for byte. */
static bool put_ply(kr_model *m, const char *name, kr_parity_out *out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), name);
    CHECK_OK(kr_model_save_ply(m, path));
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    bool ok = b && n > 0 && fread(b, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    CHECK(ok);
    if (ok) kr_parity_put_bytes(out, "ply bytes", b, (size_t)n);
    free(b);
    return ok;
}

static bool host_ply(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)cpu, (void)arg;
    return put_ply(((models_in *)fixture)->host, "fusion_host.ply", out);
}

static bool device_ply(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    return put_ply(((models_in *)fixture)->device, "fusion_device.ply", out);
}

static const kr_parity_step models_steps[] = {
    PARITY_STEP("model under a cap", host_model, device_model, NULL,
                PARITY_CHECK("size after each frame", KR_PARITY_BITS, 0),
                PARITY_CHECK("evicted", KR_PARITY_BITS, 0)),
    PARITY_STEP("snapshot", host_snapshot, device_snapshot, NULL,
                PARITY_CHECK("snapshot points", KR_PARITY_BITS, 0)),
    PARITY_STEP("saved PLY", host_ply, device_ply, NULL,
                PARITY_CHECK("ply bytes", KR_PARITY_BITS, 0)),
};

/* The model fusing on the device under a memory cap small enough to evict
 * many times: the same size, the same evictions, the same snapshot points
 * and the same PLY, byte for byte, as the model fusing on the host. */
KR_TEST(parity_fusion, model_on_device_evicts_and_saves_alike)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
    models_in in = {.cpu = cpu};
    kr_model_config_default(&in.mc);
    in.mc.background = false;
    in.mc.memory_mib = 3.0; /* a few tens of thousands of voxels */
    in.mc.evict_after = 4;
    in.mc.evict_distance = 0.5f;
    in.mc.active_window = 3;
    kr_parity_run(models_steps, sizeof models_steps / sizeof *models_steps, &in);
    kr_model_destroy(&in.host);
    kr_model_destroy(&in.device);
}

/* ---- whole pipelines ----------------------------------------------------------------- */

/* ATE of a deterministic pipeline run on `uri` with backend b. */
static double pipeline_ate(const char *uri, kr_backend b)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = uri;
    cfg.device.backend = b;
    cfg.deterministic = true;
    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, &cfg);
    CHECK_OK(s);
    if (s != KR_OK) return INFINITY;
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    kr_ate ate = {0};
    double rmse = INFINITY;
    if (gt && kr_eval_ate(gt, kr_pipeline_trajectory(p), 0, &ate) == KR_OK) rmse = ate.rmse;
    printf("    %s, %s: %llu frames, %.1f frames/s, ATE %.3f cm\n", uri,
           b == KR_BACKEND_CUDA ? "cuda" : "cpu", (unsigned long long)st.frames_out, st.fps,
           100 * rmse);
    kr_pipeline_destroy(&p);
    return rmse;
}

/* The pipeline makes its own devices; an ATE that cannot be measured is a
 * failure (it used to fail as |∞ − ∞| > 0.0005). */
static bool put_ate(kr_backend b, const void *arg, kr_parity_out *out)
{
    double rmse = pipeline_ate(arg, b);
    CHECK_MSG(isfinite(rmse), "%s: no ATE", (const char *)arg);
    kr_parity_put_scalar(out, "ATE", rmse);
    return isfinite(rmse);
}

static bool cpu_pipeline(kr_device *cpu, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)cpu, (void)fixture;
    return put_ate(KR_BACKEND_CPU, arg, out);
}

static bool cuda_pipeline(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)fixture;
    return put_ate(KR_BACKEND_CUDA, arg, out);
}

/* The CUDA tracker agrees with the CPU tracker to 1e-5 per frame, not bit
 * for bit, so over a whole run the trajectories drift apart slightly: ATE
 * within 0.05 cm (issue 8). */
KR_TEST(parity_fusion, pipeline_ate_equals_cpu)
{
    PARITY_NEED();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    char uri[2100] = "";
    if (dir) snprintf(uri, sizeof uri, "tum:%s", dir);
    const kr_parity_step steps[] = {
        PARITY_STEP("pipeline, synthetic", cpu_pipeline, cuda_pipeline, "synthetic",
                    PARITY_CHECK("ATE", KR_PARITY_ABS, 0.0005)),
        PARITY_STEP("pipeline, TUM fr1", cpu_pipeline, cuda_pipeline, uri,
                    PARITY_CHECK("ATE", KR_PARITY_ABS, 0.0005)),
    };
    kr_parity_run(steps, dir ? 2 : 1, NULL);
}
