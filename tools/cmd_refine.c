/* kinreg refine — offline multi-view distance-field refinement of a set of
 * range scans (a Stanford-style .conf): refined poses in the same format, the
 * merged model as PLY, before/after residuals, optionally from a seeded
 * perturbation of the input (to measure how well it returns). */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kinreg/scan.h"
#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "tools/cli/number_option.h"
#include "tools/cli/progress_line.h"
#include "tools/cli/terminal_text.h"
#include "kinreg/refine.h"
#include "tools/mpi/refine_mpi.h"
#include "tools/device_start.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

/* The LM iterations' progress (kr_refine_config.progress; user: the line). */
static void progress(void *user, double cell, int iteration, double cost)
{
    kr_progress_line_say(user, "iterations", "refine: grid %.1f mm, iteration %d, objective %.4g",
                         cell * 1000, iteration, cost);
}

/* What the refinement begins (kr_refine_config.stage): a line at once, so
 * that the wait before the first iteration is not silent. */
static void stage(void *user, const char *what, int views, double cell)
{
    if (strcmp(what, "fields") == 0)
        kr_progress_line_say(user, what, "refine: normals and fields of %d views, grid %.1f mm",
                             views, cell * 1000);
    else if (strcmp(what, "coarse fields") == 0)
        kr_progress_line_say(user, what, "refine: fields of %d views, grid %.1f mm", views,
                             cell * 1000);
    else if (strcmp(what, "measure") == 0)
        kr_progress_line_say(user, what, "refine: measuring how %d views overlap", views);
    else if (strcmp(what, "placement") == 0)
        kr_progress_line_say(user, what, "refine: placing %d views pairwise", views);
}

/* The scans merged in the common frame at their poses, one PLY. */
static kr_status write_model(const char *path, float **xyz, const size_t *n, const kr_pose *poses,
                             int scans)
{
    size_t total = 0;
    for (int k = 0; k < scans; k++)
        total += n[k];
    float *all = malloc(3 * (total ? total : 1) * sizeof *all);
    if (!all) return kr_error(KR_ERR_NOMEM, "no memory for the merged model (%zu points)", total);
    size_t at = 0;
    for (int k = 0; k < scans; k++)
        for (size_t i = 0; i < n[k]; i++, at++) {
            double p[3] = {xyz[k][3 * i], xyz[k][3 * i + 1], xyz[k][3 * i + 2]}, w[3];
            kr_pose_apply(&poses[k], p, w);
            for (int a = 0; a < 3; a++)
                all[3 * at + a] = (float)w[a];
        }
    char comment[64];
    snprintf(comment, sizeof comment, "kinreg refine: %d scans", scans);
    kr_status s = kr_scan_write_ply(path, all, NULL, total, comment);
    free(all);
    return s;
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

/* N views of the synthetic object (kr_scan_synthetic_object, kinreg/scan.h), or with
 * room set of the synthetic room (kr_scan_synthetic_room), as a scan set
 * whose poses are exact. */
static kr_status make_synthetic(int n, bool room, int width, int height, double noise,
                                kr_scan_set *conf, float ***xyz, size_t **count)
{
    kr_scan_set c = {0};
    c.scans = calloc((size_t)n, sizeof *c.scans);
    float **pts = calloc((size_t)n, sizeof *pts);
    size_t *cnt = calloc((size_t)n, sizeof *cnt);
    kr_pose *poses = calloc((size_t)n, sizeof *poses);
    kr_status s = (c.scans && pts && cnt && poses)
                      ? KR_OK
                      : kr_error(KR_ERR_NOMEM, "no memory for %d views", n);
    if (s == KR_OK)
        s = room ? kr_scan_synthetic_room(n, width, height, noise, 1, pts, cnt, poses)
                 : kr_scan_synthetic_object(n, 60000, pts, cnt, poses);
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
        kr_scan_set_free(&c);
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

static void say_keyframes(int keyframes, void *user)
{
    (void)user;
    fprintf(stderr, "refine: %d keyframes\n", keyframes);
}

static int refine_sequence(kr_refine_sequence_config *seq, kr_refine_config *cfg,
                           const char *output, kr_backend backend, bool json, bool quiet)
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
    bool verbose = !quiet && !json;
    if (verbose) seq->on_keyframes = say_keyframes;
    kr_progress_line line;
    kr_progress_line_init(&line, verbose);
    cfg->progress = progress;
    cfg->stage = stage;
    cfg->progress_user = &line;
    kr_refine_result res = {0};
    kr_refine_sequence_result counts = {0};
    if (!quiet && !json) fprintf(stderr, "refine: reading %s\n", seq->uri);
    double t0 = now_seconds();
    if (s == KR_OK) s = kr_refine_sequence(seq, cfg, dev, &res, &counts);
    /* The frames read and turned into keyframes' points: the call's time
     * outside the refinement. */
    double read_seconds = now_seconds() - t0 - res.seconds;
    kr_progress_line_clear(&line);
    if (s == KR_OK && verbose && seq->every_frame)
        fprintf(stderr,
                "refine: %zu frames corrected by their keyframes, %zu in stretches "
                "without one kept as they were\n",
                counts.frames_corrected, counts.frames_unmoved);
    int keyframes = counts.keyframes;
    kr_device_destroy(&dev);
    if (s != KR_OK) {
        fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        return kr_exit_code(s);
    }
    if (json)
        printf("{\"keyframes\":%d,\"backend\":\"%s\",\"devices\":%d,\"rms_before_m\":%.9g,"
               "\"rms_after_m\":%.9g,\"iterations\":%d,\"seconds\":%.6f,"
               "\"fields_seconds\":%.6f,\"sums_seconds\":%.6f,\"solve_seconds\":%.6f,"
               "\"fit_seconds\":%.6f,\"read_seconds\":%.6f,\"solver\":\"%s\"}\n",
               keyframes, kr_backend_name(res.backend), res.devices, res.rms_before, res.rms_after,
               res.iterations, res.seconds, res.fields_seconds, res.sums_seconds, res.solve_seconds,
               res.fit_seconds, read_seconds, res.solver ? res.solver : kr_refine_solver());
    else
        printf("refined %d keyframes on %s in %.3f s (%d LM iterations)\nRMS residual %.3f mm -> "
               "%.3f mm on the "
               "%.1f mm grid\n",
               keyframes, kr_backend_name(res.backend), res.seconds, res.iterations,
               res.rms_before * 1000, res.rms_after * 1000, cfg->cell * 1000);
    return KR_EXIT_OK;
}

/* METRES,DEGREES, each range-checked (a value out of range says so first). */
static bool parse_min_move(const char *who, const char *name, const char *arg,
                           kr_refine_sequence_config *seq)
{
    const kr_number_rule metres = {name, 0, 100, false, false, "metres", NULL},
                         degrees = {name, 0, 180, false, false, "degrees", NULL};
    char buf[128];
    const char *comma = strchr(arg, ',');
    if (!comma || strlen(arg) >= sizeof buf) return false;
    snprintf(buf, sizeof buf, "%.*s", (int)(comma - arg), arg);
    double m, d;
    if (!kr_number_option(who, &metres, buf, &m) || !kr_number_option(who, &degrees, comma + 1, &d))
        return false;
    seq->min_translation = m;
    seq->min_angle_deg = d;
    return true;
}

typedef struct {
    kr_refine_config cfg;
    kr_refine_sequence_config seq;
    const char *output, *model, *devices;
    kr_backend backend;
    bool json, quiet, perturbing, room, want_mpi;
    int room_width, room_height, synthetic;
    double room_noise;
    double deg[2], cm[2];
    unsigned seed;
    bool allow_disconnected;
} refine_options;

static int refine_scans(kr_mpi_session *mpi, int argc, char **argv, const refine_options *o);

/* --initialize auto|on|off. */
static bool initialize_option(const char *arg, kr_refine_config *cfg)
{
    if (!strcmp(arg, "auto"))
        cfg->initialize = KR_REFINE_INIT_AUTO;
    else if (!strcmp(arg, "on"))
        cfg->initialize = KR_REFINE_INIT_ON;
    else if (!strcmp(arg, "off"))
        cfg->initialize = KR_REFINE_INIT_OFF;
    else
        return false;
    return true;
}

/* --synthetic N or room:N[:WIDTHxHEIGHT]; N from 2 to 10000. */
static bool synthetic_option(refine_options *o, const char *who, const char *name, const char *arg)
{
    const kr_number_rule views = {name, 2, 10000, false, true, "views", NULL};
    o->room = strncmp(arg, "room:", 5) == 0;
    const char *count = arg + (o->room ? 5 : 0);
    char head[32];
    size_t len = strcspn(count, ":");
    if (len >= sizeof head) len = sizeof head - 1;
    memcpy(head, count, len);
    head[len] = 0;
    double v;
    if (!kr_number_option(who, &views, head, &v)) return false;
    o->synthetic = (int)v;
    const char *rest = count + strcspn(count, ":");
    if (*rest && !o->room) {
        fprintf(stderr, "%s: %s '%s': expected N or room:N[:WxH]\n", who, name, arg);
        return false;
    }
    if (*rest) {
        char *end;
        const char *size = rest + 1;
        long w = strtol(size, &end, 10), h = o->room_height;
        if (*end == 'x') h = strtol(end + 1, &end, 10);
        if (end == size || *end || w < 8 || h < 8 || w > 4096 || h > 4096) {
            fprintf(stderr,
                    "%s: %s '%s': expected room:N or room:N:WIDTHxHEIGHT with 8..4096 pixels a "
                    "side (e.g. room:200:160x120)\n",
                    who, name, arg);
            return false;
        }
        o->room_width = (int)w;
        o->room_height = (int)h;
    }
    return true;
}

#define SPEC_SYNTHETIC (0, "synthetic", "N", KR_CUSTOM)
#define REFINE_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg refine [OPTIONS] SCANS.conf\n\n"                                            \
        "Registers the range scans listed in SCANS.conf ('bmesh FILE tx ty tz qx qy qz qw',\n"     \
        "Stanford style: a scan point p maps to R(q)^T p + t; FILE is a PLY) jointly,\n"           \
        "with multi-view distance fields and Levenberg-Marquardt (DESIGN.md §5). The first\n"     \
        "scan (--gauge) stays fixed. Prints the RMS residual before and after.\n\n"                \
        "options:\n"))                                                                             \
    OPT(OUTPUT, ('o', "output", "FILE", KR_TEXT), o->output = arg,                                 \
        KR_HELP("write the refined poses as a .conf"))                                             \
    OPT(MODEL, (0, "model", "FILE", KR_TEXT), o->model = arg,                                      \
        KR_HELP("write the merged, refined scans as one binary PLY"))                              \
    OPT(CELL, (0, "cell", "M", KR_REAL(1e-5, 10, "metres", NULL)), o->cfg.cell = v,                \
        KR_HELP("finest grid spacing in metres (default 0.0015)"))                                 \
    OPT(LEVELS, (0, "levels", "N", KR_WHOLE(1, 12, "grid levels", NULL)), o->cfg.levels = (int)v,  \
        KR_HELP("grids cell*2^k, coarse first (default 3)"))                                       \
    OPT(BAND, (0, "band", "B", KR_WHOLE(1, 100, "cells", NULL)), o->cfg.band = (int)v,             \
        KR_HELP("influence band of the finest grid in cells (default 2)"))                         \
    OPT(COARSE_BAND, (0, "coarse-band", "B", KR_WHOLE(1, 100, "cells", NULL)),                     \
        o->cfg.coarse_band = (int)v, KR_HELP("band of the coarsest grid (default 3)"))             \
    OPT(MID_BAND, (0, "mid-band", "B", KR_WHOLE(1, 100, "cells", NULL)), o->cfg.mid_band = (int)v, \
        KR_HELP("band of the grids between coarsest and finest (default 2)"))                      \
    OPT(POINTS, (0, "points", "N", KR_WHOLE(0, INT_MAX, "points", "0 = all")),                     \
        o->cfg.max_points = (int)v,                                                                \
        KR_HELP("points per scan on the finest grid at most (default 0: all)"))                    \
    OPT(ITERATIONS,                                                                                \
        (0, "iterations", "N",                                                                     \
         KR_WHOLE(0, 100000, "LM iterations", "0 = only the residual figures")),                   \
        o->cfg.max_iterations = (int)v,                                                            \
        KR_HELP("LM iterations per level at most (default 30; 0 = only the\n"                      \
                "residual figures)"))                                                              \
    OPT(HUBER, (0, "huber", "C", KR_REAL(0, 1000, "cells", "0 = squares")), o->cfg.huber = v,      \
        KR_HELP("Huber loss with threshold C cells (default 0: squares)"))                         \
    OPT(CAP, (0, "cap", "C", KR_REAL(0, 1000, "cells", NULL)), o->cfg.cap = v,                     \
        KR_HELP("finest grid: residuals beyond C cells weigh 0 (default 0.3)"))                    \
    OPT(SUBSET, (0, "subset", "F", KR_ABOVE(0, 1, "a fraction", NULL)), o->cfg.subset = v,         \
        KR_HELP("fraction of grid points used (thesis: 0.4; default 0.2)"))                        \
    OPT(SIGNED, (0, "signed", NULL, KR_FLAG), o->cfg.signed_field = true,                          \
        KR_HELP("signed fields: distance to each point's tangent plane (normals\n"                 \
                "by PCA, towards the sensor at the scan's origin); exact on\n"                     \
                "planes, for long scans of rooms (default: unsigned)"))                            \
    OPT(INITIALIZE, (0, "initialize", "W", KR_CHOICE("expected auto, on or off")),                 \
        KR_REFUSE_UNLESS(initialize_option(arg, &o->cfg)),                                         \
        KR_HELP("place the scans by pairwise registration first: auto (default:\n"                 \
                "when the given poses leave a scan without overlap), on, off"))                    \
    OPT(ALLOW_DISCONNECTED, (0, "allow-disconnected", NULL, KR_FLAG),                              \
        o->allow_disconnected = true,                                                              \
        KR_HELP("a scan that overlaps no other is reported, not an error\n"                        \
                "(default: exit status 1)"))                                                       \
    OPT(STAR, (0, "star", NULL, KR_FLAG), o->cfg.star = true,                                      \
        KR_HELP("the thesis's form: pairs (gauge, j) only, grid points inside\n"                   \
                "every other scan's field"))                                                       \
    OPT(GAUGE, (0, "gauge", "K", KR_WHOLE(0, INT_MAX, "a scan index", NULL)),                      \
        o->cfg.gauge = (int)v, KR_HELP("index of the fixed scan (default 0)"))                     \
    OPT(BACKEND, KR_OPT_BACKEND, KR_REFUSE_UNLESS(kr_backend_parse(arg, &o->backend) == KR_OK),    \
        KR_HELP("auto, cpu or cuda (default cpu)"))                                                \
    OPT(PERTURB,                                                                                   \
        (0, "perturb", "A1:A2,C1:C2",                                                              \
         KR_REFUSAL("%s: %s '%s': expected DEG1:DEG2,CM1:CM2 (e.g. 3:5,1:2)")),                    \
        KR_REFUSE_UNLESS(parse_perturb(arg, o->deg, o->cm));                                       \
        o->perturbing = true,                                                                      \
        KR_HELP("first move every scan but the gauge by a random rotation of\n"                    \
                "A1..A2 degrees about its centre and a translation of C1..C2 cm,\n"                \
                "then report each scan's error against the input poses"))                          \
    OPT(SEED, (0, "seed", "S", KR_WHOLE(0, 4294967295.0, "a seed", NULL)), o->seed = (unsigned)v,  \
        KR_HELP("seed of --perturb and --subset (default 1)"))                                     \
    OPT(SEQUENCE, (0, "sequence", "URI", KR_TEXT), o->seq.uri = arg,                               \
        KR_HELP("instead of SCANS.conf: a depth sequence (e.g. tum:DIR) whose"))                   \
    OPT(TRAJECTORY, (0, "trajectory", "FILE", KR_TEXT), o->seq.trajectory = arg,                   \
        KR_HELP("poses are in this TUM file: keyframes every --min-move, refined\n"                \
                "jointly (grid 1 cm unless --cell); -o writes them as TUM"))                       \
    OPT(INTRINSICS, (0, "intrinsics", "NAME", KR_TEXT), o->seq.intrinsics = arg,                   \
        KR_HELP("the sequence's intrinsics preset (fr1, fr2, fr3)"))                               \
    OPT(MIN_MOVE,                                                                                  \
        (0, "min-move", "M,DEG",                                                                   \
         KR_REFUSAL("%s: %s '%s': expected METRES,DEGREES (e.g. 0.05,5)")),                        \
        KR_REFUSE_UNLESS(parse_min_move(who, name, arg, &o->seq)),                                 \
        KR_HELP("keyframe spacing: metres or degrees since the last (0.15,15)"))                   \
    OPT(EVERY_FRAME, (0, "every-frame", "FILE", KR_TEXT), o->seq.every_frame = arg,                \
        KR_HELP("with --sequence: every pose of --trajectory moved by the\n"                       \
                "refinement of the keyframes around it, interpolated between\n"                    \
                "them in time; a step the tracker's motion check refuses (a\n"                     \
                "jump) starts a stretch that follows its own keyframes only\n"                     \
                "(TUM). After a run with lost stretches, --signed --min-move\n"                    \
                "0.02,2 (docs/BENCHMARKS.md, issue 13 session 13)"))                               \
    OPT(SYNTHETIC, SPEC_SYNTHETIC, KR_FAIL_UNLESS(synthetic_option(o, who, name, arg)),            \
        KR_HELP("instead of SCANS.conf: N views of a synthetic bumpy object\n"                     \
                "(about 0.2 m across, cameras 0.5 m away; exact poses)"))                          \
    MORE(KR_SPEC_WITH_META(SPEC_SYNTHETIC, "room:N[:WxH]"),                                        \
         KR_HELP("a long scan instead: N depth views (W x H, default\n"                            \
                 "160x120) from a loop\n"                                                          \
                 "inside a 4 x 3 m room with bumpy walls (exact poses; each view\n"                \
                 "overlaps its neighbours); use a cm grid, e.g. --cell 0.02"))                     \
    OPT(NOISE, (0, "noise", "M", KR_REAL(0, 0.1, "metres", "0 = none")), o->room_noise = v,        \
        KR_HELP("--synthetic room: Gaussian depth noise of M metres along\n"                       \
                "each ray (default 0)"))                                                           \
    OPT(DEVICES, (0, "devices", "LIST", KR_TEXT), o->devices = arg,                                \
        KR_HELP("cuda backend: split the sums over these GPUs ('all', '0,1');\n"                   \
                "default one device (under mpirun: the rank's by local rank)"))                    \
    OPT(STAGED_COPIES, (0, "staged-copies", NULL, KR_FLAG), o->cfg.staged_copies = true,           \
        KR_HELP("with --devices: fields go between GPUs through the host, not\n"                   \
                "peer to peer (the route GPUs that cannot reach each other take)"))                \
    OPT(MPI, (0, "mpi", NULL, KR_FLAG), o->want_mpi = true,                                        \
        KR_HELP("insist on MPI (mpirun -np N kinreg refine ... shares the sums\n"                  \
                "over N ranks; started by mpirun this is implied)"))                               \
    OPT(JSON, KR_OPT_JSON, o->json = true, KR_HELP("print one JSON object instead of text"))       \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no progress line"))                         \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nexample: kinreg refine ../shared/data/bunny/bun.conf -o refined.conf "         \
                 "--model bunny.ply\n"))
KR_OPTION_TABLE(refine_option_table, REFINE_OPTIONS, refine_options, o, NULL);

/* Descriptions in column 24, one space after a longer option. */
static const kr_command refine_command = {"refine", &refine_option_table, {24, 2, 1}, 0, NULL};

int kr_cmd_refine(int argc, char **argv)
{
    refine_options o = {.backend = KR_BACKEND_CPU,
                        .room_width = 160,
                        .room_height = 120,
                        .seed = 1,
                        .seq = {.min_translation = 0.15, .min_angle_deg = 15}};
    kr_refine_config_default(&o.cfg);
    int prc = kr_command_parse(&refine_command, argc, argv, &o);
    if (prc >= 0) return prc;
    kr_mpi_session mpi = {.ranks = 1, .local_ranks = 1};
    if (o.want_mpi || kr_mpi_launched()) {
        kr_status ms = kr_mpi_begin(&mpi, &argc, &argv);
        if (ms != KR_OK) {
            fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
            return kr_exit_code(ms);
        }
    }
    int rc = refine_scans(&mpi, argc, argv, &o);
    kr_mpi_end(&mpi);
    return rc;
}

/* The refinement itself, on this rank of `mpi` (one rank alone without MPI). */
static int refine_scans(kr_mpi_session *mpi, int argc, char **argv, const refine_options *o)
{
    kr_refine_config cfg = o->cfg;
    kr_refine_sequence_config seq = o->seq;
    const char *output = o->output, *model = o->model, *devices = o->devices;
    kr_backend backend = o->backend;
    bool json = o->json, quiet = o->quiet, perturbing = o->perturbing, room = o->room;
    const double *deg = o->deg, *cm = o->cm;
    unsigned seed = o->seed;
    int synthetic = o->synthetic, room_width = o->room_width, room_height = o->room_height;
    double room_noise = o->room_noise;
    bool lead = mpi->rank == 0, shared = mpi->ranks > 1;
    /* Rank 0 speaks for all; the others say only what went wrong with them. */
    if (!lead) {
        quiet = true;
        json = false;
        output = model = NULL;
    }
    if (shared && !o->quiet) kr_mpi_say_binding(mpi);
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
            kr_command_usage_error(
                &refine_command,
                "expected one SCANS.conf, or --synthetic N or room:N (N >= 2) alone");
        return KR_EXIT_USAGE;
    }
    cfg.seed = seed;
    kr_progress_line line;
    kr_progress_line_init(&line, !quiet && !json);
    cfg.progress = progress;
    cfg.stage = stage;
    cfg.progress_user = &line;

    kr_scan_set conf = {0};
    float **made = NULL;
    size_t *made_n = NULL;
    /* The device starts while the scans are read or made. */
    kr_device_start starting;
    if (backend != KR_BACKEND_CPU) {
        kr_device_config dc;
        kr_device_config_default(&dc);
        dc.backend = backend;
        /* One rank per GPU: the ranks of a host take its devices in turn. */
        kr_device_start_begin(&starting, &dc, shared && !devices ? mpi->local_rank : -1,
                              cfg.devices, cfg.n_devices);
    }
    double t_read = now_seconds();
    kr_status s = synthetic ? make_synthetic(synthetic, room, room_width, room_height, room_noise,
                                             &conf, &made, &made_n)
                            : kr_scan_set_read(argv[optind], &conf);
    kr_device *dev = NULL;
    kr_status started = KR_OK;
    if (backend != KR_BACKEND_CPU) {
        /* Kept: the reading's failure, if any, is what is said first. */
        char read_error[512];
        snprintf(read_error, sizeof read_error, "%s", s != KR_OK ? kr_last_error() : "");
        started = kr_device_start_end(&starting, &dev);
        if (s != KR_OK) kr_error(s, "%s", read_error);
    }
    if (s != KR_OK && !shared) {
        fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        kr_device_destroy(&dev);
        return kr_exit_code(s);
    }
    int n = conf.n, rc = KR_EXIT_OK;
    float **xyz = calloc((size_t)n, sizeof *xyz);
    size_t *count = calloc((size_t)n, sizeof *count);
    kr_pose *poses = calloc((size_t)n, sizeof *poses), *input = calloc((size_t)n, sizeof *input);
    kr_refine_view *views = calloc((size_t)n, sizeof *views);
    if (!xyz || !count || !poses || !input || !views)
        s = kr_error(KR_ERR_NOMEM, "no memory for %d scans", n);
    if (s == KR_OK && n < 2)
        s = kr_error(KR_ERR_EMPTY, "the set has %d scan; refinement needs 2 or more", n);
    for (int k = 0; k < n && s == KR_OK; k++) {
        if (!quiet && !json) {
            /* A name from the .conf: no escape sequence of it reaches the terminal. */
            char name[1024];
            kr_terminal_text(name, sizeof name, conf.scans[k].file);
            kr_progress_line_say(&line, "reading", "refine: reading %s (%d/%d)", name, k + 1, n);
        }
        if (made) {
            xyz[k] = made[k];
            count[k] = made_n[k];
            made[k] = NULL;
        } else {
            s = kr_scan_read_ply(conf.scans[k].path, &xyz[k], &count[k]);
        }
        views[k] = (kr_refine_view){xyz[k], count[k]};
        input[k] = poses[k] = conf.scans[k].pose;
    }
    double read_seconds = now_seconds() - t_read; /* the scans read or made */
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
        if (s == KR_OK && lead && !quiet && !json) {
            kr_progress_line_clear(&line);
            fprintf(stderr, "refine: %d MPI ranks share the sums\n", mpi->ranks);
        }
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
        s = started;
        if (started != KR_OK) kr_error(started, "%s", starting.why);
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
    }
    if (shared && rc == 0) {
        /* Every rank learns whether all finished: one that failed inside the
         * refinement ended the others' reductions with its conclusion. Each
         * says why it stops: its own failure, or the rank that failed. */
        bool own = s != KR_OK && !mpi->peer_failed;
        if (own) fprintf(stderr, "kinreg refine: %s%s\n", who, kr_last_error());
        s = kr_mpi_conclude(mpi, s);
        if (s != KR_OK && !own) fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
    }
    kr_progress_line_clear(&line);
    bool reported = shared && s != KR_OK; /* each rank said why above */
    /* An output that cannot be written (full disk, file-size limit) is exit
     * status 4; the file that was there before is left whole. */
    bool output_failed = false;
    if (s == KR_OK && output)
        output_failed = (s = kr_scan_set_write(output, &conf, poses)) != KR_OK;
    if (s == KR_OK && model)
        output_failed = (s = write_model(model, xyz, count, poses, n)) != KR_OK;
    if (s != KR_OK) {
        if (!reported) fprintf(stderr, "kinreg refine: %s\n", kr_last_error());
        rc = output_failed && s == KR_ERR_IO ? KR_EXIT_OUTPUT : kr_exit_code(s);
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
                   "\"fields_seconds\":%.6f,\"sums_seconds\":%.6f,\"solve_seconds\":%.6f,"
                   "\"fit_seconds\":%.6f,\"init_seconds\":%.6f,\"read_seconds\":%.6f,"
                   "\"evaluations\":%d",
                   n, kr_backend_name(res.backend), res.rms_before, res.rms_after,
                   res.residuals_before, res.residuals_after, res.iterations, res.accepted,
                   res.seconds, res.ranks, res.devices,
                   res.solver ? res.solver : kr_refine_solver(), res.reduced_bytes,
                   bytes_per_iteration(&res), res.fields_seconds, res.sums_seconds,
                   res.solve_seconds, res.fit_seconds, res.init_seconds, read_seconds,
                   res.evaluations);
        else
            printf("refined %d scans on %s in %.3f s (fields %.3f s, sums %.3f s; %d LM "
                   "iterations, %d accepted)\n"
                   "RMS residual %.4f mm -> %.4f mm (%zu -> %zu residuals on the %.2f mm grid)\n",
                   n, kr_backend_name(res.backend), res.seconds, res.fields_seconds,
                   res.sums_seconds, res.iterations, res.accepted, res.rms_before * 1000,
                   res.rms_after * 1000, res.residuals_before, res.residuals_after,
                   cfg.cell * 1000);
        if (json)
            printf(",\"fit_before\":{\"score_m\":%.9g,\"overlap\":%.5f,\"residual_m\":%.9g},"
                   "\"fit_after\":{\"score_m\":%.9g,\"overlap\":%.5f,\"residual_m\":%.9g},"
                   "\"fit_radius_m\":%.6g,\"initialized\":%s,\"placed\":%d,\"kept_input\":%s",
                   res.fit_before.score, res.fit_before.overlap, res.fit_before.residual,
                   res.fit_after.score, res.fit_after.overlap, res.fit_after.residual,
                   res.fit_after.radius, res.initialized ? "true" : "false", res.placed,
                   res.kept_input ? "true" : "false");
        else {
            printf("fit (nearest neighbours between scans within %.2f mm): %.1f%% paired, RMS "
                   "%.4f mm -> %.1f%% paired, RMS %.4f mm (score %.4f -> %.4f mm)\n",
                   res.fit_after.radius * 1000, 100 * res.fit_before.overlap,
                   res.fit_before.residual * 1000, 100 * res.fit_after.overlap,
                   res.fit_after.residual * 1000, res.fit_before.score * 1000,
                   res.fit_after.score * 1000);
            if (res.initialized)
                printf("placed by pairwise registration first (%d of %d scans reached)%s\n",
                       res.placed, n,
                       res.placement_only ? "; the placement fits better than its joint "
                                            "refinement and is kept"
                                          : "");
            if (res.kept_input)
                printf("no refinement fitted the scans better than the given poses: they are "
                       "kept\n");
        }
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
                /* The scan's name comes from the .conf: escaped for JSON and
                 * for the terminal alike. */
                if (json) {
                    printf("%s{\"scan\":", k ? "," : "");
                    kr_json_string(stdout, conf.scans[k].file);
                    printf(",\"deg_before\":%.6f,\"mm_before\":%.6f,\"deg\":%.6f,\"mm\":%.6f}", d0,
                           m0, d1, m1);
                } else {
                    char name[1024];
                    kr_terminal_text(name, sizeof name, conf.scans[k].file);
                    printf("  %-16s %6.3f deg %7.3f mm -> %6.4f deg %6.4f mm\n", name, d0, m0, d1,
                           m1);
                }
            }
            if (json)
                printf("],\"max_deg\":%.6f,\"max_mm\":%.6f", max_deg, max_mm);
            else
                printf("largest error against the input: %.3f deg %.3f mm -> %.4f deg %.4f mm\n",
                       max_deg0, max_mm0, max_deg, max_mm);
        }
        if (res.disconnected > 0) {
            /* Name them: each scan's share of samples paired with another. */
            double *ov = calloc((size_t)n, sizeof *ov);
            kr_refine_fit f;
            if (ov && kr_refine_fit_of(views, n, poses, 0, ov, &f) == KR_OK) {
                if (json) printf(",\"disconnected\":[");
                for (int k = 0, first = 1; k < n; k++) {
                    if (ov[k] >= 0.01) continue;
                    if (json)
                        printf("%s\"%s\"", first ? "" : ",", conf.scans[k].file);
                    else
                        fprintf(stderr,
                                "kinreg refine: %s overlaps no other scan (%.1f%% of it "
                                "within %.2f mm of one)\n",
                                conf.scans[k].file, 100 * ov[k], f.radius * 1000);
                    first = 0;
                }
                if (json) printf("]");
            }
            free(ov);
            if (!o->allow_disconnected) {
                fprintf(stderr,
                        "kinreg refine: %d of %d scans overlap no other: their poses are "
                        "unchanged guesses (--allow-disconnected to accept that)\n",
                        res.disconnected, n);
                rc = KR_EXIT_FAILURE;
            }
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
    kr_scan_set_free(&conf);
    return rc;
}
