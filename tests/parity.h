/* One harness for every CPU-vs-CUDA parity test (DESIGN.md §4; modelled on
 * ggml's test-backend-ops): a table of steps, each a name, a run on the CPU
 * engine, a run on the CUDA engine and the checks that compare what the two
 * runs put out, each check with its own measure and tolerance. The runner
 * creates both devices once per process, skips the case cleanly (exit 77
 * when every case of the module skipped) where there is no CUDA device, runs
 * each step on both engines, compares, and prints both values of the worst
 * element of every check.
 *
 *   static bool cpu_run(kr_device *dev, void *fx, const void *arg, kr_parity_out *out)
 *   {   ... kr_parity_put_f(out, "points", pts, n, 3); return true; }
 *   static const kr_parity_step steps[] = {
 *       PARITY_STEP("preprocess", cpu_run, cuda_run, NULL,
 *                   PARITY_CHECK("points", KR_PARITY_NORM, 1e-5, .nan_equal = true)),
 *   };
 *   KR_TEST(parity_x, y) { PARITY_NEED(); ...; kr_parity_run(steps, 1, &fixture); }
 *
 * A run returns false when it could not run (its own CHECK or REQUIRE said
 * why): the case stops there. A run may also check what only its own engine
 * must satisfy (the true motion reached, the state GOOD). */
#ifndef KR_PARITY_H
#define KR_PARITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"
#include "kr_test.h"

enum { KR_PARITY_MAX_QUANTITIES = 48, KR_PARITY_MAX_CHECKS = 12, KR_PARITY_NAME = 64 };

/* What one engine's run of a step puts out: named arrays of n elements of
 * `dim` doubles each (a point is 3, a pose 12: R row by row, then t), and
 * optionally a scale for the tolerance (the CPU run's is used). */
typedef struct {
    char name[KR_PARITY_NAME];
    double *v;
    size_t n;
    int dim;
    double *scale; /* NULL (1), one value for every element, or one per element */
    size_t n_scale;
} kr_parity_quantity;

typedef struct {
    kr_parity_quantity q[KR_PARITY_MAX_QUANTITIES];
    int count;
} kr_parity_out;

/* Storage for n elements of `dim` doubles, zeroed, under `name`
 * (printf-style); NULL when out of room or memory (a failed check says so). */
double *kr_parity_put(kr_parity_out *out, size_t n, int dim, const char *name, ...)
    __attribute__((format(printf, 4, 5)));
void kr_parity_put_f(kr_parity_out *out, const char *name, const float *v, size_t n, int dim);
void kr_parity_put_d(kr_parity_out *out, const char *name, const double *v, size_t n, int dim);
void kr_parity_put_scalar(kr_parity_out *out, const char *name, double v);
/* 64-bit integers, each as two exact 32-bit halves (dim 2). */
void kr_parity_put_u64(kr_parity_out *out, const char *name, const uint64_t *v, size_t n);
/* Raw bytes, one element each (for BITS: memcmp of the two buffers). */
void kr_parity_put_bytes(kr_parity_out *out, const char *name, const void *p, size_t n);
/* Poses, 12 values each. */
void kr_parity_put_poses(kr_parity_out *out, const char *name, const kr_pose *p, size_t n);
/* The tolerance scale of quantity `name` (already put): one value for all
 * elements (n 1) or one per element. */
void kr_parity_scale(kr_parity_out *out, const char *name, const double *s, size_t n);
const kr_parity_quantity *kr_parity_get(const kr_parity_out *out, const char *name);
void kr_parity_out_free(kr_parity_out *out);

/* How an element's difference is measured against its bound tol · scale. */
typedef enum {
    KR_PARITY_BITS,     /* the same bits: counts, indices, keys, exact floats (tol unused) */
    KR_PARITY_ABS,      /* largest |cpu − cuda| of the element's values */
    KR_PARITY_NORM,     /* largest |cpu − cuda| over the Euclidean norm of the CPU element */
    KR_PARITY_ANGLE,    /* poses: rotation angle of cpu⁻¹·cuda, radians */
    KR_PARITY_DEGREES,  /* the same in degrees */
    KR_PARITY_DISTANCE, /* poses: |t_cpu − t_cuda| */
} kr_parity_measure;

/* One comparison of a step. `quantity` names a quantity, or a family of
 * them: "points" also matches "points level 0", "points level 1", ...,
 * each compared on its own. An element whose first value is NaN is missing:
 * missing on one side only it is off; missing on both it is equal with
 * nan_equal, else off (as a NaN fails CHECK_NEAR). `mask` compares only the
 * elements present on both sides in that quantity (same family suffix).
 * Off elements (beyond the bound, or missing on one side) are allowed up to
 * `allowed` times the element count. */
typedef struct {
    const char *quantity;
    kr_parity_measure measure;
    double tol;
    bool below; /* error < bound (as CHECK_LT), else error <= bound */
    bool nan_equal;
    double allowed;
    const char *mask;
} kr_parity_check;

/* A check, its measure and tolerance, then any of .below, .nan_equal,
 * .allowed, .mask (designated initializers throughout: -Wextra). */
#define PARITY_CHECK(q, m, t, ...)                                                                 \
    {                                                                                              \
        .quantity = (q), .measure = (m), .tol = (t), __VA_ARGS__                                   \
    }

typedef bool (*kr_parity_run_fn)(kr_device *dev, void *fixture, const void *arg,
                                 kr_parity_out *out);

typedef struct kr_parity_step {
    const char *name;
    kr_parity_run_fn cpu, cuda; /* the reference engine's run, and the CUDA engine's */
    const void *arg;            /* passed to both runs */
    kr_parity_check checks[KR_PARITY_MAX_CHECKS];
    /* What no check expresses (a set of grid points, a count bounded by
     * another's mismatches): called after the checks with both outputs. */
    void (*also)(const struct kr_parity_step *step, const kr_parity_out *cpu,
                 const kr_parity_out *cuda, void *fixture);
    /* How the two runs are named in what is printed: "cpu" and "cuda"
     * unless given (a split over devices against one device, say). */
    const char *cpu_name, *cuda_name;
} kr_parity_step;

/* A step of the table: name, runs, argument, then its checks. */
#define PARITY_STEP(n, c, g, a, ...)                                                               \
    {                                                                                              \
        .name = (n), .cpu = (c), .cuda = (g), .arg = (a), .checks = { __VA_ARGS__ }                \
    }

/* The verdict of one check on one quantity. */
typedef struct {
    size_t n, off, worst; /* elements compared, off, the worst one's index */
    double err, bound;    /* the worst element's error and bound */
    bool ok, have_worst;
    char why[160]; /* set when the quantities cannot be compared */
} kr_parity_verdict;

/* Compares quantity a (the reference run's) with b under check c; mask_a
 * and mask_b are c->mask's quantities or NULL. Returns v->ok. */
bool kr_parity_compare(const kr_parity_check *c, const kr_parity_quantity *a,
                       const kr_parity_quantity *b, const kr_parity_quantity *mask_a,
                       const kr_parity_quantity *mask_b, kr_parity_verdict *v);

/* Applies check c to outputs a and b as the runner applies a step's checks
 * (printing the worst element, failing the case when off): for quantities
 * that a step's `also` puts together from both runs. */
void kr_parity_apply(const kr_parity_step *step, const kr_parity_check *c, const kr_parity_out *a,
                     const kr_parity_out *b);

/* The CPU and CUDA devices, created at the first call of the process and
 * destroyed at its exit. Without a CUDA device the calling case is skipped
 * (the runner's skip: exit 77 when every case skipped) and false returned;
 * a device that cannot be created fails the case. */
bool kr_parity_devices(kr_device **cpu, kr_device **cuda);

/* Runs `count` steps on both engines in order, each run given `fixture`,
 * and compares; the reference run is made once for consecutive steps with
 * the same reference run and argument. Stops at a run that returns false. */
void kr_parity_run(const kr_parity_step *steps, size_t count, void *fixture);
/* The same on the devices given (a case that provokes a device fault runs
 * on a device of its own, so that nothing of it reaches the next case). */
void kr_parity_run_on(kr_device *cpu, kr_device *cuda, const kr_parity_step *steps, size_t count,
                      void *fixture);

/* A device of backend b with default settings, or NULL. */
kr_device *kr_parity_make_device(kr_backend b);

/* First statement of a parity case: skip without a CUDA device. */
#define PARITY_NEED()                                                                              \
    do {                                                                                           \
        kr_device *kr_pc_, *kr_pg_;                                                                \
        if (!kr_parity_devices(&kr_pc_, &kr_pg_)) return;                                          \
    } while (0)

#endif
