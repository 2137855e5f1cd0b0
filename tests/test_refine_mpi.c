/* Refinement shared by MPI ranks (tools/refine_mpi.c, pipeline/refine/refine_partition.c):
 * mpirun -np 1, 2 and 4 on one problem return the single-process poses within
 * the stated tolerance, and a rank that cannot read its input stops every
 * rank with a message instead of a hang. CI runs as root on 2 cores: the
 * launches allow root and oversubscribe, and each has a timeout. */
#include "kr_test.h"

#include <math.h>
#include <stdio.h>

#include "kinreg/scan.h"
#include "kinreg/refine.h"

#include "device_hold.h"

/* Open MPI keeps its own allocations past MPI_Finalize (no leak check) */
KR_LABELS("mpi");

/* The stated tolerance (docs/guide/gpus-and-clusters.md, "Refinement on a
 * cluster"): the ranks add the same per-grid-point terms in another order,
 * so the poses agree to rounding unless a borderline LM decision flips; 1 µm
 * and 1e-4° leave room for that on a problem whose poses move by millimetres
 * and degrees. */
#define RANKS_MM 1e-3
#define RANKS_DEG 1e-4

#define MPI_ENV                                                                                    \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "                                   \
    "OMPI_MCA_rmaps_base_oversubscribe=1 "                                                         \
    "OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive"

#ifdef KINREG_HAVE_MPI
static int run_mpi(const char *ranks_args, char *out, size_t size)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s timeout -k 5 60 '%s' --oversubscribe %s", MPI_ENV, KINREG_MPIEXEC,
             ranks_args);
    return kr_test_shell(cmd, out, size);
}

/* Largest difference between two pose files, in mm and degrees. */
static void conf_difference(const char *a, const char *b, double *mm, double *deg)
{
    kr_scan_set ca = {0}, cb = {0};
    *mm = *deg = INFINITY;
    if (kr_scan_set_read(a, &ca) != KR_OK || kr_scan_set_read(b, &cb) != KR_OK || ca.n != cb.n) {
        kr_scan_set_free(&ca);
        kr_scan_set_free(&cb);
        return;
    }
    *mm = *deg = 0;
    for (int k = 0; k < ca.n; k++) {
        kr_pose inv = kr_pose_inv(&ca.scans[k].pose), d = kr_pose_mul(&inv, &cb.scans[k].pose);
        *mm = fmax(*mm, 1000 * kr_pose_translation_norm(&d));
        *deg = fmax(*deg, kr_pose_angle(&d) * 180 / M_PI);
    }
    kr_scan_set_free(&ca);
    kr_scan_set_free(&cb);
}
#endif

KR_TEST(refine_mpi, ranks_match_the_single_process_run)
{
#ifndef KINREG_HAVE_MPI
    SKIP("this build has no MPI (install libopenmpi-dev and rebuild)");
#else
    const char *dir = kr_test_tmpdir();
    const char *problem = "refine --synthetic 4 --cell 0.004 --perturb 1,0.2 -q";
    char args[2048], out[16384], single[1024], path[1024];
    snprintf(single, sizeof single, "%s/single.conf", dir);
    snprintf(args, sizeof args, "%s -o %s", problem, single);
    REQUIRE(kr_test_run_tool("OMP_NUM_THREADS=1", args, out, sizeof out) == 0);
    /* The start differs from the result: the comparison below means something. */
    snprintf(args, sizeof args,
             "refine --synthetic 4 --cell 0.004 --perturb 1,0.2 -q "
             "--iterations 0 --levels 1 -o %s/start.conf",
             dir);
    REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
    snprintf(path, sizeof path, "%s/start.conf", dir);
    double mm, deg;
    conf_difference(single, path, &mm, &deg);
    CHECK(mm > 100 * RANKS_MM && deg > 100 * RANKS_DEG);
    const int ranks[] = {1, 2, 4};
    for (int r = 0; r < 3; r++) {
        snprintf(path, sizeof path, "%s/ranks%d.conf", dir, ranks[r]);
        snprintf(args, sizeof args, "-np %d '%s' %s --json -o %s", ranks[r], kr_test_tool(),
                 problem, path);
        int rc = run_mpi(args, out, sizeof out);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        REQUIRE(rc == 0);
        char expect[64];
        snprintf(expect, sizeof expect, "\"ranks\":%d", ranks[r]);
        CHECK_CONTAINS(out, expect);
        if (ranks[r] > 1) CHECK(!strstr(out, "\"reduced_bytes\":0,"));
        conf_difference(single, path, &mm, &deg);
        fprintf(stderr, "  %d rank(s): %.3g mm %.3g deg from the single process\n", ranks[r], mm,
                deg);
        CHECK(mm <= RANKS_MM);
        CHECK(deg <= RANKS_DEG);
    }
#endif
}

/* The long-scan settings of bench/refine_mpi.sh (signed fields on the room,
 * a 2 cm grid) on a short loop: 1, 2 and 4 ranks return the single-process
 * poses within the stated tolerance. */
/* long: the sanitizer passes leave it out (59 s of CPU under ASan); the ranks' code
 * runs there in ranks_match_the_single_process_run. */
KR_TEST_TAGGED(refine_mpi, ranks_agree_on_the_room_scan, "long")
{
#ifndef KINREG_HAVE_MPI
    SKIP("this build has no MPI (install libopenmpi-dev and rebuild)");
#else
    const char *dir = kr_test_tmpdir();
    const char *problem = "refine --synthetic room:12 --perturb 0.1:0.2,0.1:0.3 --cell 0.02 "
                          "--levels 1 --signed -q";
    char args[2048], out[16384], single[1024], path[1024];
    snprintf(single, sizeof single, "%s/room_single.conf", dir);
    snprintf(args, sizeof args, "%s -o %s", problem, single);
    REQUIRE(kr_test_run_tool("OMP_NUM_THREADS=1", args, out, sizeof out) == 0);
    const int ranks[] = {1, 2, 4};
    for (int r = 0; r < 3; r++) {
        snprintf(path, sizeof path, "%s/room_ranks%d.conf", dir, ranks[r]);
        snprintf(args, sizeof args, "-np %d '%s' %s --json -o %s", ranks[r], kr_test_tool(),
                 problem, path);
        int rc = run_mpi(args, out, sizeof out);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        REQUIRE(rc == 0);
        double mm, deg;
        conf_difference(single, path, &mm, &deg);
        fprintf(stderr, "  room, %d rank(s): %.3g mm %.3g deg from the single process\n", ranks[r],
                mm, deg);
        CHECK(mm <= RANKS_MM);
        CHECK(deg <= RANKS_DEG);
    }
#endif
}

KR_TEST(refine_mpi, a_rank_that_cannot_read_stops_every_rank)
{
#ifndef KINREG_HAVE_MPI
    SKIP("this build has no MPI (install libopenmpi-dev and rebuild)");
#else
    const char *dir = kr_test_tmpdir();
    char args[4096], out[16384];
    /* MPMD: rank 0 builds its views, rank 1 is given a file that is not there. */
    snprintf(args, sizeof args,
             "-np 1 '%s' refine --synthetic 4 --cell 0.004 -q : -np 1 '%s' refine %s/absent.conf "
             "-q",
             kr_test_tool(), kr_test_tool(), dir);
    int rc = run_mpi(args, out, sizeof out);
    CHECK(rc != 0);
    CHECK(rc != 124 && rc != 137); /* not the timeout: no hang */
    CHECK_CONTAINS(out, "rank 1: ");
    CHECK_CONTAINS(out, "absent.conf");
    CHECK_CONTAINS(out, "rank 0 stops: rank 1 failed");
#endif
}

/* A rank that fails inside the refinement, after the ranks have begun to
 * share reductions (the overlap measure's), while the other waits in the
 * next one: every rank ends, each saying why, and no rank is killed
 * (MPI_Abort ended them before, with Open MPI's own banner). Rank 1 is
 * given a grid too fine for its memory limit: its distance fields cannot be
 * allocated. */
KR_TEST(refine_mpi, a_rank_failing_inside_the_refinement_stops_every_rank)
{
#ifndef KINREG_HAVE_MPI
    SKIP("this build has no MPI (install libopenmpi-dev and rebuild)");
#elif defined(KINREG_SANITIZED)
    SKIP("a virtual-memory limit and the sanitizers' shadow memory do not mix");
#else
    char args[4096], out[16384];
    snprintf(args, sizeof args,
             "-np 1 '%s' refine --synthetic 4 --cell 0.004 --levels 1 : -np 1 sh -c 'ulimit -v "
             "1500000; exec \"$0\" refine --synthetic 4 --cell 0.00005 --levels 1' '%s'",
             kr_test_tool(), kr_test_tool());
    int rc = run_mpi(args, out, sizeof out);
    printf("%s", out);
    CHECK(rc != 0);
    CHECK(rc != 124 && rc != 137);                        /* not the timeout: no hang */
    CHECK_CONTAINS(out, "measuring how 4 views overlap"); /* inside the refinement */
    CHECK_CONTAINS(out, "rank 1: distance field: no memory");
    CHECK_CONTAINS(out, "rank 0 stops: rank 1 failed");
    CHECK_MSG(!strstr(out, "MPI_ABORT"), "a rank was killed: %s", out);
#endif
}

/* A rank whose GPU is out of memory (the test takes it, as another program
 * on a shared GPU would): every rank ends, each saying why, not a hang. Rank
 * r takes GPU r by local rank; on one GPU both ranks find it full. */
KR_TEST_TAGGED(refine_mpi, a_device_out_of_memory_stops_every_rank, "gpu")
{
#ifndef KINREG_HAVE_MPI
    SKIP("this build has no MPI (install libopenmpi-dev and rebuild)");
#else
    if (!kr_cuda_available()) SKIP("needs a CUDA device");
    int all[KR_REFINE_MAX_DEVICES], n_all = 0;
    REQUIRE_OK(kr_refine_devices_parse("all", all, &n_all));
    int device = n_all >= 2 ? 1 : 0;
    kr_test_device_hold hold;
    REQUIRE(kr_test_device_hold_begin(&hold, device, (size_t)4 << 20));
    char args[4096], out[16384];
    snprintf(args, sizeof args,
             "-np 2 '%s' refine --synthetic room:20 --cell 0.02 --levels 1 --signed --backend "
             "cuda -q",
             kr_test_tool());
    int rc = run_mpi(args, out, sizeof out);
    kr_test_device_hold_end(&hold);
    printf("%s", out);
    CHECK(rc != 0);
    CHECK(rc != 124 && rc != 137); /* not the timeout: no hang */
    CHECK_CONTAINS(out, "rank 1: ");
    CHECK_CONTAINS(out, "memory");
    if (n_all >= 2) CHECK_CONTAINS(out, "rank 0 stops: rank 1 failed");
#endif
}

KR_TEST(refine_mpi, without_mpi_the_program_says_how_to_get_it)
{
#ifdef KINREG_HAVE_MPI
    SKIP("this build has MPI");
#else
    char out[4096];
    int rc = kr_test_run_tool(NULL, "refine --mpi --synthetic 4 -q", out, sizeof out);
    CHECK(rc != 0);
    CHECK_CONTAINS(out, "libopenmpi-dev");
#endif
}

KR_TEST(refine_mpi, device_lists_are_checked)
{
    int d[KR_REFINE_MAX_DEVICES] = {7}, n = 7;
    if (!kr_cuda_available()) {
        /* No GPU here (CI): a clear error, outputs untouched. */
        CHECK_STATUS(kr_refine_devices_parse("all", d, &n), KR_ERR_NO_DEVICE);
        CHECK_EQ(n, 7);
        CHECK_EQ(d[0], 7);
        return;
    }
    CHECK_OK(kr_refine_devices_parse("0,0", d, &n));
    CHECK_EQ(n, 2);
    CHECK_STATUS(kr_refine_devices_parse("0,x", d, &n), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_refine_devices_parse("999", d, &n), KR_ERR_INVALID_ARG);
    CHECK_EQ(n, 2);
}
