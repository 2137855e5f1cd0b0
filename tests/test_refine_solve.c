/* The refinement's block-sparse normal equations (pipeline/refine/refine_solve.c):
 * assembled from random pair sums and solved with the build's solver
 * (CHOLMOD or dense) or on a CUDA device (cuSOLVER), checked against a dense
 * matrix built here directly from the Jacobian rule J_j = −J_i and solved by
 * Gaussian elimination. */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/device.h"
#include "pipeline/refine/refine_solve.h"
#include "pipeline/refine/refine_solve_cuda.h"

/* Gaussian elimination with partial pivoting of the n×n system A x = b. */
static void gauss_solve(int n, double *A, double *b, double *x)
{
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(A[r * n + c]) > fabs(A[piv * n + c])) piv = r;
        for (int k = 0; k < n; k++) {
            double t = A[c * n + k];
            A[c * n + k] = A[piv * n + k];
            A[piv * n + k] = t;
        }
        double t = b[c];
        b[c] = b[piv];
        b[piv] = t;
        for (int r = c + 1; r < n; r++) {
            double f = A[r * n + c] / A[c * n + c];
            for (int k = c; k < n; k++)
                A[r * n + k] -= f * A[c * n + k];
            b[r] -= f * b[c];
        }
    }
    for (int r = n - 1; r >= 0; r--) {
        double s = b[r];
        for (int k = r + 1; k < n; k++)
            s -= A[r * n + k] * x[k];
        x[r] = s / A[r * n + r];
    }
}

/* Views on a ring, each pair (k, k+d) for d up to `reach` in both orders,
 * one pair with no residuals (skipped), gauge in the middle: solved as the
 * build and the overlap choose (`solver`), or on `device` when it is given,
 * against the dense reference. */
static void solve_matches_a_dense_reference(int reach, const char *solver,
                                            kr_refine_device_solver *device)
{
    enum { V = 9, GAUGE = 4, MAXP = 8 * V };
    int pairs[2 * MAXP], np = 0;
    for (int k = 0; k < V; k++)
        for (int d = 1; d <= reach; d++) {
            int j = (k + d) % V;
            pairs[2 * np] = k, pairs[2 * np + 1] = j, np++;
            pairs[2 * np] = j, pairs[2 * np + 1] = k, np++;
        }
    kr_refine_acc acc[MAXP];
    unsigned seed = 5;
    int n = 6 * (V - 1);
    double *H = calloc((size_t)n * n, sizeof *H), *g = calloc((size_t)n, sizeof *g);
    REQUIRE(H && g);
    for (int p = 0; p < np; p++) {
        kr_refine_acc_zero(&acc[p]);
        if (p == 3) continue; /* saw nothing */
        /* Sums of a few random residual rows, as kr_refine_accumulate makes them. */
        for (int r = 0; r < 8; r++) {
            float J[6];
            for (int c = 0; c < 6; c++)
                J[c] = (float)(2 * kr_urand(&seed) - 1);
            kr_refine_accumulate(&acc[p], J, (float)(kr_urand(&seed) - 0.5), 1, 0);
        }
        double S[36];
        int at = 0;
        for (int r = 0; r < 6; r++)
            for (int c = r; c < 6; c++)
                S[6 * r + c] = S[6 * c + r] = acc[p].H[at++];
        int v[2] = {pairs[2 * p], pairs[2 * p + 1]}, m[2];
        for (int s = 0; s < 2; s++)
            m[s] = v[s] == GAUGE ? -1 : 6 * (v[s] < GAUGE ? v[s] : v[s] - 1);
        double sign[2] = {1, -1}; /* J_i and J_j = −J_i */
        for (int a = 0; a < 2; a++) {
            if (m[a] < 0) continue;
            for (int r = 0; r < 6; r++)
                g[m[a] + r] += sign[a] * acc[p].g[r];
            for (int b = 0; b < 2; b++) {
                if (m[b] < 0) continue;
                for (int r = 0; r < 6; r++)
                    for (int c = 0; c < 6; c++)
                        H[(m[a] + r) * n + m[b] + c] += sign[a] * sign[b] * S[6 * r + c];
            }
        }
    }
    double lambda = 0.3, dmax = 0;
    for (int i = 0; i < n; i++)
        dmax = fmax(dmax, H[i * n + i]);
    double *A = malloc(sizeof *A * (size_t)n * n), *b = malloc(sizeof *b * (size_t)n),
           *want = malloc(sizeof *want * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    REQUIRE(A && b && want && got);
    memcpy(A, H, sizeof *A * (size_t)n * n);
    for (int i = 0; i < n; i++) {
        A[i * n + i] = fmax(H[i * n + i], 1e-9 * dmax) * (1 + lambda);
        b[i] = -g[i];
    }
    gauss_solve(n, A, b, want);

    kr_refine_normal *ne = NULL;
    REQUIRE_OK(kr_refine_normal_create(&ne, V, GAUGE));
    kr_refine_normal_use_device(ne, device);
    double got_dmax = 0;
    REQUIRE_OK(kr_refine_normal_assemble(ne, pairs, acc, np, &got_dmax));
    CHECK_NEAR(got_dmax, dmax, 1e-12 * dmax);
    REQUIRE_OK(kr_refine_normal_solve(ne, lambda, got));
    CHECK_STR(kr_refine_normal_solver(ne), solver);
    double worst = 0, scale = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    CHECK(scale > 0);
    CHECK(worst <= 1e-9 * scale);
    /* A retry with more damping on the same assembly (a rejected LM step:
     * refine.c does not assemble again; the device re-damps the H it kept). */
    double lambda2 = 3.0;
    memcpy(A, H, sizeof *A * (size_t)n * n);
    for (int i = 0; i < n; i++) {
        A[i * n + i] = fmax(H[i * n + i], 1e-9 * dmax) * (1 + lambda2);
        b[i] = -g[i];
    }
    gauss_solve(n, A, b, want);
    REQUIRE_OK(kr_refine_normal_solve(ne, lambda2, got));
    worst = scale = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    CHECK_MSG(worst <= 1e-9 * scale, "re-damped solve off by %g of %g", worst, scale);
    /* An indefinite system is a numeric failure, not a step. */
    for (int p = 0; p < np; p++)
        for (int k = 0; k < 21; k++)
            acc[p].H[k] = -acc[p].H[k];
    REQUIRE_OK(kr_refine_normal_assemble(ne, pairs, acc, np, &got_dmax));
    CHECK_STATUS(kr_refine_normal_solve(ne, 0.0, got), KR_ERR_NUMERIC);
    CHECK_STR(kr_refine_normal_solver(ne), solver);
    kr_refine_normal_destroy(&ne);
    free(H);
    free(g);
    free(A);
    free(b);
    free(want);
    free(got);
}

/* A ring whose views overlap their two neighbours each side: block-sparse,
 * CHOLMOD's where the build has it. */
KR_TEST(refine_solve, block_sparse_solve_matches_a_dense_reference)
{
    solve_matches_a_dense_reference(2, kr_refine_solver_name(), NULL);
}

/* Every view overlapping every other (a sequence of one scene): the dense
 * Cholesky in every build. */
KR_TEST(refine_solve, all_pairs_solve_densely_and_match_the_reference)
{
    solve_matches_a_dense_reference(4, "dense", NULL);
}

/* The CUDA engine's solve (pipeline/refine/refine_solve_cuda.cu): cuSOLVER's
 * Cholesky of the host's dense fill, for the sparse ring and the all-pairs
 * system alike, against the same reference, and an indefinite system a
 * numeric failure there too. */
KR_TEST_TAGGED(refine_solve, device_solve_matches_the_reference, "gpu")
{
    if (!kr_cuda_available()) SKIP("needs a CUDA device (runs on the GPU machine)");
    kr_refine_device_solver *device = NULL;
    REQUIRE_OK(kr_refine_device_solver_create(&device, 0));
    solve_matches_a_dense_reference(2, "cusolver", device);
    solve_matches_a_dense_reference(4, "cusolver", device);
    kr_refine_device_solver_destroy(&device);
    CHECK(device == NULL);
}

KR_TEST(refine_solve, solver_is_named)
{
#ifdef KINREG_HAVE_CHOLMOD
    CHECK(strcmp(kr_refine_solver_name(), "cholmod") == 0);
#else
    CHECK(strcmp(kr_refine_solver_name(), "dense") == 0);
#endif
}
