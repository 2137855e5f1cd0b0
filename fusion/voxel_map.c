/* Voxel map: records live in a dense array in insertion order; an
 * open-addressing table (linear probing, load ≤ 1/2) maps packed voxel
 * coordinates to record indices. Records never move, so growing the table only
 * re-inserts keys, and the active list (record indices of recently seen
 * voxels) stays valid across growth. */
#include "fusion/voxel_map.h"

#include "fusion/voxel_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keys, hashing and the per-sample math: fusion/voxel_kernels.h. */
#define EMPTY_KEY KR_VOXEL_EMPTY_KEY

typedef struct {
    uint64_t key;
    uint32_t index;
} slot;

struct kr_voxel_map {
    kr_voxel_map_config cfg;
    float inv_size;
    kr_voxel *records;
    size_t count, records_cap;
    slot *table;
    size_t table_cap; /* power of two */
    uint32_t *active;  /* record indices; capacity records_cap */
    size_t active_count;
    /* Every voxel outside the active list was last seen before this frame:
     * a gather from an older frame must rebuild the list first. */
    uint64_t pruned_below;
    struct sample_ *scratch; /* per-frame samples, reused */
    size_t scratch_cap;
};

static inline uint64_t hash64(uint64_t x)
{
    return kr_voxel_hash64(x);
}

static inline bool pack_key(const kr_voxel_map *m, const float p[3], uint64_t *key)
{
    return kr_voxel_pack_key(m->inv_size, p, key);
}

kr_status kr_voxel_map_create(kr_voxel_map **out, const kr_voxel_map_config *cfg)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_create: NULL argument");
    if (!(cfg->voxel_size > 0) || !isfinite(cfg->voxel_size))
        return kr_error(KR_ERR_INVALID_ARG, "voxel size must be positive (got %g)", (double)cfg->voxel_size);
    if (!(cfg->max_weight > 0))
        return kr_error(KR_ERR_INVALID_ARG, "max weight must be positive (got %g)", (double)cfg->max_weight);
    kr_voxel_map *m = calloc(1, sizeof *m);
    if (!m) return kr_error(KR_ERR_NOMEM, "cannot allocate voxel map");
    m->cfg = *cfg;
    m->inv_size = 1.0f / cfg->voxel_size;
    *out = m;
    return KR_OK;
}

void kr_voxel_map_destroy(kr_voxel_map **mp)
{
    if (!mp || !*mp) return;
    kr_voxel_map *m = *mp;
    free(m->records);
    free(m->table);
    free(m->active);
    free(m->scratch);
    free(m);
    *mp = NULL;
}

void kr_voxel_map_clear(kr_voxel_map *m)
{
    if (!m) return;
    m->count = 0;
    m->active_count = 0;
    m->pruned_below = 0;
    if (m->table) memset(m->table, 0xff, m->table_cap * sizeof *m->table); /* every key EMPTY_KEY */
}

size_t kr_voxel_map_size(const kr_voxel_map *m)
{
    return m ? m->count : 0;
}

const kr_voxel *kr_voxel_map_at(const kr_voxel_map *m, size_t i)
{
    return m && i < m->count ? &m->records[i] : NULL;
}

static void table_insert(slot *table, size_t cap, uint64_t key, uint32_t index)
{
    size_t mask = cap - 1, s = (size_t)hash64(key) & mask;
    while (table[s].key != EMPTY_KEY) s = (s + 1) & mask;
    table[s].key = key;
    table[s].index = index;
}

/* Makes room for `extra` more voxels so integration never allocates midway
 * (and a failed allocation leaves the map as it was). */
static kr_status reserve(kr_voxel_map *m, size_t extra)
{
    size_t need = m->count + extra;
    if (need >= UINT32_MAX) return kr_error(KR_ERR_NOMEM, "voxel map full (%zu voxels)", m->count);
    if (need > m->records_cap) {
        size_t cap = m->records_cap ? m->records_cap : 4096;
        while (cap < need) cap *= 2;
        kr_voxel *r = realloc(m->records, cap * sizeof *r);
        if (!r) return kr_error(KR_ERR_NOMEM, "cannot grow voxel map to %zu voxels", cap);
        m->records = r;
        uint32_t *a = realloc(m->active, cap * sizeof *a);
        if (!a) return kr_error(KR_ERR_NOMEM, "cannot grow active list to %zu voxels", cap);
        m->active = a;
        m->records_cap = cap;
    }
    if (need * 2 > m->table_cap) {
        size_t cap = m->table_cap ? m->table_cap : 8192;
        while (need * 2 > cap) cap *= 2;
        slot *t = malloc(cap * sizeof *t);
        if (!t) return kr_error(KR_ERR_NOMEM, "cannot grow voxel table to %zu slots", cap);
        memset(t, 0xff, cap * sizeof *t); /* every key EMPTY_KEY */
        for (size_t i = 0; i < m->count; i++) table_insert(t, cap, m->records[i].key, (uint32_t)i);
        free(m->table);
        m->table = t;
        m->table_cap = cap;
    }
    return KR_OK;
}

static inline const slot *table_find(const kr_voxel_map *m, uint64_t key)
{
    if (!m->table_cap) return NULL;
    size_t mask = m->table_cap - 1, s = (size_t)hash64(key) & mask;
    for (;;) {
        if (m->table[s].key == key) return &m->table[s];
        if (m->table[s].key == EMPTY_KEY) return NULL;
        s = (s + 1) & mask;
    }
}

const kr_voxel *kr_voxel_map_find(const kr_voxel_map *m, const float p[3])
{
    uint64_t key;
    if (!m || !pack_key(m, p, &key)) return NULL;
    const slot *s = table_find(m, key);
    return s ? &m->records[s->index] : NULL;
}

/* Index of the voxel for `key`, created empty (weight 0) when new. Capacity
 * was reserved beforehand. */
static inline uint32_t find_or_insert(kr_voxel_map *m, uint64_t key, uint64_t frame)
{
    size_t mask = m->table_cap - 1, s = (size_t)hash64(key) & mask;
    for (;;) {
        if (m->table[s].key == key) return m->table[s].index;
        if (m->table[s].key == EMPTY_KEY) break;
        s = (s + 1) & mask;
    }
    uint32_t index = (uint32_t)m->count++;
    m->table[s].key = key;
    m->table[s].index = index;
    kr_voxel *v = &m->records[index];
    memset(v, 0, sizeof *v);
    v->key = key;
    v->last_seen = frame;
    return index;
}

static inline float point_weight(const kr_voxel_map *m, const float pc[3], const float nc[3])
{
    return kr_voxel_weight(m->cfg.geometric_weight, pc, nc);
}

/* One sample ready to fuse: world point and normal, weight, voxel key, and
 * (filled in the second pass) the voxel's record index. */
typedef struct sample_ {
    uint64_t key;
    float p[3], n[3], w;
    uint32_t index;
} sample;

/* Samples are fused PREFETCH_AHEAD behind the probe that finds their record,
 * and probed PREFETCH_AHEAD behind the prefetch of their table slot: table and
 * records are random accesses into tens of MB, and those cache misses, not the
 * arithmetic, are the cost of integration (perf without prefetching: ~80% of
 * the time on the two loads; a QVGA frame into a 358k-voxel map went from
 * 12.6 ms to 2.5 ms on the 2-core development machine). */
#define PREFETCH_AHEAD 16

kr_status kr_voxel_map_integrate(kr_voxel_map *m, const kr_cloud *cloud, const kr_pose *pose,
                                 uint64_t frame)
{
    if (!m || !cloud || !pose) return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_integrate: NULL argument");
    if (cloud->width < 0 || cloud->height < 0)
        return kr_error(KR_ERR_INVALID_ARG, "cloud size %dx%d", cloud->width, cloud->height);
    size_t npix = (size_t)cloud->width * (size_t)cloud->height;
    if (npix == 0) return KR_OK;
    if (!cloud->points || !cloud->normals)
        return kr_error(KR_ERR_INVALID_ARG, "cloud %dx%d without point or normal buffers", cloud->width,
                        cloud->height);
    if (npix > m->scratch_cap) {
        sample *sc = realloc(m->scratch, npix * sizeof *sc);
        if (!sc) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu integration samples", npix);
        m->scratch = sc;
        m->scratch_cap = npix;
    }

    /* Pass 1: samples in world coordinates. */
    float R[9], t[3];
    for (int k = 0; k < 9; k++) R[k] = (float)pose->R[k];
    for (int k = 0; k < 3; k++) t[k] = (float)pose->t[k];
    const float *P = cloud->points, *N = cloud->normals;
    sample *S = m->scratch;
    size_t ns = 0;
    for (size_t i = 0; i < npix; i++) {
        const float *pc = P + 3 * i, *nc = N + 3 * i;
        if (!isfinite(pc[0]) || !isfinite(nc[0])) continue;
        sample *x = &S[ns];
        kr_voxel_to_world(R, t, pc, nc, x->p, x->n);
        if (!pack_key(m, x->p, &x->key)) continue;
        x->w = point_weight(m, pc, nc);
        ns++;
    }
    /* Room for every sample to be a new voxel: nothing allocates below, so
     * a failure leaves the map as it was. */
    kr_status s = reserve(m, ns);
    if (s != KR_OK) return s;

    /* Pass 2: find each sample's voxel (creating it), prefetching ahead. */
    const size_t mask = m->table_cap - 1;
    const float cap = m->cfg.max_weight;
    /* Neighbouring pixels often fall in the same voxel: remember the last one
     * to skip the probe. */
    uint64_t last_key = EMPTY_KEY;
    uint32_t last_index = 0;
    for (size_t i = 0; i < ns + PREFETCH_AHEAD; i++) {
        if (i + PREFETCH_AHEAD < ns) __builtin_prefetch(&m->table[hash64(S[i + PREFETCH_AHEAD].key) & mask]);
        if (i < ns) {
            sample *x = &S[i];
            x->index = x->key == last_key ? last_index : find_or_insert(m, x->key, frame);
            last_key = x->key;
            last_index = x->index;
            const char *rec = (const char *)&m->records[x->index];
            __builtin_prefetch(rec, 1);
            __builtin_prefetch(rec + sizeof(kr_voxel) - 1, 1);
        }
        if (i < PREFETCH_AHEAD) continue;
        /* Fuse the sample whose record was prefetched PREFETCH_AHEAD ago. */
        const sample *x = &S[i - PREFETCH_AHEAD];
        kr_voxel *v = &m->records[x->index];
        kr_voxel_fuse(v->point, v->normal, &v->weight, x->p, x->n, x->w, cap);
        v->last_seen = frame;
        if (!v->active) {
            v->active = 1;
            m->active[m->active_count++] = x->index;
        }
    }
    return KR_OK;
}

bool kr_voxel_unit_normal(const kr_voxel *v, float out[3])
{
    return kr_voxel_unit_normal_hd(v->normal, out);
}

static kr_status grow_output(float **points, float **normals, size_t *capacity, size_t need)
{
    if (need <= *capacity && *points && *normals) return KR_OK;
    size_t cap = need > 1024 ? need : 1024;
    float *p = realloc(*points, cap * 3 * sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu snapshot points", cap);
    *points = p;
    float *n = realloc(*normals, cap * 3 * sizeof *n);
    if (!n) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu snapshot normals", cap);
    *normals = n;
    *capacity = cap;
    return KR_OK;
}

static inline void emit(const kr_voxel *v, float *points, float *normals, size_t k)
{
    memcpy(points + 3 * k, v->point, sizeof v->point);
    if (!kr_voxel_unit_normal(v, normals + 3 * k)) {
        normals[3 * k] = NAN;
        normals[3 * k + 1] = normals[3 * k + 2] = 0;
    }
}

kr_status kr_voxel_map_gather(kr_voxel_map *m, uint64_t since, float **points, float **normals,
                              size_t *capacity, size_t *n)
{
    if (!m || !points || !normals || !capacity || !n)
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_gather: NULL argument");
    if (since < m->pruned_below) {
        /* Pruned voxels may be newer than `since`: put every voxel back. */
        for (size_t i = 0; i < m->count; i++) {
            m->records[i].active = 1;
            m->active[i] = (uint32_t)i;
        }
        m->active_count = m->count;
        m->pruned_below = 0;
    }
    kr_status s = grow_output(points, normals, capacity, m->active_count);
    if (s != KR_OK) return s;
    size_t kept = 0, out = 0;
    for (size_t j = 0; j < m->active_count; j++) {
        kr_voxel *v = &m->records[m->active[j]];
        if (v->last_seen < since) {
            v->active = 0;
            continue;
        }
        m->active[kept++] = m->active[j];
        emit(v, *points, *normals, out++);
    }
    m->active_count = kept;
    m->pruned_below = since;
    *n = out;
    return KR_OK;
}

kr_status kr_voxel_map_gather_scan(const kr_voxel_map *m, uint64_t since, float **points, float **normals,
                                   size_t *capacity, size_t *n)
{
    if (!m || !points || !normals || !capacity || !n)
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_gather_scan: NULL argument");
    kr_status s = grow_output(points, normals, capacity, m->count);
    if (s != KR_OK) return s;
    size_t out = 0;
    for (size_t i = 0; i < m->count; i++)
        if (m->records[i].last_seen >= since) emit(&m->records[i], *points, *normals, out++);
    *n = out;
    return KR_OK;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline bool far_from(const kr_voxel *v, const float c[3], float min_d2)
{
    return kr_voxel_far_from(v->point, c, min_d2);
}

/* Which voxels an eviction pass drops: those last seen before `older_than`
 * (far from the camera when `need_far`) and at or before `cutoff`, but of
 * those seen exactly at `cutoff` only the first `at_cutoff` in insertion
 * order (SIZE_MAX: all of them). */
typedef struct {
    uint64_t older_than, cutoff;
    size_t at_cutoff;
    bool need_far;
} eviction_rule;

static inline bool candidate(const kr_voxel *v, const eviction_rule *e, const float cam[3],
                             float min_d2)
{
    return v->last_seen < e->older_than && (!e->need_far || far_from(v, cam, min_d2));
}

/* The rule that drops at least `excess` of the candidates (older than
 * e->older_than, far when e->need_far), oldest first, found by sorting their
 * ages; *found = false when there are not that many (then every candidate
 * goes). With `exact`, voxels of the cutoff's age go in insertion order
 * until exactly `excess` have gone: the last resort may have to split a
 * frame's voxels (every voxel of the newest frame has the same age). */
static kr_status eviction_cutoff(const kr_voxel_map *m, size_t excess, const float cam[3],
                                 float min_d2, bool exact, eviction_rule *e, bool *found,
                                 size_t *candidates)
{
    size_t nc = 0;
    for (size_t i = 0; i < m->count; i++)
        nc += candidate(&m->records[i], e, cam, min_d2);
    *candidates = nc;
    *found = nc >= excess;
    e->cutoff = e->older_than ? e->older_than - 1 : 0;
    e->at_cutoff = SIZE_MAX;
    if (!*found || nc == 0 || excess == 0) return KR_OK;
    uint64_t *ages = malloc(nc * sizeof *ages);
    if (!ages) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu voxel ages for eviction", nc);
    size_t k = 0;
    for (size_t i = 0; i < m->count; i++)
        if (candidate(&m->records[i], e, cam, min_d2)) ages[k++] = m->records[i].last_seen;
    /* A full sort: eviction runs once per tenth of the cap filled. */
    qsort(ages, nc, sizeof *ages, compare_u64);
    e->cutoff = ages[excess - 1];
    if (exact) {
        size_t below = 0;
        while (below < excess && ages[below] < e->cutoff)
            below++;
        e->at_cutoff = excess - below;
    }
    free(ages);
    return KR_OK;
}

kr_status kr_voxel_map_evict(kr_voxel_map *m, size_t max_voxels, size_t target, uint64_t older_than,
                             const float camera[3], float min_distance, size_t *evicted,
                             uint64_t *newest)
{
    if (!m || !camera || !evicted) return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_evict: NULL argument");
    if (target > max_voxels) target = max_voxels;
    *evicted = 0;
    if (newest) *newest = 0;
    if (m->count <= max_voxels) return KR_OK;
    size_t excess = m->count - target;
    float min_d2 = min_distance > 0 ? min_distance * min_distance : 0;
    eviction_rule e = {older_than, 0, SIZE_MAX, true};
    bool found;
    size_t old_n = 0;
    kr_status s = eviction_cutoff(m, excess, camera, min_d2, false, &e, &found, &old_n);
    if (s == KR_OK && !found) {
        /* Not enough far voxels: near ones that are old go too. */
        e.need_far = false;
        s = eviction_cutoff(m, excess, camera, min_d2, false, &e, &found, &old_n);
    }
    if (s == KR_OK && !found && m->count - old_n > max_voxels) {
        /* The voxels seen since `older_than` alone exceed the cap: the
         * oldest of them go, down to exactly the target, the active window
         * last. A cap that held only while the recent frames fitted under
         * it let a 16 MiB model grow to 9x its cap (issue 30 item 8). When
         * dropping every old voxel gets under the cap, no recent one goes
         * for the sake of the slack. */
        e.older_than = UINT64_MAX;
        s = eviction_cutoff(m, excess, camera, min_d2, true, &e, &found, &old_n);
    }
    if (s != KR_OK) return s;

    /* Compact the records in place (insertion order kept), then rebuild the
     * table and the active list over the survivors. */
    size_t kept = 0, active = 0, at_cutoff = 0;
    uint64_t newest_dropped = 0;
    for (size_t i = 0; i < m->count; i++) {
        const kr_voxel *v = &m->records[i];
        bool drop = candidate(v, &e, camera, min_d2) && v->last_seen <= e.cutoff;
        if (drop && v->last_seen == e.cutoff) drop = at_cutoff++ < e.at_cutoff;
        if (drop) {
            if (v->last_seen > newest_dropped) newest_dropped = v->last_seen;
            continue;
        }
        if (kept != i) m->records[kept] = *v;
        kept++;
    }
    *evicted = m->count - kept;
    if (newest) *newest = newest_dropped;
    m->count = kept;
    memset(m->table, 0xff, m->table_cap * sizeof *m->table);
    for (size_t i = 0; i < kept; i++) {
        table_insert(m->table, m->table_cap, m->records[i].key, (uint32_t)i);
        if (m->records[i].active) m->active[active++] = (uint32_t)i;
    }
    m->active_count = active;
    return KR_OK;
}

kr_status kr_voxel_map_assign(kr_voxel_map *m, const kr_voxel *records, size_t n)
{
    if (!m || (!records && n)) return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_map_assign: NULL argument");
    /* Room first (the old records kept while it fails), then the copy. */
    size_t old = m->count;
    m->count = 0;
    kr_status s = reserve(m, n);
    m->count = old;
    if (s != KR_OK) return s;
    if (n) memcpy(m->records, records, n * sizeof *records);
    m->count = n;
    if (m->table) memset(m->table, 0xff, m->table_cap * sizeof *m->table);
    for (size_t i = 0; i < n; i++) {
        table_insert(m->table, m->table_cap, m->records[i].key, (uint32_t)i);
        m->records[i].active = 1;
        m->active[i] = (uint32_t)i;
    }
    m->active_count = n;
    m->pruned_below = 0;
    return KR_OK;
}

const kr_voxel *kr_voxel_map_records(const kr_voxel_map *m)
{
    return m && m->count ? m->records : NULL;
}
