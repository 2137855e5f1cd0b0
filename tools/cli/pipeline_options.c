/* Parsing of the options shared by run, demo and bench. */
#include "pipeline_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "number_option.h"
#include "option_error.h"

void kr_pipeline_options_help(FILE *out)
{
    kr_pipeline_options_help_for(out, true);
}

void kr_pipeline_options_help_for(FILE *out, bool outputs)
{
    kr_pipeline_config d;
    kr_pipeline_config_default(&d);
    fprintf(out, "%s", outputs ? "source and output:\n" : "source:\n");
    fprintf(out, "  -s, --source URI        synthetic[:SEED] | tum:DIR | fakenect:DIR | DIR (TUM "
                 "or fakenect)\n"
                 "                          | kinect[:N|:SERIAL] live sensor (default synthetic)\n"
                 "  -n, --frames N          stop after N frames (default: the whole source; alias "
                 "--max-frames)\n");
    if (outputs)
        fprintf(
            out,
            "  -r, --rate max|FACTOR   max = as fast as possible (default); 1.0 = recorded timing\n"
            "                          (replays only: a sensor sets its own pace)\n");
    fprintf(out,
            "      --intrinsics NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3]\n"
            "                          preset fr1 fr2 fr3 default kinect, or explicit pinhole "
            "values with\n"
            "                          optional Brown-Conrady distortion (OpenCV order)\n"
            "      --depth-scale S     raw units per metre for 16-bit PNG depth (TUM: 5000)\n"
            "      --skip-bad          skip and count corrupt frames instead of stopping\n"
            "      --seed N            synthetic scene and trajectory seed (default 1)\n"
            "      --duration SEC      synthetic sequence length (default 30)\n"
            "      --every K           deliver only every K-th frame of any source (alias --stride):\n"
            "                          a camera moving K times faster\n"
            "      --jumps N           synthetic: N sudden camera jumps, seeded, spread through the\n"
            "                          sequence (away from the path, back at the next jump)\n"
            "      --jump-angle DEG    synthetic: a jump turns by half to all of DEG (default %g)\n"
            "      --jump-distance M   synthetic: and moves by half to all of M metres (default %g)\n"
            "      --covered N         synthetic: N covered-sensor stretches (no valid depth)\n"
            "      --covered-frames K  synthetic: frames per covered stretch (default %d)\n"
            "      --depth-mode M      kinect: 11bit (raw disparity, default) | mm | registered\n"
            "      --stall-timeout SEC kinect: a sensor silent this long ends the run with exit\n"
            "                          status 3 (default %g)\n",
            d.source.jump_angle_deg, d.source.jump_distance_m, d.source.covered_frames,
            d.source.stall_timeout_s);
    if (outputs)
        fprintf(
            out,
            "  -t, --trajectory FILE   write poses as a TUM trajectory while tracking\n"
            "  -m, --save-model FILE   write the model (PLY, points and normals) at the end\n"
            "  -p, --publish ENDPOINT  ZeroMQ PUB endpoint, e.g. tcp://*:5555 (default: none)\n"
            "      --wait-subscriber SEC  before the first frame, wait up to SEC for a subscriber\n"
            "                          (ZeroMQ drops what is sent before one has joined)\n"
            "      --model-period SEC  publish a model snapshot for viewers every SEC seconds, "
            "only\n"
            "                          while one subscribes to `model` (default %g; 0 = never)\n"
            "      --model-points N    at most N points per model snapshot (default %d)\n"
            "      --trajectory-refined FILE  with --refine on: every frame's pose corrected by "
            "its\n"
            "                          keyframe's refined motion (TUM), written when the run ends\n"
            "      --trajectory-final FILE  the trajectory as known when the run ends (TUM): LOST\n"
            "                          frames before a recovery tracked backwards from it against\n"
            "                          the final model, covered ones interpolated; the rest keep\n"
            "                          their published pose; the poses it changes go to\n"
            "                          subscribers on the topic 'final' (docs/PROTOCOL.md)\n"
            "      --fill off|on       the final trajectory's filling and its 'final' messages\n"
            "                          without a file (default off; on with --trajectory-final)\n"
            "      --fill-frames N     for the filling, keep the depth of at most N LOST frames,\n"
            "                          the oldest dropped first (default %zu, about 0.6 MB each\n"
            "                          at 640x480)\n",
            d.model_period_s, d.model_points, d.fill_frames);
    if (outputs) kr_curve_options_help(out);
    fprintf(
        out,
        "compute:\n"
        "  -b, --backend B         auto | cpu | cuda (default auto: CUDA when a GPU is present)\n"
        "      --threads N         OpenMP threads (default: all cores)\n"
        "      --deterministic     repeatable runs: bit-identical poses for the same source,\n"
        "                          options and --threads (snapshots built in step, fixed\n"
        "                          reduction order; a little slower)\n"
        "      --finest-level L    finest pyramid level tracked, 0 = 640x480 (default %d)\n"
        "      --voxel M           model voxel size in metres (default %g)\n"
        "      --exact-nn          exact nearest neighbours instead of k-d cell descent\n"
        "      --iterations N,N,..  Newton steps per level, finest first (default %d,%d,%d)\n"
        "      --gate M            reject pairs farther apart than M metres at the finest level "
        "(default %g)\n"
        "      --active-window N   model voxels seen in the last N frames are tracked against "
        "(default %d)\n"
        "      --rebuild-every N   frames between model snapshot rebuilds (default %d)\n",
        d.track.finest_level, (double)d.model.voxel_size, d.track.iterations[0],
        d.track.iterations[1], d.track.iterations[2], (double)d.track.gate, d.model.active_window,
        d.rebuild_every);
    fprintf(out,
            "      --model-memory MIB  cap on the model's voxel map (default %g MiB, 0 = none): past it\n"
            "                          voxels unseen for %d frames and over %g m from the camera\n"
            "                          are evicted, oldest first (--save-model has what is left)\n",
            d.model.memory_mib, d.model.evict_after, (double)d.model.evict_distance);
    fprintf(out,
            "      --recover M         after a loss: emicp (EM-ICP of the frame against the model\n"
            "                          near the last good pose, then the newton search, default)\n"
            "                          | newton (wide-basin search from the last good pose and\n"
            "                          rotated seeds) | softassign | off\n"
            "      --recover-after N   N POOR frames in a row count as a loss (default %d)\n"
            "      --recover-radius M  emicp / softassign register the frame's and the model's\n"
            "                          points within M metres of the camera (default %g; raise it\n"
            "                          for a scene seen mostly beyond it)\n",
            d.recover.after_poor, (double)d.recover.model_radius);
    fprintf(
        out,
        "      --refine off|on     live refiner: keyframes every %g m or %g deg while tracking is\n"
        "                          GOOD, refined jointly with distance fields on a thread of\n"
        "                          its own; refined keyframe poses on the topic 'refine'\n"
        "                          (default off: on 2 cores it takes a core from tracking)\n"
        "      --refine-window K   keyframes refined together, the oldest fixed (default %d, "
        "2..64)\n"
        "      --refine-every M    a refinement every M new keyframes (default %d, 1..K)\n"
        "      --refine-refuse D   re-fuse the model from the newest 32 keyframes at their\n"
        "                          refined poses when a refinement moves one by D m or more\n"
        "                          (default %g = never; the model then holds only what those\n"
        "                          keyframes saw)\n",
        d.refine.keyframe_distance, d.refine.keyframe_angle_deg, d.refine.window, d.refine.every,
        d.refine.refuse_distance);
    fprintf(
        out,
        "      --depth-step A      depth noise that grows as z^2: the sensor's depth step at z is\n"
        "                          A*z^2 (default %g, Kinect v1); normals take wider baselines "
        "and\n"
        "                          far points wider gates and less weight; 0 turns this off\n",
        (double)d.track.depth_step);
}

/* Range-checked before any conversion (number_option.h); one line names the
 * option, the value and the allowed range. */
static int parse_number(const kr_number_rule *r, const char *arg, double *out)
{
    return kr_number_option("kinreg", r, arg, out) ? 1 : -1;
}

static const kr_number_rule
    rule_every = {"--every", 1, 100000, false, true, "K (every K-th frame)", NULL},
    rule_jumps = {"--jumps", 0, 100000, false, true, "jumps", NULL},
    rule_jump_angle = {"--jump-angle", 0, 180, false, false, "degrees", NULL},
    rule_jump_distance = {"--jump-distance", 0, 100, false, false, "metres", NULL},
    rule_covered = {"--covered", 0, 100000, false, true, "stretches", NULL},
    rule_covered_frames = {"--covered-frames", 1, 100000, false, true, "frames", NULL},
    rule_recover_after = {"--recover-after",     0, 100000, false, true, "POOR frames",
                          "0 = only LOST frames"},
    rule_recover_radius = {"--recover-radius", 0.1, 100, false, false, "metres", NULL},
    rule_frames = {"--frames", 1, INT_MAX, false, true, "frames", NULL},
    /* below a millimetre the voxel map cannot hold a scene (and 1e-30 empties it) */
    rule_voxel = {"--voxel", 0.001, 10, false, false, "a voxel size in metres", NULL},
    rule_depth_scale = {"--depth-scale",       0.001,      1e9, false, false,
                        "raw units per metre", "TUM: 5000"},
    rule_seed = {"--seed", 0, 4294967295.0, false, true, "a seed", NULL},
    rule_duration = {"--duration", 0, 86400, true, false, "seconds", NULL},
    rule_threads = {"--threads", 0, 4096, false, true, "threads", "0 = all cores"},
    rule_active_window = {"--active-window", 1, INT_MAX, false, true, "frames", NULL},
    rule_rebuild = {"--rebuild-every", 1, INT_MAX, false, true, "frames", NULL},
    rule_gate = {"--gate", 0, 100, true, false, "a distance in metres", NULL},
    rule_depth_step =
        {"--depth-step", 0, 1, false, false, "a coefficient", "0 turns the noise model off"},
    rule_stall = {"--stall-timeout", 0.01, 86400, false, false, "seconds", NULL},
    rule_wait = {"--wait-subscriber", 0, 86400, false, false, "seconds", NULL},
    /* a factor below 1e-3 turns a 1 s gap into more than 15 minutes (and 1e-300 overflowed the
       pacing) */
    rule_model_period = {"--model-period",        0, 86400, false, false, "seconds",
                         "0 = no model snapshots"},
    rule_model_points = {"--model-points", 1, 100000000, false, true, "points", NULL},
    rule_refine_every = {"--refine-every",         1, 64, false, true, "keyframes",
                         "at most --refine-window"},
    rule_refine_window = {"--refine-window", 2, 64, false, true, "keyframes", NULL},
    rule_fill_frames = {"--fill-frames", 0, 1000000, false, true, "frames", NULL},
    rule_refine_refuse = {"--refine-refuse", 0, 100, false, false, "metres", "0 = never"},
    rule_model_memory = {"--model-memory", 0, 1048576, false, false, "MiB", "0 = no cap"},
    rule_rate = {
        "--rate", 0.001, 1000, false, false, "a speed factor", "or max; 1.0 = recorded timing"};

/* Explicit intrinsics: pixels for a sensor of at most 8192x8192 and distortion
 * coefficients of real lenses, so no value overflows the float it fills (1e30
 * once gave an empty model and identity poses without a word). */
static const kr_number_rule rule_focal = {"--intrinsics",     1,   100000, false, false,
                                          "fx, fy in pixels", NULL},
                            rule_centre = {"--intrinsics",     -100000, 100000, false, false,
                                           "cx, cy in pixels", NULL},
                            rule_distortion = {"--intrinsics",       -1000, 1000, false, false,
                                               "k1, k2, p1, p2, k3", NULL};

/* fx,fy,cx,cy[,k1,k2,p1,p2,k3]: 4 or 9 numbers, each checked. 1 parsed, 0
 * not of this form, -1 a value out of range (its line printed). */
static int parse_explicit_intrinsics(const char *arg, kr_intrinsics *out)
{
    double v[9];
    int n = 0;
    const char *p = arg;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno == ERANGE || (*end != ',' && *end) || n == 9) return 0;
        v[n++] = x;
        if (!*end) break;
        p = end + 1;
    }
    if (n != 4 && n != 9) return 0;
    for (int i = 0; i < n; i++) {
        const kr_number_rule *r = i < 2 ? &rule_focal : i < 4 ? &rule_centre : &rule_distortion;
        if (!kr_number_in_range(r, v[i])) {
            kr_number_refuse("kinreg", r, arg);
            return -1;
        }
    }
    kr_intrinsics c = {.width = 640, .height = 480};
    float *dst[9] = {&c.fx, &c.fy, &c.cx, &c.cy, &c.k1, &c.k2, &c.p1, &c.p2, &c.k3};
    for (int i = 0; i < n; i++)
        *dst[i] = (float)v[i];
    *out = c;
    return 1;
}

int kr_intrinsics_option(kr_source_config *src, const char *arg)
{
    kr_intrinsics k;
    if (kr_intrinsics_preset(arg, &k) == KR_OK) {
        src->intrinsics = arg;
        src->override_intrinsics = false;
        return 1;
    }
    kr_intrinsics c;
    int parsed = parse_explicit_intrinsics(arg, &c);
    if (parsed < 0) return -1;
    if (parsed > 0) {
        src->override_intrinsics = true;
        src->custom = c;
        src->intrinsics = NULL;
        return 1;
    }
    fprintf(stderr,
            "kinreg: --intrinsics '%s' is not allowed: expected fr1, fr2, fr3, default, kinect, "
            "fx,fy,cx,cy or fx,fy,cx,cy,k1,k2,p1,p2,k3\n",
            arg);
    return -1;
}

int kr_pipeline_option(kr_pipeline_config *cfg, int opt, const char *arg)
{
    int curve = kr_curve_option(cfg, opt, arg); /* tools/cli/curve_options.c */
    if (curve) return curve;
    double v;
    switch (opt) {
    case 's':
        cfg->source.uri = arg;
        return 1;
    case 'b':
        if (kr_backend_parse(arg, &cfg->device.backend) != KR_OK) {
            fprintf(stderr, "kinreg: --backend '%s' is not allowed: expected auto, cpu or cuda\n", arg);
            return -1;
        }
        return 1;
    case 'p':
        cfg->publish.endpoint = arg;
        return 1;
    case 't':
        cfg->trajectory_path = arg;
        return 1;
    case 'm':
        cfg->model_path = arg;
        return 1;
    case 'r':
        if (!strcmp(arg, "max")) {
            cfg->rate = 0;
            return 1;
        }
        if (parse_number(&rule_rate, arg, &v) < 0) return -1;
        cfg->rate = v;
        return 1;
    case 'n':
        if (parse_number(&rule_frames, arg, &v) < 0) return -1;
        cfg->source.max_frames = (int)v;
        return 1;
    case 1001:
        return kr_intrinsics_option(&cfg->source, arg);
    case 1002:
        if (parse_number(&rule_depth_scale, arg, &v) < 0) return -1;
        cfg->source.depth_scale = (float)v;
        return 1;
    case 1003:
        cfg->source.skip_bad = true;
        return 1;
    case 1004: {
        kr_number_rule r = {"--finest-level",  0,   cfg->preprocess.levels - 1, false, true,
                            "a pyramid level", NULL};
        if (parse_number(&r, arg, &v) < 0) return -1;
        cfg->track.finest_level = (int)v;
        cfg->fuse_level = (int)v;
        return 1;
    }
    case 1005:
        if (parse_number(&rule_voxel, arg, &v) < 0) return -1;
        cfg->model.voxel_size = (float)v;
        return 1;
    case 1006:
        if (parse_number(&rule_seed, arg, &v) < 0) return -1;
        cfg->source.seed = (unsigned)v;
        return 1;
    case 1007:
        if (parse_number(&rule_duration, arg, &v) < 0) return -1;
        cfg->source.duration_s = v;
        return 1;
    case 1008:
        if (parse_number(&rule_threads, arg, &v) < 0) return -1;
        cfg->device.cpu_threads = (int)v;
        return 1;
    case 1009:
        cfg->track.exact_nn = true;
        return 1;
    case 1023:
        cfg->deterministic = true;
        return 1;
    case 1060:
        if (parse_number(&rule_model_memory, arg, &v) < 0) return -1;
        cfg->model.memory_mib = v;
        return 1;
    case 1010:
        if (parse_number(&rule_active_window, arg, &v) < 0) return -1;
        cfg->model.active_window = (int)v;
        return 1;
    case 1012:
        if (parse_number(&rule_gate, arg, &v) < 0) return -1;
        cfg->track.gate = (float)v;
        return 1;
    case 1013: {
        int it[KR_MAX_LEVELS] = {0};
        int n = 0;
        const char *p = arg;
        bool ok = true;
        while (ok && n < KR_MAX_LEVELS) {
            char *end;
            errno = 0;
            long c = strtol(p, &end, 10);
            ok = end != p && errno != ERANGE && c >= 0 && c <= 1000 && (*end == ',' || !*end);
            if (!ok) break;
            it[n++] = (int)c;
            if (!*end) break;
            p = end + 1;
        }
        if (!ok || n == 0 || (n == KR_MAX_LEVELS && strchr(p, ','))) {
            fprintf(stderr,
                    "kinreg: --iterations '%s' is not allowed: expected up to %d counts 0..1000 "
                    "separated by commas, finest level first, like 6,5,4\n",
                    arg, KR_MAX_LEVELS);
            return -1;
        }
        for (int i = 0; i < KR_MAX_LEVELS; i++) cfg->track.iterations[i] = i < n ? it[i] : it[n - 1];
        return 1;
    }
    case 1011:
        if (parse_number(&rule_rebuild, arg, &v) < 0) return -1;
        cfg->rebuild_every = (int)v;
        return 1;
    case 1014:
        if (parse_number(&rule_depth_step, arg, &v) < 0) return -1;
        cfg->preprocess.depth_step = (float)v;
        cfg->track.depth_step = (float)v;
        return 1;
    case 1030:
        if (parse_number(&rule_every, arg, &v) < 0) return -1;
        cfg->source.stride = (int)v;
        return 1;
    case 1031:
        if (parse_number(&rule_jumps, arg, &v) < 0) return -1;
        cfg->source.jumps = (int)v;
        return 1;
    case 1032:
        if (parse_number(&rule_jump_angle, arg, &v) < 0) return -1;
        cfg->source.jump_angle_deg = v;
        return 1;
    case 1033:
        if (parse_number(&rule_jump_distance, arg, &v) < 0) return -1;
        cfg->source.jump_distance_m = v;
        return 1;
    case 1034:
        if (parse_number(&rule_covered, arg, &v) < 0) return -1;
        cfg->source.covered = (int)v;
        return 1;
    case 1035:
        if (parse_number(&rule_covered_frames, arg, &v) < 0) return -1;
        cfg->source.covered_frames = (int)v;
        return 1;
    case 1036:
        if (kr_recover_method_parse(arg, &cfg->recover.method) != KR_OK) {
            fprintf(stderr,
                    "kinreg: --recover '%s' is not allowed: expected emicp, newton, softassign or "
                    "off\n",
                    arg);
            return -1;
        }
        return 1;
    case 1037:
        if (parse_number(&rule_recover_after, arg, &v) < 0) return -1;
        cfg->recover.after_poor = (int)v;
        return 1;
    case 1038:
        if (parse_number(&rule_recover_radius, arg, &v) < 0) return -1;
        cfg->recover.model_radius = (float)v;
        return 1;
    case 1050:
        if (strcmp(arg, "on") && strcmp(arg, "off")) {
            fprintf(stderr, "kinreg: --refine '%s' is not allowed: expected on or off\n", arg);
            return -1;
        }
        cfg->refine.enabled = !strcmp(arg, "on");
        return 1;
    case 1051:
        if (parse_number(&rule_refine_window, arg, &v) < 0) return -1;
        cfg->refine.window = (int)v;
        return 1;
    case 1052:
        /* The pair (every <= window) is checked when the pipeline is created. */
        if (parse_number(&rule_refine_every, arg, &v) < 0) return -1;
        cfg->refine.every = (int)v;
        return 1;
    case 1053:
        cfg->trajectory_refined_path = arg;
        return 1;
    case 1055:
        cfg->trajectory_final_path = arg;
        return 1;
    case 1056:
        if (parse_number(&rule_fill_frames, arg, &v) < 0) return -1;
        cfg->fill_frames = (size_t)v;
        return 1;
    case 1057:
        if (strcmp(arg, "on") && strcmp(arg, "off")) {
            fprintf(stderr, "kinreg: --fill '%s' is not allowed: expected on or off\n", arg);
            return -1;
        }
        cfg->fill_lost = !strcmp(arg, "on");
        return 1;
    case 1054:
        if (parse_number(&rule_refine_refuse, arg, &v) < 0) return -1;
        cfg->refine.refuse_distance = v;
        return 1;
    case 1020:
        if (kr_kinect_depth_mode_parse(arg, &cfg->source.depth_mode) != KR_OK) {
            fprintf(stderr, "kinreg: --depth-mode '%s' is not allowed: expected 11bit, mm or registered\n",
                    arg);
            return -1;
        }
        return 1;
    case 1021:
        if (parse_number(&rule_stall, arg, &v) < 0) return -1;
        cfg->source.stall_timeout_s = v;
        return 1;
    case 1022:
        if (parse_number(&rule_wait, arg, &v) < 0) return -1;
        cfg->publish_wait_s = v;
        return 1;
    case 1040:
        if (parse_number(&rule_model_period, arg, &v) < 0) return -1;
        cfg->model_period_s = v;
        return 1;
    case 1041:
        if (parse_number(&rule_model_points, arg, &v) < 0) return -1;
        cfg->model_points = (int)v;
        return 1;
    }
    return 0;
}

int kr_parse_command(int argc, char **argv, kr_pipeline_config *cfg, const kr_command_options *own)
{
    static const struct option shared[] = {KR_PIPELINE_LONG_OPTIONS};
    enum { MAX_OPTIONS = 64 };
    struct option longopts[MAX_OPTIONS];
    size_t n = 0;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) longopts[n++] = shared[i];
    for (const struct option *o = own->longopts; o && o->name && n < MAX_OPTIONS - 2; o++) longopts[n++] = *o;
    longopts[n++] = (struct option){"help", no_argument, 0, 'h'};
    longopts[n] = (struct option){0, 0, 0, 0};
    char shortopts[64];
    snprintf(shortopts, sizeof shortopts, ":%s%sh", KR_PIPELINE_SHORT_OPTIONS, own->shortopts ? own->shortopts : "");

    int opt;
    optind = 1;
    opterr = 0; /* kr_option_error prints one line instead */
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (opt == '?' || opt == ':') return kr_option_error(argv[0], argc, argv, opt);
        int handled = kr_pipeline_option(cfg, opt, optarg);
        if (handled < 0) return KR_EXIT_USAGE;
        if (handled) continue;
        if (opt == 'h') {
            own->help(stdout);
            return KR_EXIT_OK;
        }
        if (!own->apply || own->apply(opt, optarg, own->user) < 0) return KR_EXIT_USAGE;
    }
    return -1;
}
