/* The parity harness (parity.h): quantities, the comparison of one check,
 * the devices made once, and the runner of a table of steps. */
#include "parity.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- quantities ------------------------------------------------------------- */

double *kr_parity_put(kr_parity_out *out, size_t n, int dim, const char *name, ...)
{
    if (out->count >= KR_PARITY_MAX_QUANTITIES || dim < 1) return NULL;
    kr_parity_quantity *q = &out->q[out->count];
    memset(q, 0, sizeof *q);
    va_list ap;
    va_start(ap, name);
    vsnprintf(q->name, sizeof q->name, name, ap);
    va_end(ap);
    q->v = calloc(n ? n * (size_t)dim : 1, sizeof *q->v);
    if (!q->v) return NULL;
    q->n = n;
    q->dim = dim;
    out->count++;
    return q->v;
}

void kr_parity_put_f(kr_parity_out *out, const char *name, const float *v, size_t n, int dim)
{
    double *d = kr_parity_put(out, n, dim, "%s", name);
    for (size_t i = 0; d && i < n * (size_t)dim; i++)
        d[i] = v[i];
}

void kr_parity_put_d(kr_parity_out *out, const char *name, const double *v, size_t n, int dim)
{
    double *d = kr_parity_put(out, n, dim, "%s", name);
    if (d && n) memcpy(d, v, n * (size_t)dim * sizeof *d);
}

void kr_parity_put_scalar(kr_parity_out *out, const char *name, double v)
{
    kr_parity_put_d(out, name, &v, 1, 1);
}

void kr_parity_put_u64(kr_parity_out *out, const char *name, const uint64_t *v, size_t n)
{
    double *d = kr_parity_put(out, n, 2, "%s", name);
    for (size_t i = 0; d && i < n; i++) {
        d[2 * i] = (double)(v[i] >> 32);
        d[2 * i + 1] = (double)(v[i] & 0xffffffffu);
    }
}

void kr_parity_put_bytes(kr_parity_out *out, const char *name, const void *p, size_t n)
{
    const unsigned char *b = p;
    double *d = kr_parity_put(out, n, 1, "%s", name);
    for (size_t i = 0; d && i < n; i++)
        d[i] = b[i];
}

void kr_parity_put_poses(kr_parity_out *out, const char *name, const kr_pose *p, size_t n)
{
    double *d = kr_parity_put(out, n, 12, "%s", name);
    for (size_t i = 0; d && i < n; i++) {
        memcpy(d + 12 * i, p[i].R, 9 * sizeof *d);
        memcpy(d + 12 * i + 9, p[i].t, 3 * sizeof *d);
    }
}

void kr_parity_scale(kr_parity_out *out, const char *name, const double *s, size_t n)
{
    for (int k = 0; k < out->count; k++) {
        kr_parity_quantity *q = &out->q[k];
        if (strcmp(q->name, name) != 0) continue;
        free(q->scale);
        q->scale = malloc((n ? n : 1) * sizeof *q->scale);
        q->n_scale = q->scale ? n : 0;
        if (q->scale && n) memcpy(q->scale, s, n * sizeof *s);
        return;
    }
}

const kr_parity_quantity *kr_parity_get(const kr_parity_out *out, const char *name)
{
    for (int k = 0; k < out->count; k++)
        if (strcmp(out->q[k].name, name) == 0) return &out->q[k];
    return NULL;
}

void kr_parity_out_free(kr_parity_out *out)
{
    for (int k = 0; k < out->count; k++) {
        free(out->q[k].v);
        free(out->q[k].scale);
    }
    memset(out, 0, sizeof *out);
}

/* ---- one check -------------------------------------------------------------- */

static kr_pose pose_of(const double *v)
{
    kr_pose p;
    memcpy(p.R, v, sizeof p.R);
    memcpy(p.t, v + 9, sizeof p.t);
    return p;
}

/* The error of element a against b by measure m (both present). */
static double element_error(kr_parity_measure m, const double *a, const double *b, int dim)
{
    double e = 0;
    switch (m) {
    case KR_PARITY_BITS:
        return memcmp(a, b, (size_t)dim * sizeof *a) == 0 ? 0 : 1;
    case KR_PARITY_ABS:
    case KR_PARITY_NORM: {
        double norm = 1;
        if (m == KR_PARITY_NORM) {
            norm = 0;
            for (int j = 0; j < dim; j++)
                norm += a[j] * a[j];
            norm = sqrt(norm);
        }
        for (int j = 0; j < dim; j++) {
            if (a[j] == b[j]) continue; /* infinities included */
            if (isnan(a[j]) || isnan(b[j])) return NAN;
            e = fmax(e, fabs(a[j] - b[j]) / norm);
        }
        return e;
    }
    case KR_PARITY_ANGLE:
    case KR_PARITY_DEGREES: {
        if (dim != 12) return NAN;
        kr_pose pa = pose_of(a), pb = pose_of(b), ia = kr_pose_inv(&pa), d = kr_pose_mul(&ia, &pb);
        double angle = kr_pose_angle(&d);
        return m == KR_PARITY_DEGREES ? angle * 180 / M_PI : angle;
    }
    case KR_PARITY_DISTANCE: {
        if (dim != 12) return NAN;
        double dt[3] = {b[9] - a[9], b[10] - a[10], b[11] - a[11]};
        return sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]);
    }
    }
    return NAN;
}

static double scale_at(const kr_parity_quantity *q, size_t i)
{
    if (!q->scale || q->n_scale == 0) return 1;
    return q->n_scale == 1 ? q->scale[0] : q->scale[i];
}

bool kr_parity_compare(const kr_parity_check *c, const kr_parity_quantity *a,
                       const kr_parity_quantity *b, const kr_parity_quantity *mask_a,
                       const kr_parity_quantity *mask_b, kr_parity_verdict *v)
{
    memset(v, 0, sizeof *v);
    if (a->n != b->n || a->dim != b->dim) {
        snprintf(v->why, sizeof v->why, "%zu elements of %d against %zu of %d", a->n, a->dim, b->n,
                 b->dim);
        return false;
    }
    if (a->scale && a->n_scale != 1 && a->n_scale != a->n) {
        snprintf(v->why, sizeof v->why, "%zu scales for %zu elements", a->n_scale, a->n);
        return false;
    }
    if ((mask_a || mask_b) && (!mask_a || !mask_b || mask_a->n != a->n || mask_b->n != a->n)) {
        snprintf(v->why, sizeof v->why, "mask %s does not cover the elements", c->mask);
        return false;
    }
    double worst_ratio = -1;
    for (size_t i = 0; i < a->n; i++) {
        if (mask_a && (isnan(mask_a->v[i * (size_t)mask_a->dim]) ||
                       isnan(mask_b->v[i * (size_t)mask_b->dim])))
            continue;
        v->n++;
        const double *x = a->v + i * (size_t)a->dim, *y = b->v + i * (size_t)b->dim;
        bool xa = !isnan(x[0]), ya = !isnan(y[0]);
        double err, bound = c->measure == KR_PARITY_BITS ? 0 : c->tol * scale_at(a, i), ratio;
        bool off;
        if (c->measure == KR_PARITY_BITS) {
            /* Bits are bits: a NaN matches only the same NaN (or any NaN
             * with nan_equal). */
            err = element_error(c->measure, x, y, a->dim);
            if (err != 0 && c->nan_equal && !xa && !ya) err = 0;
            off = err != 0;
        } else if (!xa || !ya) {
            err = xa == ya && c->nan_equal ? 0 : NAN;
            off = isnan(err);
        } else {
            err = element_error(c->measure, x, y, a->dim);
            off = c->below ? !(err < bound) : !(err <= bound);
        }
        if (off) v->off++;
        ratio = isnan(err) ? INFINITY : bound > 0 ? err / bound : err > 0 ? INFINITY : 0;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            v->worst = i;
            v->err = err;
            v->bound = bound;
            v->have_worst = true;
        }
    }
    v->ok = (double)v->off <= c->allowed * (double)a->n;
    return v->ok;
}

/* ---- devices ---------------------------------------------------------------- */

kr_device *kr_parity_make_device(kr_backend b)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = b;
    kr_device *dev = NULL;
    return kr_device_create(&dev, &dc) == KR_OK ? dev : NULL;
}

static kr_device *shared_cpu, *shared_cuda;

/* Registered after the devices exist, so it runs before the CUDA runtime's
 * own exit handlers (registered at its first call) tear the runtime down. */
static void destroy_shared(void)
{
    kr_device_destroy(&shared_cuda);
    kr_device_destroy(&shared_cpu);
}

bool kr_parity_devices(kr_device **cpu, kr_device **cuda)
{
    *cpu = *cuda = NULL;
    if (!kr_cuda_available()) {
        kr_test_skip("no CUDA device: parity needs a GPU (runs on the GPU machine)");
        return false;
    }
    if (!shared_cpu || !shared_cuda) {
        bool first = !shared_cpu && !shared_cuda;
        if (!shared_cpu) shared_cpu = kr_parity_make_device(KR_BACKEND_CPU);
        if (!shared_cuda) shared_cuda = kr_parity_make_device(KR_BACKEND_CUDA);
        if (first && (shared_cpu || shared_cuda)) atexit(destroy_shared);
    }
    if (!shared_cpu || !shared_cuda) {
        kr_test_fail(__FILE__, __LINE__, "parity devices: cpu %s, cuda %s (%s)",
                     shared_cpu ? "made" : "failed", shared_cuda ? "made" : "failed",
                     kr_last_error());
        return false;
    }
    *cpu = shared_cpu;
    *cuda = shared_cuda;
    return true;
}

/* ---- the runner ------------------------------------------------------------- */

static const char *measure_name(kr_parity_measure m)
{
    static const char *const names[] = {"bits", "abs", "relative to norm", "rad", "deg", "m"};
    return (unsigned)m < sizeof names / sizeof *names ? names[m] : "?";
}

/* The values of element i, or for poses its translation: integers whole,
 * floats to 9 digits, doubles to 17 (so that two values that differ print
 * apart). */
static void element_text(const kr_parity_quantity *q, size_t i, kr_parity_measure m, char *buf,
                         size_t size)
{
    const double *x = q->v + i * (size_t)q->dim;
    int from = 0, count = q->dim < 4 ? q->dim : 4;
    if (q->dim == 12 && m >= KR_PARITY_ANGLE) from = 9, count = 3;
    size_t at = 0;
    for (int j = 0; j < count && at < size; j++)
        at += (size_t)snprintf(buf + at, size - at,
                               x[from + j] == floor(x[from + j]) && fabs(x[from + j]) < 9e15
                                   ? "%s%.0f"
                               : x[from + j] == (double)(float)x[from + j] ? "%s%.9g"
                                                                           : "%s%.17g",
                               j ? " " : "", x[from + j]);
    if (from + count < q->dim && at < size) snprintf(buf + at, size - at, " ...");
}

/* Whether `name` is `family` or one of it ("family ..."). */
static bool in_family(const char *name, const char *family)
{
    size_t n = strlen(family);
    return strncmp(name, family, n) == 0 && (name[n] == '\0' || name[n] == ' ');
}

void kr_parity_apply(const kr_parity_step *s, const kr_parity_check *c, const kr_parity_out *a,
                     const kr_parity_out *b)
{
    const char *an = s->cpu_name ? s->cpu_name : "cpu", *bn = s->cuda_name ? s->cuda_name : "cuda";
    int matched = 0;
    for (int k = 0; k < a->count; k++) {
        const kr_parity_quantity *qa = &a->q[k];
        if (!in_family(qa->name, c->quantity)) continue;
        matched++;
        const kr_parity_quantity *qb = kr_parity_get(b, qa->name), *ma = NULL, *mb = NULL;
        if (!qb) {
            kr_test_fail(__FILE__, __LINE__, "%s: %s: the %s run put no %s", s->name, qa->name, bn,
                         qa->name);
            continue;
        }
        if (c->mask) {
            char mname[2 * KR_PARITY_NAME];
            snprintf(mname, sizeof mname, "%s%s", c->mask, qa->name + strlen(c->quantity));
            ma = kr_parity_get(a, mname);
            mb = kr_parity_get(b, mname);
        }
        kr_parity_verdict v;
        kr_parity_compare(c, qa, qb, ma, mb, &v);
        if (v.why[0]) {
            kr_test_fail(__FILE__, __LINE__, "%s: %s: %s against %s: %s", s->name, qa->name, an, bn,
                         v.why);
            continue;
        }
        char ta[160] = "", tb[160] = "";
        if (v.have_worst) {
            element_text(qa, v.worst, c->measure, ta, sizeof ta);
            element_text(qb, v.worst, c->measure, tb, sizeof tb);
        }
        char line[768];
        snprintf(line, sizeof line,
                 "%s: %s: %zu compared, %zu off (%g allowed); worst [%zu] %s %s, %s %s: %.3g %s "
                 "(%s %.3g)",
                 s->name, qa->name, v.n, v.off, c->allowed * (double)qa->n, v.worst, an, ta, bn, tb,
                 v.err, measure_name(c->measure), c->below ? "below" : "at most", v.bound);
        if (v.ok)
            printf("    %s\n", line);
        else
            kr_test_fail(__FILE__, __LINE__, "%s", line);
    }
    if (!matched)
        kr_test_fail(__FILE__, __LINE__, "%s: the %s run put no %s", s->name, an, c->quantity);
}

void kr_parity_run_on(kr_device *cpu, kr_device *cuda, const kr_parity_step *steps, size_t count,
                      void *fixture)
{
    kr_parity_out a = {0}, b = {0};
    const kr_parity_step *made = NULL; /* whose reference output `a` holds */
    for (size_t i = 0; i < count; i++) {
        const kr_parity_step *s = &steps[i];
        if (!made || made->cpu != s->cpu || made->arg != s->arg) {
            kr_parity_out_free(&a);
            made = NULL;
            if (!s->cpu(cpu, fixture, s->arg, &a)) break;
            made = s;
        }
        kr_parity_out_free(&b);
        if (!s->cuda(cuda, fixture, s->arg, &b)) break;
        for (int k = 0; k < KR_PARITY_MAX_CHECKS && s->checks[k].quantity; k++)
            kr_parity_apply(s, &s->checks[k], &a, &b);
        if (s->also) s->also(s, &a, &b, fixture);
    }
    kr_parity_out_free(&a);
    kr_parity_out_free(&b);
}

void kr_parity_run(const kr_parity_step *steps, size_t count, void *fixture)
{
    kr_device *cpu, *cuda;
    if (kr_parity_devices(&cpu, &cuda)) kr_parity_run_on(cpu, cuda, steps, count, fixture);
}
