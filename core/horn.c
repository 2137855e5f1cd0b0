/* Weighted absolute orientation, Horn (1987) "Closed-form solution of absolute
 * orientation using unit quaternions", J. Opt. Soc. Am. A 4(4).
 *
 * We minimise Σ w_i ‖d_i − (R s_i + t)‖². With weighted centroids c_s, c_d and
 * centred points s'_i = s_i − c_s, d'_i = d_i − c_d, the optimal t is
 * c_d − R c_s and R maximises Σ w_i d'_iᵀ R s'_i = qᵀ N q for the unit
 * quaternion q = (q0, qx, qy, qz), where, with M = Σ w_i s'_i d'_iᵀ
 * (S_ab = M[a][b], a from the source, b from the destination):
 *
 *     N = | Sxx+Syy+Szz  Syz−Szy      Szx−Sxz      Sxy−Syx     |
 *         | Syz−Szy      Sxx−Syy−Szz  Sxy+Syx      Szx+Sxz     |
 *         | Szx−Sxz      Sxy+Syx     −Sxx+Syy−Szz  Syz+Szy     |
 *         | Sxy−Syx      Szx+Sxz      Syz+Szy     −Sxx−Syy+Szz |
 *
 * Derivation: d'ᵀ R s' = (q s' q*)·d' = (q s')·(d' q) because multiplying
 * both sides of a dot product by the unit q preserves it; with q s' = R̄(s') q
 * and d' q = L(d') q (right and left product matrices, R̄ᵀ = −R̄ for a pure
 * quaternion) this is qᵀ R̄(s')ᵀ L(d') q, and N = Σ w R̄(s')ᵀ L(d') expands to
 * the matrix above. The seed paper (001_…, eq. 15) prints K with
 * Sxy+Syz where Sxy+Syx belongs, Syz−Szy in the (3,4)/(4,3) places where
 * Syz+Szy belongs, and names the fixed and moving sets the other way round;
 * the tests check this N against an independent SVD (Kabsch/Umeyama) solution.
 *
 * The optimal q is the eigenvector of N's largest eigenvalue. */
#include <math.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "kinreg/horn.h"

/* Relative size under which the two largest eigenvalues of N count as equal.
 * They tie when the rotation is not determined (points on a line or all at one
 * place); any vector of the top eigenspace is then a minimiser and we take the
 * one closest to the identity so that the answer is deterministic and small. */
#define HORN_TIE_RTOL 1e-10

kr_status kr_horn(const double *src, const double *dst, const double *w, size_t n, kr_pose *out)
{
    if (!src || !dst || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_horn: NULL argument");
    if (n < 3) return kr_error(KR_ERR_EMPTY, "kr_horn: %zu point pairs, need at least 3", n);

    /* Weighted centroids. */
    double W = 0, cs[3] = {0, 0, 0}, cd[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        if (!(wi >= 0) || !isfinite(wi))
            return kr_error(KR_ERR_INVALID_ARG,
                            "kr_horn: weight %zu is %g (must be finite and >= 0)", i, wi);
        for (int k = 0; k < 3; k++) {
            if (!isfinite(src[3 * i + k]) || !isfinite(dst[3 * i + k]))
                return kr_error(KR_ERR_INVALID_ARG, "kr_horn: point pair %zu is not finite", i);
            cs[k] += wi * src[3 * i + k];
            cd[k] += wi * dst[3 * i + k];
        }
        W += wi;
    }
    if (!(W > 0)) return kr_error(KR_ERR_EMPTY, "kr_horn: total weight is zero");
    for (int k = 0; k < 3; k++) {
        cs[k] /= W;
        cd[k] /= W;
    }

    /* Cross-covariance of centred points (centring first keeps precision when
     * the points sit far from the origin). */
    double S[3][3] = {{0}};
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        if (wi == 0) continue;
        double a[3], b[3];
        for (int k = 0; k < 3; k++) {
            a[k] = src[3 * i + k] - cs[k];
            b[k] = dst[3 * i + k] - cd[k];
        }
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                S[r][c] += wi * a[r] * b[c];
    }

    /* The matrix assembly is shared with the registration engines. */
    double Sf[9], N[16];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            Sf[3 * r + c] = S[r][c];
    kr_horn_matrix(Sf, N);

    /* kr_eigen_sym stops on an absolute off-diagonal threshold; normalising N
     * makes its precision independent of the units and the weights' scale. */
    double scale = 0;
    for (int i = 0; i < 16; i++)
        scale = fmax(scale, fabs(N[i]));
    double q[4] = {1, 0, 0, 0}; /* (q0, qx, qy, qz) */
    if (scale > 0 && isfinite(scale)) {
        for (int i = 0; i < 16; i++)
            N[i] /= scale;
        double ev[4], V[16];
        kr_eigen_sym(4, N, ev, V);
        /* Top eigenspace: eigenvalues within the tie tolerance of the largest
         * (N is normalised, so its eigenvalues are O(1)). */
        int first = 3;
        while (first > 0 && ev[3] - ev[first - 1] <= HORN_TIE_RTOL * fmax(1.0, fabs(ev[3])))
            first--;
        double p[4] = {0, 0, 0, 0};
        if (first < 3) {
            /* Project the identity quaternion onto the eigenspace. */
            for (int j = first; j < 4; j++)
                for (int k = 0; k < 4; k++)
                    p[k] += V[0 * 4 + j] * V[k * 4 + j];
        }
        double pn = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]);
        if (first < 3 && pn > 1e-6) {
            for (int k = 0; k < 4; k++)
                q[k] = p[k] / pn;
        } else {
            for (int k = 0; k < 4; k++)
                q[k] = V[k * 4 + 3];
        }
    }
    /* else: all points coincide (M = 0); every rotation fits, keep identity. */

    kr_pose T = kr_pose_from_quat((kr_quat){q[1], q[2], q[3], q[0]}, NULL);
    double Rc[3];
    kr_pose_rotate(&T, cs, Rc);
    for (int k = 0; k < 3; k++)
        T.t[k] = cd[k] - Rc[k];
    *out = T;
    return KR_OK;
}
