/* Synthetic object views (capture/synthetic_object.h). The surface is a
 * sphere with smooth bumps of several frequencies, so that no rotation maps
 * it onto itself and registration has one answer. */
#include "kinreg/scan.h"

#include <math.h>
#include <stdlib.h>

static double radius(double th, double ph)
{
    return 0.1 * (1 + 0.15 * sin(3 * th) * cos(2 * ph) + 0.08 * sin(5 * ph + 1) +
                  0.05 * cos(4 * th - ph));
}

static void surface(double th, double ph, double p[3])
{
    double r = radius(th, ph);
    p[0] = r * sin(th) * cos(ph);
    p[1] = r * sin(th) * sin(ph);
    p[2] = r * cos(th);
}

/* Camera at c looking at the origin: z forward, as a depth camera. */
static kr_pose look_at(const double c[3])
{
    double z[3] = {-c[0], -c[1], -c[2]}, up[3] = {0, 0, 1}, x[3], y[3];
    double nz = sqrt(z[0] * z[0] + z[1] * z[1] + z[2] * z[2]);
    for (int i = 0; i < 3; i++)
        z[i] /= nz;
    x[0] = up[1] * z[2] - up[2] * z[1];
    x[1] = up[2] * z[0] - up[0] * z[2];
    x[2] = up[0] * z[1] - up[1] * z[0];
    double nx = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    for (int i = 0; i < 3; i++)
        x[i] /= nx;
    y[0] = z[1] * x[2] - z[2] * x[1];
    y[1] = z[2] * x[0] - z[0] * x[2];
    y[2] = z[0] * x[1] - z[1] * x[0];
    kr_pose T;
    for (int r = 0; r < 3; r++) {
        T.R[3 * r] = x[r];
        T.R[3 * r + 1] = y[r];
        T.R[3 * r + 2] = z[r];
        T.t[r] = c[r];
    }
    return T;
}

kr_status kr_scan_synthetic_object(int n_views, size_t density, float **xyz, size_t *n,
                                   kr_pose *poses)
{
    if (n_views < 1 || density < 100 || !xyz || !n || !poses)
        return kr_error(KR_ERR_INVALID_ARG, "synthetic object: needs >= 1 view and >= 100 samples");
    float **out = calloc((size_t)n_views, sizeof *out);
    if (!out) return kr_error(KR_ERR_NOMEM, "synthetic object: no memory");
    for (int k = 0; k < n_views; k++) {
        double a = 2 * M_PI * k / n_views, el = 0.35 * sin(3 * a);
        double c[3] = {0.5 * cos(a) * cos(el), 0.5 * sin(a) * cos(el), 0.5 * sin(el)};
        poses[k] = look_at(c);
        if (!(out[k] = malloc(sizeof(float) * 3 * density))) {
            for (int j = 0; j <= k; j++)
                free(out[j]);
            free(out);
            return kr_error(KR_ERR_NOMEM, "synthetic object: no memory for %zu points", density);
        }
        kr_pose inv = kr_pose_inv(&poses[k]);
        size_t m = 0;
        /* Fibonacci sphere: even samples of direction (θ, φ). */
        for (size_t i = 0; i < density; i++) {
            double zc = 1 - (2.0 * i + 1) / (double)density, th = acos(zc),
                   ph = fmod(i * 2.399963229728653, 2 * M_PI);
            double p[3], pu[3], pv[3], q[3];
            surface(th, ph, p);
            surface(th + 1e-4, ph, pu);
            surface(th, ph + 1e-4, pv);
            double du[3], dv[3], nrm[3];
            for (int j = 0; j < 3; j++) {
                du[j] = pu[j] - p[j];
                dv[j] = pv[j] - p[j];
            }
            nrm[0] = du[1] * dv[2] - du[2] * dv[1];
            nrm[1] = du[2] * dv[0] - du[0] * dv[2];
            nrm[2] = du[0] * dv[1] - du[1] * dv[0];
            double toc[3] = {c[0] - p[0], c[1] - p[1], c[2] - p[2]};
            double facing = nrm[0] * toc[0] + nrm[1] * toc[1] + nrm[2] * toc[2];
            double nn = sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2]),
                   nt = sqrt(toc[0] * toc[0] + toc[1] * toc[1] + toc[2] * toc[2]);
            if (facing < 0.2 * nn * nt) continue;
            kr_pose_apply(&inv, p, q);
            for (int j = 0; j < 3; j++)
                out[k][3 * m + j] = (float)q[j];
            m++;
        }
        n[k] = m;
    }
    for (int k = 0; k < n_views; k++)
        xyz[k] = out[k];
    free(out);
    return KR_OK;
}
