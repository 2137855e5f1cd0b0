/* kinreg refine — offline multi-view distance-field refinement of a set of
 * range scans (a Stanford-style .conf): refined poses in the same format, the
 * merged model as PLY, before/after residuals, optionally from a seeded
 * perturbation of the input (to measure how well it returns). */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/ply_read.h"
#include "capture/scan_conf.h"
#include "capture/synthetic_object.h"
#include "capture/synthetic_room.h"
#include "cli.h"
#include "tools/cli/number_option.h"
#include "kinreg/refine.h"
#include "tools/mpi/refine_mpi.h"
#include "gpu/gpu.h"
#include "refine_sequence.h"

static void help(FILE *out)
{
    fprintf(
        out,
        "usage: kinreg refine [OPTIONS] SCANS.conf\n\n"
        "Registers the range scans listed in SCANS.conf ('bmesh FILE tx ty tz qx qy qz qw',\n"
        "Stanford style: a scan point p maps to R(q)^T p + t; FILE is an ASCII PLY) jointly,\n"
        "with multi-view distance fields and Levenberg-Marquardt (DESIGN.md §5). The first\n"
        "scan (--gauge) stays fixed. Prints the RMS residual before and after.\n\n"
        "options:\n"
        "  -o, --output FILE     write the refined poses as a .conf\n"
        "  --model FILE          write the merged, refined scans as one binary PLY\n"
        "  --cell M              finest grid spacing in metres (default 0.0015)\n"
        "  --levels N            grids cell*2^k, coarse first (default 3)\n"
        "  --band B              influence band of the finest grid in cells (default 2)\n"
        "  --coarse-band B       band of the coarsest grid (default 3)\n"
        "  --mid-band B          band of the grids between coarsest and finest (default 2)\n"
        "  --points N            points per scan on the finest grid at most (default 0: "
        "all)\n"
        "  --iterations N        LM iterations per level at most (default 30; 0 = only the\n"
        "                        residual figures)\n"
        "  --huber C             Huber loss with threshold C cells (default 0: squares)\n"
        "  --cap C               finest grid: residuals beyond C cells weigh 0 (default 0.3)\n"
        "  --subset F            fraction of grid points used (thesis: 0.4; default 0.2)\n"
        "  --signed              signed fields: distance to each point's tangent plane (normals\n"
        "                        by PCA, towards the sensor at the scan's origin); exact on\n"
        "                        planes, for long scans of rooms (default: unsigned)\n"
        "  --star                the thesis's form: pairs (gauge, j) only, grid points inside\n"
        "                        every other scan's field\n"
        "  --gauge K             index of the fixed scan (default 0)\n"
        "  --backend B           auto, cpu or cuda (default cpu)\n"
        "  --perturb A1:A2,C1:C2 first move every scan but the gauge by a random rotation of\n"
        "                        A1..A2 degrees about its centre and a translation of C1..C2 cm,\n"
        "                        then report each scan's error against the input poses\n"
        "  --seed S              seed of --perturb and --subset (default 1)\n"
        "  --sequence URI        instead of SCANS.conf: a depth sequence (e.g. tum:DIR) whose\n"
        "  --trajectory FILE     poses are in this TUM file: keyframes every --min-move, refined\n"
        "                        jointly (grid 1 cm unless --cell); -o writes them as TUM\n"
        "  --intrinsics NAME     the sequence's intrinsics preset (fr1, fr2, fr3)\n"
        "  --min-move M,DEG      keyframe spacing: metres or degrees since the last (0.15,15)\n"
        "  --every-frame FILE    with --sequence: every pose of --trajectory moved by the\n"
        "                        refinement of the keyframes around it, interpolated between\n"
        "                        them in time; a step the tracker's motion check refuses (a\n"
        "                        jump) starts a stretch that follows its own keyframes only\n"
        "                        (TUM). After a run with lost stretches, --signed --min-move\n"
        "                        0.02,2 (docs/BENCHMARKS.md, issue 13 session 13)\n"
        "  --synthetic N         instead of SCANS.conf: N views of a synthetic bumpy object\n"
        "                        (about 0.2 m across, cameras 0.5 m away; exact poses)\n"
        "  --synthetic room:N[:WxH] a long scan instead: N depth views (W x H, default\n"
        "                        160x120) from a loop\n"
        "                        inside a 4 x 3 m room with bumpy walls (exact poses; each view\n"
        "                        overlaps its neighbours); use a cm grid, e.g. --cell 0.02\n"
        "  --noise M             --synthetic room: Gaussian depth noise of M metres along\n"
        "                        each ray (default 0)\n"
        "  --devices LIST        cuda backend: split the sums over these GPUs ('all', '0,1');\n"
        "                        default one device (under mpirun: the rank's by local rank)\n"
        "  --mpi                 insist on MPI (mpirun -np N kinreg refine ... shares the sums\n"
        "                        over N ranks; started by mpirun this is implied)\n"
        "  --json                print one JSON object instead of text\n"
        "  -q, --quiet           no progress line\n"
        "  -h, --help            this text\n\n"
        "example: kinreg refine ../shared/data/bunny/bun.conf -o refined.conf --model bunny.ply\n");
}

static unsigned rng_state;
static double urand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (rng_state >> 8) / 16777216.0;
}

/* Moves T by a rotation of `deg` degrees about a random axis through c and a
 * translation of `cm` centimetres in a random direction. */
static kr_pose perturb(const kr_pose *T, const double c[3], double deg, double cm)
{
    double axis[3], dir[3], na, nd;
    do {
        for (int i = 0; i < 3; i++)
            axis[i] = 2 * urand() - 1;
        na = sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
    } while (na < 0.1 || na > 1);
    do {
        for (int i = 0; i < 3; i++)
            dir[i] = 2 * urand() - 1;
        nd = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    } while (nd < 0.1 || nd > 1);
    double x[6] = {0};
    for (int i = 0; i < 3; i++)
        x[i] = axis[i] / na * deg * M_PI / 180;
    kr_pose R = kr_pose_exp(x), D = R;
    double Rc[3];
    kr_pose_rotate(&R, c, Rc);
    for (int i = 0; i < 3; i++)
        D.t[i] = c[i] - Rc[i] + dir[i] / nd * cm / 100;
    return kr_pose_mul(&D, T);
}

static bool parse_range(const char *s, double *a, double *b)
{
    char *end;
    *a = strtod(s, &end);
    if (end == s) return false;
    if (*end == ':') {
        const char *t = end + 1;
        *b = strtod(t, &end);
        if (end == t) return false;
    } else {
        *b = *a;
    }
    return *end == 0 && *a >= 0 && *b >= *a && isfinite(*b);
}

static bool parse_perturb(const char *arg, double deg[2], double cm[2])
{
    char buf[128];
    if (strlen(arg) >= sizeof buf) return false;
    strcpy(buf, arg);
    char *comma = strchr(buf, ',');
    if (!comma) return false;
    *comma = 0;
    return parse_range(buf, &deg[0], &deg[1]) && parse_range(comma + 1, &cm[0], &cm[1]);
}

static void progress(void *user, double cell, int iteration, double cost)
{
    (void)user;
    fprintf(stderr, "\rrefine: grid %.1f mm, iteration %d, objective %.4g   ", cell * 1000,
            iteration, cost);
    fflush(stderr);
}

static kr_status write_model(const char *path, float **xyz, const size_t *n, const kr_pose *poses,
                             int scans)
{
    size_t total = 0;
    for (int k = 0; k < scans; k++)
        total += n[k];
    FILE *f = fopen(path, "wb");
    if (!f) return kr_error(KR_ERR_IO, "cannot write model %s", path);
    fprintf(f,
            "ply\nformat binary_little_endian 1.0\ncomment kinreg refine: %d scans\nelement vertex "
            "%zu\n"
            "property float x\nproperty float y\nproperty float z\nend_header\n",
            scans, total);
    for (int k = 0; k < scans; k++)
        for (size_t i = 0; i < n[k]; i++) {
            double p[3] = {xyz[k][3 * i], xyz[k][3 * i + 1], xyz[k][3 * i + 2]}, w[3];
            kr_pose_apply(&poses[k], p, w);
            float v[3] = {(float)w[0], (float)w[1], (float)w[2]};
            fwrite(v, sizeof v, 1, f); /* x86 and ARM hosts are little-endian */
        }
    if (fclose(f) != 0) return kr_error(KR_ERR_IO, "cannot write model %s", path);
    return KR_OK;
}

/* Error of scan k against the reference, both relative to the gauge. */
static void relative_error(const kr_pose *est, const kr_pose *ref, int gauge, int k, double *deg,
                           double *mm)
{
    kr_pose ge = kr_pose_inv(&est[gauge]), gr = kr_pose_inv(&ref[gauge]);
    kr_pose re = kr_pose_mul(&ge, &est[k]), rr = kr_pose_mul(&gr, &ref[k]);
    kr_pose rri = kr_pose_inv(&rr), d = kr_pose_mul(&rri, &re);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    *mm = kr_pose_translation_norm(&d) * 1000;
}

/* N views of the synthetic object (capture/synthetic_object.h), or with
 * room set of the synthetic room (capture/synthetic_room.h), as a scan set
 * whose poses are exact. */
static kr_status make_synthetic(int n, bool room, int width, int height, double noise,
                                kr_scan_conf *conf, float ***xyz, size_t **count)
{
    kr_scan_conf c = {0};
    c.scans = calloc((size_t)n, sizeof *c.scans);
    float **pts = calloc((size_t)n, sizeof *pts);
    size_t *cnt = calloc((size_t)n, sizeof *cnt);
    kr_pose *poses = calloc((size_t)n, sizeof *poses);
    kr_status s = (c.scans && pts && cnt && poses)
                      ? KR_OK
                      : kr_error(KR_ERR_NOMEM, "no memory for %d views", n);
    if (s == KR_OK)
        s = room ? kr_synthetic_room_views(n, width, height, noise, 1, pts, cnt, poses)
                 : kr_synthetic_object_views(n, 60000, pts, cnt, poses);
    for (int k = 0; k < n && s == KR_OK; k++) {
        char name[32];
        snprintf(name, sizeof name, room ? "room%03d.ply" : "synthetic%02d.ply", k);
        c.scans[k].file = strdup(name);
        c.scans[k].pose = poses[k];
        c.n = k + 1;
        if (!c.scans[k].file) s = kr_error(KR_ERR_NOMEM, "no memory");
    }
    free(poses);
    if (s != KR_OK) {
        kr_scan_conf_free(&c);
        free(pts);
        free(cnt);
        return s;
    }
    *conf = c;
    *xyz = pts;
    *count = cnt;
    return KR_OK;
}

/* The all-reduce payload of one LM iteration: the pair sums of one
 * evaluation and the step (rank 0's), averaged over the run. */
static double bytes_per_iteration(const kr_refine_result *r)
{
    return r->evaluations > 0 ? r->reduced_bytes / r->evaluations : 0;
}

/* A number that differs when the ranks read different inputs. */
static double problem_digest(const kr_refine_view *views, const kr_pose *poses, int n)
{
    double d = n;
    for (int k = 0; k < n; k++) {
        d += (double)views[k].n * (k + 1);
        for (int i = 0; i < 12; i++)
            d += (i < 9 ? poses[k].R[i] : poses[k].t[i - 9]) * (1 + 0.37 * i + 0.11 * k);
        if (views[k].n) d += views[k].xyz[0] + views[k].xyz[3 * (views[k].n - 1) + 2];
    }
    return d;
}

static int refine_scans(kr_mpi_session *mpi, int argc, char **argv, kr_refine_config *cfgp,
                        kr_refine_sequence_args *seqp, const char *output, const char *model,
                        kr_backend backend, const char *devices, bool json, bool quiet,
                        bool perturbing, const double deg[2], const double cm[2], unsigned seed,
                        int synthetic, bool room, int room_width, int room_height,
                        double room_noise);

static int refine_sequence(kr_refine_sequence_args *seq, kr_refine_config *cfg, const char *output,
                           kr_backend backend, bool json, bool quiet)
{
    kr_device *dev = NULL;
    kr_status s = KR_OK;
    if (backend != KR_BACKEND_CPU) {
        kr_device_config dc;
        kr_device_config_default(&dc);
        dc.backend = backend;
        s = kr_device_create(&dev, &dc);
    }
    /* Depth sensors: centimetre grids, not the bunny's millimetres, unless asked. */
    if (cfg->cell == 0.0015) cfg->cell = 0.01;
    seq->output = output;
    seq->verbose = !quiet && !json;
    if (!quiet && !json) cfg->progress = progress;
    kr_refine_result res = {0};
    int keyframes = 0;
    if (!quiet && !json) fprintf(stderr, "refine: reading %s\n", seq->uri);
    if (s == KR_OK) s = kr_refine_sequence(seq, cfg, dev, &res, &keyframes);
    if (!quiet && !json) fprintf(stderr, "\r%-70s\r", "");
    kr_device_destroy(&dev);
    if (s != KR_OK) {
        fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        return kr_exit_code(s);
    }
    if (json)
        printf("{\"keyframes\":%d,\"backend\":\"%s\",\"rms_before_m\":%.9g,\"rms_after_m\":%.9g,"
               "\"iterations\":%d,"
               "\"seconds\":%.6f}\n",
               keyframes, kr_backend_name(res.backend), res.rms_before, res.rms_after,
               res.iterations, res.seconds);
    else
        printf("refined %d keyframes on %s in %.3f s (%d LM iterations)\nRMS residual %.3f mm -> "
               "%.3f mm on the "
               "%.1f mm grid\n",
               keyframes, kr_backend_name(res.backend), res.seconds, res.iterations,
               res.rms_before * 1000, res.rms_after * 1000, cfg->cell * 1000);
    return KR_EXIT_OK;
}

/* Every numeric option's range, checked before conversion (number_option.h). */
static const kr_number_rule rule_cell = {"--cell", 1e-5, 10, false, false, "metres", NULL};
static const kr_number_rule rule_levels = {"--levels", 1, 12, false, true, "grid levels", NULL};
static const kr_number_rule rule_band = {"--band", 1, 100, false, true, "cells", NULL};
static const kr_number_rule rule_coarse_band = {"--coarse-band", 1,   100, false, true,
                                                "cells",         NULL};
static const kr_number_rule rule_mid_band = {"--mid-band", 1, 100, false, true, "cells", NULL};
static const kr_number_rule rule_points = {"--points", 0,        INT_MAX,  false,
                                           true,       "points", "0 = all"};
static const kr_number_rule rule_iterations = {
    "--iterations", 0, 100000, false, true, "LM iterations", "0 = only the residual figures"};
static const kr_number_rule rule_huber = {"--huber", 0, 1000, false, false, "cells", "0 = squares"};
static const kr_number_rule rule_cap = {"--cap", 0, 1000, false, false, "cells", NULL};
static const kr_number_rule rule_noise = {"--noise", 0, 0.1, false, false, "metres", "0 = none"};
static const kr_number_rule rule_subset = {"--subset", 0, 1, true, false, "a fraction", NULL};
static const kr_number_rule rule_gauge = {"--gauge", 0, INT_MAX, false, true, "a scan index", NULL};
static const kr_number_rule rule_seed = {"--seed", 0, 4294967295.0, false, true, "a seed", NULL};
static const kr_number_rule rule_synthetic = {"--synthetic", 2, 10000, false, true, "views", NULL};
static const kr_number_rule rule_min_metres = {"--min-move", 0, 100, false, false, "metres", NULL};
static const kr_number_rule rule_min_degrees = {"--min-move", 0,         180, false,
                                                false,        "degrees", NULL};

static bool refine_number(const kr_number_rule *r, const char *arg, double *v)
{
    return kr_number_option("kinreg refine", r, arg, v);
}

/* METRES,DEGREES, each range-checked. */
static bool parse_min_move(const char *arg, kr_refine_sequence_args *seq)
{
    char buf[128];
    const char *comma = strchr(arg, ',');
    if (!comma || strlen(arg) >= sizeof buf) return false;
    snprintf(buf, sizeof buf, "%.*s", (int)(comma - arg), arg);
    double m, d;
    if (!refine_number(&rule_min_metres, buf, &m) ||
        !refine_number(&rule_min_degrees, comma + 1, &d))
        return false;
    seq->min_translation = m;
    seq->min_angle_deg = d;
    return true;
}

int kr_cmd_refine(int argc, char **argv)
{
    enum {
        OPT_MODEL = 256,
        OPT_CELL,
        OPT_LEVELS,
        OPT_BAND,
        OPT_COARSE_BAND,
        OPT_MID_BAND,
        OPT_POINTS,
        OPT_ITER,
        OPT_HUBER,
        OPT_CAP,
        OPT_SUBSET,
        OPT_STAR,
        OPT_SIGNED,
        OPT_NOISE,
        OPT_GAUGE,
        OPT_BACKEND,
        OPT_PERTURB,
        OPT_SEED,
        OPT_JSON,
        OPT_SYNTHETIC,
        OPT_SEQUENCE,
        OPT_TRAJECTORY,
        OPT_INTRINSICS,
        OPT_MIN_MOVE,
        OPT_EVERY_FRAME,
        OPT_DEVICES,
        OPT_MPI
    };
    static const struct option longopts[] = {{"output", required_argument, 0, 'o'},
                                             {"model", required_argument, 0, OPT_MODEL},
                                             {"cell", required_argument, 0, OPT_CELL},
                                             {"levels", required_argument, 0, OPT_LEVELS},
                                             {"band", required_argument, 0, OPT_BAND},
                                             {"coarse-band", required_argument, 0, OPT_COARSE_BAND},
                                             {"mid-band", required_argument, 0, OPT_MID_BAND},
                                             {"points", required_argument, 0, OPT_POINTS},
                                             {"iterations", required_argument, 0, OPT_ITER},
                                             {"huber", required_argument, 0, OPT_HUBER},
                                             {"cap", required_argument, 0, OPT_CAP},
                                             {"subset", required_argument, 0, OPT_SUBSET},
                                             {"star", no_argument, 0, OPT_STAR},
                                             {"signed", no_argument, 0, OPT_SIGNED},
                                             {"noise", required_argument, 0, OPT_NOISE},
                                             {"gauge", required_argument, 0, OPT_GAUGE},
                                             {"backend", required_argument, 0, OPT_BACKEND},
                                             {"perturb", required_argument, 0, OPT_PERTURB},
                                             {"seed", required_argument, 0, OPT_SEED},
                                             {"json", no_argument, 0, OPT_JSON},
                                             {"synthetic", required_argument, 0, OPT_SYNTHETIC},
                                             {"sequence", required_argument, 0, OPT_SEQUENCE},
                                             {"trajectory", required_argument, 0, OPT_TRAJECTORY},
                                             {"intrinsics", required_argument, 0, OPT_INTRINSICS},
                                             {"min-move", required_argument, 0, OPT_MIN_MOVE},
                                             {"every-frame", required_argument, 0, OPT_EVERY_FRAME},
                                             {"devices", required_argument, 0, OPT_DEVICES},
                                             {"mpi", no_argument, 0, OPT_MPI},
                                             {"quiet", no_argument, 0, 'q'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    const char *output = NULL, *model = NULL;
    kr_backend backend = KR_BACKEND_CPU;
    bool json = false, quiet = false, perturbing = false, room = false, want_mpi = false;
    const char *devices = NULL;
    int room_width = 160, room_height = 120;
    double room_noise = 0;
    double deg[2] = {0, 0}, cm[2] = {0, 0};
    unsigned seed = 1;
    int opt, synthetic = 0;
    kr_refine_sequence_args seq = {.min_translation = 0.15, .min_angle_deg = 15};
    optind = 1;
    while ((opt = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
        double v;
        switch (opt) {
        case 'o':
            output = optarg;
            break;
        case OPT_MODEL:
            model = optarg;
            break;
        case OPT_CELL:
            if (!refine_number(&rule_cell, optarg, &v)) return KR_EXIT_USAGE;
            cfg.cell = v;
            break;
        case OPT_LEVELS:
            if (!refine_number(&rule_levels, optarg, &v)) return KR_EXIT_USAGE;
            cfg.levels = (int)v;
            break;
        case OPT_BAND:
            if (!refine_number(&rule_band, optarg, &v)) return KR_EXIT_USAGE;
            cfg.band = (int)v;
            break;
        case OPT_COARSE_BAND:
            if (!refine_number(&rule_coarse_band, optarg, &v)) return KR_EXIT_USAGE;
            cfg.coarse_band = (int)v;
            break;
        case OPT_MID_BAND:
            if (!refine_number(&rule_mid_band, optarg, &v)) return KR_EXIT_USAGE;
            cfg.mid_band = (int)v;
            break;
        case OPT_POINTS:
            if (!refine_number(&rule_points, optarg, &v)) return KR_EXIT_USAGE;
            cfg.max_points = (int)v;
            break;
        case OPT_ITER:
            if (!refine_number(&rule_iterations, optarg, &v)) return KR_EXIT_USAGE;
            cfg.max_iterations = (int)v;
            break;
        case OPT_HUBER:
            if (!refine_number(&rule_huber, optarg, &v)) return KR_EXIT_USAGE;
            cfg.huber = v;
            break;
        case OPT_CAP:
            if (!refine_number(&rule_cap, optarg, &v)) return KR_EXIT_USAGE;
            cfg.cap = v;
            break;
        case OPT_SUBSET:
            if (!refine_number(&rule_subset, optarg, &v)) return KR_EXIT_USAGE;
            cfg.subset = v;
            break;
        case OPT_SIGNED:
            cfg.signed_field = true;
            break;
        case OPT_NOISE:
            if (!refine_number(&rule_noise, optarg, &v)) return KR_EXIT_USAGE;
            room_noise = v;
            break;
        case OPT_STAR:
            cfg.star = true;
            break;
        case OPT_GAUGE:
            if (!refine_number(&rule_gauge, optarg, &v)) return KR_EXIT_USAGE;
            cfg.gauge = (int)v;
            break;
        case OPT_SEED:
            if (!refine_number(&rule_seed, optarg, &v)) return KR_EXIT_USAGE;
            seed = (unsigned)v;
            break;
        case OPT_SEQUENCE:
            seq.uri = optarg;
            break;
        case OPT_TRAJECTORY:
            seq.trajectory = optarg;
            break;
        case OPT_INTRINSICS:
            seq.intrinsics = optarg;
            break;
        case OPT_EVERY_FRAME:
            seq.every_frame = optarg;
            break;
        case OPT_MIN_MOVE:
            if (!parse_min_move(optarg, &seq)) {
                fprintf(stderr,
                        "kinreg refine: --min-move '%s': expected METRES,DEGREES (e.g. 0.05,5)\n",
                        optarg);
                return KR_EXIT_USAGE;
            }
            break;
        case OPT_SYNTHETIC: {
            /* N views, or room:N[:WIDTHxHEIGHT]; N checked by rule_synthetic. */
            room = strncmp(optarg, "room:", 5) == 0;
            const char *count = optarg + (room ? 5 : 0);
            char head[32];
            size_t len = strcspn(count, ":");
            if (len >= sizeof head) len = sizeof head - 1;
            memcpy(head, count, len);
            head[len] = 0;
            if (!refine_number(&rule_synthetic, head, &v)) return KR_EXIT_USAGE;
            synthetic = (int)v;
            const char *rest = count + strcspn(count, ":");
            if (*rest && !room) {
                fprintf(stderr, "kinreg refine: --synthetic '%s': expected N or room:N[:WxH]\n",
                        optarg);
                return KR_EXIT_USAGE;
            }
            if (*rest) {
                char *end;
                const char *size = rest + 1;
                long w = strtol(size, &end, 10), h = room_height;
                if (*end == 'x') h = strtol(end + 1, &end, 10);
                if (end == size || *end || w < 8 || h < 8 || w > 4096 || h > 4096) {
                    fprintf(stderr,
                            "kinreg refine: --synthetic '%s': expected room:N or "
                            "room:N:WIDTHxHEIGHT with 8..4096 pixels a side (e.g. "
                            "room:200:160x120)\n",
                            optarg);
                    return KR_EXIT_USAGE;
                }
                room_width = (int)w;
                room_height = (int)h;
            }
            break;
        }
        case OPT_DEVICES:
            devices = optarg;
            break;
        case OPT_MPI:
            want_mpi = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        case 'q':
            quiet = true;
            break;
        case OPT_BACKEND:
            if (kr_backend_parse(optarg, &backend) != KR_OK) {
                fprintf(stderr, "kinreg refine: --backend '%s': use auto, cpu or cuda\n", optarg);
                return KR_EXIT_USAGE;
            }
            break;
        case OPT_PERTURB:
            if (!parse_perturb(optarg, deg, cm)) {
                fprintf(
                    stderr,
                    "kinreg refine: --perturb '%s': expected DEG1:DEG2,CM1:CM2 (e.g. 3:5,1:2)\n",
                    optarg);
                return KR_EXIT_USAGE;
            }
            perturbing = true;
            break;
        case 'h':
            help(stdout);
            return KR_EXIT_OK;
        default:
            help(stderr);
            return KR_EXIT_USAGE;
        }
    }
    kr_mpi_session mpi = {.ranks = 1, .local_ranks = 1};
    if (want_mpi || kr_mpi_launched()) {
        kr_status ms = kr_mpi_begin(&mpi, &argc, &argv);
        if (ms != KR_OK) {
            fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
            return kr_exit_code(ms);
        }
    }
    int rc = refine_scans(&mpi, argc, argv, &cfg, &seq, output, model, backend, devices, json,
                          quiet, perturbing, deg, cm, seed, synthetic, room, room_width,
                          room_height, room_noise);
    kr_mpi_end(&mpi);
    return rc;
}

/* The refinement itself, on this rank of `mpi` (one rank alone without MPI). */
static int refine_scans(kr_mpi_session *mpi, int argc, char **argv, kr_refine_config *cfgp,
                        kr_refine_sequence_args *seqp, const char *output, const char *model,
                        kr_backend backend, const char *devices, bool json, bool quiet,
                        bool perturbing, const double deg[2], const double cm[2], unsigned seed,
                        int synthetic, bool room, int room_width, int room_height,
                        double room_noise)
{
    kr_refine_config cfg = *cfgp;
    kr_refine_sequence_args seq = *seqp;
    bool lead = mpi->rank == 0, shared = mpi->ranks > 1;
    /* Rank 0 speaks for all; the others say only what went wrong with them. */
    if (!lead) {
        quiet = true;
        json = false;
        output = model = NULL;
    }
    const char *who = "";
    char who_buf[32];
    if (shared) {
        snprintf(who_buf, sizeof who_buf, "rank %d: ", mpi->rank);
        who = who_buf;
    }
    if (devices && backend != KR_BACKEND_CUDA) {
        fprintf(stderr, "kinreg refine: --devices needs --backend cuda\n");
        return KR_EXIT_USAGE;
    }
    if (devices) {
        kr_status ds = kr_refine_devices_parse(devices, cfg.devices, &cfg.n_devices);
        if (ds != KR_OK) {
            fprintf(stderr, "kinreg refine: %s%s\n", who, kr_last_error());
            return kr_exit_code(ds);
        }
    }
    if (shared && (seq.uri || seq.trajectory)) {
        if (lead)
            fprintf(stderr, "kinreg refine: --sequence runs in one process; under mpirun give "
                            "SCANS.conf or --synthetic\n");
        return KR_EXIT_USAGE;
    }
    if (seq.every_frame && !seq.uri) {
        fprintf(stderr, "kinreg refine: --every-frame needs --sequence and --trajectory\n");
        return KR_EXIT_USAGE;
    }
    if (seq.uri || seq.trajectory) {
        if (!seq.uri || !seq.trajectory || optind != argc) {
            fprintf(stderr, "kinreg refine: --sequence URI and --trajectory FILE go together, "
                            "alone (see --help)\n");
            return KR_EXIT_USAGE;
        }
        return refine_sequence(&seq, &cfg, output, backend, json, quiet);
    }
    if (optind != argc - (synthetic ? 0 : 1) || synthetic < 0 || synthetic == 1) {
        if (lead)
            fprintf(stderr, "kinreg refine: expected one SCANS.conf, or --synthetic N or "
                            "room:N (N >= 2) alone (see --help)\n");
        return KR_EXIT_USAGE;
    }
    cfg.seed = seed;
    if (!quiet && !json) cfg.progress = progress;

    kr_scan_conf conf = {0};
    float **made = NULL;
    size_t *made_n = NULL;
    kr_status s = synthetic ? make_synthetic(synthetic, room, room_width, room_height, room_noise,
                                             &conf, &made, &made_n)
                            : kr_scan_conf_read(argv[optind], &conf);
    if (s != KR_OK && !shared) {
        fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        return kr_exit_code(s);
    }
    int n = conf.n, rc = KR_EXIT_OK;
    float **xyz = calloc((size_t)n, sizeof *xyz);
    size_t *count = calloc((size_t)n, sizeof *count);
    kr_pose *poses = calloc((size_t)n, sizeof *poses), *input = calloc((size_t)n, sizeof *input);
    kr_refine_view *views = calloc((size_t)n, sizeof *views);
    kr_device *dev = NULL;
    if (!xyz || !count || !poses || !input || !views)
        s = kr_error(KR_ERR_NOMEM, "no memory for %d scans", n);
    if (s == KR_OK && n < 2)
        s = kr_error(KR_ERR_EMPTY, "the set has %d scan; refinement needs 2 or more", n);
    for (int k = 0; k < n && s == KR_OK; k++) {
        if (!quiet && !json)
            fprintf(stderr, "\rrefine: reading %s (%d/%d)   ", conf.scans[k].file, k + 1, n);
        if (made) {
            xyz[k] = made[k];
            count[k] = made_n[k];
            made[k] = NULL;
        } else {
            s = kr_ply_read_points(conf.scans[k].path, &xyz[k], &count[k]);
        }
        views[k] = (kr_refine_view){xyz[k], count[k]};
        input[k] = poses[k] = conf.scans[k].pose;
    }
    if (s == KR_OK && (cfg.gauge < 0 || cfg.gauge >= n))
        s = kr_error(KR_ERR_INVALID_ARG, "--gauge %d: the set has scans 0..%d", cfg.gauge, n - 1);
    if (shared) {
        /* Every rank reads its input itself; one that cannot makes them all
         * stop, each saying why, instead of leaving the others waiting. */
        if (s != KR_OK) fprintf(stderr, "kinreg refine: %s%s\n", who, kr_last_error());
        kr_status mine = s;
        s = kr_mpi_agree(mpi, s);
        if (s != KR_OK && mine == KR_OK) fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        if (s == KR_OK && !kr_mpi_same(mpi, problem_digest(views, poses, n))) {
            s = kr_error(KR_ERR_INVALID_ARG, "the ranks read different scans or poses; give "
                                             "every rank the same input");
            if (lead) fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        }
        if (s != KR_OK) rc = kr_exit_code(s);
        if (s == KR_OK && lead && !quiet && !json)
            fprintf(stderr, "\rrefine: %d MPI ranks share the sums%-30s\n", mpi->ranks, "");
    }
    if (s == KR_OK && perturbing) {
        rng_state = seed * 2654435761u + 1;
        for (int k = 0; k < n; k++) {
            if (k == cfg.gauge) continue;
            double c[3] = {0, 0, 0}, w[3];
            for (size_t i = 0; i < count[k]; i++)
                for (int a = 0; a < 3; a++)
                    c[a] += xyz[k][3 * i + a] / (double)count[k];
            kr_pose_apply(&poses[k], c, w);
            double a = deg[0] + (deg[1] - deg[0]) * urand(), t = cm[0] + (cm[1] - cm[0]) * urand();
            poses[k] = perturb(&poses[k], w, a, t);
        }
    }
    if (s == KR_OK && backend != KR_BACKEND_CPU) {
        kr_device_config dc;
        kr_device_config_default(&dc);
        dc.backend = backend;
        /* One rank per GPU: the ranks of a host take its devices in turn. */
        int visible = shared && !devices ? kr_gpu_device_count(NULL, 0) : 0;
        if (visible > 0) dc.cuda_device = mpi->local_rank % visible;
        s = kr_device_create(&dev, &dc);
        if (shared) {
            if (s != KR_OK) fprintf(stderr, "kinreg refine: %s%s\n", who, kr_last_error());
            kr_status mine = s;
            s = kr_mpi_agree(mpi, s);
            if (s != KR_OK && mine == KR_OK)
                fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
            if (s != KR_OK) rc = kr_exit_code(s);
        }
    }
    if (shared) cfg.partition = &mpi->partition;
    kr_refine_result res = {0};
    kr_pose *start = calloc((size_t)n, sizeof *start);
    if (s == KR_OK && !start) s = kr_error(KR_ERR_NOMEM, "no memory for %d poses", n);
    if (s == KR_OK) {
        memcpy(start, poses, sizeof *poses * (size_t)n);
        s = kr_refine(&cfg, dev, views, n, poses, &res);
        /* A rank that fails inside the refinement may have left the others
         * waiting in an all-reduce it will not join: end them all. */
        if (s != KR_OK && shared) {
            fprintf(stderr, "kinreg refine: %s%s\n", who, kr_last_error());
            kr_mpi_abort(mpi, kr_exit_code(s));
        }
    }
    if (!quiet && !json) fprintf(stderr, "\r%-70s\r", "");
    bool reported = shared && s != KR_OK; /* each rank said why above */
    if (s == KR_OK && output) s = kr_scan_conf_write(output, &conf, poses);
    if (s == KR_OK && model) s = write_model(model, xyz, count, poses, n);
    if (s != KR_OK) {
        if (!reported) fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        rc = kr_exit_code(s);
    } else if (!lead) {
        /* Rank 0 reports. */
    } else {
        double max_deg = 0, max_mm = 0, max_deg0 = 0, max_mm0 = 0;
        if (json)
            printf("{\"scans\":%d,\"backend\":\"%s\",\"rms_before_m\":%.9g,\"rms_after_m\":%.9g,"
                   "\"residuals_before\":%zu,\"residuals_after\":%zu,\"iterations\":%d,"
                   "\"accepted\":%d,"
                   "\"seconds\":%.6f,\"ranks\":%d,\"devices\":%d,\"solver\":\"%s\","
                   "\"reduced_bytes\":%.0f,\"bytes_per_iteration\":%.0f,"
                   "\"fields_seconds\":%.6f,\"sums_seconds\":%.6f,\"evaluations\":%d",
                   n, kr_backend_name(res.backend), res.rms_before, res.rms_after,
                   res.residuals_before, res.residuals_after, res.iterations, res.accepted,
                   res.seconds, res.ranks, res.devices, kr_refine_solver(), res.reduced_bytes,
                   bytes_per_iteration(&res), res.fields_seconds, res.sums_seconds,
                   res.evaluations);
        else
            printf("refined %d scans on %s in %.3f s (fields %.3f s, sums %.3f s; %d LM "
                   "iterations, %d accepted)\n"
                   "RMS residual %.4f mm -> %.4f mm (%zu -> %zu residuals on the %.2f mm grid)\n",
                   n, kr_backend_name(res.backend), res.seconds, res.fields_seconds,
                   res.sums_seconds, res.iterations, res.accepted, res.rms_before * 1000,
                   res.rms_after * 1000, res.residuals_before, res.residuals_after,
                   cfg.cell * 1000);
        if (!json && (res.ranks > 1 || res.devices > 1))
            printf("%d rank%s, %d GPU%s each; all-reduce payload %.0f bytes per LM iteration "
                   "(%.0f in all)\n",
                   res.ranks, res.ranks == 1 ? "" : "s", res.devices, res.devices == 1 ? "" : "s",
                   bytes_per_iteration(&res), res.reduced_bytes);
        if (perturbing) {
            if (json) printf(",\"seed\":%u,\"errors\":[", seed);
            for (int k = 0; k < n; k++) {
                double d0, m0, d1, m1;
                relative_error(start, input, cfg.gauge, k, &d0, &m0);
                relative_error(poses, input, cfg.gauge, k, &d1, &m1);
                max_deg = fmax(max_deg, d1);
                max_mm = fmax(max_mm, m1);
                max_deg0 = fmax(max_deg0, d0);
                max_mm0 = fmax(max_mm0, m0);
                if (json)
                    printf("%s{\"scan\":\"%s\",\"deg_before\":%.6f,\"mm_before\":%.6f,\"deg\":%.6f,"
                           "\"mm\":%.6f}",
                           k ? "," : "", conf.scans[k].file, d0, m0, d1, m1);
                else
                    printf("  %-16s %6.3f deg %7.3f mm -> %6.4f deg %6.4f mm\n", conf.scans[k].file,
                           d0, m0, d1, m1);
            }
            if (json)
                printf("],\"max_deg\":%.6f,\"max_mm\":%.6f", max_deg, max_mm);
            else
                printf("largest error against the input: %.3f deg %.3f mm -> %.4f deg %.4f mm\n",
                       max_deg0, max_mm0, max_deg, max_mm);
        }
        if (json) printf("}\n");
    }
    kr_device_destroy(&dev);
    for (int k = 0; k < n && xyz; k++)
        free(xyz[k]);
    free(xyz);
    free(count);
    free(poses);
    free(input);
    free(start);
    free(views);
    if (made)
        for (int k = 0; k < n; k++)
            free(made[k]);
    free(made);
    free(made_n);
    kr_scan_conf_free(&conf);
    return rc;
}
