/* The surface volume's storage: creation, the block hash, statistics. */
#include <stdlib.h>
#include <string.h>

#include "fusion/surface/surface_internal.h"

void kr_surface_config_default(kr_surface_config *cfg)
{
    cfg->voxel_size = 0.005f;
    cfg->truncation_voxels = 4.0f;
    cfg->depth_step = (float)-KR_DISPARITY_B;
    cfg->max_weight = 128.0f;
    cfg->max_depth = 3.0f;
    cfg->memory_mib = 1024.0;
}

static kr_status check_config(const kr_surface_config *c)
{
    if (!(c->voxel_size >= 1e-4f && c->voxel_size <= 1.0f))
        return kr_error(KR_ERR_INVALID_ARG, "surface voxel size %g m: expected 0.0001 to 1",
                        (double)c->voxel_size);
    if (!(c->truncation_voxels >= 1.0f && c->truncation_voxels <= 64.0f))
        return kr_error(KR_ERR_INVALID_ARG, "surface truncation %g voxels: expected 1 to 64",
                        (double)c->truncation_voxels);
    if (!(c->depth_step >= 0.0f && c->depth_step <= 1.0f))
        return kr_error(KR_ERR_INVALID_ARG, "surface depth step %g: expected 0 to 1",
                        (double)c->depth_step);
    if (!(c->max_weight >= 1.0f))
        return kr_error(KR_ERR_INVALID_ARG, "surface weight cap %g: expected at least 1",
                        (double)c->max_weight);
    if (!(c->max_depth > 0.0f))
        return kr_error(KR_ERR_INVALID_ARG, "surface depth limit %g m: expected above 0",
                        (double)c->max_depth);
    if (!(c->memory_mib >= 0.0 && c->memory_mib <= 1048576.0))
        return kr_error(KR_ERR_INVALID_ARG, "surface memory %g MiB: expected 0 to 1048576",
                        c->memory_mib);
    return KR_OK;
}

kr_status kr_surface_create(kr_surface **out, const kr_surface_config *cfg)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_surface_create: no output");
    kr_surface_config def;
    kr_surface_config_default(&def);
    if (!cfg) cfg = &def;
    kr_status st = check_config(cfg);
    if (st != KR_OK) return st;
    kr_surface *s = calloc(1, sizeof *s);
    if (!s) return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
    s->cfg = *cfg;
    s->max_blocks = cfg->memory_mib > 0
                        ? (size_t)(cfg->memory_mib * 1048576.0 / KR_SURFACE_BYTES_PER_BLOCK)
                        : SIZE_MAX;
    if (s->max_blocks == 0) s->max_blocks = 1;
    *out = s;
    return KR_OK;
}

void kr_surface_destroy(kr_surface **surface)
{
    if (!surface || !*surface) return;
    kr_surface *s = *surface;
    for (size_t i = 0; i < s->n_chunks; i++)
        free(s->chunks[i]);
    free(s->chunks);
    free(s->coords);
    free(s->touched);
    free(s->depth);
    free(s->slots);
    kr_surface_cuda_destroy(&s->gpu);
    free(s);
    *surface = NULL;
}

kr_status kr_surface_fuse_on(kr_surface *s, const kr_device *dev)
{
    if (!s) return kr_error(KR_ERR_INVALID_ARG, "kr_surface_fuse_on: NULL surface");
    if (s->n_blocks)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_surface_fuse_on: the volume already holds %zu blocks", s->n_blocks);
    const kr_gpu_context *ctx = dev ? kr_device_gpu(dev) : NULL;
    if (!ctx) return kr_error(KR_ERR_NO_DEVICE, "kr_surface_fuse_on: not a CUDA device");
    kr_surface_cuda *gpu = NULL;
    kr_status st = kr_surface_cuda_create(ctx, &gpu);
    if (st != KR_OK) return st;
    kr_surface_cuda_destroy(&s->gpu);
    s->gpu = gpu;
    return KR_OK;
}

kr_surface_stats kr_surface_stats_get(const kr_surface *s)
{
    kr_surface_stats st = {s->n_blocks, s->max_blocks, s->frames, s->refused};
    return st;
}

static bool rehash(kr_surface *s, size_t n_slots)
{
    uint32_t *slots = calloc(n_slots, sizeof *slots);
    if (!slots) return false;
    for (size_t b = 0; b < s->n_blocks; b++) {
        size_t i = kr_surface_slot_of(s->coords[b], n_slots - 1);
        while (slots[i])
            i = (i + 1) & (n_slots - 1);
        slots[i] = (uint32_t)(b + 1);
    }
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
    return true;
}

/* Room for one more block: its coordinates, list entry, voxels and a hash load of
 * at most one half. */
static bool reserve_one(kr_surface *s)
{
    if (s->n_blocks == s->cap_blocks) {
        size_t cap = s->cap_blocks ? 2 * s->cap_blocks : 4096;
        int32_t(*coords)[3] = realloc(s->coords, cap * sizeof *coords);
        if (!coords) return false;
        s->coords = coords;
        uint32_t *touched = realloc(s->touched, cap * sizeof *touched);
        if (!touched) return false;
        s->touched = touched;
        s->cap_blocks = cap;
    }
    if (!s->gpu && s->n_blocks == s->n_chunks * KR_SURFACE_CHUNK) {
        if (s->n_chunks == s->cap_chunks) {
            size_t cap = s->cap_chunks ? 2 * s->cap_chunks : 16;
            kr_surface_voxel **chunks = realloc(s->chunks, cap * sizeof *chunks);
            if (!chunks) return false;
            s->chunks = chunks;
            s->cap_chunks = cap;
        }
        /* calloc: all-zero is the unseen voxel (w = 0). */
        kr_surface_voxel *chunk =
            calloc((size_t)KR_SURFACE_CHUNK * KR_SURFACE_BLOCK_VOXELS, sizeof *chunk);
        if (!chunk) return false;
        s->chunks[s->n_chunks++] = chunk;
    }
    if (2 * (s->n_blocks + 1) > s->n_slots && !rehash(s, s->n_slots ? 2 * s->n_slots : 8192))
        return false;
    return true;
}

long kr_surface_find_or_add(kr_surface *s, const int32_t c[3])
{
    kr_surface_view view = kr_surface_host_view(s);
    long found = kr_surface_view_find(&view, c);
    if (found >= 0) return found;
    for (int k = 0; k < 3; k++)
        if (c[k] < -KR_SURFACE_BLOCK_LIMIT || c[k] >= KR_SURFACE_BLOCK_LIMIT) {
            s->refused++;
            return -1;
        }
    if (s->n_blocks >= s->max_blocks) {
        s->refused++;
        return -1;
    }
    if (!reserve_one(s)) return -2;
    size_t b = s->n_blocks++;
    memcpy(s->coords[b], c, sizeof s->coords[b]);
    size_t i = kr_surface_slot_of(c, s->n_slots - 1);
    while (s->slots[i])
        i = (i + 1) & (s->n_slots - 1);
    s->slots[i] = (uint32_t)(b + 1);
    return (long)b;
}
