/* The refinement's block-sparse normal equations (pipeline/refine/refine_solve.h). H is
 * kept as its upper-triangle entries (row ≤ column, duplicates allowed: a
 * block that several pairs fill appears once per pair); CHOLMOD's triplet
 * form adds duplicates itself, the dense fallback scatters them. A system
 * that will be solved densely is assembled straight into a dense H instead. */
#include "pipeline/refine/refine_solve.h"
#include "pipeline/refine/refine_solve_cuda.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#ifdef KINREG_HAVE_CHOLMOD
#include <cholmod.h>
#endif

struct kr_refine_normal {
    int views, gauge, n;
    int *row, *col; /* upper-triangle entries of H */
    double *val;
    size_t entries, capacity;
    double *g, *diag;
    int active_pairs;   /* pairs with residuals in the last assembly */
    double *dense;      /* n×n, made at the first dense solve */
    double *H;          /* n×n: H itself, assembled in place of the entries (dense_H) */
    bool dense_H;       /* the last assembly went into H (a dense solve follows) */
    bool device_has_H;  /* the device keeps this assembly's H (a retry only re-damps) */
    double *damp;       /* n: the damping of a device solve */
    const char *solver; /* the last solve's: "cholmod", "dense" or "cusolver" */
    kr_refine_device_solver *device; /* the CUDA engine's (not owned); NULL: the host */
#ifdef KINREG_HAVE_CHOLMOD
    cholmod_common cm;
#endif
};

/* The CUDA engine's device solves dense systems of DEVICE_MIN_UNKNOWNS
 * (50 views) to DEVICE_MAX_UNKNOWNS (1366 views: 537 MB filled on the host
 * and copied up each solve); smaller ones take the host a few milliseconds,
 * larger sparse ones are CHOLMOD's. */
#define DEVICE_MIN_UNKNOWNS 294
#define DEVICE_MAX_UNKNOWNS 8192

/* When most pairs of views overlap (a sequence of one scene, where every
 * keyframe sees the others) the sparse factorisation is dense anyway and
 * CHOLMOD's ordering and triplet sort are most of its time: 100 keyframes
 * took 47 ms a solve on the two-H200 host. Dense below DENSE_MAX_UNKNOWNS
 * (72 MB) when more than DENSE_PAIRS of the ordered pairs saw residuals. */
#ifdef KINREG_HAVE_CHOLMOD
#define DENSE_MAX_UNKNOWNS 3000
#define DENSE_PAIRS 0.6

static bool dense_pays(const kr_refine_normal *ne)
{
    double all = (double)ne->views * (ne->views - 1);
    return ne->n <= DENSE_MAX_UNKNOWNS && ne->active_pairs > DENSE_PAIRS * all;
}
#endif

/* Whether the next solve is dense (on the device or the host), from the
 * active pairs of this assembly. */
static bool solved_densely(const kr_refine_normal *ne)
{
    if (ne->device && ne->n <= DEVICE_MAX_UNKNOWNS) return true;
#ifdef KINREG_HAVE_CHOLMOD
    return dense_pays(ne);
#else
    return true;
#endif
}

const char *kr_refine_solver_name(void)
{
#ifdef KINREG_HAVE_CHOLMOD
    return "cholmod";
#else
    return "dense";
#endif
}

const char *kr_refine_normal_solver(const kr_refine_normal *ne)
{
    return ne->solver ? ne->solver : "none";
}

kr_status kr_refine_normal_create(kr_refine_normal **out, int views, int gauge)
{
    kr_refine_normal *ne = calloc(1, sizeof *ne);
    if (!ne) return kr_error(KR_ERR_NOMEM, "refine: no memory for the normal equations");
    ne->views = views;
    ne->gauge = gauge;
    ne->n = 6 * (views - 1);
    ne->g = calloc((size_t)ne->n, sizeof *ne->g);
    ne->diag = calloc((size_t)ne->n, sizeof *ne->diag);
    int ok = ne->g && ne->diag;
#ifdef KINREG_HAVE_CHOLMOD
    if (ok) {
        cholmod_start(&ne->cm);
        ne->cm.print = 0; /* failures become status codes, not text */
        ne->cm.error_handler = NULL;
    }
#endif
    if (!ok) {
        free(ne->g);
        free(ne->diag);
        free(ne);
        return kr_error(KR_ERR_NOMEM, "refine: no memory for the normal equations of %d views",
                        views);
    }
    *out = ne;
    return KR_OK;
}

void kr_refine_normal_destroy(kr_refine_normal **ne)
{
    if (!ne || !*ne) return;
#ifdef KINREG_HAVE_CHOLMOD
    cholmod_finish(&(*ne)->cm);
#endif
    free((*ne)->dense);
    free((*ne)->damp);
    free((*ne)->H);
    free((*ne)->row);
    free((*ne)->col);
    free((*ne)->val);
    free((*ne)->g);
    free((*ne)->diag);
    free(*ne);
    *ne = NULL;
}

static int reserve(kr_refine_normal *ne, size_t more)
{
    if (ne->entries + more <= ne->capacity) return 1;
    size_t cap = ne->capacity ? ne->capacity : 1024;
    while (cap < ne->entries + more)
        cap *= 2;
    int *r = realloc(ne->row, sizeof *r * cap);
    if (r) ne->row = r;
    int *c = realloc(ne->col, sizeof *c * cap);
    if (c) ne->col = c;
    double *v = realloc(ne->val, sizeof *v * cap);
    if (v) ne->val = v;
    if (!r || !c || !v) return 0;
    ne->capacity = cap;
    return 1;
}

/* Block (a, b) of H gains sign·S (S symmetric 6×6); only the upper triangle
 * is stored, so a block below the diagonal goes in as its transpose: as
 * entries, or straight into the dense H (row-major lower triangle, as
 * dense_fill lays the entries out). */
static void add_block(kr_refine_normal *ne, int a, int b, double sign, const double S[36])
{
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++) {
            int i = a + r, j = b + c;
            if (i > j) {
                if (a == b) continue; /* the diagonal block's lower half */
                int t = i;
                i = j;
                j = t;
            }
            if (ne->dense_H) {
                ne->H[(size_t)j * (size_t)ne->n + (size_t)i] += sign * S[6 * r + c];
                continue;
            }
            ne->row[ne->entries] = i;
            ne->col[ne->entries] = j;
            ne->val[ne->entries++] = sign * S[6 * r + c];
        }
}

kr_status kr_refine_normal_assemble(kr_refine_normal *ne, const int *pairs,
                                    const kr_refine_acc *acc, int npairs, double *max_diagonal)
{
    ne->entries = 0;
    ne->device_has_H = false;
    memset(ne->g, 0, sizeof *ne->g * (size_t)ne->n);
    memset(ne->diag, 0, sizeof *ne->diag * (size_t)ne->n);
    ne->active_pairs = 0;
    for (int p = 0; p < npairs; p++)
        ne->active_pairs += acc[p].count != 0;
    /* A system solved densely is assembled densely: 298 keyframes that all
     * see each other made 6.9 M entries, then scattered into the dense
     * matrix at every solve (3-4 s of a 12-17 s refinement on the GPUs). */
    size_t n2 = (size_t)ne->n * (size_t)ne->n;
    ne->dense_H = solved_densely(ne);
    if (ne->dense_H && !ne->H && !(ne->H = malloc(sizeof *ne->H * n2))) ne->dense_H = false;
    if (ne->dense_H) memset(ne->H, 0, sizeof *ne->H * n2);
    for (int p = 0; p < npairs; p++) {
        if (acc[p].count == 0) continue;
        int v[2] = {pairs[2 * p], pairs[2 * p + 1]}, m[2];
        for (int s = 0; s < 2; s++)
            m[s] = v[s] == ne->gauge ? -1 : 6 * (v[s] < ne->gauge ? v[s] : v[s] - 1);
        double S[36];
        int at = 0;
        for (int r = 0; r < 6; r++)
            for (int c = r; c < 6; c++)
                S[6 * r + c] = S[6 * c + r] = acc[p].H[at++];
        if (!ne->dense_H && !reserve(ne, 36 * 3))
            return kr_error(KR_ERR_NOMEM, "refine: no memory for the normal equations");
        for (int a = 0; a < 2; a++) {
            if (m[a] < 0) continue;
            double sign = a == 0 ? 1 : -1;
            for (int r = 0; r < 6; r++) {
                ne->g[m[a] + r] += sign * acc[p].g[r];
                ne->diag[m[a] + r] += S[7 * r];
            }
            add_block(ne, m[a], m[a], 1, S);
        }
        /* Both pairs (i, j) and (j, i) add −S to the block between i and j. */
        if (m[0] >= 0 && m[1] >= 0) {
            if (m[0] < m[1])
                add_block(ne, m[0], m[1], -1, S);
            else
                add_block(ne, m[1], m[0], -1, S);
        }
    }
    double dmax = 0;
    for (int i = 0; i < ne->n; i++)
        dmax = fmax(dmax, ne->diag[i]);
    *max_diagonal = dmax;
    return KR_OK;
}

/* The damping added to H's diagonal entry i. */
static double damping(const kr_refine_normal *ne, int i, double lambda, double dmax)
{
    double d = fmax(ne->diag[i], 1e-9 * dmax);
    return d * (1 + lambda) - ne->diag[i];
}

#ifdef KINREG_HAVE_CHOLMOD
static kr_status sparse_solve(kr_refine_normal *ne, double lambda, double dmax, double *x)
{
    int n = ne->n;
    cholmod_common *cm = &ne->cm;
    cholmod_triplet *T = cholmod_allocate_triplet((size_t)n, (size_t)n, ne->entries + (size_t)n, 1,
                                                  CHOLMOD_REAL, cm);
    if (!T)
        return kr_error(KR_ERR_NOMEM, "refine: CHOLMOD has no memory for %zu entries", ne->entries);
    int *Ti = T->i, *Tj = T->j;
    double *Tx = T->x;
    memcpy(Ti, ne->row, sizeof *Ti * ne->entries);
    memcpy(Tj, ne->col, sizeof *Tj * ne->entries);
    memcpy(Tx, ne->val, sizeof *Tx * ne->entries);
    for (int i = 0; i < n; i++) {
        Ti[ne->entries + (size_t)i] = Tj[ne->entries + (size_t)i] = i;
        Tx[ne->entries + (size_t)i] = damping(ne, i, lambda, dmax);
    }
    T->nnz = ne->entries + (size_t)n;
    cholmod_sparse *A = cholmod_triplet_to_sparse(T, T->nnz, cm); /* adds duplicates */
    cholmod_free_triplet(&T, cm);
    cholmod_dense *b = cholmod_zeros((size_t)n, 1, CHOLMOD_REAL, cm);
    kr_status s = KR_OK;
    cholmod_factor *L = NULL;
    cholmod_dense *sol = NULL;
    if (!A || !b) s = kr_error(KR_ERR_NOMEM, "refine: CHOLMOD has no memory for %d unknowns", n);
    if (s == KR_OK) {
        double *bx = b->x;
        for (int i = 0; i < n; i++)
            bx[i] = -ne->g[i];
        /* CHOLMOD's supernodes are many small BLAS calls. An OpenMP BLAS
         * (OpenBLAS, which the setup installs) starts a team of every core
         * for each: on a 32-core host that made the solve of 200 views five
         * times slower than Debian's reference BLAS. One thread: the
         * optimised kernels without the team, and the same rounding on
         * every host. */
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        L = cholmod_analyze(A, cm);
        if (L) cholmod_factorize(A, L, cm);
        if (!L || cm->status == CHOLMOD_OUT_OF_MEMORY)
            s = kr_error(KR_ERR_NOMEM, "refine: CHOLMOD has no memory to factorise %d unknowns", n);
        else if (cm->status == CHOLMOD_NOT_POSDEF || L->minor < L->n)
            s = KR_ERR_NUMERIC;
        else if (!(sol = cholmod_solve(CHOLMOD_A, L, b, cm)))
            s = kr_error(KR_ERR_NOMEM, "refine: CHOLMOD solve failed (status %d)", cm->status);
        omp_set_num_threads(threads);
    }
    if (s == KR_OK) {
        const double *sx = sol->x;
        for (int i = 0; i < n; i++)
            if (!isfinite(sx[i])) s = KR_ERR_NUMERIC;
        if (s == KR_OK) memcpy(x, sx, sizeof *x * (size_t)n);
    }
    cholmod_free_dense(&sol, cm);
    cholmod_free_factor(&L, cm);
    cholmod_free_dense(&b, cm);
    cholmod_free_sparse(&A, cm);
    return s;
}
#endif

/* H + λ·D into the dense n×n buffer: row-major lower triangle, which is
 * LAPACK's column-major upper one (the stored entries (i ≤ j) go in as
 * (j, i)). */
static kr_status dense_fill(kr_refine_normal *ne, double lambda, double dmax)
{
    size_t n = (size_t)ne->n;
    if (!ne->dense && !(ne->dense = malloc(sizeof *ne->dense * n * n)))
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %zu×%zu normal equations", n, n);
    double *A = ne->dense;
    if (ne->dense_H) {
        memcpy(A, ne->H, sizeof *A * n * n);
    } else {
        memset(A, 0, sizeof *A * n * n);
        for (size_t e = 0; e < ne->entries; e++)
            A[(size_t)ne->col[e] * n + ne->row[e]] += ne->val[e];
    }
    for (size_t i = 0; i < n; i++)
        A[i * n + i] += damping(ne, (int)i, lambda, dmax);
    return KR_OK;
}

#ifdef KINREG_HAVE_LAPACK
/* LAPACK's Cholesky (Fortran; gfortran's hidden string lengths last). */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
                    size_t uplo_len);
extern void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a,
                    const int *lda, double *b, const int *ldb, int *info, size_t uplo_len);

static kr_status dense_factor_solve(kr_refine_normal *ne, double *x)
{
    int n = ne->n, one = 1, info = 0;
    for (int i = 0; i < n; i++)
        x[i] = -ne->g[i];
    /* One BLAS thread, as for CHOLMOD (sparse_solve). */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    dpotrf_("U", &n, ne->dense, &n, &info, 1);
    if (info == 0) dpotrs_("U", &n, &one, ne->dense, &n, x, &n, &info, 1);
    omp_set_num_threads(threads);
    return info == 0 ? KR_OK : KR_ERR_NUMERIC;
}
#else
/* The Cholesky factorisation and the two triangular solves, by hand. */
static kr_status dense_factor_solve(kr_refine_normal *ne, double *x)
{
    int n = ne->n;
    double *A = ne->dense;
    for (int j = 0; j < n; j++) {
        double d = A[(size_t)j * n + j];
        for (int k = 0; k < j; k++)
            d -= A[(size_t)j * n + k] * A[(size_t)j * n + k];
        if (!(d > 0)) return KR_ERR_NUMERIC;
        d = sqrt(d);
        A[(size_t)j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[(size_t)i * n + j];
            for (int k = 0; k < j; k++)
                s -= A[(size_t)i * n + k] * A[(size_t)j * n + k];
            A[(size_t)i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; i++) {
        double s = -ne->g[i];
        for (int k = 0; k < i; k++)
            s -= A[(size_t)i * n + k] * x[k];
        x[i] = s / A[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = x[i];
        for (int k = i + 1; k < n; k++)
            s -= A[(size_t)k * n + i] * x[k];
        x[i] = s / A[(size_t)i * n + i];
    }
    return KR_OK;
}
#endif

bool kr_refine_normal_device_pays(int views)
{
    int n = 6 * (views - 1);
    return n >= DEVICE_MIN_UNKNOWNS && n <= DEVICE_MAX_UNKNOWNS;
}

void kr_refine_normal_use_device(kr_refine_normal *ne, kr_refine_device_solver *device)
{
    ne->device = device;
}

/* On the device: the dense matrix as the host's LAPACK path fills it. A
 * device that cannot (no room, no cuSOLVER) leaves the solve to the host
 * for the rest of the run: the same system, the same step up to rounding. */
static kr_status device_solve(kr_refine_normal *ne, double lambda, double dmax, double *x)
{
    for (int i = 0; i < ne->n; i++)
        x[i] = -ne->g[i];
    kr_status s;
    if (ne->dense_H) {
        /* H as assembled, kept on the device; only the damping changes
         * between a rejected step's retries. */
        if (!ne->damp && !(ne->damp = malloc(sizeof *ne->damp * (size_t)ne->n)))
            return kr_error(KR_ERR_NOMEM, "refine: no memory for the damping");
        for (int i = 0; i < ne->n; i++)
            ne->damp[i] = damping(ne, i, lambda, dmax);
        s = kr_refine_device_solve_damped(ne->device, ne->H, !ne->device_has_H, ne->damp, ne->n, x);
        ne->device_has_H = s == KR_OK || s == KR_ERR_NUMERIC;
    } else {
        s = dense_fill(ne, lambda, dmax);
        if (s != KR_OK) return s;
        s = kr_refine_device_solve(ne->device, ne->dense, ne->n, x);
    }
    if (s != KR_OK && s != KR_ERR_NUMERIC) ne->device = NULL;
    return s;
}

kr_status kr_refine_normal_solve(kr_refine_normal *ne, double lambda, double *x)
{
    double dmax = 0;
    for (int i = 0; i < ne->n; i++)
        dmax = fmax(dmax, ne->diag[i]);
    kr_status s = KR_ERR_NO_DEVICE;
    if (ne->device && ne->n <= DEVICE_MAX_UNKNOWNS) {
        s = device_solve(ne, lambda, dmax, x);
        if (s == KR_OK || s == KR_ERR_NUMERIC) ne->solver = "cusolver";
    }
    if (s != KR_OK && s != KR_ERR_NUMERIC) {
#ifdef KINREG_HAVE_CHOLMOD
        /* Without memory for the dense matrix, the sparse one (whose
         * entries exist only when H was not assembled densely). */
        bool dense = ne->dense_H || dense_pays(ne);
        kr_status filled = dense ? dense_fill(ne, lambda, dmax) : KR_OK;
        if (filled != KR_OK && ne->dense_H) return filled; /* no entries to fall back on */
        if (!dense || filled != KR_OK) {
            ne->solver = "cholmod";
            return sparse_solve(ne, lambda, dmax, x);
        }
#else
        kr_status filled = dense_fill(ne, lambda, dmax);
        if (filled != KR_OK) return filled;
#endif
        ne->solver = "dense";
        s = dense_factor_solve(ne, x);
    }
    for (int i = 0; s == KR_OK && i < ne->n; i++)
        if (!isfinite(x[i])) s = KR_ERR_NUMERIC;
    return s;
}
