/* kinreg mesh — a replay fused at given poses into a surface mesh: every
 * frame of SOURCE that has a pose in the trajectory (kinreg's own, refined
 * or not, or another tool's) or in the source's ground truth is integrated
 * into the signed-distance volume (kinreg/surface.h), and the volume's zero
 * level is written as a PLY mesh. Ctrl-C stops reading and still writes the
 * mesh of the frames fused so far. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "kinreg/surface.h"
#include "tools/cli/common_options.h"
#include "tools/cli/output_path.h"
#include "tools/cli/pipeline_options.h"
#include "tools/cli/progress_line.h"
#include "tools/cli/stop_signals.h"
#include "tools/commands.h"

typedef struct {
    kr_source_config source;
    kr_surface_config surface;
    const char *output, *trajectory;
    bool groundtruth, quiet;
    double max_dt;
    int decimate;
    kr_backend backend;
} mesh_options;

#define MESH_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg mesh [OPTIONS] SOURCE (--trajectory FILE | --groundtruth) -o FILE.ply\n\n"  \
        "Fuses the depth frames of SOURCE (a TUM sequence, a fakenect dump, synthetic[:SEED])\n"   \
        "at the given camera-to-world poses into a truncated signed-distance volume and\n"         \
        "writes the surface it holds as a triangle mesh: binary PLY with vertex normals and\n"     \
        "faces (MeshLab, Blender, Open3D and trimesh read it). A frame takes the pose of\n"        \
        "its timestamp, interpolated between the two poses around it when they are at most\n"      \
        "2 x --max-dt apart, else the nearest within --max-dt; frames without one are\n"           \
        "skipped and counted. The mesh is open where no frame saw the scene, and coloured\n"       \
        "where the source has colour (a TUM sequence's rgb.txt, synthetic).\n\n"                   \
        "options:\n"))                                                                             \
    OPT(OUTPUT, ('o', "output", "FILE.ply", KR_TEXT), o->output = arg,                             \
        KR_HELP("the mesh to write (required)"))                                                   \
    OPT(TRAJECTORY, ('t', "trajectory", "FILE", KR_TEXT), o->trajectory = arg,                     \
        KR_HELP("the frames' poses, a TUM file ('timestamp tx ty tz qx qy qz qw':\n"               \
                "kinreg run -t or --trajectory-refined, or another tool's)"))                      \
    OPT(GROUNDTRUTH, (0, "groundtruth", NULL, KR_FLAG), o->groundtruth = true,                     \
        KR_HELP("the source's own ground truth instead (synthetic; TUM's\n"                        \
                "groundtruth.txt)"))                                                               \
    OPT(MAX_DT, (0, "max-dt", "S", KR_ABOVE(0, 10, "seconds", NULL)), o->max_dt = v,               \
        KR_HELP("pose association window (default 0.02)"))                                         \
    OPT(VOXEL, (0, "voxel", "M", KR_REAL(0.0001, 1, "metres", NULL)),                              \
        o->surface.voxel_size = (float)v, KR_HELP("voxel size (default 0.005)"))                   \
    OPT(TRUNCATION, (0, "truncation", "VOXELS", KR_REAL(1, 64, "voxels", NULL)),                   \
        o->surface.truncation_voxels = (float)v,                                                   \
        KR_HELP("the distance band's least half-width (default 4); it widens\n"                    \
                "to two depth steps where the sensor is coarser"))                                 \
    OPT(DEPTH_STEP, (0, "depth-step", "A", KR_REAL(0, 1, "a coefficient", "0 turns it off")),      \
        o->surface.depth_step = (float)v,                                                          \
        KR_HELP("the sensor's depth step at z is A z^2 (default 0.0030711,\n"                      \
                "the Kinect v1's); it widens the band and weighs far measurements\n"               \
                "less (0: fixed band, equal weights)"))                                            \
    OPT(DECIMATE, (0, "decimate", "N", KR_WHOLE(1, 64, "a factor", NULL)), o->decimate = (int)v,   \
        KR_HELP("a coarser mesh for a large scan: the voxels averaged N x N x N\n"                 \
                "and meshed at N times the voxel (about N^2 fewer triangles;\n"                    \
                "default 1: the full mesh)"))                                                      \
    OPT(MAX_DEPTH, (0, "max-depth", "M", KR_ABOVE(0, 100, "metres", NULL)),                        \
        o->surface.max_depth = (float)v, KR_HELP("ignore farther measurements (default 3)"))       \
    OPT(MEMORY, (0, "memory", "MIB", KR_REAL(0, 1048576, "MiB", "0 = no cap")),                    \
        o->surface.memory_mib = v,                                                                 \
        KR_HELP("the volume's memory cap (default 1024; 0: none); past it new\n"                   \
                "surface is not added and a warning says so"))                                     \
    OPT(BACKEND, KR_OPT_BACKEND, KR_REFUSE_UNLESS(kr_backend_parse(arg, &o->backend) == KR_OK),    \
        KR_HELP("auto | cpu | cuda: where the voxels are fused and meshed\n"                       \
                "(default auto: a CUDA device when there is one)"))                                \
    OPT(FRAMES, KR_OPT_FRAMES, o->source.max_frames = (int)v,                                      \
        KR_HELP("stop after N frames of SOURCE (default: all)"))                                   \
    OPT(INTRINSICS, KR_OPT_INTRINSICS, KR_FAIL_UNLESS(kr_intrinsics_option(&o->source, arg) > 0),  \
        KR_HELP("the source's intrinsics, as for kinreg run"))                                     \
    OPT(SKIP_BAD, KR_OPT_SKIP_BAD, o->source.skip_bad = true,                                      \
        KR_HELP("skip and count corrupt input frames instead of stopping"))                        \
    GROUP(kr_synthetic_option_table, source, KR_SHOW_NEVER)                                        \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no progress line"))                         \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nexamples:\n"                                                                   \
                 "  kinreg run tum:fr1_xyz --trajectory-refined poses.txt && \\\n"                 \
                 "    kinreg mesh tum:fr1_xyz -t poses.txt -o fr1.ply\n"                           \
                 "  kinreg mesh synthetic --duration 10 --groundtruth -o room.ply\n"))
KR_OPTION_TABLE(mesh_option_table, MESH_OPTIONS, mesh_options, o, NULL);

static const kr_command mesh_command = {"mesh", &mesh_option_table, KR_HELP_LAYOUT_DEFAULT, 0,
                                        NULL};

/* The pose at `stamp`: interpolated between the poses around it when they
 * are at most 2·max_dt apart, else the nearest within max_dt. */
static bool pose_at(const kr_trajectory *t, double stamp, double max_dt, kr_pose *out)
{
    size_t lo = 0, hi = t->count; /* first stamp >= stamp */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->stamps[mid] < stamp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->count && lo > 0 && t->stamps[lo] - t->stamps[lo - 1] <= 2 * max_dt) {
        double span = t->stamps[lo] - t->stamps[lo - 1];
        double u = span > 0 ? (stamp - t->stamps[lo - 1]) / span : 0.0;
        *out = kr_pose_interpolate(&t->poses[lo - 1], &t->poses[lo], u);
        return true;
    }
    size_t best = SIZE_MAX;
    if (lo < t->count) best = lo;
    if (lo > 0 && (best == SIZE_MAX || stamp - t->stamps[lo - 1] < t->stamps[lo] - stamp))
        best = lo - 1;
    if (best == SIZE_MAX || fabs(t->stamps[best] - stamp) > max_dt) return false;
    *out = t->poses[best];
    return true;
}

static bool sorted(const kr_trajectory *t)
{
    for (size_t i = 1; i < t->count; i++)
        if (t->stamps[i] < t->stamps[i - 1]) return false;
    return true;
}

typedef struct {
    uint64_t read, fused, no_pose;
} mesh_counts;

/* Reads SOURCE to its end (or Ctrl-C) and fuses every frame with a pose. */
static kr_status fuse_source(kr_source *src, const kr_trajectory *poses, const mesh_options *o,
                             kr_surface *surface, mesh_counts *n)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    kr_status st = kr_device_create(&dev, &dc);
    if (st != KR_OK) return st;
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    pc.levels = 1;
    pc.max_depth = o->surface.max_depth;
    pc.depth_step = o->surface.depth_step;
    kr_intrinsics k = kr_source_intrinsics(src);
    kr_pyramid pyr = {0};
    kr_progress_line progress;
    kr_progress_line_init(&progress, !o->quiet);
    unsigned length = kr_source_length(src);
    kr_frame frame;
    while (!kr_stop_signals_caught() && (st = kr_source_read(src, &frame)) == KR_OK) {
        n->read++;
        kr_pose pose;
        if (pose_at(poses, frame.timestamp, o->max_dt, &pose)) {
            st = kr_preprocess(dev, &pc, &frame, &k, &pyr);
            if (st == KR_OK) st = kr_surface_integrate(surface, &pyr.level[0], frame.rgb, &pose);
            if (st == KR_OK) n->fused++;
        } else {
            n->no_pose++;
        }
        kr_frame_release(&frame);
        if (st != KR_OK) break;
        kr_surface_stats ss = kr_surface_stats_get(surface);
        if (length)
            kr_progress_line_say(&progress, "fusing", "fusing frame %llu of %u (%zu blocks)",
                                 (unsigned long long)n->read, length, ss.blocks);
        else
            kr_progress_line_say(&progress, "fusing", "fusing frame %llu (%zu blocks)",
                                 (unsigned long long)n->read, ss.blocks);
    }
    kr_progress_line_clear(&progress);
    kr_pyramid_free(&pyr);
    kr_device_destroy(&dev);
    return st == KR_END ? KR_OK : st;
}

int kr_cmd_mesh(int argc, char **argv)
{
    const char *who = "kinreg mesh";
    mesh_options o = {.max_dt = 0.02, .decimate = 1, .backend = KR_BACKEND_AUTO};
    kr_source_config_default(&o.source);
    kr_surface_config_default(&o.surface);
    int rc = kr_command_parse(&mesh_command, argc, argv, &o);
    if (rc >= 0) return rc;
    if (argc - optind != 1)
        return kr_command_usage_error(&mesh_command, "expected one SOURCE (got %d arguments)",
                                      argc - optind);
    if (!o.output) return kr_command_usage_error(&mesh_command, "no output: give -o FILE.ply");
    if (!o.trajectory == !o.groundtruth)
        return kr_command_usage_error(&mesh_command,
                                      "give the poses: --trajectory FILE or --groundtruth (one)");
    if (!kr_output_writable(who, "-o", o.output)) return KR_EXIT_USAGE;
    kr_stop_signals_start();

    kr_trajectory file_poses = {0};
    if (o.trajectory) {
        kr_status st = kr_trajectory_read_tum(o.trajectory, &file_poses);
        if (st != KR_OK) {
            fprintf(stderr, "%s: %s\n", who, kr_last_error());
            return kr_exit_code(st);
        }
        if (!sorted(&file_poses)) {
            fprintf(stderr, "%s: %s: timestamps go backwards: sort the file by time\n", who,
                    o.trajectory);
            kr_trajectory_free(&file_poses);
            return KR_EXIT_FAILURE;
        }
    }
    o.source.uri = argv[optind];
    o.source.colour = true; /* a coloured mesh where the source has colour */
    kr_source *src = NULL;
    kr_status st = kr_source_create(&src, &o.source);
    if (st != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, kr_strerror(st), kr_last_error());
        kr_trajectory_free(&file_poses);
        return st == KR_ERR_INVALID_ARG ? KR_EXIT_USAGE : kr_exit_code(st);
    }
    const kr_trajectory *poses = o.trajectory ? &file_poses : kr_source_groundtruth(src);
    if (!poses || !sorted(poses)) {
        fprintf(stderr, "%s: %s has no ground truth%s: give --trajectory FILE\n", who,
                kr_source_describe(src), poses ? " in time order" : "");
        kr_source_destroy(&src);
        return KR_EXIT_USAGE;
    }
    if (!o.quiet)
        fprintf(stderr, "%s: %s; %s\n", who, kr_source_describe(src), kr_source_settings(src));

    kr_surface *surface = NULL;
    mesh_counts n = {0};
    double t0 = kr_now();
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = o.backend;
    kr_device *engine = NULL;
    st = kr_device_create(&engine, &dc);
    if (st != KR_OK) {
        fprintf(stderr, "%s: %s\n", who, kr_last_error());
        kr_source_destroy(&src);
        kr_trajectory_free(&file_poses);
        return kr_exit_code(st);
    }
    if (!o.quiet) fprintf(stderr, "%s: fusing on %s\n", who, kr_device_describe(engine));
    st = kr_surface_create(&surface, &o.surface);
    if (st == KR_OK && kr_device_backend(engine) == KR_BACKEND_CUDA)
        st = kr_surface_fuse_on(surface, engine);
    if (st == KR_OK) st = fuse_source(src, poses, &o, surface, &n);
    if (st != KR_OK) {
        /* What was fused is still meshed below. */
        fprintf(stderr, "%s: stopped after %llu frames: %s: %s\n", who, (unsigned long long)n.read,
                kr_strerror(st), kr_last_error());
        rc = kr_exit_code(st);
    } else {
        rc = KR_EXIT_OK;
    }
    double t_fuse = kr_now() - t0;
    kr_source_destroy(&src);
    kr_trajectory_free(&file_poses);
    if (!surface) {
        kr_device_destroy(&engine);
        return rc;
    }

    kr_mesh mesh = {0};
    kr_status ms = n.fused     ? kr_surface_extract_coarse(surface, o.decimate, &mesh)
                   : n.no_pose ? kr_error(KR_ERR_EMPTY,
                                          "no frame of the source has a pose within %g s: are "
                                          "the trajectory's timestamps the source's?",
                                          o.max_dt)
                               : kr_error(KR_ERR_EMPTY, "no frame was fused");
    bool saving = ms == KR_OK;
    if (saving) ms = kr_mesh_save_ply(o.output, &mesh);
    double t_all = kr_now() - t0;
    kr_surface_stats ss = kr_surface_stats_get(surface);
    if (ms != KR_OK) {
        fprintf(stderr, "%s: no mesh written: %s\n", who, kr_last_error());
        if (rc == KR_EXIT_OK) rc = saving ? KR_EXIT_OUTPUT : kr_exit_code(ms);
    } else if (!o.quiet) {
        fprintf(stderr,
                "%s: %llu of %llu frames fused (%llu without a pose%s), %zu blocks "
                "(%.0f MiB), %.1f s fusing, %.1f s in all\n"
                "%s: %zu vertices, %zu triangles -> %s\n",
                who, (unsigned long long)n.fused, (unsigned long long)n.read,
                (unsigned long long)n.no_pose,
                kr_stop_signals_caught() ? "; stopped by a signal" : "", ss.blocks,
                ss.blocks * (double)KR_SURFACE_BYTES_PER_BLOCK / 1048576.0, t_fuse, t_all, who,
                mesh.n_vertices, mesh.n_faces, o.output);
    }
    kr_mesh_free(&mesh);
    kr_surface_destroy(&surface);
    kr_device_destroy(&engine);
    return rc;
}
