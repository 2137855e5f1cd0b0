/* Parsing of the options shared by run, demo and bench. */
#include "pipeline_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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
            "      --model-period SEC  publish a model snapshot for viewers every SEC seconds, only\n"
            "                          while one subscribes to `model` (default %g; 0 = never)\n"
            "      --model-points N    at most N points per model snapshot (default %d)\n"
            "      --trajectory-refined FILE  with --refine on: every frame's pose corrected by its\n"
            "                          keyframe's refined motion (TUM), written when the run ends\n",
            d.model_period_s, d.model_points);
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
            "      --recover M         after a loss: newton (wide-basin search from the last good "
            "pose\n"
            "                          and rotated seeds, default) | emicp | softassign | off\n"
            "      --recover-after N   N POOR frames in a row count as a loss (default %d)\n",
            d.recover.after_poor);
    fprintf(out,
            "      --refine off|on     live refiner: keyframes every %g m or %g deg while tracking is\n"
            "                          GOOD, refined jointly with distance fields on a thread of\n"
            "                          its own; refined keyframe poses on the topic 'refine'\n"
            "                          (default off: on 2 cores it takes a core from tracking)\n"
            "      --refine-window K   keyframes refined together, the oldest fixed (default %d, 2..64)\n"
            "      --refine-every M    a refinement every M new keyframes (default %d, 1..K)\n",
            d.refine.keyframe_distance, d.refine.keyframe_angle_deg, d.refine.window, d.refine.every);
    fprintf(
        out,
        "      --depth-step A      depth noise that grows as z^2: the sensor's depth step at z is\n"
        "                          A*z^2 (default %g, Kinect v1); normals take wider baselines "
        "and\n"
        "                          far points wider gates and less weight; 0 turns this off\n",
        (double)d.track.depth_step);
}

/* What one numeric option allows: [lo, hi] (lo excluded when lo_open),
 * whole numbers only when integer, and the words the error line uses. */
typedef struct {
    const char *name;
    double lo, hi;
    bool lo_open, integer;
    const char *allowed;
} number_rule;

/* Parses and range-checks before any conversion, so a value like 1e12 for a
 * count is refused instead of overflowing an int. One line names the option,
 * the value and what is allowed. */
static int parse_number(const number_rule *r, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    bool ok = end != arg && !*end && isfinite(v) && errno != ERANGE && (r->lo_open ? v > r->lo : v >= r->lo) &&
              v <= r->hi && (!r->integer || v == floor(v));
    if (!ok) {
        fprintf(stderr, "kinreg: %s '%s' is not allowed: expected %s\n", r->name, arg, r->allowed);
        return -1;
    }
    *out = v;
    return 1;
}

static const number_rule
    rule_every = {"--every", 1, 100000, false, true, "a whole number K >= 1"},
    rule_jumps = {"--jumps", 0, 100000, false, true, "a whole number of jumps >= 0"},
    rule_jump_angle = {"--jump-angle", 0, 180, false, false, "degrees 0..180"},
    rule_jump_distance = {"--jump-distance", 0, 100, false, false, "metres 0..100"},
    rule_covered = {"--covered", 0, 100000, false, true, "a whole number of stretches >= 0"},
    rule_covered_frames = {"--covered-frames", 1, 100000, false, true, "a whole number of frames >= 1"},
    rule_recover_after = {"--recover-after", 0, 100000, false, true, "a whole number of POOR frames >= 0"},
    rule_frames = {"--frames", 1, INT_MAX, false, true, "a whole number of frames >= 1"},
    rule_voxel = {"--voxel", 0, 10, true, false, "a voxel size in metres, > 0 and <= 10"},
    rule_depth_scale = {"--depth-scale", 0, 1e9, true, false, "raw units per metre > 0 (TUM: 5000)"},
    rule_seed = {"--seed", 0, 4294967295.0, false, true, "a whole number 0..4294967295"},
    rule_duration = {"--duration", 0, 86400, true, false, "seconds > 0 (at most 86400)"},
    rule_threads = {"--threads", 0, 4096, false, true, "a whole number of threads, 0 = all cores"},
    rule_active_window = {"--active-window", 1, INT_MAX, false, true, "a whole number of frames >= 1"},
    rule_rebuild = {"--rebuild-every", 1, INT_MAX, false, true, "a whole number of frames >= 1"},
    rule_gate = {"--gate", 0, 100, true, false, "a distance in metres > 0"},
    rule_depth_step = {"--depth-step", 0, 1, false, false, "a coefficient >= 0 (0 turns the noise model off)"},
    rule_stall = {"--stall-timeout", 0, 86400, true, false, "seconds > 0"},
    rule_wait = {"--wait-subscriber", 0, 86400, false, false, "seconds >= 0"},
    rule_model_period = {"--model-period", 0, 86400, false, false, "seconds >= 0 (0 = no model snapshots)"},
    rule_model_points = {"--model-points", 1, 100000000, false, true, "a whole number of points >= 1"},
    rule_refine_every = {"--refine-every", 1, 64, false, true,
                         "a whole number of keyframes 1..64, at most --refine-window"},
    rule_refine_window = {"--refine-window", 2, 64, false, true, "a whole number of keyframes 2..64"},
    rule_rate = {"--rate", 0, 1000, true, false, "'max' or a positive speed factor (1.0 = recorded timing)"};

int kr_intrinsics_option(kr_source_config *src, const char *arg)
{
    kr_intrinsics k;
    if (kr_intrinsics_preset(arg, &k) == KR_OK) {
        src->intrinsics = arg;
        src->override_intrinsics = false;
        return 1;
    }
    kr_intrinsics c = {.width = 640, .height = 480};
    char tail;
    int n = sscanf(arg, "%f,%f,%f,%f,%f,%f,%f,%f,%f%c", &c.fx, &c.fy, &c.cx, &c.cy, &c.k1, &c.k2, &c.p1, &c.p2,
                   &c.k3, &tail);
    if ((n == 4 || n == 9) && c.fx > 0 && c.fy > 0 && isfinite(c.fx) && isfinite(c.fy) && isfinite(c.cx) &&
        isfinite(c.cy)) {
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
    int curve = kr_curve_option(cfg, opt, arg); /* tools/curve_options.c */
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
        char allowed[64];
        snprintf(allowed, sizeof allowed, "a pyramid level 0..%d", cfg->preprocess.levels - 1);
        number_rule r = {"--finest-level", 0, cfg->preprocess.levels - 1, false, true, allowed};
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
                    "kinreg: --recover '%s' is not allowed: expected newton, emicp, softassign or off\n", arg);
            return -1;
        }
        return 1;
    case 1037:
        if (parse_number(&rule_recover_after, arg, &v) < 0) return -1;
        cfg->recover.after_poor = (int)v;
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
