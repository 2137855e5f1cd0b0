/* The parity harness itself (tests/parity.c), on the CPU: CI has no GPU, so
 * this is where what every parity test's verdict rests on is checked on
 * every commit. Each measure, tolerance, NaN rule, mask and allowance
 * against verdicts worked out by hand, and a table of steps run with the CPU
 * engine on both sides. */
#include "kr_test.h"
#include "parity.h"

#include <math.h>
#include <stdlib.h>

/* A quantity over the caller's values (no copy). */
static kr_parity_quantity quantity(double *v, size_t n, int dim)
{
    kr_parity_quantity q;
    memset(&q, 0, sizeof q);
    snprintf(q.name, sizeof q.name, "q");
    q.v = v;
    q.n = n;
    q.dim = dim;
    return q;
}

KR_TEST(parity_harness, bits_are_bits)
{
    double a[4] = {1, 2, 0.0, NAN}, b[4] = {1, 2, -0.0, NAN};
    kr_parity_quantity qa = quantity(a, 4, 1), qb = quantity(b, 4, 1);
    kr_parity_check c = PARITY_CHECK("q", KR_PARITY_BITS, 0);
    kr_parity_verdict v;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_EQ(v.off, 1); /* −0 is not +0; the same NaN is the same bits */
    CHECK_EQ(v.worst, 2);
    CHECK_EQ(v.n, 4);
    b[2] = 0.0;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    /* NaNs of other bits: equal only with nan_equal. */
    b[3] = -NAN;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    c.nan_equal = true;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    /* Groups: one element of two values, differing in the second. */
    double g[2] = {1, 2}, h[2] = {1, 3};
    kr_parity_quantity qg = quantity(g, 1, 2), qh = quantity(h, 1, 2);
    CHECK(!kr_parity_compare(&c, &qg, &qh, NULL, NULL, &v));
    /* Counts differ: not compared, and said why. */
    kr_parity_quantity q3 = quantity(a, 3, 1);
    CHECK(!kr_parity_compare(&c, &qa, &q3, NULL, NULL, &v));
    CHECK_CONTAINS(v.why, "4 elements of 1 against 3 of 1");
}

KR_TEST(parity_harness, tolerances_scales_and_strictness)
{
    double a[3] = {1, 2, 3}, b[3] = {1, 2.5, 3};
    kr_parity_quantity qa = quantity(a, 3, 1), qb = quantity(b, 3, 1);
    kr_parity_check c = PARITY_CHECK("q", KR_PARITY_ABS, 0.5);
    kr_parity_verdict v;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v)); /* 0.5 <= 0.5 */
    CHECK_EQ(v.worst, 1);
    CHECK_EQ(v.err, 0.5);
    CHECK_EQ(v.bound, 0.5);
    c.below = true;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v)); /* 0.5 < 0.5 fails */
    c.below = false;
    /* The reference's scale: per element, or one for all. */
    double s[3] = {1, 0.5, 1};
    qa.scale = s;
    qa.n_scale = 3;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_EQ(v.bound, 0.25);
    qa.n_scale = 1;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    qa.scale = NULL;
    qa.n_scale = 0;
    /* Allowed: one element of three may be off with 1/3, not with 0.3. */
    c.tol = 0.1;
    c.allowed = 1.0 / 3;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_EQ(v.off, 1);
    c.allowed = 0.3;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    /* Infinities match only themselves; a NaN value is never within. */
    double x[2] = {INFINITY, 1}, y[2] = {INFINITY, NAN};
    kr_parity_quantity qx = quantity(x, 1, 2), qy = quantity(y, 1, 2);
    c.allowed = 0;
    CHECK(!kr_parity_compare(&c, &qx, &qy, NULL, NULL, &v));
    y[1] = 1;
    CHECK(kr_parity_compare(&c, &qx, &qy, NULL, NULL, &v));
    y[0] = 1e300;
    CHECK(!kr_parity_compare(&c, &qx, &qy, NULL, NULL, &v));
}

KR_TEST(parity_harness, missing_elements_norms_and_masks)
{
    /* Points: (3, 4, 0) against (3, 4, 5e-5): 1e-5 of its norm 5. */
    double a[9] = {3, 4, 0, NAN, NAN, NAN, NAN, NAN, NAN};
    double b[9] = {3, 4, 5e-5, NAN, NAN, NAN, 1, 1, 1};
    kr_parity_quantity qa = quantity(a, 3, 3), qb = quantity(b, 3, 3);
    kr_parity_check c = PARITY_CHECK("q", KR_PARITY_NORM, 1e-5, .nan_equal = true);
    kr_parity_verdict v;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_EQ(v.off, 1); /* the third: missing on one side only */
    CHECK_EQ(v.worst, 2);
    b[6] = NAN;
    CHECK(kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_NEAR(v.err, 1e-5, 1e-15);
    /* Missing on both sides without nan_equal: off, as NaN fails CHECK_NEAR. */
    c.nan_equal = false;
    CHECK(!kr_parity_compare(&c, &qa, &qb, NULL, NULL, &v));
    CHECK_EQ(v.off, 2);
    /* A mask leaves out the elements it lacks on either side. */
    double m[3] = {1, NAN, 1}, mb[3] = {1, 1, NAN};
    kr_parity_quantity qm = quantity(m, 3, 1), qmb = quantity(mb, 3, 1);
    CHECK(kr_parity_compare(&c, &qa, &qb, &qm, &qmb, &v));
    CHECK_EQ(v.n, 1);
}

KR_TEST(parity_harness, poses_by_angle_and_distance)
{
    double w[6] = {0, 0, M_PI / 180, 0.001, 0.002, 0.002};
    kr_pose id = kr_pose_identity(), p = kr_pose_exp(w);
    kr_parity_out a = {0}, b = {0};
    kr_parity_put_poses(&a, "pose", &id, 1);
    kr_parity_put_poses(&b, "pose", &p, 1);
    const kr_parity_quantity *qa = kr_parity_get(&a, "pose"), *qb = kr_parity_get(&b, "pose");
    REQUIRE(qa && qb);
    kr_parity_check deg = PARITY_CHECK("pose", KR_PARITY_DEGREES, 1.0 + 1e-9);
    kr_parity_check rad = PARITY_CHECK("pose", KR_PARITY_ANGLE, 0.999 * M_PI / 180, .below = true);
    kr_parity_check dist = PARITY_CHECK("pose", KR_PARITY_DISTANCE, 0.002);
    kr_parity_verdict v;
    CHECK(kr_parity_compare(&deg, qa, qb, NULL, NULL, &v));
    CHECK_NEAR(v.err, 1.0, 1e-9);
    CHECK(!kr_parity_compare(&rad, qa, qb, NULL, NULL, &v));
    rad.tol = 1.001 * M_PI / 180;
    CHECK(kr_parity_compare(&rad, qa, qb, NULL, NULL, &v));
    CHECK(!kr_parity_compare(&dist, qa, qb, NULL, NULL, &v));
    CHECK_NEAR(v.err, sqrt(p.t[0] * p.t[0] + p.t[1] * p.t[1] + p.t[2] * p.t[2]), 1e-15);
    dist.tol = 0.004;
    CHECK(kr_parity_compare(&dist, qa, qb, NULL, NULL, &v));
    kr_parity_out_free(&a);
    kr_parity_out_free(&b);
}

/* ---- a table run with the CPU engine on both sides ------------------------- */

static int reference_runs;

static bool put_values(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)fixture;
    CHECK(dev != NULL);
    const double *add = arg;
    double *v = kr_parity_put(out, 2, 1, "values level %d", 0);
    if (!v) return false;
    v[0] = 1;
    v[1] = 2 + *add;
    kr_parity_put_scalar(out, "count", 7);
    kr_parity_put_u64(out, "key", &(uint64_t){0x123456789abcdefull}, 1);
    return true;
}

static bool off_by_a_little(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    static const double tiny = 1e-12;
    return put_values(dev, fixture, &tiny, out);
}

static bool reference(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    reference_runs++;
    return put_values(dev, fixture, arg, out);
}

static void also_counts(const kr_parity_step *step, const kr_parity_out *a, const kr_parity_out *b,
                        void *fixture)
{
    (void)step;
    (*(int *)fixture)++;
    CHECK_EQ(kr_parity_get(a, "count")->v[0], kr_parity_get(b, "count")->v[0]);
}

KR_TEST(parity_harness, a_table_of_steps_on_two_engines)
{
    kr_device *c = kr_parity_make_device(KR_BACKEND_CPU),
              *g = kr_parity_make_device(KR_BACKEND_CPU);
    REQUIRE(c && g);
    static const double none = 0;
    const kr_parity_step steps[] = {
        {.name = "same",
         .cpu = reference,
         .cuda = put_values,
         .arg = &none,
         .checks = {PARITY_CHECK("values", KR_PARITY_BITS, 0),
                    PARITY_CHECK("count", KR_PARITY_BITS, 0),
                    PARITY_CHECK("key", KR_PARITY_BITS, 0)},
         .also = also_counts},
        {.name = "again",
         .cpu = reference,
         .cuda = put_values,
         .arg = &none,
         .checks = {PARITY_CHECK("values", KR_PARITY_ABS, 0)},
         .also = also_counts},
        {.name = "nearly",
         .cpu = reference,
         .cuda = off_by_a_little,
         .arg = &none,
         .checks = {PARITY_CHECK("values", KR_PARITY_ABS, 1e-9)},
         .also = also_counts},
    };
    int also = 0;
    reference_runs = 0;
    kr_parity_run_on(c, g, steps, 3, &also);
    CHECK_EQ(also, 3);
    CHECK_EQ(reference_runs, 1); /* one reference run for steps with the same run and argument */
    kr_device_destroy(&c);
    kr_device_destroy(&g);
}
