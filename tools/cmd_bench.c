/* kinreg bench — per-stage medians on a named source and backend, as a table
 * and as JSON. Stages run one after another on the calling thread so each
 * time is that stage's alone; `--pipeline` also runs the threaded pipeline on
 * the same frames for end-to-end frames per second. */
#include <stdlib.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/cli/output_file.h"
#include "tools/cli/output_path.h"
#include "tools/cli/common_options.h"
#include "tools/cli/pipeline_options.h"

enum {
    ST_READ,
    ST_UPLOAD,
    ST_PREPROCESS,
    ST_DOWNLOAD,
    ST_TRACK,
    ST_ITERATION,
    ST_FUSE,
    ST_FUSE_DEVICE,
    ST_SNAPSHOT,
    ST_GATHER_DEVICE,
    ST_TREE_DEVICE,
    ST_TREE_500K,
    ST_POSE,
    ST_FRAME,
    ST_COUNT
};
static const char *const stage_names[ST_COUNT] = {"source read",
                                                  "  upload (device)",
                                                  "preprocess",
                                                  "  download (device)",
                                                  "track (whole frame)",
                                                  "one Newton iteration",
                                                  "fuse into model",
                                                  "  fusion kernels (device)",
                                                  "tree build (snapshot)",
                                                  "  gather (device)",
                                                  "  tree kernels (device)",
                                                  "tree 500k pts (device)",
                                                  "frame to pose",
                                                  "frame total"};
static const char *const stage_keys[ST_COUNT] = {"read",
                                                 "upload",
                                                 "preprocess",
                                                 "download",
                                                 "track",
                                                 "newton_iteration",
                                                 "fuse",
                                                 "fuse_device",
                                                 "tree_build",
                                                 "gather_device",
                                                 "tree_build_device",
                                                 "tree_build_device_500k",
                                                 "frame_to_pose",
                                                 "frame"};

typedef struct {
    double *v;
    size_t n, cap;
} samples;

static void add(samples *s, double ms)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(samples *s)
{
    if (!s->n) return 0;
    qsort(s->v, s->n, sizeof *s->v, cmp_double);
    return s->n % 2 ? s->v[s->n / 2] : 0.5 * (s->v[s->n / 2 - 1] + s->v[s->n / 2]);
}

/* 99th percentile (nearest rank); call after median (sorted). */
static double p99(const samples *s)
{
    if (!s->n) return 0;
    size_t k = (size_t)(0.99 * (double)s->n + 0.999999);
    return s->v[(k ? k : 1) - 1];
}

/* The device tree build at the target size: 500k points (a
 * room-sized model) with normals, 20 builds; the build kernels' device time
 * (the points' upload and the tree's download are not included). */
static kr_status bench_tree_500k(const kr_device *dev, samples *out)
{
    const size_t n = 500000;
    float *pts = malloc(3 * n * sizeof *pts), *nrm = malloc(3 * n * sizeof *nrm);
    if (!pts || !nrm) {
        free(pts);
        free(nrm);
        return kr_error(KR_ERR_NOMEM, "kinreg bench: no memory for 500k tree points");
    }
    uint64_t x = 88172645463325252ull; /* xorshift: the same cloud every run */
    for (size_t i = 0; i < 3 * n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float u = (float)((x >> 40) * (1.0 / 16777216.0));
        pts[i] = i % 3 == 2 ? 1.0f + 3.0f * u : 4.0f * u - 2.0f;
        nrm[i] = 2.0f * u - 1.0f;
    }
    kr_status s = KR_OK;
    for (int r = 0; r < 20 && s == KR_OK; r++) {
        kr_kdtree *t = NULL;
        kr_device_tree_times tt;
        s = kr_device_build_kdtree(dev, pts, nrm, n, &t, &tt);
        if (s == KR_OK) add(out, tt.build_ms);
        kr_kdtree_destroy(&t);
    }
    free(pts);
    free(nrm);
    return s;
}

static kr_status bench_stages(const kr_pipeline_config *cfg, samples st[ST_COUNT], int *frames,
                              int *lost, char *device_name, size_t device_size)
{
    kr_source *src = NULL;
    kr_device *dev = NULL;
    kr_model *model = NULL;
    kr_pyramid pyr;
    memset(&pyr, 0, sizeof pyr);
    kr_model_config mcfg = cfg->model;
    mcfg.background = false; /* time the tree build itself, on this thread */
    kr_status s;
    if ((s = kr_source_create(&src, &cfg->source)) != KR_OK) return s;
    if ((s = kr_device_create(&dev, &cfg->device)) != KR_OK) goto done;
    snprintf(device_name, device_size, "%s", kr_device_describe(dev));
    if ((s = kr_model_create(&model, &mcfg)) != KR_OK) goto done;
    /* As the pipeline does: snapshot trees on the device with the CUDA engine. */
    bool device_trees =
        kr_device_backend(dev) == KR_BACKEND_CUDA && kr_model_build_trees_on(model, dev) == KR_OK;
    /* And fusion on the device, as the pipeline does. */
    bool device_fusion =
        kr_device_backend(dev) == KR_BACKEND_CUDA && kr_model_fuse_on(model, dev) == KR_OK;
    if (device_trees && (s = bench_tree_500k(dev, &st[ST_TREE_500K])) != KR_OK) goto done;
    kr_intrinsics K = kr_source_intrinsics(src);
    kr_pose pose = kr_pose_identity(), velocity = kr_pose_identity();
    int fuse_level = cfg->fuse_level >= 0 ? cfg->fuse_level : cfg->track.finest_level;
    for (;;) {
        kr_frame frame;
        double t0 = kr_now();
        s = kr_source_read(src, &frame);
        if (s == KR_END) {
            s = KR_OK;
            break;
        }
        if (s != KR_OK) goto done;
        double t1 = kr_now();
        s = kr_preprocess(dev, &cfg->preprocess, &frame, &K, &pyr);
        double t2 = kr_now();
        if (s != KR_OK) {
            kr_frame_release(&frame);
            goto done;
        }
        add(&st[ST_READ], 1e3 * (t1 - t0));
        add(&st[ST_PREPROCESS], 1e3 * (t2 - t1));
        if (kr_device_backend(dev) == KR_BACKEND_CUDA) {
            /* Inside preprocess: the raw frame up, the pyramid down (device time). */
            double up, down;
            kr_preprocess_transfer_times(dev, &up, &down);
            add(&st[ST_UPLOAD], up);
            add(&st[ST_DOWNLOAD], down);
        }
        kr_model_snapshot *snap = kr_model_snapshot_acquire(model);
        bool have_model = snap != NULL;
        double t3 = kr_now(), t4 = t3;
        bool good = true;
        if (snap) {
            kr_pose seed = kr_pose_mul(&pose, &velocity);
            kr_track_result r;
            s = kr_track_frame_on(dev, kr_model_snapshot_tree(snap), &pyr, &seed, &cfg->track, &r);
            t4 = kr_now();
            if (s != KR_OK) {
                kr_model_snapshot_release(&snap);
                kr_frame_release(&frame);
                goto done;
            }
            add(&st[ST_TRACK], 1e3 * (t4 - t3));
            kr_newton_sums sums;
            double t5 = kr_now();
            kr_newton_linearize_on(dev, kr_model_snapshot_tree(snap), &pyr, cfg->track.finest_level,
                                   &r.pose, &cfg->track, cfg->track.gate, &sums);
            add(&st[ST_ITERATION], 1e3 * (kr_now() - t5));
            good = r.state != KR_TRACK_LOST;
            if (good) {
                kr_pose inv = kr_pose_inv(&pose);
                velocity = kr_pose_mul(&inv, &r.pose);
                pose = r.pose;
            } else {
                (*lost)++;
                velocity = kr_pose_identity();
            }
            kr_model_snapshot_release(&snap);
        }
        double t6 = kr_now();
        if (good) kr_model_integrate(model, &pyr.level[fuse_level], &pose, frame.index);
        double t7 = kr_now();
        add(&st[ST_FUSE], 1e3 * (t7 - t6));
        kr_model_device_times times;
        kr_model_last_device_times(model, &times);
        if (device_fusion && good) add(&st[ST_FUSE_DEVICE], times.integrate_ms);
        if (!have_model || frame.index % (uint64_t)cfg->rebuild_every == 0) {
            double t8 = kr_now();
            kr_model_request_snapshot(model, frame.index);
            add(&st[ST_SNAPSHOT], 1e3 * (kr_now() - t8));
            kr_model_last_device_times(model, &times);
            if (device_fusion && times.gather_ms > 0) add(&st[ST_GATHER_DEVICE], times.gather_ms);
            if (device_trees && times.tree.build_ms > 0)
                add(&st[ST_TREE_DEVICE], times.tree.build_ms);
        }
        /* Depth image in (upload) to pose on the host: preprocess + track. */
        if (have_model) add(&st[ST_POSE], 1e3 * ((t2 - t1) + (t4 - t3)));
        /* A frame's cost on the tracker thread: preprocess + track + fuse
         * (the tree build runs in the background in the pipeline). */
        add(&st[ST_FRAME], 1e3 * ((t2 - t1) + (t4 - t3) + (t7 - t6)));
        (*frames)++;
        kr_frame_release(&frame);
    }
done:
    kr_pyramid_free(&pyr);
    kr_model_destroy(&model);
    kr_device_destroy(&dev);
    kr_source_destroy(&src);
    return s;
}

typedef struct {
    kr_pipeline_config cfg;
    const char *output_path; /* -o: the JSON report, also */
    bool json, run_pipeline, quiet;
} bench_options;

#define BENCH_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                               \
    TEXT(KR_HELP("usage: kinreg bench [OPTIONS] [SOURCE]\n\n"                                      \
                 "Times each stage per frame (median over frames) on SOURCE with the chosen "      \
                 "backend;\n"                                                                      \
                 "the first 300 frames unless -n says otherwise.\n\n"))                            \
    OPT(OUTPUT, ('o', "output", "FILE", KR_TEXT), o->output_path = arg,                            \
        KR_HELP("also write the results as one JSON object to FILE (whole\n"                       \
                "or not at all)"))                                                                 \
    OPT(JSON, KR_OPT_JSON, o->json = true,                                                         \
        KR_HELP("the results as one JSON object on standard output (the\n"                         \
                "table goes to stderr instead)"))                                                  \
    OPT(PIPELINE, (0, "pipeline", NULL, KR_FLAG), o->run_pipeline = true,                          \
        KR_HELP("also run the threaded pipeline for end-to-end frames/s"))                         \
    GROUP(kr_pipeline_option_table, cfg, KR_SHOW_ALL)                                              \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true,                                                      \
        KR_HELP("no progress line (bench prints only its results)"))                               \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))
KR_OPTION_TABLE(bench_option_table, BENCH_OPTIONS, bench_options, o, NULL);

/* The pipeline's help without the output options, which bench does not use. */
static const kr_command bench_command = {"bench", &bench_option_table, KR_HELP_LAYOUT_DEFAULT,
                                         KR_PIPELINE_HELP_NO_OUTPUTS, NULL};

/* Options run and demo take that bench would silently ignore. */
static bool refuse_unused(const kr_pipeline_config *cfg, const kr_pipeline_config *def)
{
    const char *unused = cfg->trajectory_path                         ? "--trajectory"
                         : cfg->model_path                            ? "--save-model"
                         : cfg->publish.endpoint                      ? "--publish"
                         : cfg->rate != def->rate                     ? "--rate"
                         : cfg->publish_wait_s != def->publish_wait_s ? "--wait-subscriber"
                                                                      : NULL;
    if (!unused) return true;
    fprintf(stderr,
            "kinreg bench: %s is not used by bench (it times the stages on frames read as fast as "
            "possible; use kinreg run)\n",
            unused);
    return false;
}

typedef struct {
    const char *source, *device;
    int frames, lost;
    const double *med, *tail;
    bool pipeline;
    const kr_pipeline_stats *ps;
    double per_attempt;
} bench_results;

static void print_json(FILE *f, const bench_results *r)
{
    fprintf(f,
            "{\"source\": \"%s\", \"device\": \"%s\", \"frames\": %d, \"lost\": %d, "
            "\"median_ms\": {",
            r->source, r->device, r->frames, r->lost);
    for (int i = 0; i < ST_COUNT; i++)
        fprintf(f, "%s\"%s\": %.4f", i ? ", " : "", stage_keys[i], r->med[i]);
    fprintf(f, "}, \"p99_ms\": {");
    for (int i = 0; i < ST_COUNT; i++)
        fprintf(f, "%s\"%s\": %.4f", i ? ", " : "", stage_keys[i], r->tail[i]);
    fprintf(f, "}, \"tracker_fps\": %.2f", r->med[ST_FRAME] > 0 ? 1e3 / r->med[ST_FRAME] : 0);
    if (r->pipeline)
        fprintf(f,
                ", \"pipeline_fps\": %.2f, \"recovery_ms_mean\": %.3f, \"losses\": %llu, "
                "\"losses_ended\": %llu, \"losses_ended_within_3\": %llu, \"recoveries\": %llu, "
                "\"recovery_failures\": %llu",
                r->ps->fps, r->per_attempt, (unsigned long long)r->ps->losses,
                (unsigned long long)r->ps->losses_ended,
                (unsigned long long)r->ps->losses_ended_fast, (unsigned long long)r->ps->recoveries,
                (unsigned long long)r->ps->recovery_failures);
    fprintf(f, "}\n");
}

/* -o FILE: the report whole or not at all. */
static bool write_report(const char *path, const bench_results *r)
{
    kr_output_file out;
    if (!kr_output_file_open(&out, "kinreg bench", "the JSON report", path)) return false;
    print_json(out.f, r);
    return kr_output_file_commit(&out, "kinreg bench");
}

int kr_cmd_bench(int argc, char **argv)
{
    bench_options o = {.output_path = NULL};
    kr_pipeline_config_default(&o.cfg);
    o.cfg.source.max_frames = 300;
    int rc = kr_command_parse(&bench_command, argc, argv, &o);
    if (rc >= 0) return rc;
    kr_pipeline_config cfg = o.cfg;
    kr_pipeline_config def;
    kr_pipeline_config_default(&def);
    if (!refuse_unused(&cfg, &def)) return KR_EXIT_USAGE;
    /* `--json FILE` wrote FILE until --json became the flag it is in every
     * command: FILE now arrives as an operand. */
    bool json_file =
        o.json && optind < argc &&
        (optind + 1 < argc || !strcmp(argv[optind], "-") || strstr(argv[optind], ".json") != NULL);
    if (json_file)
        return kr_command_usage_error(&bench_command,
                                      "--json takes no file: it prints JSON on standard output, "
                                      "as in every command; write the report to a file with -o %s",
                                      argv[argc - 1]);
    if (optind + 1 < argc)
        return kr_command_usage_error(&bench_command, "unexpected argument '%s'", argv[optind + 1]);
    if (o.output_path && !kr_output_writable("kinreg bench", "--output", o.output_path))
        return KR_EXIT_USAGE;
    bool run_pipeline = o.run_pipeline;
    if (optind < argc) cfg.source.uri = argv[optind++];

    samples st[ST_COUNT];
    memset(st, 0, sizeof st);
    int frames = 0, lost = 0;
    char device_name[256] = "";
    if (!o.quiet)
        fprintf(stderr, "kinreg bench: timing stages on %s ...\n",
                cfg.source.uri ? cfg.source.uri : "synthetic");
    kr_status s = bench_stages(&cfg, st, &frames, &lost, device_name, sizeof device_name);
    if (s != KR_OK) {
        fprintf(stderr, "kinreg bench: %s: %s\n", kr_strerror(s), kr_last_error());
        return KR_EXIT_FAILURE;
    }
    double med[ST_COUNT], tail[ST_COUNT];
    for (int i = 0; i < ST_COUNT; i++) {
        med[i] = median(&st[i]);
        tail[i] = p99(&st[i]);
    }

    double pipeline_fps = 0;
    kr_pipeline_stats ps;
    memset(&ps, 0, sizeof ps);
    if (run_pipeline) {
        kr_pipeline *p = NULL;
        if ((s = kr_pipeline_create(&p, &cfg)) == KR_OK) s = kr_pipeline_run(p);
        if (s != KR_OK) {
            fprintf(stderr, "kinreg bench: pipeline: %s: %s\n", kr_strerror(s), kr_last_error());
        } else {
            kr_pipeline_get_stats(p, &ps);
            pipeline_fps = ps.fps;
        }
        kr_pipeline_destroy(&p);
    }

    const char *src_name = cfg.source.uri ? cfg.source.uri : "synthetic";
    /* Recovery runs in the pipeline only (the stage loop above has none). */
    uint64_t attempts = ps.recoveries + ps.recovery_failures;
    double per_attempt = attempts ? ps.recovery_ms_total / (double)attempts : 0;
    FILE *table = o.json ? stderr : stdout;
    fprintf(table, "kinreg bench: source %s, %d frames (LOST %d), backend %s\n", src_name, frames,
            lost, device_name);
    fprintf(table, "%-24s %10s %10s %8s\n", "stage", "median ms", "p99 ms", "samples");
    /* A stage with no samples did not run here (the device's on the CPU). */
    for (int i = 0; i < ST_COUNT; i++)
        if (st[i].n)
            fprintf(table, "%-24s %10.3f %10.3f %8zu\n", stage_names[i], med[i], tail[i], st[i].n);
    fprintf(table, "%-24s %10.1f\n", "tracker frames/s",
            med[ST_FRAME] > 0 ? 1e3 / med[ST_FRAME] : 0);
    if (run_pipeline) {
        fprintf(table, "%-24s %10.1f\n", "pipeline frames/s", pipeline_fps);
        fprintf(table, "%-24s %10.3f %8llu\n", "recovery (per attempt)", per_attempt,
                (unsigned long long)attempts);
        fprintf(table,
                "pipeline: loss events %llu, ended %llu (%llu within 3 frames); recovery "
                "searches %llu found the pose, %llu failed\n",
                (unsigned long long)ps.losses, (unsigned long long)ps.losses_ended,
                (unsigned long long)ps.losses_ended_fast, (unsigned long long)ps.recoveries,
                (unsigned long long)ps.recovery_failures);
    }
    bench_results r = {src_name, device_name,  frames, lost,       med,
                       tail,     run_pipeline, &ps,    per_attempt};
    if (o.json) print_json(stdout, &r); /* checked at exit, as every command's stdout */
    int code = KR_EXIT_OK;
    if (o.output_path && !write_report(o.output_path, &r)) code = KR_EXIT_OUTPUT;
    for (int i = 0; i < ST_COUNT; i++)
        free(st[i].v);
    return code;
}
