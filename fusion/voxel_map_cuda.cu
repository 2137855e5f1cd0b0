/* The voxel map on the device (fusion/voxel_map_cuda.h): records in insertion order
 * (kr_voxel, as the host map's), an open-addressing table of keys and
 * record indices (linear probing, load <= 1/2, keys claimed by atomicCAS),
 * and per-frame work arrays that only grow.
 *
 * A frame, all on ctx's stream, one host sync at the end (the new count):
 *   1. sample_kernel: per pixel, the world point and normal, weight and voxel
 *      key (fusion/voxel_kernels.h), or the empty key when skipped;
 *   2. a stable radix sort of (key, pixel) pairs, then runs of equal keys
 *      (run-length encoding) and their offsets (a scan);
 *   3. lookup_kernel: per run, its record, or a flag on the run's first
 *      pixel when the voxel is new; a scan of those flags ranks new voxels in
 *      pixel order, the host's insertion order; insert_kernel creates them;
 *   4. fuse_kernel: per run, its samples in pixel order into the record.
 * Each voxel's running mean is then the host's, product for product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "fusion/voxel_kernels.h"
#include "gpu/context.cuh"
#include "fusion/voxel_map_cuda.h"

namespace
{

const int kThreads = 256;
const uint32_t kNone = 0xffffffffu; /* a run of skipped samples */
const uint32_t kNew = 0xfffffffeu;  /* a run whose voxel is not in the map yet */

int blocks_for(size_t n)
{
    return (int)((n + kThreads - 1) / kThreads);
}

/* Linear probing from the key's hash, as the host table probes. */
__device__ uint32_t table_find(const unsigned long long *keys, const uint32_t *idx, size_t cap,
                               uint64_t key)
{
    size_t mask = cap - 1, s = (size_t)kr_voxel_hash64(key) & mask;
    for (;;) {
        unsigned long long k = keys[s];
        if (k == key) return idx[s];
        if (k == KR_VOXEL_EMPTY_KEY) return kNone;
        s = (s + 1) & mask;
    }
}

/* Keys are unique among the inserting threads, so a claimed slot is
 * another key's: probe on. */
__device__ void table_insert(unsigned long long *keys, uint32_t *idx, size_t cap, uint64_t key,
                             uint32_t index)
{
    size_t mask = cap - 1, s = (size_t)kr_voxel_hash64(key) & mask;
    for (;;) {
        unsigned long long prev =
            atomicCAS(&keys[s], (unsigned long long)KR_VOXEL_EMPTY_KEY, (unsigned long long)key);
        if (prev == KR_VOXEL_EMPTY_KEY) {
            idx[s] = index;
            return;
        }
        s = (s + 1) & mask;
    }
}

__global__ void insert_all_kernel(const kr_voxel *rec, size_t n, unsigned long long *keys,
                                  uint32_t *idx, size_t cap)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) table_insert(keys, idx, cap, rec[i].key, (uint32_t)i);
}

struct frame_params {
    float R[9], t[3];
    float inv_size, max_weight;
    bool geometric;
    uint64_t frame;
};

__global__ void sample_kernel(const float *__restrict__ P, const float *__restrict__ N, size_t npix,
                              frame_params fp, float *sp, float *sn, float *sw,
                              unsigned long long *skey, uint32_t *pix)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npix) return;
    const float *pc = P + 3 * i, *nc = N + 3 * i;
    uint64_t key = KR_VOXEL_EMPTY_KEY;
    pix[i] = (uint32_t)i;
    /* The host's test: a finite x of point and of normal. */
    if (isfinite(pc[0]) && isfinite(nc[0])) {
        float p[3], n[3], a[3], b[3];
        for (int r = 0; r < 3; r++) {
            a[r] = pc[r];
            b[r] = nc[r];
        }
        kr_voxel_to_world(fp.R, fp.t, a, b, p, n);
        uint64_t k;
        if (kr_voxel_pack_key(fp.inv_size, p, &k)) {
            key = k;
            for (int r = 0; r < 3; r++) {
                sp[3 * i + r] = p[r];
                sn[3 * i + r] = n[r];
            }
            sw[i] = kr_voxel_weight(fp.geometric, a, b);
        }
    }
    skey[i] = key;
}

/* Per run: its record, or kNew with a flag on its first pixel. */
__global__ void lookup_kernel(const unsigned long long *__restrict__ ukey,
                              const uint32_t *__restrict__ offset,
                              const uint32_t *__restrict__ runs,
                              const uint32_t *__restrict__ pix_sorted, size_t npix,
                              const unsigned long long *tkeys, const uint32_t *tidx, size_t cap,
                              uint32_t *run_index, uint32_t *first_flag)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= npix || r >= *runs) return;
    uint64_t key = ukey[r];
    if (key == KR_VOXEL_EMPTY_KEY) {
        run_index[r] = kNone;
        return;
    }
    uint32_t found = table_find(tkeys, tidx, cap, key);
    if (found != kNone) {
        run_index[r] = found;
    } else {
        run_index[r] = kNew;
        first_flag[pix_sorted[offset[r]]] = 1;
    }
}

/* New voxels: record count + (rank of the first pixel among new voxels'). */
__global__ void insert_kernel(const unsigned long long *__restrict__ ukey,
                              const uint32_t *__restrict__ offset,
                              const uint32_t *__restrict__ runs,
                              const uint32_t *__restrict__ pix_sorted,
                              const uint32_t *__restrict__ rank, size_t npix, uint32_t count,
                              uint64_t frame, kr_voxel *rec, unsigned long long *tkeys,
                              uint32_t *tidx, size_t cap, uint32_t *run_index)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= npix || r >= *runs || run_index[r] != kNew) return;
    uint32_t index = count + rank[pix_sorted[offset[r]]];
    kr_voxel v;
    memset(&v, 0, sizeof v);
    v.key = ukey[r];
    v.last_seen = frame;
    rec[index] = v;
    table_insert(tkeys, tidx, cap, ukey[r], index);
    run_index[r] = index;
}

__global__ void count_kernel(const uint32_t *rank, const uint32_t *flag, size_t npix,
                             uint32_t count, uint32_t *out)
{
    *out = count + rank[npix - 1] + flag[npix - 1];
}

__global__ void fuse_kernel(const uint32_t *__restrict__ counts,
                            const uint32_t *__restrict__ offset, const uint32_t *__restrict__ runs,
                            const uint32_t *__restrict__ pix_sorted,
                            const uint32_t *__restrict__ run_index, const float *__restrict__ sp,
                            const float *__restrict__ sn, const float *__restrict__ sw, size_t npix,
                            float cap, uint64_t frame, kr_voxel *rec)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= npix || r >= *runs || run_index[r] == kNone) return;
    kr_voxel *v = &rec[run_index[r]];
    float point[3], normal[3], weight = v->weight;
    for (int a = 0; a < 3; a++) {
        point[a] = v->point[a];
        normal[a] = v->normal[a];
    }
    for (uint32_t j = offset[r], end = offset[r] + counts[r]; j < end; j++) {
        uint32_t p = pix_sorted[j];
        kr_voxel_fuse(point, normal, &weight, sp + 3 * (size_t)p, sn + 3 * (size_t)p, sw[p], cap);
    }
    for (int a = 0; a < 3; a++) {
        v->point[a] = point[a];
        v->normal[a] = normal[a];
    }
    v->weight = weight;
    v->last_seen = frame;
}

__global__ void seen_kernel(const kr_voxel *__restrict__ rec, size_t n, uint64_t since,
                            uint32_t *flag)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flag[i] = rec[i].last_seen >= since;
}

__global__ void emit_kernel(const kr_voxel *__restrict__ rec, size_t n,
                            const uint32_t *__restrict__ flag, const uint32_t *__restrict__ pos,
                            float *out_p, float *out_n, uint32_t *total)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == n - 1) *total = pos[i] + flag[i];
    if (i >= n || !flag[i]) return;
    size_t k = pos[i];
    float u[3];
    for (int a = 0; a < 3; a++)
        out_p[3 * k + a] = rec[i].point[a];
    if (kr_voxel_unit_normal_hd(rec[i].normal, u)) {
        for (int a = 0; a < 3; a++)
            out_n[3 * k + a] = u[a];
    } else {
        out_n[3 * k] = NAN;
        out_n[3 * k + 1] = out_n[3 * k + 2] = 0;
    }
}

} // namespace

struct kr_voxel_map_cuda {
    kr_gpu_context *ctx;
    float inv_size, max_weight;
    bool geometric;
    kr_voxel *rec;
    size_t count, rec_cap;
    unsigned long long *tkeys;
    uint32_t *tidx;
    size_t table_cap;
    /* Per-frame work, for npix_cap pixels. */
    size_t npix_cap;
    float *in_p, *in_n, *sp, *sn, *sw;
    unsigned long long *skey, *skey_sorted, *ukey;
    uint32_t *pix, *pix_sorted, *counts, *offset, *run_index, *first_flag, *rank, *small;
    /* Gather work, for gather_cap records. */
    size_t gather_cap;
    uint32_t *gflag, *gpos;
    float *gp, *gn;
    void *temp;
    size_t temp_bytes;
    uint32_t *host_small; /* page-locked: the count and totals on their way down */
    cudaEvent_t ev[4];
    float integrate_ms, gather_ms;
};

namespace
{

template <typename T> kr_status grow(T **p, size_t n, const char *what)
{
    T *q = NULL;
    cudaError_t err = cudaMalloc((void **)&q, n * sizeof(T) + 1);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not sticky: clear it */
        kr_error(KR_ERR_NOMEM, "device voxel map: no device memory for %zu %s (%s)", n, what,
                 cudaGetErrorString(err));
        return KR_ERR_NOMEM;
    }
    cudaFree(*p);
    *p = q;
    return KR_OK;
}

kr_status ensure_temp(kr_voxel_map_cuda *m, size_t bytes)
{
    if (bytes <= m->temp_bytes) return KR_OK;
    KR_CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    kr_status s = grow((char **)&m->temp, bytes, "bytes of scan and sort storage");
    if (s == KR_OK) m->temp_bytes = bytes;
    return s;
}

/* Room for `need` records, the table at load <= 1/2; the records and the
 * table keep their content (the table is rebuilt when it grows). */
kr_status ensure_records(kr_voxel_map_cuda *m, size_t need)
{
    cudaStream_t st = m->ctx->stream;
    if (need >= UINT32_MAX - 2)
        return kr_error(KR_ERR_NOMEM, "device voxel map full (%zu voxels)", m->count);
    if (need > m->rec_cap) {
        size_t cap = m->rec_cap ? m->rec_cap : 4096;
        while (cap < need)
            cap *= 2;
        kr_voxel *r = NULL;
        if (cudaMalloc((void **)&r, cap * sizeof *r) != cudaSuccess && (cudaGetLastError(), 1))
            return kr_error(KR_ERR_NOMEM, "device voxel map: no device memory for %zu voxels", cap);
        kr_status s = KR_OK;
        if (m->count)
            s = KR_CUDA_STATUS(
                cudaMemcpyAsync(r, m->rec, m->count * sizeof *r, cudaMemcpyDeviceToDevice, st));
        if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(st));
        if (s != KR_OK) {
            cudaFree(r);
            return s;
        }
        cudaFree(m->rec);
        m->rec = r;
        m->rec_cap = cap;
    }
    if (need * 2 > m->table_cap) {
        size_t cap = m->table_cap ? m->table_cap : 8192;
        while (need * 2 > cap)
            cap *= 2;
        unsigned long long *k = NULL;
        uint32_t *ix = NULL;
        if (cudaMalloc((void **)&k, cap * sizeof *k) != cudaSuccess ||
            cudaMalloc((void **)&ix, cap * sizeof *ix) != cudaSuccess) {
            cudaGetLastError();
            cudaFree(k);
            return kr_error(KR_ERR_NOMEM, "device voxel map: no device memory for %zu slots", cap);
        }
        kr_status s = KR_CUDA_STATUS(cudaMemsetAsync(k, 0xff, cap * sizeof *k, st));
        if (s == KR_OK && m->count) {
            insert_all_kernel<<<blocks_for(m->count), kThreads, 0, st>>>(m->rec, m->count, k, ix,
                                                                         cap);
            s = KR_CUDA_STATUS(cudaGetLastError());
        }
        if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(st));
        if (s != KR_OK) {
            cudaFree(k);
            cudaFree(ix);
            return s;
        }
        cudaFree(m->tkeys);
        cudaFree(m->tidx);
        m->tkeys = k;
        m->tidx = ix;
        m->table_cap = cap;
    }
    return KR_OK;
}

kr_status ensure_frame(kr_voxel_map_cuda *m, size_t npix)
{
    if (npix <= m->npix_cap) return KR_OK;
    KR_CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    size_t n = npix;
    kr_status s;
    if ((s = grow(&m->in_p, 3 * n, "input floats")) != KR_OK) return s;
    if ((s = grow(&m->in_n, 3 * n, "input floats")) != KR_OK) return s;
    if ((s = grow(&m->sp, 3 * n, "sample floats")) != KR_OK) return s;
    if ((s = grow(&m->sn, 3 * n, "sample floats")) != KR_OK) return s;
    if ((s = grow(&m->sw, n, "sample weights")) != KR_OK) return s;
    if ((s = grow(&m->skey, n, "sample keys")) != KR_OK) return s;
    if ((s = grow(&m->skey_sorted, n, "sample keys")) != KR_OK) return s;
    if ((s = grow(&m->ukey, n, "run keys")) != KR_OK) return s;
    if ((s = grow(&m->pix, n, "pixel indices")) != KR_OK) return s;
    if ((s = grow(&m->pix_sorted, n, "pixel indices")) != KR_OK) return s;
    if ((s = grow(&m->counts, n, "run lengths")) != KR_OK) return s;
    if ((s = grow(&m->offset, n, "run offsets")) != KR_OK) return s;
    if ((s = grow(&m->run_index, n, "run records")) != KR_OK) return s;
    if ((s = grow(&m->first_flag, n, "new-voxel flags")) != KR_OK) return s;
    if ((s = grow(&m->rank, n, "new-voxel ranks")) != KR_OK) return s;
    m->npix_cap = npix;
    return KR_OK;
}

kr_status ensure_gather(kr_voxel_map_cuda *m, size_t n)
{
    if (n <= m->gather_cap) return KR_OK;
    KR_CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    size_t cap = n + n / 4;
    kr_status s;
    if ((s = grow(&m->gflag, cap, "gather flags")) != KR_OK) return s;
    if ((s = grow(&m->gpos, cap, "gather positions")) != KR_OK) return s;
    if ((s = grow(&m->gp, 3 * cap, "gathered floats")) != KR_OK) return s;
    if ((s = grow(&m->gn, 3 * cap, "gathered floats")) != KR_OK) return s;
    m->gather_cap = cap;
    return KR_OK;
}

} // namespace

kr_status kr_voxel_map_cuda_create(kr_gpu_context *ctx, float voxel_size, float max_weight,
                                   bool geometric_weight, kr_voxel_map_cuda **out)
{
    if (!ctx || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_cuda_create: NULL argument");
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    kr_voxel_map_cuda *m = (kr_voxel_map_cuda *)calloc(1, sizeof *m);
    if (!m) return kr_error(KR_ERR_NOMEM, "cannot allocate device voxel map");
    m->ctx = ctx;
    m->inv_size = 1.0f / voxel_size; /* as the host map computes it */
    m->max_weight = max_weight;
    m->geometric = geometric_weight;
    s = KR_CUDA_STATUS(cudaMallocHost((void **)&m->host_small, 4 * sizeof(uint32_t)));
    if (s == KR_OK) s = grow(&m->small, 4, "counters");
    for (int i = 0; s == KR_OK && i < 4; i++)
        s = KR_CUDA_STATUS(cudaEventCreate(&m->ev[i]));
    if (s != KR_OK) {
        kr_voxel_map_cuda_destroy(&m);
        return s;
    }
    *out = m;
    return KR_OK;
}

void kr_voxel_map_cuda_destroy(kr_voxel_map_cuda **mp)
{
    if (!mp || !*mp) return;
    kr_voxel_map_cuda *m = *mp;
    kr_gpu_enter(m->ctx);
    cudaStreamSynchronize(m->ctx->stream);
    void *bufs[] = {m->rec,        m->tkeys,  m->tidx,   m->in_p,        m->in_n,       m->sp,
                    m->sn,         m->sw,     m->skey,   m->skey_sorted, m->ukey,       m->pix,
                    m->pix_sorted, m->counts, m->offset, m->run_index,   m->first_flag, m->rank,
                    m->small,      m->gflag,  m->gpos,   m->gp,          m->gn,         m->temp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]);
    if (m->host_small) cudaFreeHost(m->host_small);
    for (int i = 0; i < 4; i++)
        if (m->ev[i]) cudaEventDestroy(m->ev[i]);
    free(m);
    *mp = NULL;
}

size_t kr_voxel_map_cuda_size(const kr_voxel_map_cuda *m)
{
    return m ? m->count : 0;
}

kr_status kr_voxel_map_cuda_integrate(kr_voxel_map_cuda *m, const float *points,
                                      const float *normals, size_t w, size_t h, bool on_device,
                                      const float R[9], const float t[3], uint64_t frame)
{
    if (!m || !R || !t || (w * h != 0 && (!points || !normals)))
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_cuda_integrate: NULL argument");
    size_t npix = w * h;
    if (npix == 0) return KR_OK;
    if (npix >= UINT32_MAX)
        return kr_error(KR_ERR_INVALID_ARG, "device fusion: %zu samples is too many", npix);
    kr_status s = kr_gpu_enter(m->ctx);
    if (s != KR_OK) return s;
    cudaStream_t st = m->ctx->stream;
    /* Room for every sample to be a new voxel, before anything changes. */
    if ((s = ensure_frame(m, npix)) != KR_OK) return s;
    if ((s = ensure_records(m, m->count + npix)) != KR_OK) return s;
    size_t sort_b = 0, rle_b = 0, scan_b = 0;
    int n = (int)npix;
    KR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_b, m->skey, m->skey_sorted, m->pix,
                                                  m->pix_sorted, n, 0, 64, st));
    KR_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(NULL, rle_b, m->skey_sorted, m->ukey,
                                                     m->counts, m->small, n, st));
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_b, m->counts, m->offset, n, st));
    size_t need = sort_b > rle_b ? sort_b : rle_b;
    need = need > scan_b ? need : scan_b;
    if ((s = ensure_temp(m, need)) != KR_OK) return s;

    KR_CUDA_CHECK(cudaEventRecord(m->ev[0], st));
    const float *P = points, *N = normals;
    if (!on_device) {
        KR_CUDA_CHECK(
            cudaMemcpyAsync(m->in_p, points, 3 * npix * sizeof(float), cudaMemcpyHostToDevice, st));
        KR_CUDA_CHECK(cudaMemcpyAsync(m->in_n, normals, 3 * npix * sizeof(float),
                                      cudaMemcpyHostToDevice, st));
        P = m->in_p;
        N = m->in_n;
    }
    frame_params fp;
    for (int k = 0; k < 9; k++)
        fp.R[k] = R[k];
    for (int k = 0; k < 3; k++)
        fp.t[k] = t[k];
    fp.inv_size = m->inv_size;
    fp.max_weight = m->max_weight;
    fp.geometric = m->geometric;
    fp.frame = frame;
    int nb = blocks_for(npix);
    sample_kernel<<<nb, kThreads, 0, st>>>(P, N, npix, fp, m->sp, m->sn, m->sw, m->skey, m->pix);
    KR_CUDA_CHECK_LAUNCH(sample_kernel);
    size_t tb = m->temp_bytes;
    KR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(m->temp, tb, m->skey, m->skey_sorted, m->pix,
                                                  m->pix_sorted, n, 0, 64, st));
    KR_CUDA_CHECK(cudaMemsetAsync(m->counts, 0, npix * sizeof(uint32_t), st));
    tb = m->temp_bytes;
    KR_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(m->temp, tb, m->skey_sorted, m->ukey,
                                                     m->counts, m->small, n, st));
    tb = m->temp_bytes;
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(m->temp, tb, m->counts, m->offset, n, st));
    KR_CUDA_CHECK(cudaMemsetAsync(m->first_flag, 0, npix * sizeof(uint32_t), st));
    lookup_kernel<<<nb, kThreads, 0, st>>>(m->ukey, m->offset, m->small, m->pix_sorted, npix,
                                           m->tkeys, m->tidx, m->table_cap, m->run_index,
                                           m->first_flag);
    KR_CUDA_CHECK_LAUNCH(lookup_kernel);
    tb = m->temp_bytes;
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(m->temp, tb, m->first_flag, m->rank, n, st));
    insert_kernel<<<nb, kThreads, 0, st>>>(m->ukey, m->offset, m->small, m->pix_sorted, m->rank,
                                           npix, (uint32_t)m->count, frame, m->rec, m->tkeys,
                                           m->tidx, m->table_cap, m->run_index);
    KR_CUDA_CHECK_LAUNCH(insert_kernel);
    count_kernel<<<1, 1, 0, st>>>(m->rank, m->first_flag, npix, (uint32_t)m->count, m->small + 1);
    KR_CUDA_CHECK_LAUNCH(count_kernel);
    fuse_kernel<<<nb, kThreads, 0, st>>>(m->counts, m->offset, m->small, m->pix_sorted,
                                         m->run_index, m->sp, m->sn, m->sw, npix, m->max_weight,
                                         frame, m->rec);
    KR_CUDA_CHECK_LAUNCH(fuse_kernel);
    KR_CUDA_CHECK(
        cudaMemcpyAsync(m->host_small, m->small + 1, sizeof(uint32_t), cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaEventRecord(m->ev[1], st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    m->count = m->host_small[0];
    cudaEventElapsedTime(&m->integrate_ms, m->ev[0], m->ev[1]);
    return KR_OK;
}

kr_status kr_voxel_map_cuda_gather(kr_voxel_map_cuda *m, uint64_t since, float **points,
                                   float **normals, size_t *capacity, size_t *n)
{
    if (!m || !points || !normals || !capacity || !n)
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_cuda_gather: NULL argument");
    kr_status s = kr_gpu_enter(m->ctx);
    if (s != KR_OK) return s;
    if (m->count == 0) {
        *n = 0;
        return KR_OK;
    }
    cudaStream_t st = m->ctx->stream;
    size_t count = m->count, scan_b = 0;
    if ((s = ensure_gather(m, count)) != KR_OK) return s;
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_b, m->gflag, m->gpos, (int)count, st));
    if ((s = ensure_temp(m, scan_b)) != KR_OK) return s;
    KR_CUDA_CHECK(cudaEventRecord(m->ev[2], st));
    int nb = blocks_for(count);
    seen_kernel<<<nb, kThreads, 0, st>>>(m->rec, count, since, m->gflag);
    KR_CUDA_CHECK_LAUNCH(seen_kernel);
    size_t tb = m->temp_bytes;
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(m->temp, tb, m->gflag, m->gpos, (int)count, st));
    emit_kernel<<<nb, kThreads, 0, st>>>(m->rec, count, m->gflag, m->gpos, m->gp, m->gn,
                                         m->small + 2);
    KR_CUDA_CHECK_LAUNCH(emit_kernel);
    KR_CUDA_CHECK(cudaMemcpyAsync(m->host_small + 1, m->small + 2, sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    size_t total = m->host_small[1];
    if (total > *capacity || !*points || !*normals) {
        size_t cap = total > 1024 ? total : 1024;
        float *p = (float *)realloc(*points, cap * 3 * sizeof(float));
        if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu snapshot points", cap);
        *points = p;
        float *q = (float *)realloc(*normals, cap * 3 * sizeof(float));
        if (!q) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu snapshot normals", cap);
        *normals = q;
        *capacity = cap;
    }
    if (total) {
        KR_CUDA_CHECK(
            cudaMemcpyAsync(*points, m->gp, 3 * total * sizeof(float), cudaMemcpyDeviceToHost, st));
        KR_CUDA_CHECK(cudaMemcpyAsync(*normals, m->gn, 3 * total * sizeof(float),
                                      cudaMemcpyDeviceToHost, st));
    }
    KR_CUDA_CHECK(cudaEventRecord(m->ev[3], st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    cudaEventElapsedTime(&m->gather_ms, m->ev[2], m->ev[3]);
    *n = total;
    return KR_OK;
}

kr_status kr_voxel_map_cuda_download(kr_voxel_map_cuda *m, kr_voxel *out)
{
    if (!m || (!out && m->count))
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_cuda_download: NULL argument");
    if (m->count == 0) return KR_OK;
    kr_status s = kr_gpu_enter(m->ctx);
    if (s != KR_OK) return s;
    KR_CUDA_CHECK(cudaMemcpyAsync(out, m->rec, m->count * sizeof *out, cudaMemcpyDeviceToHost,
                                  m->ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    return KR_OK;
}

kr_status kr_voxel_map_cuda_upload(kr_voxel_map_cuda *m, const kr_voxel *records, size_t n)
{
    if (!m || (!records && n))
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_cuda_upload: NULL argument");
    kr_status s = kr_gpu_enter(m->ctx);
    if (s != KR_OK) return s;
    cudaStream_t st = m->ctx->stream;
    if ((s = ensure_records(m, n)) != KR_OK) return s;
    if (n)
        KR_CUDA_CHECK(
            cudaMemcpyAsync(m->rec, records, n * sizeof *records, cudaMemcpyHostToDevice, st));
    if (m->table_cap)
        KR_CUDA_CHECK(cudaMemsetAsync(m->tkeys, 0xff, m->table_cap * sizeof *m->tkeys, st));
    if (n) {
        insert_all_kernel<<<blocks_for(n), kThreads, 0, st>>>(m->rec, n, m->tkeys, m->tidx,
                                                              m->table_cap);
        KR_CUDA_CHECK_LAUNCH(insert_all_kernel);
    }
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    m->count = n;
    return KR_OK;
}

void kr_voxel_map_cuda_times(const kr_voxel_map_cuda *m, double *integrate_ms, double *gather_ms)
{
    if (integrate_ms) *integrate_ms = m ? m->integrate_ms : 0;
    if (gather_ms) *gather_ms = m ? m->gather_ms : 0;
}
