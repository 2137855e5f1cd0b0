/* kr_refine shared by several "processes" without MPI: threads of this test,
 * each one part of a kr_refine_partition, with an all-reduce made of a
 * barrier and per-part slots. Each part evaluates only its share of the grid
 * points, so the poses match the single run only if the shares cover every
 * grid point once and the reduced sums reach every part. */
#include "kr_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/scan.h"
#include "kinreg/refine.h"

enum { V = 4, PARTS = 3 };

typedef struct {
    pthread_barrier_t barrier;
    double *slot[PARTS];
    size_t cap[PARTS];
} shared_sums;

typedef struct {
    shared_sums *sh;
    int rank;
    kr_refine_partition part;
    const kr_refine_view *views;
    kr_pose poses[V];
    kr_refine_result res;
    kr_status status;
} part_run;

static kr_status allreduce_sum(void *user, double *data, size_t n)
{
    part_run *me = user;
    shared_sums *sh = me->sh;
    if (sh->cap[me->rank] < n) {
        double *p = realloc(sh->slot[me->rank], sizeof *p * n);
        if (!p) return KR_ERR_NOMEM; /* the test fails; not expected */
        sh->slot[me->rank] = p;
        sh->cap[me->rank] = n;
    }
    memcpy(sh->slot[me->rank], data, sizeof *data * n);
    pthread_barrier_wait(&sh->barrier);
    /* Every part adds the slots in rank order: the same sums everywhere. */
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < PARTS; r++)
            s += sh->slot[r][i];
        data[i] = s;
    }
    pthread_barrier_wait(&sh->barrier); /* nobody refills a slot still being read */
    return KR_OK;
}

static kr_refine_config config(void)
{
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    cfg.cell = 0.004;
    return cfg;
}

static void *run_part(void *arg)
{
    part_run *me = arg;
    kr_refine_config cfg = config();
    cfg.partition = &me->part;
    me->status = kr_refine(&cfg, NULL, me->views, V, me->poses, &me->res);
    return NULL;
}

KR_TEST(refine_partition, parts_match_the_single_run)
{
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V], single[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 60000, xyz, n, truth));
    unsigned s = 3;
    for (int k = 0; k < V; k++) {
        double x[6] = {0};
        for (int i = 0; i < 3 && k; i++)
            x[i] = 0.015 * kr_nrand(&s);
        for (int i = 3; i < 6 && k; i++)
            x[i] = 0.003 * kr_nrand(&s);
        kr_pose d = kr_pose_exp(x);
        start[k] = kr_pose_mul(&d, &truth[k]);
    }
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    kr_refine_config cfg = config();
    kr_refine_result one;
    memcpy(single, start, sizeof single);
    REQUIRE_OK(kr_refine(&cfg, NULL, views, V, single, &one));
    CHECK_EQ(one.ranks, 1);
    CHECK(one.reduced_bytes == 0);

    shared_sums sh = {0};
    REQUIRE(pthread_barrier_init(&sh.barrier, NULL, PARTS) == 0);
    part_run runs[PARTS];
    pthread_t th[PARTS];
    for (int r = 0; r < PARTS; r++) {
        runs[r] = (part_run){.sh = &sh, .rank = r, .views = views};
        runs[r].part = (kr_refine_partition){
            .rank = r, .ranks = PARTS, .allreduce_sum = allreduce_sum, .user = &runs[r]};
        memcpy(runs[r].poses, start, sizeof start);
        REQUIRE(pthread_create(&th[r], NULL, run_part, &runs[r]) == 0);
    }
    for (int r = 0; r < PARTS; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < PARTS; r++) {
        CHECK_OK(runs[r].status);
        CHECK_EQ(runs[r].res.ranks, PARTS);
        /* (30·pairs + 1 + 6·(V−1) + 1) doubles per LM iteration at most. */
        CHECK(runs[r].res.reduced_bytes > 0);
        CHECK(runs[r].res.reduced_bytes <=
              8.0 * (30 * V * (V - 1) + 2 + 6 * (V - 1)) * runs[r].res.evaluations);
        CHECK_EQ(runs[r].res.iterations, one.iterations);
        /* The shares cover every grid point once: the reduced totals are the
         * single run's (were each part to evaluate everything, or nothing be
         * reduced, they would be 3× or about ⅓ of it). */
        CHECK_EQ(runs[r].res.residuals_before, one.residuals_before);
        CHECK_EQ(runs[r].res.residuals_after, one.residuals_after);
        CHECK_NEAR(runs[r].res.cost_before, one.cost_before, 1e-9 * one.cost_before);
        for (int k = 0; k < V; k++) {
            /* Every part moved exactly as part 0 did ... */
            CHECK(memcmp(&runs[r].poses[k], &runs[0].poses[k], sizeof(kr_pose)) == 0);
            /* ... and as the single run, to the stated tolerance (1 µm, 1e-4°). */
            kr_pose inv = kr_pose_inv(&single[k]), d = kr_pose_mul(&inv, &runs[r].poses[k]);
            CHECK_LT(kr_pose_translation_norm(&d), 1e-6);
            CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 1e-4);
        }
    }
    /* The refinement moved the poses, so agreeing means something. */
    kr_pose inv = kr_pose_inv(&start[1]), d = kr_pose_mul(&inv, &single[1]);
    CHECK(kr_pose_translation_norm(&d) > 1e-4);
    pthread_barrier_destroy(&sh.barrier);
    for (int r = 0; r < PARTS; r++)
        free(sh.slot[r]);
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}
