/* kinreg eval — ATE and RPE of an estimated TUM trajectory against ground
 * truth, as a table or JSON, with an optional plot. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "kinreg/eval.h"
#include "tools/cli/option_error.h"
#include "tools/cli/output_path.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: kinreg eval [OPTIONS] GT EST\n\n"
            "Compares the estimated trajectory EST with the ground truth GT (both TUM files:\n"
            "'timestamp tx ty tz qx qy qz qw', camera-to-world). Each estimate is paired with\n"
            "the nearest ground-truth stamp within --max-dt. Prints:\n"
            "  ATE  absolute trajectory error after rigid alignment of the estimate onto the\n"
            "       ground truth (Horn's method, no scale): RMSE, mean, median, max in cm\n"
            "  RPE  relative pose error over --delta seconds: translational RMSE in cm and\n"
            "       rotational RMSE in degrees (drift per interval, no alignment)\n\n"
            "options:\n"
            "  --max-dt S        association window in seconds (default 0.02)\n"
            "  --delta S         RPE interval in seconds (default 1.0)\n"
            "  --plot FILE       write a plot of both trajectories (top and side view);\n"
            "                    the format follows the extension: .svg or .png\n"
            "  --t-offset SEC    add SEC to every estimate stamp before association (evo's\n"
            "                    --t_offset): for an estimate on a shifted clock\n"
            "  --align-start     align by the first associated pose pair instead of Horn's\n"
            "                    best fit over all (evo's --align_origin): ATE then shows drift\n"
            "  --json            print one JSON object (metres and degrees) instead of text\n"
            "  -h, --help        this text\n\n"
            "example: kinreg eval ../shared/data/tum/fr1_xyz_head/groundtruth.txt traj.txt --plot "
            "traj.svg\n");
}

static bool parse_seconds(const char *name, const char *arg, bool allow_zero, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !isfinite(v) || v < 0 || (!allow_zero && v == 0)) {
        fprintf(stderr, "kinreg eval: %s '%s' is not a %s number of seconds\n", name, arg,
                allow_zero ? "non-negative" : "positive");
        return false;
    }
    *out = v;
    return true;
}

/* JSON string literal (paths may hold quotes, backslashes or controls). */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

int kr_cmd_eval(int argc, char **argv)
{
    enum { OPT_MAX_DT = 256, OPT_DELTA, OPT_PLOT, OPT_JSON, OPT_T_OFFSET, OPT_ALIGN_START };
    static const struct option longopts[] = {{"max-dt", required_argument, 0, OPT_MAX_DT},
                                             {"delta", required_argument, 0, OPT_DELTA},
                                             {"plot", required_argument, 0, OPT_PLOT},
                                             {"json", no_argument, 0, OPT_JSON},
                                             {"t-offset", required_argument, 0, OPT_T_OFFSET},
                                             {"t_offset", required_argument, 0, OPT_T_OFFSET},
                                             {"align-start", no_argument, 0, OPT_ALIGN_START},
                                             {"align_origin", no_argument, 0, OPT_ALIGN_START},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    double max_dt = 0.02, delta = 1.0;
    const char *plot = NULL;
    bool json = false, align_start = false;
    double t_offset = 0;
    int opt;
    optind = 1;
    opterr = 0; /* kr_option_error prints one line instead */
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_T_OFFSET: {
            char *end;
            t_offset = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(t_offset) || fabs(t_offset) > 1e9) {
                fprintf(stderr, "kinreg eval: --t-offset '%s' is not allowed: expected seconds, e.g. -0.25\n",
                        optarg);
                return KR_EXIT_USAGE;
            }
            break;
        }
        case OPT_ALIGN_START:
            align_start = true;
            break;
        case OPT_MAX_DT:
            if (!parse_seconds("--max-dt", optarg, false, &max_dt)) return KR_EXIT_USAGE;
            break;
        case OPT_DELTA:
            if (!parse_seconds("--delta", optarg, false, &delta)) return KR_EXIT_USAGE;
            break;
        case OPT_PLOT:
            plot = optarg;
            break;
        case OPT_JSON:
            json = true;
            break;
        case 'h':
            help(stdout);
            return KR_EXIT_OK;
        default:
            return kr_option_error("eval", argc, argv, opt);
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "kinreg eval: expected two files, GT and EST (got %d)\n", argc - optind);
        help(stderr);
        return KR_EXIT_USAGE;
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

    for (size_t i = 0; i < est.count; i++) est.stamps[i] += t_offset;

    kr_ate ate;
    st = align_start ? kr_eval_ate_start(&gt, &est, max_dt, &ate) : kr_eval_ate(&gt, &est, max_dt, &ate);
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
        json_string(stdout, gt_path);
        printf(", \"est\": ");
        json_string(stdout, est_path);
        printf(", \"gt_poses\": %zu, \"est_poses\": %zu, \"max_dt\": %g, \"t_offset\": %.9g, "
               "\"align\": \"%s\", \"pairs\": %zu,\n",
               gt.count, est.count, max_dt, t_offset, align_start ? "start" : "horn", ate.pairs);
        printf(" \"ate\": {\"rmse\": %.9g, \"mean\": %.9g, \"median\": %.9g, \"max\": %.9g, "
               "\"alignment\": {\"t\": [%.9g, %.9g, %.9g], \"q\": [%.9g, %.9g, %.9g, %.9g]}},\n",
               ate.rmse, ate.mean, ate.median, ate.max, ate.alignment.t[0], ate.alignment.t[1],
               ate.alignment.t[2], q.x, q.y, q.z, q.w);
        if (rpe_error[0]) {
            printf(" \"rpe\": null, \"rpe_error\": ");
            json_string(stdout, rpe_error);
        } else {
            printf(" \"rpe\": {\"delta\": %g, \"pairs\": %zu, \"trans_rmse\": %.9g, "
                   "\"trans_mean\": %.9g, "
                   "\"trans_median\": %.9g, \"rot_rmse_deg\": %.9g}",
                   delta, rpe.pairs, rpe.rmse, rpe.mean, rpe.median, rpe.rot_rmse_deg);
        }
        printf(",\n \"plot\": ");
        if (plot)
            json_string(stdout, plot);
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
    rc = plot_failed ? KR_EXIT_FAILURE : KR_EXIT_OK;
done:
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
    return rc;
}
