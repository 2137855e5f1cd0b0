/* Parsing of the options shared by run, demo and bench. */
#include "pipeline_options.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

void kr_pipeline_options_help(FILE *out)
{
    kr_pipeline_config d;
    kr_pipeline_config_default(&d);
    fprintf(
        out,
        "source and output:\n"
        "  -s, --source URI        synthetic[:SEED] | tum:DIR | fakenect:DIR | DIR (TUM or "
        "fakenect)\n"
        "                          | kinect[:N|:SERIAL] live sensor (default synthetic)\n"
        "  -n, --frames N          stop after N frames (default: the whole source)\n"
        "  -r, --rate max|FACTOR   max = as fast as possible (default); 1.0 = recorded timing\n"
        "                          (replays only: a sensor sets its own pace)\n"
        "      --intrinsics NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3]\n"
        "                          preset fr1 fr2 fr3 default kinect, or explicit pinhole values "
        "with\n"
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
        "                          status 3 (default %g)\n"
        "  -t, --trajectory FILE   write poses as a TUM trajectory while tracking\n"
        "  -m, --save-model FILE   write the model (PLY, points and normals) at the end\n"
        "  -p, --publish ENDPOINT  ZeroMQ PUB endpoint, e.g. tcp://*:5555 (default: none)\n"
        "      --wait-subscriber SEC  before the first frame, wait up to SEC for a subscriber\n"
        "                          (ZeroMQ drops what is sent before one has joined)\n"
        "compute:\n"
        "  -b, --backend B         auto | cpu | cuda (default auto: CUDA when a GPU is present)\n"
        "      --threads N         OpenMP threads (default: all cores)\n"
        "      --finest-level L    finest pyramid level tracked, 0 = 640x480 (default %d)\n"
        "      --voxel M           model voxel size in metres (default %g)\n"
        "      --exact-nn          exact nearest neighbours instead of k-d cell descent\n"
        "      --iterations N,N,..  Newton steps per level, finest first (default %d,%d,%d)\n"
        "      --gate M            reject pairs farther apart than M metres at the finest level "
        "(default %g)\n"
        "      --active-window N   model voxels seen in the last N frames are tracked against "
        "(default %d)\n"
        "      --rebuild-every N   frames between model snapshot rebuilds (default %d)\n",
        d.source.jump_angle_deg, d.source.jump_distance_m, d.source.covered_frames,
        d.source.stall_timeout_s, d.track.finest_level, (double)d.model.voxel_size,
        d.track.iterations[0], d.track.iterations[1], d.track.iterations[2], (double)d.track.gate,
        d.model.active_window, d.rebuild_every);
    fprintf(out,
            "      --recover M         after a loss: newton (wide-basin search from the last good "
            "pose\n"
            "                          and rotated seeds, default) | emicp | softassign | off\n"
            "      --recover-after N   N POOR frames in a row count as a loss (default %d)\n",
            d.recover.after_poor);
    fprintf(
        out,
        "      --depth-step A      depth noise that grows as z^2: the sensor's depth step at z is\n"
        "                          A*z^2 (default %g, Kinect v1); normals take wider baselines "
        "and\n"
        "                          far points wider gates and less weight; 0 turns this off\n",
        (double)d.track.depth_step);
}

static int parse_double(const char *arg, double *out, const char *what)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end) {
        fprintf(stderr, "kinreg: %s expects a number, got '%s'\n", what, arg);
        return -1;
    }
    *out = v;
    return 1;
}

int kr_pipeline_option(kr_pipeline_config *cfg, int opt, const char *arg)
{
    double v;
    switch (opt) {
    case 's':
        cfg->source.uri = arg;
        return 1;
    case 'b':
        if (kr_backend_parse(arg, &cfg->device.backend) != KR_OK) {
            fprintf(stderr, "kinreg: --backend must be auto, cpu or cuda, got '%s'\n", arg);
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
        if (parse_double(arg, &v, "--rate") < 0 || v <= 0) {
            fprintf(stderr, "kinreg: --rate must be 'max' or a positive factor\n");
            return -1;
        }
        cfg->rate = v;
        return 1;
    case 'n':
        if (parse_double(arg, &v, "--frames") < 0 || v < 1) return -1;
        cfg->source.max_frames = (int)v;
        return 1;
    case 1001: {
        kr_intrinsics k;
        if (kr_intrinsics_preset(arg, &k) == KR_OK) {
            cfg->source.intrinsics = arg;
            return 1;
        }
        kr_intrinsics c = {.width = 640, .height = 480};
        int n = sscanf(arg, "%f,%f,%f,%f,%f,%f,%f,%f,%f", &c.fx, &c.fy, &c.cx, &c.cy, &c.k1, &c.k2, &c.p1,
                       &c.p2, &c.k3);
        if ((n == 4 || n == 9) && c.fx > 0 && c.fy > 0) {
            cfg->source.override_intrinsics = true;
            cfg->source.custom = c;
            return 1;
        }
        fprintf(stderr,
                "kinreg: --intrinsics must be fr1, fr2, fr3, default, kinect, fx,fy,cx,cy or "
                "fx,fy,cx,cy,k1,k2,p1,p2,k3; got '%s'\n",
                arg);
        return -1;
    }
    case 1002:
        if (parse_double(arg, &v, "--depth-scale") < 0 || v <= 0) return -1;
        cfg->source.depth_scale = (float)v;
        return 1;
    case 1003:
        cfg->source.skip_bad = true;
        return 1;
    case 1004:
        if (parse_double(arg, &v, "--finest-level") < 0 || v < 0 || v >= cfg->preprocess.levels) {
            fprintf(stderr, "kinreg: --finest-level must be 0..%d\n", cfg->preprocess.levels - 1);
            return -1;
        }
        cfg->track.finest_level = (int)v;
        cfg->fuse_level = (int)v;
        return 1;
    case 1005:
        if (parse_double(arg, &v, "--voxel") < 0 || v <= 0) return -1;
        cfg->model.voxel_size = (float)v;
        return 1;
    case 1006:
        if (parse_double(arg, &v, "--seed") < 0) return -1;
        cfg->source.seed = (unsigned)v;
        return 1;
    case 1007:
        if (parse_double(arg, &v, "--duration") < 0 || v <= 0) return -1;
        cfg->source.duration_s = v;
        return 1;
    case 1008:
        if (parse_double(arg, &v, "--threads") < 0 || v < 0) return -1;
        cfg->device.cpu_threads = (int)v;
        return 1;
    case 1009:
        cfg->track.exact_nn = true;
        return 1;
    case 1010:
        if (parse_double(arg, &v, "--active-window") < 0 || v < 1) return -1;
        cfg->model.active_window = (int)v;
        return 1;
    case 1012:
        if (parse_double(arg, &v, "--gate") < 0 || v <= 0) return -1;
        cfg->track.gate = (float)v;
        return 1;
    case 1013: {
        int it[KR_MAX_LEVELS] = {0};
        int n = sscanf(arg, "%d,%d,%d,%d,%d", &it[0], &it[1], &it[2], &it[3], &it[4]);
        if (n < 1) {
            fprintf(stderr, "kinreg: --iterations expects counts like 6,5,4, got '%s'\n", arg);
            return -1;
        }
        for (int i = 0; i < KR_MAX_LEVELS; i++) cfg->track.iterations[i] = i < n ? it[i] : it[n - 1];
        return 1;
    }
    case 1011:
        if (parse_double(arg, &v, "--rebuild-every") < 0 || v < 1) return -1;
        cfg->rebuild_every = (int)v;
        return 1;
    case 1014:
        if (parse_double(arg, &v, "--depth-step") < 0) return -1;
        if (!(v >= 0)) {
            fprintf(stderr, "kinreg: --depth-step must be >= 0 (0 turns the noise model off)\n");
            return -1;
        }
        cfg->preprocess.depth_step = (float)v;
        cfg->track.depth_step = (float)v;
        return 1;
    case 1030:
        if (parse_double(arg, &v, "--every") < 0 || v < 1 || v != (int)v) {
            fprintf(stderr, "kinreg: --every expects a whole number K >= 1\n");
            return -1;
        }
        cfg->source.stride = (int)v;
        return 1;
    case 1031:
        if (parse_double(arg, &v, "--jumps") < 0 || v < 0) return -1;
        cfg->source.jumps = (int)v;
        return 1;
    case 1032:
        if (parse_double(arg, &v, "--jump-angle") < 0 || v < 0 || v > 180) {
            fprintf(stderr, "kinreg: --jump-angle must be 0..180 degrees\n");
            return -1;
        }
        cfg->source.jump_angle_deg = v;
        return 1;
    case 1033:
        if (parse_double(arg, &v, "--jump-distance") < 0 || v < 0) return -1;
        cfg->source.jump_distance_m = v;
        return 1;
    case 1034:
        if (parse_double(arg, &v, "--covered") < 0 || v < 0) return -1;
        cfg->source.covered = (int)v;
        return 1;
    case 1035:
        if (parse_double(arg, &v, "--covered-frames") < 0 || v < 1) return -1;
        cfg->source.covered_frames = (int)v;
        return 1;
    case 1036:
        if (kr_recover_method_parse(arg, &cfg->recover.method) != KR_OK) {
            fprintf(stderr,
                    "kinreg: --recover must be newton, emicp, softassign or off, got '%s'\n", arg);
            return -1;
        }
        return 1;
    case 1037:
        if (parse_double(arg, &v, "--recover-after") < 0 || v < 0) return -1;
        cfg->recover.after_poor = (int)v;
        return 1;
    case 1020:
        if (kr_kinect_depth_mode_parse(arg, &cfg->source.depth_mode) != KR_OK) {
            fprintf(stderr, "kinreg: --depth-mode must be 11bit, mm or registered, got '%s'\n", arg);
            return -1;
        }
        return 1;
    case 1021:
        if (parse_double(arg, &v, "--stall-timeout") < 0 || v <= 0) return -1;
        cfg->source.stall_timeout_s = v;
        return 1;
    case 1022:
        if (parse_double(arg, &v, "--wait-subscriber") < 0 || v < 0) return -1;
        cfg->publish_wait_s = v;
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
    snprintf(shortopts, sizeof shortopts, "%s%sh", KR_PIPELINE_SHORT_OPTIONS, own->shortopts ? own->shortopts : "");

    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int handled = kr_pipeline_option(cfg, opt, optarg);
        if (handled < 0) return KR_EXIT_USAGE;
        if (handled) continue;
        if (opt == 'h') {
            own->help(stdout);
            return KR_EXIT_OK;
        }
        if (opt == '?' || !own->apply || own->apply(opt, optarg, own->user) < 0) {
            own->help(stderr);
            return KR_EXIT_USAGE;
        }
    }
    return -1;
}
