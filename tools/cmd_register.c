/* kinreg register — pairwise registration of two point sets with EM-ICP or
 * Softassign (kr_register), printing the transform and its quality. Also the
 * registration benchmark: --synthetic N registers the CuPy anchor's bumpy
 * surface, --repeat K reports the median time of K runs. */
#include <errno.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "tools/cli/number_option.h"
#include "tools/cli/pipeline_options.h"
#include "kinreg/register.h"
#include "kinreg/source.h"

static unsigned long long rng_state = 1;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double nrand(void)
{
    double u = urand(), v = urand();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Keeps a random n of the points (partial Fisher–Yates). */
static void subsample(float *p, size_t *count, size_t n)
{
    if (n == 0 || *count <= n) return;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + (size_t)(urand() * (double)(*count - i));
        for (int k = 0; k < 3; k++) {
            float t = p[3 * i + k];
            p[3 * i + k] = p[3 * j + k];
            p[3 * j + k] = t;
        }
    }
    *count = n;
}

/* Copies of both sets for a chain's Newton stage, each cut to `keep` random
 * points (0 = all) with the rng from --seed: the points a separate run with
 * --method newton --subsample keep would use. */
static bool newton_sets(const float *src, size_t n, const float *dst, size_t m, size_t keep,
                        float **ns, size_t *nn, float **nd, size_t *nm)
{
    unsigned long long saved = rng_state;
    *ns = malloc(3 * n * sizeof **ns);
    *nd = malloc(3 * m * sizeof **nd);
    if (!*ns || !*nd) {
        fprintf(stderr, "kinreg register: out of memory for %zu points\n", n + m);
        free(*ns);
        free(*nd);
        *ns = *nd = NULL;
        return false;
    }
    memcpy(*ns, src, 3 * n * sizeof **ns);
    memcpy(*nd, dst, 3 * m * sizeof **nd);
    *nn = n;
    *nm = m;
    subsample(*ns, nn, keep);
    subsample(*nd, nm, keep);
    rng_state = saved;
    return true;
}

/* The anchor's surface (shared/tools/anchors/emicp_dense_cupy.py). */
static float *surface(size_t n)
{
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        double u[3] = {nrand(), nrand(), nrand()};
        double l = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int k = 0; k < 3; k++)
            u[k] /= l;
        double r = 0.1 * (1 + 0.25 * sin(5 * u[0]) * cos(4 * u[1]) + 0.15 * sin(7 * u[2]));
        for (int k = 0; k < 3; k++)
            p[3 * i + k] = (float)(u[k] * r);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --newton-subsample is checked as --subsample is and named so in a refusal. */
static const kr_number_rule rule_subsample = {"--subsample", 0,        100000000, false,
                                              true,          "points", "0 = all"};

/* "emicp", "softassign", "newton", or a soft method then Newton:
 * "emicp+newton", "softassign+newton". */
static bool parse_method(const char *text, kr_reg_method *method, bool *then_newton)
{
    const char *plus = strchr(text, '+');
    *then_newton = plus != NULL;
    if (!plus) return kr_reg_method_parse(text, method) == KR_OK;
    char base[32];
    size_t len = (size_t)(plus - text);
    if (strcmp(plus, "+newton") != 0 || len >= sizeof base) goto bad;
    memcpy(base, text, len);
    base[len] = '\0';
    if (kr_reg_method_parse(base, method) == KR_OK && *method != KR_REG_NEWTON) return true;
bad:
    kr_error(KR_ERR_INVALID_ARG, "a chain is emicp+newton or softassign+newton");
    return false;
}

/* A --method or --engine the library does not know, with its reason. */
static bool bad_value(const char *who, const char *arg)
{
    fprintf(stderr, "%s: bad value '%s'%s%s (see --help)\n", who, arg,
            kr_last_error()[0] ? ": " : "", kr_last_error());
    return false;
}

/* --seed: any 64-bit state, digits only (strtoull would wrap "-1"). */
static bool seed_option(const char *arg, unsigned long long *state)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!isdigit((unsigned char)arg[0]) || *end || errno == ERANGE) return false;
    *state = v;
    return true;
}

/* -b/--backend, as every command takes it: auto, cpu or cuda, the engine
 * that each names (cuda: fused, kinreg's own kernels). */
static bool backend_option(const char *arg, kr_reg_engine *engine)
{
    kr_backend b;
    if (kr_backend_parse(arg, &b) != KR_OK) return false;
    *engine = b == KR_BACKEND_CPU    ? KR_REG_ENGINE_CPU
              : b == KR_BACKEND_CUDA ? KR_REG_ENGINE_FUSED
                                     : KR_REG_ENGINE_AUTO;
    return true;
}

/* --init 'tx ty tz qx qy qz qw'. */
static bool init_option(const char *arg, kr_pose *init)
{
    double v[7];
    int used = 0;
    if (sscanf(arg, " %lf %lf %lf %lf %lf %lf %lf %n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &used) != 7 ||
        arg[used] != '\0')
        return false;
    kr_quat q = kr_quat_normalize((kr_quat){v[3], v[4], v[5], v[6]});
    *init = kr_pose_from_quat(q, v);
    return true;
}

typedef struct {
    kr_register_config cfg;
    kr_pose init;
    long sub, synthetic, repeat, threads, newton_sub;
    bool then_newton;        /* --method emicp+newton or softassign+newton */
    kr_source_config camera; /* --intrinsics, parsed as kinreg run parses it */
    float depth_scale;
    bool json;
} register_options;

#define REGISTER_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                            \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg register [OPTIONS] SOURCE DEST\n"                                           \
        "       kinreg register [OPTIONS] --synthetic N\n\n"                                       \
        "Finds the rigid motion T that maps SOURCE's points onto DEST's (dest ~ R src + t)\n"      \
        "and says whether to trust it. By default (--method auto) it tries the start and\n"        \
        "the start turned about 60 ways, probes each with the k-d tree Newton method\n"            \
        "(point-to-plane, normals from each point's neighbours), refines the best by\n"            \
        "Newton and by Softassign (Tamaki et al.) then Newton, and keeps the one that\n"           \
        "puts most of SOURCE on DEST. Or one method alone: EM-ICP or Softassign, which\n"          \
        "need no good initial pose, or Newton, which refines a close one.\n"                       \
        "SOURCE and DEST are PLY files, ASCII or binary (x y z; other vertex properties\n"         \
        "and elements are ignored; the Stanford range scans work as is) or single depth\n"         \
        "frames: FILE.png (16-bit depth, TUM's format) or FILE.pgm (a fakenect dump's\n"           \
        "raw disparity), preprocessed as kinreg tracks them; T then maps SOURCE's\n"               \
        "camera frame into DEST's.\n"                                                              \
        "Prints T as a 4x4 matrix and as a TUM line (tx ty tz qx qy qz qw), the RMS\n"             \
        "distance from each moved source point to its nearest DEST point (capped at\n"             \
        "the extent; over at most 20 000 source points), the share of inliers, and the\n"          \
        "verdict: the overlap (the share of SOURCE within three of DEST's point\n"                 \
        "spacings), their RMS distance, a confidence from 0 to 1, and 'trusted' or\n"              \
        "'NOT trusted' (too little overlap, too large a residual, or another pose that\n"          \
        "fits nearly as well).\n\n"))                                                              \
    OPT(METHOD, (0, "method", "M", KR_CUSTOM),                                                     \
        KR_FAIL_UNLESS(parse_method(arg, &o->cfg.method, &o->then_newton) || bad_value(who, arg)), \
        KR_HELP("auto (default: the search above), emicp, softassign, or\n"                        \
                "newton: from --init (or identity) within about 10 deg and a\n"                    \
                "tenth of the scan's size; emicp+newton or softassign+newton:\n"                   \
                "Newton from the soft method's answer, on --newton-subsample\n"                    \
                "points"))                                                                         \
    OPT(HYPOTHESES, (0, "hypotheses", "N", KR_WHOLE(0, 200, "axes", NULL)),                        \
        o->cfg.hypotheses = (int)v,                                                                \
        KR_HELP("auto: axes the start is turned about, by 45, 90 and 135 deg\n"                    \
                "each (default 20; 0 = the start alone)"))                                         \
    OPT(ENGINE, (0, "engine", "E", KR_CUSTOM),                                                     \
        KR_FAIL_UNLESS(kr_reg_engine_parse(arg, &o->cfg.engine) == KR_OK || bad_value(who, arg)),  \
        KR_HELP("auto (default: fused on a CUDA device, else cpu), cpu,\n"                         \
                "cublas (the seed's N x M matrix; not newton) or fused\n"                          \
                "(CUDA, memory N + M; newton: the GPU tracker)"))                                  \
    OPT(BACKEND, KR_OPT_BACKEND, KR_REFUSE_UNLESS(backend_option(arg, &o->cfg.engine)),            \
        KR_HELP("auto, cpu or cuda: --engine auto, cpu or fused"))                                 \
    OPT(INIT, (0, "init", "POSE", KR_REFUSAL("%s: %s takes 'tx ty tz qx qy qz qw', got '%s'")),    \
        KR_REFUSE_UNLESS(init_option(arg, &o->init)),                                              \
        KR_HELP("initial T as 'tx ty tz qx qy qz qw' (default identity)"))                         \
    OPT(INTRINSICS, KR_OPT_INTRINSICS, KR_FAIL_UNLESS(kr_intrinsics_option(&o->camera, arg) > 0),  \
        KR_HELP("\ndepth frames' camera: fr1 fr2 fr3 default kinect (default:\n"                   \
                "default, 525 px at 640x480)"))                                                    \
    OPT(DEPTH_SCALE, (0, "depth-scale", "S", KR_REAL(0.001, 1e9, "units per metre", NULL)),        \
        o->depth_scale = (float)v, KR_HELP("units per metre of .png depth (default 5000, TUM's)")) \
    OPT(SUBSAMPLE, (0, "subsample", "N", KR_WHOLE(0, 100000000, "points", "0 = all")),             \
        o->sub = (long)v,                                                                          \
        KR_HELP("use at most N random points of each set (default 5000;\n"                         \
                "0 = all: the soft methods' cost grows as N x M, Newton's\n"                       \
                "as (N + M) log M; on whole Kinect depth frames Newton does\n"                     \
                "better with 60000 than with all, whose normals are noisier;\n"                    \
                "auto: --newton-subsample, its soft stage takes 600 of them)"))                    \
    OPT(NEWTON_SUBSAMPLE, (0, "newton-subsample", "N", KR_CUSTOM),                                 \
        KR_FAIL_UNLESS(kr_number_option(who, &rule_subsample, arg, &v));                           \
        o->newton_sub = (long)v, KR_HELP("points of each set for a chain's Newton stage\n"         \
                                         "(default 60000; 0 = all)"))                              \
    OPT(EXTENT, (0, "extent", "METRES", KR_ABOVE(0, 1e6, "metres", NULL)), o->cfg.extent = v,      \
        KR_HELP("size the schedule is scaled to (default: the RMS radius of\n"                     \
                "DEST; 0.1 runs the seed's constants unscaled)"))                                  \
    OPT(FULL_SCHEDULE, (0, "full-schedule", NULL, KR_FLAG), o->cfg.stop_motion = 0,                \
        KR_HELP("no early stop: run the seed's whole annealing schedule"))                         \
    OPT(COARSE_POINTS, (0, "coarse-points", "N", KR_WHOLE(0, 100000000, "points", "0 = off")),     \
        o->cfg.coarse_points = (int)v,                                                             \
        KR_HELP("softassign: the warm temperatures on about N points of\n"                         \
                "each set (default 512; 0 = every point at every temperature,\n"                   \
                "the seed's form: 6-12x the time for 5000 points)"))                               \
    OPT(FINE_TEMPERATURES,                                                                         \
        (0, "fine-temperatures", "K", KR_WHOLE(1, 10000, "temperatures", NULL)),                   \
        o->cfg.fine_temperatures = (int)v,                                                         \
        KR_HELP("softassign: every point from K temperatures before the\n"                         \
                "stop rule's scale, sqrt(T) < extent/10 (default 6)"))                             \
    OPT(DETERMINISTIC, KR_OPT_DETERMINISTIC, o->cfg.deterministic = true,                          \
        KR_HELP("bit-identical results from run to run (the fused\n"                               \
                "Softassign engine then sums in fixed point, ~20%% slower)"))                      \
    OPT(THREADS, (0, "threads", "N", KR_WHOLE(1, 4096, "threads", NULL)), o->threads = (long)v,    \
        KR_HELP("OpenMP threads of the cpu engine (default: all)"))                                \
    OPT(SYNTHETIC, (0, "synthetic", "N", KR_WHOLE(3, 10000000, "points", NULL)),                   \
        o->synthetic = (long)v,                                                                    \
        KR_HELP("instead of files: N points of the CuPy anchor's bumpy\n"                          \
                "surface and N of a second sample moved by 20 deg about\n"                         \
                "(1,2,3) and (2, -1, 1.5) cm (uses --seed)"))                                      \
    OPT(SEED,                                                                                      \
        (0, "seed", "S",                                                                           \
         KR_CHOICE("expected a seed: a whole number from 0 to 18446744073709551615")),             \
        KR_REFUSE_UNLESS(seed_option(arg, &rng_state)),                                            \
        KR_HELP("random seed for --synthetic and --subsample (default 1)"))                        \
    OPT(REPEAT, (0, "repeat", "K", KR_WHOLE(1, 100000, "runs", NULL)), o->repeat = (long)v,        \
        KR_HELP("run K times (after one warm-up run on a GPU) and report\n"                        \
                "the median and minimum time"))                                                    \
    OPT(JSON, KR_OPT_JSON, o->json = true, KR_HELP("print one JSON object instead of text"))       \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_NO_HELP)                                               \
    TEXT(KR_HELP("\nExit status: 0 success, 1 failure (unreadable file, registration failed),\n"   \
                 "2 usage error, 4 standard output could not be written.\n"))
KR_OPTION_TABLE(register_option_table, REGISTER_OPTIONS, register_options, o, NULL);

/* Descriptions in column 20. */
static const kr_command register_command = {
    "register", &register_option_table, {20, 2, 2}, 0, NULL};

int kr_cmd_register(int argc, char **argv)
{
    register_options o = {.init = kr_pose_identity(),
                          .sub = 5000,
                          .repeat = 1,
                          .newton_sub = 60000,
                          .depth_scale = 5000};
    kr_register_config_default(&o.cfg);
    kr_source_config_default(&o.camera);
    o.camera.intrinsics = "default";
    int rc = kr_command_parse(&register_command, argc, argv, &o);
    if (rc >= 0) return rc;
    kr_register_config cfg = o.cfg;
    kr_pose init = o.init;
    long sub = o.sub, synthetic = o.synthetic, repeat = o.repeat, threads = o.threads,
         newton_sub = o.newton_sub;
    bool then_newton = o.then_newton;
    kr_source_config camera = o.camera;
    float depth_scale = o.depth_scale;
    bool json = o.json;
    int files = argc - optind;
    if ((synthetic && files != 0) || (!synthetic && files != 2)) {
        return kr_command_usage_error(&register_command,
                                      "give SOURCE and DEST files, or --synthetic N");
    }

    float *src = NULL, *dst = NULL, *nsrc = NULL, *ndst = NULL; /* n...: the Newton stage's */
    size_t n = 0, m = 0, nn = 0, nm = 0;
    kr_pose truth = kr_pose_identity();
    bool have_truth = false;
    if (synthetic) {
        n = m = (size_t)synthetic;
        dst = surface(m);
        src = surface(n);
        if (!src || !dst) {
            fprintf(stderr, "kinreg register: out of memory for %zu points\n", n);
            return KR_EXIT_FAILURE;
        }
        double h = 20 * M_PI / 360, l = sqrt(14.0), t[3] = {0.02, -0.01, 0.015};
        truth = kr_pose_from_quat((kr_quat){sin(h) / l, 2 * sin(h) / l, 3 * sin(h) / l, cos(h)}, t);
        kr_pose inv = kr_pose_inv(&truth);
        for (size_t i = 0; i < n; i++) {
            double p[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]}, o[3];
            kr_pose_apply(&inv, p, o);
            for (int k = 0; k < 3; k++)
                src[3 * i + k] = (float)o[k];
        }
        have_truth = true;
        if (then_newton &&
            !newton_sets(src, n, dst, m, (size_t)newton_sub, &nsrc, &nn, &ndst, &nm)) {
            free(src);
            free(dst);
            return KR_EXIT_FAILURE;
        }
    } else {
        kr_intrinsics K;
        if (camera.override_intrinsics)
            K = camera.custom;
        else
            kr_intrinsics_preset(camera.intrinsics, &K);
        kr_status s = kr_register_read_points(argv[optind], &K, depth_scale, &src, &n);
        if (s == KR_OK) s = kr_register_read_points(argv[optind + 1], &K, depth_scale, &dst, &m);
        if (s != KR_OK) {
            fprintf(stderr, "kinreg register: %s\n", kr_last_error());
            free(src);
            return KR_EXIT_FAILURE;
        }
        if (then_newton &&
            !newton_sets(src, n, dst, m, (size_t)newton_sub, &nsrc, &nn, &ndst, &nm)) {
            free(src);
            free(dst);
            return KR_EXIT_FAILURE;
        }
        /* The search subsamples for its soft stage itself. */
        size_t keep = cfg.method == KR_REG_AUTO ? (size_t)newton_sub : (size_t)sub;
        subsample(src, &n, keep);
        subsample(dst, &m, keep);
    }

    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.cpu_threads = (int)threads;
    if (cfg.engine == KR_REG_ENGINE_CPU) dc.backend = KR_BACKEND_CPU;
    if (cfg.engine == KR_REG_ENGINE_CUBLAS || cfg.engine == KR_REG_ENGINE_FUSED)
        dc.backend = KR_BACKEND_CUDA;
    kr_device *dev = NULL;
    kr_status s = kr_device_create(&dev, &dc);
    if (s != KR_OK) {
        fprintf(stderr, "kinreg register: the %s engine needs a CUDA device: %s\n",
                kr_reg_engine_name(cfg.engine), kr_last_error());
        free(src);
        free(dst);
        return kr_exit_code(s);
    }
    kr_register_result r, coarse = {0};
    /* A chain's Newton stage: the device's engine, or the CPU's (cuBLAS is
     * the soft methods' alone). */
    kr_register_config fine = cfg;
    fine.method = KR_REG_NEWTON;
    if (fine.engine == KR_REG_ENGINE_CUBLAS) fine.engine = KR_REG_ENGINE_AUTO;
    double *times = calloc((size_t)repeat, sizeof *times);
    if (repeat > 1 && kr_device_backend(dev) == KR_BACKEND_CUDA)
        s = kr_register(dev, &cfg, src, n, dst, m, &init, &r); /* warm-up */
    for (long k = 0; s == KR_OK && k < repeat; k++) {
        s = kr_register(dev, &cfg, src, n, dst, m, &init, &r);
        times[k] = r.seconds;
        if (s == KR_OK && then_newton) {
            coarse = r;
            s = kr_register(dev, &fine, nsrc, nn, ndst, nm, &coarse.pose, &r);
            times[k] += r.seconds;
        }
    }
    if (s != KR_OK) {
        fprintf(stderr, "kinreg register: %s: %s\n", kr_strerror(s), kr_last_error());
        kr_device_destroy(&dev);
        free(times);
        free(src);
        free(dst);
        free(nsrc);
        free(ndst);
        return KR_EXIT_FAILURE;
    }
    char method[48];
    snprintf(method, sizeof method, "%s%s", kr_reg_method_name(cfg.method),
             then_newton ? "+newton" : "");
    if (then_newton) {
        n = nn;
        m = nm;
    }
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    double median = times[repeat / 2], fastest = times[0];
    kr_quat q = kr_pose_to_quat(&r.pose);
    double err_deg = NAN, err_mm = NAN;
    if (have_truth) {
        kr_pose ti = kr_pose_inv(&truth), d = kr_pose_mul(&r.pose, &ti);
        err_deg = kr_pose_angle(&d) * 180 / M_PI;
        double dt = 0;
        for (int k = 0; k < 3; k++)
            dt += pow(r.pose.t[k] - truth.t[k], 2);
        err_mm = sqrt(dt) * 1e3;
    }
    const kr_pose *T = &r.pose;
    if (json) {
        printf("{\"method\": \"%s\", \"engine\": \"%s\", \"device\": \"%s\", \"n\": %zu, "
               "\"m\": %zu, \"iterations\": %d, \"stopped_early\": %s, \"final_sigma2\": %.6g, "
               "\"extent\": %.6g, \"rms_m\": %.6g, \"inlier_fraction\": %.4f, "
               "\"inlier_distance_m\": %.4g, \"repeat\": %ld, \"median_ms\": %.3f, "
               "\"min_ms\": %.3f, ",
               method, kr_reg_engine_name(r.engine), kr_device_describe(dev), n, m, r.iterations,
               r.stopped_early ? "true" : "false", r.final_sigma2, r.extent, r.rms,
               r.inlier_fraction, r.inlier_distance, repeat, median * 1e3, fastest * 1e3);
        if (have_truth) printf("\"rot_err_deg\": %.5f, \"trans_err_mm\": %.4f, ", err_deg, err_mm);
        if (then_newton)
            printf("\"coarse_iterations\": %d, \"coarse_ms\": %.3f, ", coarse.iterations,
                   coarse.seconds * 1e3);
        printf("\"spacing_m\": %.6g, \"overlap\": %.4f, \"residual_m\": %.6g, \"runner_up\": %.4f, "
               "\"confidence\": %.3f, \"trusted\": %s, \"hypotheses\": %d, ",
               r.spacing, r.overlap, isfinite(r.residual) ? r.residual : -1, r.runner_up,
               r.confidence, r.trusted ? "true" : "false", r.hypotheses);
        printf("\"t\": [%.9g, %.9g, %.9g], \"q\": [%.9g, %.9g, %.9g, %.9g], \"matrix\": [", T->t[0],
               T->t[1], T->t[2], q.x, q.y, q.z, q.w);
        for (int i = 0; i < 3; i++)
            printf("[%.9g, %.9g, %.9g, %.9g], ", T->R[3 * i], T->R[3 * i + 1], T->R[3 * i + 2],
                   T->t[i]);
        printf("[0, 0, 0, 1]]}\n");
    } else {
        printf("# %s on %s (%s), %zu -> %zu points, %d steps%s, %.2f ms", method,
               kr_reg_engine_name(r.engine), kr_device_describe(dev), n, m, r.iterations,
               r.stopped_early ? " (stopped: pose settled)" : "", median * 1e3);
        if (repeat > 1) printf(" (median of %ld, min %.2f ms)", repeat, fastest * 1e3);
        if (then_newton)
            printf("; %s took %d steps, %.2f ms", kr_reg_method_name(cfg.method), coarse.iterations,
                   coarse.seconds * 1e3);
        printf("\n");
        for (int i = 0; i < 3; i++)
            printf("%12.8f %12.8f %12.8f %12.8f\n", T->R[3 * i], T->R[3 * i + 1], T->R[3 * i + 2],
                   T->t[i]);
        printf("%12.8f %12.8f %12.8f %12.8f\n", 0.0, 0.0, 0.0, 1.0);
        printf("tum: %.9f %.9f %.9f %.9f %.9f %.9f %.9f\n", T->t[0], T->t[1], T->t[2], q.x, q.y,
               q.z, q.w);
        printf("quality: rms %.3f mm, inliers %.1f%% within %.2f mm, extent %.4f m\n", r.rms * 1e3,
               100 * r.inlier_fraction, r.inlier_distance * 1e3, r.extent);
        printf("verdict: %s (confidence %.2f): %.1f%% of the source within %.2f mm of DEST "
               "(3 point spacings), RMS %.3f mm",
               r.trusted ? "trusted" : "NOT trusted", r.confidence, 100 * r.overlap,
               3 * r.spacing * 1e3, r.residual * 1e3);
        if (r.runner_up > 0) printf("; next best distinct pose %.1f%%", 100 * r.runner_up);
        printf("\n");
        if (have_truth)
            printf("error vs the synthetic truth: %.4f deg, %.3f mm\n", err_deg, err_mm);
    }
    kr_device_destroy(&dev);
    free(times);
    free(src);
    free(dst);
    free(nsrc);
    free(ndst);
    return KR_EXIT_OK;
}
