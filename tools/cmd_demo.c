/* kinreg demo — the embedded default: track the synthetic scan, publish,
 * save trajectory, ground truth, model and plot, print ATE and fps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/commands.h"
#include "kinreg/eval.h"
#include "tools/cli/common_options.h"
#include "tools/cli/pipeline_options.h"
#include "tools/cli/run_json.h"

static char *join(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

typedef struct {
    kr_pipeline_config cfg;
    kr_status_options status;
    const char *out_dir;
    bool json;
} demo_options;

#define DEMO_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg demo [OPTIONS]\n\n"                                                         \
        "Generates kinreg's synthetic indoor scan (Kinect v1 sensor model, handheld\n"             \
        "trajectory, 30 s at 30 Hz), tracks it, and writes into DIR:\n"                            \
        "  trajectory.txt  estimated poses (TUM)     groundtruth.txt  true poses (TUM)\n"          \
        "  model.ply       fused model               trajectory.svg   plot of both\n"              \
        "  trajectory_final.txt  the poses with LOST stretches filled in (--trajectory-final)\n"   \
        "then prints the ATE against the ground truth (of the final trajectory too, when\n"        \
        "frames were lost: the plot then shows the final one) and the frames per second.\n"        \
        "Poses are published on ipc://DIR/poses.ipc unless -p names an endpoint.\n\n"))            \
    OPT(OUT, ('o', "output", "DIR", KR_TEXT), o->out_dir = arg,                                    \
        KR_HELP("output directory (default kinreg-demo)"))                                         \
    ALIAS(OUT, "out")                                                                              \
    GROUP(kr_pipeline_option_table, cfg, KR_SHOW_ALL)                                              \
    GROUP(kr_status_option_table, status, KR_SHOW_ALL)                                             \
    OPT(JSON, KR_OPT_JSON, o->json = true,                                                         \
        KR_HELP("the results as one JSON object on standard output (the ATE\n"                     \
                "lines go to stderr instead)"))                                                    \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))
KR_OPTION_TABLE(demo_option_table, DEMO_OPTIONS, demo_options, o, NULL);

static const kr_command demo_command = {"demo", &demo_option_table, KR_HELP_LAYOUT_DEFAULT, 0,
                                        NULL};

int kr_cmd_demo(int argc, char **argv)
{
    demo_options o = {.status = KR_STATUS_OPTIONS_DEFAULT, .out_dir = "kinreg-demo"};
    kr_pipeline_config_default(&o.cfg);
    o.cfg.source.uri = "synthetic";
    int rc = kr_command_parse(&demo_command, argc, argv, &o);
    if (rc >= 0) return rc;
    kr_pipeline_config cfg = o.cfg;
    const char *out_dir = o.out_dir;
    if (optind < argc) {
        fprintf(stderr, "kinreg demo: unexpected argument '%s'\n", argv[optind]);
        return KR_EXIT_USAGE;
    }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kinreg demo: cannot create output directory %s: %s\n", out_dir,
                strerror(errno));
        return KR_EXIT_FAILURE;
    }
    char traj_path[1024], final_path[1024], model_path[1024], gt_path[1024], plot_path[1024];
    cfg.trajectory_path = join(traj_path, sizeof traj_path, out_dir, "trajectory.txt");
    if (!cfg.trajectory_final_path)
        cfg.trajectory_final_path =
            join(final_path, sizeof final_path, out_dir, "trajectory_final.txt");
    cfg.model_path = join(model_path, sizeof model_path, out_dir, "model.ply");
    join(gt_path, sizeof gt_path, out_dir, "groundtruth.txt");
    join(plot_path, sizeof plot_path, out_dir, "trajectory.svg");
    /* Publish by default on a socket file in the output directory: no port
     * to collide with, and `kinreg sub ipc://DIR/poses.ipc` follows along. */
    char endpoint[1100];
    if (!cfg.publish.endpoint) {
        snprintf(endpoint, sizeof endpoint, "ipc://%s/poses.ipc", out_dir);
        cfg.publish.endpoint = endpoint;
    }
    fprintf(stderr, "kinreg demo: publishing poses on %s\n", cfg.publish.endpoint);

    kr_pipeline *p = NULL;
    kr_pipeline_stats stats;
    kr_status s = kr_run_pipeline(&cfg, "kinreg demo", &o.status, &p, &stats);
    if (!p) return KR_EXIT_FAILURE;
    char error[600] = "";
    if (s != KR_OK) snprintf(error, sizeof error, "%s: %s", kr_strerror(s), kr_last_error());
    FILE *said = o.json ? stderr : stdout; /* the results in words */

    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    const kr_trajectory *est = kr_pipeline_trajectory(p);
    kr_ate ate;
    kr_status es = gt ? kr_eval_ate(gt, est, 0, &ate) : KR_ERR_EMPTY;
    /* Every file is said to be written only when it was; one that was not
     * (full disk, file-size limit) is named with the cause: exit status 4. */
    bool output_failed = stats.trajectory_failed || stats.model_save_failed;
    if (gt && kr_trajectory_write_tum(gt_path, gt) != KR_OK) {
        fprintf(stderr, "kinreg demo: %s\n", kr_last_error());
        output_failed = true;
    }
    kr_ate fin;
    bool have_fin = false;
    if (es == KR_OK) {
        /* With frames LOST, the final trajectory (those frames placed) is
         * what the run delivers: the plot shows it, with its ATE. */
        const kr_trajectory *final = kr_pipeline_final_trajectory(p);
        have_fin = stats.frames_lost && kr_eval_ate(gt, final, 0, &fin) == KR_OK;
        /* Its frames that were LOST and placed afterwards (those whose
         * final pose is not the published one) are marked. */
        bool *placed = have_fin ? calloc(final->count ? final->count : 1, sizeof *placed) : NULL;
        for (size_t i = 0; placed && i < final->count && i < est->count; i++)
            placed[i] = memcmp(&final->poses[i], &est->poses[i], sizeof(kr_pose)) != 0;
        if (kr_eval_plot_marked(plot_path, gt, have_fin ? final : est, have_fin ? &fin : &ate,
                                placed, "lost frames, placed afterwards") != KR_OK) {
            fprintf(stderr, "kinreg demo: %s\n", kr_last_error());
            output_failed = true;
        }
        free(placed);
        fprintf(said,
                "ATE RMSE %.2f cm (median %.2f cm, max %.2f cm) over %zu frames; %.1f frames/s; "
                "LOST %llu\n",
                100 * ate.rmse, 100 * ate.median, 100 * ate.max, ate.pairs, stats.fps,
                (unsigned long long)stats.frames_lost);
        if (have_fin)
            fprintf(
                said,
                "final trajectory (%llu LOST frames placed, %llu not): ATE RMSE %.2f cm (median "
                "%.2f cm, max %.2f cm)\n",
                (unsigned long long)(stats.frames_filled + stats.frames_interpolated),
                (unsigned long long)stats.frames_unfilled, 100 * fin.rmse, 100 * fin.median,
                100 * fin.max);
        if (!output_failed) /* said only when true */
            fprintf(said, "wrote %s, %s, %s, %s, %s\n", traj_path, cfg.trajectory_final_path,
                    gt_path, model_path, plot_path);
    } else if (!gt) {
        /* Not a failure: the source has nothing to compare with. */
        fprintf(said,
                "%s has no ground truth (groundtruth.txt), so no ATE; %.1f frames/s; LOST %llu\n",
                kr_source_describe(kr_pipeline_source(p)), stats.fps,
                (unsigned long long)stats.frames_lost);
        if (!output_failed) fprintf(said, "wrote %s, %s\n", traj_path, model_path);
        es = KR_OK;
    } else {
        fprintf(stderr, "kinreg demo: cannot evaluate against the ground truth: %s\n",
                kr_last_error());
    }
    if (o.json) {
        putchar('{');
        kr_run_json_members(stdout, kr_source_describe(kr_pipeline_source(p)),
                            kr_device_describe(kr_pipeline_device(p)), &stats,
                            s == KR_OK ? NULL : error);
        if (es == KR_OK && gt)
            printf(
                ",\"ate_rmse_m\":%.6f,\"ate_median_m\":%.6f,\"ate_max_m\":%.6f,\"ate_pairs\":%zu",
                ate.rmse, ate.median, ate.max, ate.pairs);
        if (have_fin) printf(",\"final_ate_rmse_m\":%.6f", fin.rmse);
        printf(",\"outputs_written\":%s}\n", output_failed ? "false" : "true");
    }
    kr_pipeline_destroy(&p);
    if (output_failed) return KR_EXIT_OUTPUT;
    if (s == KR_OK && es != KR_OK) return KR_EXIT_FAILURE;
    return kr_exit_code(s);
}
