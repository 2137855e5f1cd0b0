/* The options shared by run, demo and bench (pipeline_options.h). */
#include "pipeline_options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common_options.h"
#include "curve_options.h"
#include "number_option.h"

/* The defaults the help text names. */
static const kr_pipeline_config *def(void)
{
    static kr_pipeline_config d;
    static bool filled;
    if (!filled) kr_pipeline_config_default(&d);
    filled = true;
    return &d;
}

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

/* --finest-level L: the range depends on the pyramid's levels. */
static bool finest_level_option(kr_pipeline_config *cfg, const char *who, const char *name,
                                const char *arg)
{
    kr_number_rule r = {name, 0, cfg->preprocess.levels - 1, false, true, "a pyramid level", NULL};
    double v;
    if (!kr_number_option(who, &r, arg, &v)) return false;
    cfg->track.finest_level = (int)v;
    cfg->fuse_level = (int)v;
    return true;
}

/* --iterations N,N,..: up to KR_MAX_LEVELS counts, the last repeated. */
static bool iterations_option(kr_pipeline_config *cfg, const char *who, const char *name,
                              const char *arg)
{
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
                "%s: %s '%s' is not allowed: expected up to %d counts 0..1000 separated by "
                "commas, finest level first, like 6,5,4\n",
                who, name, arg, KR_MAX_LEVELS);
        return false;
    }
    for (int i = 0; i < KR_MAX_LEVELS; i++)
        cfg->track.iterations[i] = i < n ? it[i] : it[n - 1];
    return true;
}

/* The synthetic source's: record and convert take them too. */
#define SYNTHETIC_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                           \
    OPT(DURATION, KR_OPT_DURATION, src->duration_s = v, KR_NO_HELP)                                \
    OPT(JUMPS, KR_OPT_JUMPS, src->jumps = (int)v, KR_NO_HELP)                                      \
    OPT(JUMP_ANGLE, KR_OPT_JUMP_ANGLE, src->jump_angle_deg = v, KR_NO_HELP)                        \
    OPT(JUMP_DISTANCE, KR_OPT_JUMP_DISTANCE, src->jump_distance_m = v, KR_NO_HELP)                 \
    OPT(COVERED, KR_OPT_COVERED, src->covered = (int)v, KR_NO_HELP)                                \
    OPT(COVERED_FRAMES, KR_OPT_COVERED_FRAMES, src->covered_frames = (int)v, KR_NO_HELP)
KR_OPTION_TABLE(kr_synthetic_option_table, SYNTHETIC_OPTIONS, kr_source_config, src, "kinreg");

#define OUTPUTS KR_PIPELINE_HELP_OUTPUTS
#define PIPELINE_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                            \
    TEXT(KR_HELP_IF(OUTPUTS, "source and output:\n"))                                              \
    TEXT(KR_HELP_IF(KR_PIPELINE_HELP_NO_OUTPUTS, "source:\n"))                                     \
    OPT(SOURCE, ('s', "source", "URI", KR_TEXT), cfg->source.uri = arg,                            \
        KR_HELP("synthetic[:SEED] | tum:DIR | fakenect:DIR | DIR (TUM or fakenect)\n"              \
                "| kinect[:N|:SERIAL] live sensor (default synthetic)"))                           \
    OPT(FRAMES, KR_OPT_FRAMES, cfg->source.max_frames = (int)v,                                    \
        KR_HELP_IF(OUTPUTS,                                                                        \
                   "stop after N frames (default: the whole source; alias --max-frames)"))         \
    MORE(KR_OPT_FRAMES, KR_HELP_IF(KR_PIPELINE_HELP_NO_OUTPUTS,                                    \
                                   "stop after N frames (default 300; alias --max-frames)"))       \
    ALIAS(FRAMES, "max-frames")                                                                    \
    /* a factor below 1e-3 turns a 1 s gap into more than 15 minutes (and 1e-300 overflowed the    \
       pacing) */                                                                                  \
    OPT(RATE,                                                                                      \
        ('r', "rate", "max|FACTOR",                                                                \
         KR_REAL_OR("max", 0, 0.001, 1000, "a speed factor", "or max; 1.0 = recorded timing")),    \
        cfg->rate = v,                                                                             \
        KR_HELP_IF(OUTPUTS, "max = as fast as possible (default); 1.0 = recorded timing\n"         \
                            "(replays only: a sensor sets its own pace)"))                         \
    OPT(INTRINSICS, KR_OPT_INTRINSICS,                                                             \
        KR_FAIL_UNLESS(kr_intrinsics_option(&cfg->source, arg) > 0),                               \
        KR_HELP("\npreset fr1 fr2 fr3 default kinect, or explicit pinhole values with\n"           \
                "optional Brown-Conrady distortion (OpenCV order)"))                               \
    OPT(DEPTH_SCALE,                                                                               \
        (0, "depth-scale", "S", KR_REAL(0.001, 1e9, "raw units per metre", "TUM: 5000")),          \
        cfg->source.depth_scale = (float)v,                                                        \
        KR_HELP("raw units per metre for 16-bit PNG depth (TUM: 5000)"))                           \
    OPT(SKIP_BAD, KR_OPT_SKIP_BAD, cfg->source.skip_bad = true,                                    \
        KR_HELP("skip and count corrupt frames instead of stopping"))                              \
    OPT(SEED, (0, "seed", "N", KR_WHOLE(0, 4294967295.0, "a seed", NULL)),                         \
        cfg->source.seed = (unsigned)v,                                                            \
        KR_HELP("synthetic scene and trajectory seed (default 1)"))                                \
    GROUP(kr_synthetic_option_table, source, KR_SHOW_NEVER)                                        \
    MORE(KR_OPT_DURATION, KR_HELP("synthetic sequence length (default 30)"))                       \
    OPT(EVERY, (0, "every", "K", KR_WHOLE(1, 100000, "K (every K-th frame)", NULL)),               \
        cfg->source.stride = (int)v,                                                               \
        KR_HELP("deliver only every K-th frame of any source (alias --stride):\n"                  \
                "a camera moving K times faster"))                                                 \
    ALIAS(EVERY, "stride")                                                                         \
    MORE(KR_OPT_JUMPS, KR_HELP("synthetic: N sudden camera jumps, seeded, spread through the\n"    \
                               "sequence (away from the path, back at the next jump)"))            \
    MORE(KR_OPT_JUMP_ANGLE, KR_HELP("synthetic: a jump turns by half to all of DEG (default %g)",  \
                                    def()->source.jump_angle_deg))                                 \
    MORE(KR_OPT_JUMP_DISTANCE,                                                                     \
         KR_HELP("synthetic: and moves by half to all of M metres (default %g)",                   \
                 def()->source.jump_distance_m))                                                   \
    MORE(KR_OPT_COVERED, KR_HELP("synthetic: N covered-sensor stretches (no valid depth)"))        \
    MORE(KR_OPT_COVERED_FRAMES, KR_HELP("synthetic: frames per covered stretch (default %d)",      \
                                        def()->source.covered_frames))                             \
    OPT(DEPTH_MODE, (0, "depth-mode", "M", KR_CHOICE("expected 11bit, mm or registered")),         \
        KR_REFUSE_UNLESS(kr_kinect_depth_mode_parse(arg, &cfg->source.depth_mode) == KR_OK),       \
        KR_HELP("kinect: 11bit (raw disparity, default) | mm | registered"))                       \
    OPT(STALL_TIMEOUT, (0, "stall-timeout", "SEC", KR_REAL(0.01, 86400, "seconds", NULL)),         \
        cfg->source.stall_timeout_s = v,                                                           \
        KR_HELP("kinect: a sensor silent this long ends the run with exit\n"                       \
                "status 3 (default %g)",                                                           \
                def()->source.stall_timeout_s))                                                    \
    OPT(TRAJECTORY, ('t', "trajectory", "FILE", KR_TEXT), cfg->trajectory_path = arg,              \
        KR_HELP_IF(OUTPUTS, "write poses as a TUM trajectory while tracking"))                     \
    OPT(SAVE_MODEL, ('m', "save-model", "FILE", KR_TEXT), cfg->model_path = arg,                   \
        KR_HELP_IF(OUTPUTS, "write the model (PLY, points and normals) at the end"))               \
    OPT(MESH, (0, "mesh", "FILE", KR_TEXT), cfg->mesh_path = arg,                                  \
        KR_HELP_IF(OUTPUTS, "write the surface at the end: a mesh (PLY with faces) of the\n"       \
                            "tracked frames fused on a thread of their own (frames it has no\n"    \
                            "time for are skipped; kinreg mesh fuses all of a replay)"))           \
    OPT(MESH_VOXEL, (0, "mesh-voxel", "M", KR_REAL(0.0001, 1, "metres", NULL)),                    \
        cfg->surface.voxel_size = (float)v,                                                        \
        KR_HELP_IF(OUTPUTS, "the surface's voxel size (default %g)",                               \
                   (double)def()->surface.voxel_size))                                             \
    OPT(MESH_MEMORY, (0, "mesh-memory", "MIB", KR_REAL(0, 1048576, "MiB", "0 = no cap")),          \
        cfg->surface.memory_mib = v,                                                               \
        KR_HELP_IF(OUTPUTS,                                                                        \
                   "the surface volume's memory cap (default %g; 0: none);\n"                      \
                   "past it new surface is not added and a warning says so",                       \
                   def()->surface.memory_mib))                                                     \
    OPT(MESH_DECIMATE, (0, "mesh-decimate", "N", KR_WHOLE(1, 64, "a factor", NULL)),               \
        cfg->mesh_decimate = (int)v,                                                               \
        KR_HELP_IF(OUTPUTS, "a coarser mesh: N times the surface's voxel (default 1)"))            \
    OPT(MESH_PERIOD, (0, "mesh-period", "SEC", KR_REAL(0, 86400, "seconds", "0 = never")),         \
        cfg->mesh_period_s = v,                                                                    \
        KR_HELP_IF(OUTPUTS,                                                                        \
                   "with --mesh, publish the surface for viewers every SEC seconds,\n"             \
                   "only while one subscribes to `mesh` (default %g; 0 = never)",                  \
                   def()->mesh_period_s))                                                          \
    OPT(PUBLISH, ('p', "publish", "ENDPOINT", KR_TEXT), cfg->publish.endpoint = arg,               \
        KR_HELP_IF(OUTPUTS, "ZeroMQ PUB endpoint, e.g. tcp://*:5555 (default: none)"))             \
    OPT(WAIT_SUBSCRIBER, (0, "wait-subscriber", "SEC", KR_REAL(0, 86400, "seconds", NULL)),        \
        cfg->publish_wait_s = v,                                                                   \
        KR_HELP_IF(OUTPUTS, "before the first frame, wait up to SEC for a subscriber\n"            \
                            "(ZeroMQ drops what is sent before one has joined)"))                  \
    OPT(MODEL_PERIOD,                                                                              \
        (0, "model-period", "SEC", KR_REAL(0, 86400, "seconds", "0 = no model snapshots")),        \
        cfg->model_period_s = v,                                                                   \
        KR_HELP_IF(OUTPUTS,                                                                        \
                   "publish a model snapshot for viewers every SEC seconds, only\n"                \
                   "while one subscribes to `model` (default %g; 0 = never)",                      \
                   def()->model_period_s))                                                         \
    OPT(MODEL_POINTS, (0, "model-points", "N", KR_WHOLE(1, 100000000, "points", NULL)),            \
        cfg->model_points = (int)v,                                                                \
        KR_HELP_IF(OUTPUTS, "at most N points per model snapshot (default %d)",                    \
                   def()->model_points))                                                           \
    OPT(TRAJECTORY_REFINED, (0, "trajectory-refined", "FILE", KR_TEXT),                            \
        cfg->trajectory_refined_path = arg,                                                        \
        KR_HELP_IF(OUTPUTS, "with --refine on: every frame's pose corrected by its\n"              \
                            "keyframe's refined motion (TUM), written when the run ends"))         \
    OPT(TRAJECTORY_FINAL, (0, "trajectory-final", "FILE", KR_TEXT),                                \
        cfg->trajectory_final_path = arg,                                                          \
        KR_HELP_IF(OUTPUTS, "the trajectory as known when the run ends (TUM): LOST\n"              \
                            "frames before a recovery tracked backwards from it against\n"         \
                            "the final model, covered ones interpolated; the rest keep\n"          \
                            "their published pose; the poses it changes go to\n"                   \
                            "subscribers on the topic 'final' (docs/PROTOCOL.md)"))                \
    OPT(FILL, (0, "fill", "off|on", KR_CHOICE("expected on or off")),                              \
        KR_REFUSE_UNLESS(kr_option_on_off(arg, &cfg->fill_lost)),                                  \
        KR_HELP_IF(OUTPUTS, "the final trajectory's filling and its 'final' messages\n"            \
                            "without a file (default off; on with --trajectory-final)"))           \
    OPT(FILL_FRAMES, (0, "fill-frames", "N", KR_WHOLE(0, 1000000, "frames", NULL)),                \
        cfg->fill_frames = (size_t)v,                                                              \
        KR_HELP_IF(OUTPUTS,                                                                        \
                   "for the filling, keep the depth of at most N LOST frames,\n"                   \
                   "the oldest dropped first (default %zu, about 0.6 MB each\n"                    \
                   "at 640x480)",                                                                  \
                   def()->fill_frames))                                                            \
    GROUP(kr_curve_option_table, publish, OUTPUTS)                                                 \
    TEXT(KR_HELP("compute:\n"))                                                                    \
    OPT(BACKEND, KR_OPT_BACKEND,                                                                   \
        KR_REFUSE_UNLESS(kr_backend_parse(arg, &cfg->device.backend) == KR_OK),                    \
        KR_HELP("auto | cpu | cuda (default auto: CUDA when a GPU is present)"))                   \
    OPT(THREADS, (0, "threads", "N", KR_WHOLE(0, 4096, "threads", "0 = all cores")),               \
        cfg->device.cpu_threads = (int)v, KR_HELP("OpenMP threads (default: all cores)"))          \
    OPT(DETERMINISTIC, KR_OPT_DETERMINISTIC, cfg->deterministic = true,                            \
        KR_HELP("repeatable runs: bit-identical poses for the same source,\n"                      \
                "options and --threads (snapshots built in step, fixed\n"                          \
                "reduction order; a little slower)"))                                              \
    OPT(FINEST_LEVEL, (0, "finest-level", "L", KR_CUSTOM),                                         \
        KR_FAIL_UNLESS(finest_level_option(cfg, who, name, arg)),                                  \
        KR_HELP("finest pyramid level tracked, 0 = 640x480 (default %d)",                          \
                def()->track.finest_level))                                                        \
    /* below a millimetre the voxel map cannot hold a scene (and 1e-30 empties it) */              \
    OPT(VOXEL, (0, "voxel", "M", KR_REAL(0.001, 10, "a voxel size in metres", NULL)),              \
        cfg->model.voxel_size = (float)v,                                                          \
        KR_HELP("model voxel size in metres (default %g)", (double)def()->model.voxel_size))       \
    OPT(EXACT_NN, (0, "exact-nn", NULL, KR_FLAG), cfg->track.exact_nn = true,                      \
        KR_HELP("exact nearest neighbours instead of k-d cell descent"))                           \
    OPT(ITERATIONS, (0, "iterations", "N,N,..", KR_CUSTOM),                                        \
        KR_FAIL_UNLESS(iterations_option(                                                          \
            cfg, who, name,                                                                        \
            arg)), /* a space more than the column asks for, as this line always had */            \
        KR_HELP(" Newton steps per level, finest first (default %d,%d,%d)",                        \
                def()->track.iterations[0], def()->track.iterations[1],                            \
                def()->track.iterations[2]))                                                       \
    OPT(POLISH, (0, "polish", "N", KR_WHOLE(0, 100, "steps", "0 = none")),                         \
        cfg->track.polish_steps = (int)v,                                                          \
        KR_HELP("whole Gauss-Newton steps after the finest level, so the pose does not\n"          \
                "depend on the seed (default %d)",                                                 \
                def()->track.polish_steps))                                                        \
    OPT(GATE, (0, "gate", "M", KR_ABOVE(0, 100, "a distance in metres", NULL)),                    \
        cfg->track.gate = (float)v,                                                                \
        KR_HELP("reject pairs farther apart than M metres at the finest level (default %g)",       \
                (double)def()->track.gate))                                                        \
    OPT(ACTIVE_WINDOW, (0, "active-window", "N", KR_WHOLE(1, INT_MAX, "frames", NULL)),            \
        cfg->model.active_window = (int)v,                                                         \
        KR_HELP("model voxels seen in the last N frames are tracked against (default %d)",         \
                def()->model.active_window))                                                       \
    OPT(REBUILD_EVERY, (0, "rebuild-every", "N", KR_WHOLE(1, INT_MAX, "frames", NULL)),            \
        cfg->rebuild_every = (int)v,                                                               \
        KR_HELP("frames between model snapshot rebuilds (default %d)", def()->rebuild_every))      \
    OPT(MODEL_MEMORY, (0, "model-memory", "MIB", KR_REAL(0, 1048576, "MiB", "0 = no cap")),        \
        cfg->model.memory_mib = v,                                                                 \
        KR_HELP("cap on the model's voxel map (default %g MiB at 168 bytes a voxel,\n"             \
                "0 = none): the model never holds more voxels; past it voxels\n"                   \
                "unseen for %d frames and over %g m from the camera are evicted\n"                 \
                "first, oldest first, then unseen ones near it, then, only when\n"                 \
                "the recent frames alone exceed it, the oldest recent ones\n"                      \
                "(--save-model has what is left)",                                                 \
                def()->model.memory_mib, def()->model.evict_after,                                 \
                (double)def()->model.evict_distance))                                              \
    OPT(RECOVER, (0, "recover", "M", KR_CHOICE("expected emicp, newton, softassign or off")),      \
        KR_REFUSE_UNLESS(kr_recover_method_parse(arg, &cfg->recover.method) == KR_OK),             \
        KR_HELP("after a loss: emicp (EM-ICP of the frame against the model\n"                     \
                "near the last good pose, then the newton search, default)\n"                      \
                "| newton (wide-basin search from the last good pose and\n"                        \
                "rotated seeds) | softassign | off"))                                              \
    OPT(RECOVER_AFTER,                                                                             \
        (0, "recover-after", "N", KR_WHOLE(0, 100000, "POOR frames", "0 = only LOST frames")),     \
        cfg->recover.after_poor = (int)v,                                                          \
        KR_HELP("N POOR frames in a row count as a loss (default %d)", def()->recover.after_poor)) \
    OPT(RECOVER_RADIUS, (0, "recover-radius", "M", KR_REAL(0.1, 100, "metres", NULL)),             \
        cfg->recover.model_radius = (float)v,                                                      \
        KR_HELP("emicp / softassign register the frame's and the model's\n"                        \
                "points within M metres of the camera (default %g; raise it\n"                     \
                "for a scene seen mostly beyond it)",                                              \
                (double)def()->recover.model_radius))                                              \
    OPT(REFINE, (0, "refine", "off|on", KR_CHOICE("expected on or off")),                          \
        KR_REFUSE_UNLESS(kr_option_on_off(arg, &cfg->refine.enabled)),                             \
        KR_HELP("live refiner: keyframes every %g m or %g deg while tracking is\n"                 \
                "GOOD, refined jointly with distance fields on a thread of\n"                      \
                "its own; refined keyframe poses on the topic 'refine'\n"                          \
                "(default off: on 2 cores it takes a core from tracking)",                         \
                def()->refine.keyframe_distance, def()->refine.keyframe_angle_deg))                \
    OPT(REFINE_WINDOW, (0, "refine-window", "K", KR_WHOLE(2, 64, "keyframes", NULL)),              \
        cfg->refine.window = (int)v,                                                               \
        KR_HELP("keyframes refined together, the oldest fixed (default %d, 2..64)",                \
                def()->refine.window))                                                             \
    /* The pair (every <= window) is checked when the pipeline is created. */                      \
    OPT(REFINE_EVERY,                                                                              \
        (0, "refine-every", "M", KR_WHOLE(1, 64, "keyframes", "at most --refine-window")),         \
        cfg->refine.every = (int)v,                                                                \
        KR_HELP("a refinement every M new keyframes (default %d, 1..K)", def()->refine.every))     \
    OPT(REFINE_REFUSE, (0, "refine-refuse", "D", KR_REAL(0, 100, "metres", "0 = never")),          \
        cfg->refine.refuse_distance = v,                                                           \
        KR_HELP("re-fuse the model from the newest 32 keyframes at their\n"                        \
                "refined poses when a refinement moves one by D m or more\n"                       \
                "(default %g = never; the model then holds only what those\n"                      \
                "keyframes saw)",                                                                  \
                def()->refine.refuse_distance))                                                    \
    OPT(DEPTH_STEP,                                                                                \
        (0, "depth-step", "A", KR_REAL(0, 1, "a coefficient", "0 turns the noise model off")),     \
        cfg->preprocess.depth_step = (float)v;                                                     \
        cfg->track.depth_step = (float)v,                                                          \
        KR_HELP("depth noise that grows as z^2: the sensor's depth step at z is\n"                 \
                "A*z^2 (default %g, Kinect v1); normals take wider baselines and\n"                \
                "far points wider gates and less weight; 0 turns this off",                        \
                (double)def()->track.depth_step))
KR_OPTION_TABLE(kr_pipeline_option_table, PIPELINE_OPTIONS, kr_pipeline_config, cfg, "kinreg");
