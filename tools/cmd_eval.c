/* kinreg eval — ATE and RPE of an estimated TUM trajectory against ground
 * truth, as a table or JSON, with an optional plot. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/commands.h"
#include "kinreg/eval.h"
#include "tools/cli/common_options.h"
#include "tools/cli/output_path.h"
#include "tools/cli/terminal_text.h"

/* --max-dt and --delta: a number of seconds greater than 0. */
static bool positive_seconds(const char *arg, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !isfinite(v) || v <= 0) return false;
    *out = v;
    return true;
}

/* --t-offset SEC: any finite number of seconds up to 1e9 either way. */
static bool offset_seconds(const char *arg, double *out)
{
    char *end;
    *out = strtod(arg, &end);
    return end != arg && !*end && isfinite(*out) && fabs(*out) <= 1e9;
}

typedef struct {
    double max_dt, delta, t_offset;
    const char *plot;
    bool json, align_start;
} eval_options;

#define SECONDS_REFUSAL KR_REFUSAL("%s: %s '%s' is not a positive number of seconds")
#define EVAL_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg eval [OPTIONS] GT EST\n\n"                                                  \
        "Compares the estimated trajectory EST with the ground truth GT (both TUM files:\n"        \
        "'timestamp tx ty tz qx qy qz qw', camera-to-world). Each estimate is paired with\n"       \
        "the nearest ground-truth stamp within --max-dt. Prints:\n"                                \
        "  ATE  absolute trajectory error after rigid alignment of the estimate onto the\n"        \
        "       ground truth (Horn's method, no scale): RMSE, mean, median, max in cm\n"           \
        "  RPE  relative pose error over --delta seconds: translational RMSE in cm and\n"          \
        "       rotational RMSE in degrees (drift per interval, no alignment)\n\n"                 \
        "options:\n"))                                                                             \
    OPT(MAX_DT, (0, "max-dt", "S", SECONDS_REFUSAL),                                               \
        KR_REFUSE_UNLESS(positive_seconds(arg, &o->max_dt)),                                       \
        KR_HELP("association window in seconds (default 0.02)"))                                   \
    OPT(DELTA, (0, "delta", "S", SECONDS_REFUSAL),                                                 \
        KR_REFUSE_UNLESS(positive_seconds(arg, &o->delta)),                                        \
        KR_HELP("RPE interval in seconds (default 1.0)"))                                          \
    OPT(PLOT, (0, "plot", "FILE", KR_TEXT), o->plot = arg,                                         \
        KR_HELP("write a plot of both trajectories (top and side view);\n"                         \
                "the format follows the extension: .svg or .png"))                                 \
    OPT(T_OFFSET, (0, "t-offset", "SEC", KR_CHOICE("expected seconds, e.g. -0.25")),               \
        KR_REFUSE_UNLESS(offset_seconds(arg, &o->t_offset)),                                       \
        KR_HELP("add SEC to every estimate stamp before association (evo's\n"                      \
                "--t_offset): for an estimate on a shifted clock"))                                \
    ALIAS(T_OFFSET, "t_offset")                                                                    \
    OPT(ALIGN_START, (0, "align-start", NULL, KR_FLAG), o->align_start = true,                     \
        KR_HELP("align by the first associated pose pair instead of Horn's\n"                      \
                "best fit over all (evo's --align_origin): ATE then shows drift"))                 \
    ALIAS(ALIGN_START, "align_origin")                                                             \
    OPT(JSON, KR_OPT_JSON, o->json = true,                                                         \
        KR_HELP("print one JSON object (metres and degrees) instead of text"))                     \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nexample: kinreg eval ../shared/data/tum/fr1_xyz_head/groundtruth.txt "         \
                 "traj.txt --plot traj.svg\n"))
KR_OPTION_TABLE(eval_option_table, EVAL_OPTIONS, eval_options, o, NULL);

/* Descriptions in column 20, "  --long" not lined up under "  -h, --help". */
static const kr_command eval_command = {"eval", &eval_option_table, {20, 2, 2}, 0, NULL};

int kr_cmd_eval(int argc, char **argv)
{
    eval_options o = {.max_dt = 0.02, .delta = 1.0};
    int prc = kr_command_parse(&eval_command, argc, argv, &o);
    if (prc >= 0) return prc;
    double max_dt = o.max_dt, delta = o.delta, t_offset = o.t_offset;
    const char *plot = o.plot;
    bool json = o.json, align_start = o.align_start;
    if (argc - optind != 2) {
        return kr_command_usage_error(&eval_command, "expected two files, GT and EST (got %d)",
                                      argc - optind);
    }
    const char *gt_path = argv[optind], *est_path = argv[optind + 1];
    if (plot) {
        /* Refuse a bad plot name before any work, not after. */
        const char *dot = strrchr(plot, '.');
        if (!dot || (strcasecmp(dot, ".svg") && strcasecmp(dot, ".png"))) {
            fprintf(stderr, "kinreg eval: --plot %s: the file name must end in .svg or .png\n",
                    plot);
            return KR_EXIT_USAGE;
        }
        if (!kr_output_writable("kinreg eval", "--plot", plot)) return KR_EXIT_USAGE;
    }

    kr_trajectory gt = {0}, est = {0};
    int rc = KR_EXIT_FAILURE;
    kr_status st;
    if ((st = kr_trajectory_read_tum(gt_path, &gt)) != KR_OK) {
        fprintf(stderr, "kinreg eval: ground truth: %s\n", kr_last_error());
        goto done;
    }
    if ((st = kr_trajectory_read_tum(est_path, &est)) != KR_OK) {
        fprintf(stderr, "kinreg eval: estimate: %s\n", kr_last_error());
        goto done;
    }
    if (gt.count == 0 || est.count == 0) {
        fprintf(stderr, "kinreg eval: %s has no poses\n", gt.count == 0 ? gt_path : est_path);
        goto done;
    }

    for (size_t i = 0; i < est.count; i++)
        est.stamps[i] += t_offset;

    kr_ate ate;
    st = align_start ? kr_eval_ate_start(&gt, &est, max_dt, &ate)
                     : kr_eval_ate(&gt, &est, max_dt, &ate);
    if (st != KR_OK) {
        fprintf(stderr, "kinreg eval: %s\n", kr_last_error());
        goto done;
    }
    /* RPE needs pairs `delta` apart; a short trajectory has none, which is
     * reported but does not hide the ATE. */
    kr_rpe rpe;
    char rpe_error[512] = "";
    st = kr_eval_rpe(&gt, &est, max_dt, delta, &rpe);
    if (st == KR_ERR_EMPTY)
        snprintf(rpe_error, sizeof rpe_error, "%s", kr_last_error());
    else if (st != KR_OK) {
        fprintf(stderr, "kinreg eval: %s\n", kr_last_error());
        goto done;
    }
    /* A plot that cannot be written is reported, but the figures still print. */
    bool plot_failed = false;
    if (plot && (st = kr_eval_plot(plot, &gt, &est, &ate)) != KR_OK) {
        fprintf(stderr, "kinreg eval: %s\n", kr_last_error());
        plot_failed = true;
        plot = NULL;
    }

    kr_quat q = kr_pose_to_quat(&ate.alignment);
    if (json) {
        printf("{\"gt\": ");
        kr_json_string(stdout, gt_path);
        printf(", \"est\": ");
        kr_json_string(stdout, est_path);
        printf(", \"gt_poses\": %zu, \"est_poses\": %zu, \"max_dt\": %g, \"t_offset\": %.9g, "
               "\"align\": \"%s\", \"pairs\": %zu,\n",
               gt.count, est.count, max_dt, t_offset, align_start ? "start" : "horn", ate.pairs);
        printf(" \"ate\": {\"rmse\": %.9g, \"mean\": %.9g, \"median\": %.9g, \"max\": %.9g, "
               "\"alignment\": {\"t\": [%.9g, %.9g, %.9g], \"q\": [%.9g, %.9g, %.9g, %.9g]}},\n",
               ate.rmse, ate.mean, ate.median, ate.max, ate.alignment.t[0], ate.alignment.t[1],
               ate.alignment.t[2], q.x, q.y, q.z, q.w);
        if (rpe_error[0]) {
            printf(" \"rpe\": null, \"rpe_error\": ");
            kr_json_string(stdout, rpe_error);
        } else {
            printf(" \"rpe\": {\"delta\": %g, \"pairs\": %zu, \"trans_rmse\": %.9g, "
                   "\"trans_mean\": %.9g, "
                   "\"trans_median\": %.9g, \"rot_rmse_deg\": %.9g}",
                   delta, rpe.pairs, rpe.rmse, rpe.mean, rpe.median, rpe.rot_rmse_deg);
        }
        printf(",\n \"plot\": ");
        if (plot)
            kr_json_string(stdout, plot);
        else
            printf("null");
        printf("}\n");
    } else {
        printf("ground truth     %s (%zu poses)\n", gt_path, gt.count);
        printf("estimate         %s (%zu poses)\n", est_path, est.count);
        printf("pairs            %zu (max dt %.3f s)\n", ate.pairs, max_dt);
        if (t_offset != 0) printf("time offset      %+.6f s added to the estimate\n", t_offset);
        printf("aligned by       %s\n", align_start ? "the first pose pair (--align-start)"
                                                    : "Horn's best rigid fit over all pairs");
        printf("ATE rmse         %.3f cm\n", ate.rmse * 100);
        printf("ATE mean         %.3f cm\n", ate.mean * 100);
        printf("ATE median       %.3f cm\n", ate.median * 100);
        printf("ATE max          %.3f cm\n", ate.max * 100);
        if (rpe_error[0]) {
            printf("RPE              not available: %s\n", rpe_error);
        } else {
            printf("RPE trans rmse   %.3f cm per %g s (%zu pairs)\n", rpe.rmse * 100, delta,
                   rpe.pairs);
            printf("RPE rot rmse     %.3f deg per %g s\n", rpe.rot_rmse_deg, delta);
        }
        printf("alignment        t %.4f %.4f %.4f m, q %.5f %.5f %.5f %.5f (x y z w)\n",
               ate.alignment.t[0], ate.alignment.t[1], ate.alignment.t[2], q.x, q.y, q.z, q.w);
        if (plot) printf("plot             %s\n", plot);
    }
    rc = plot_failed ? KR_EXIT_OUTPUT : KR_EXIT_OK;
done:
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
    return rc;
}
