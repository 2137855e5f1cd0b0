/* kinreg run — track a source, publish poses, write trajectory and model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tools/cli/number_option.h"
#include "tools/cli/output_path.h"
#include "tools/cli/pipeline_options.h"
#include "tools/cli/status_line.h"
#include "tools/cli/stop_signals.h"
#include "tools/view/view.h"

double kr_progress_interval_s = KR_PROGRESS_INTERVAL_S;

int kr_progress_option(const char *arg)
{
    static const kr_number_rule rule = {"--progress",           0, 86400, false, false, "seconds",
                                        "0 = no progress lines"};
    double v;
    if (!kr_number_option("kinreg", &rule, arg, &v)) return -1;
    kr_progress_interval_s = v;
    return 0;
}

static void help(FILE *out)
{
    fprintf(out, "usage: kinreg run [OPTIONS] [SOURCE]\n\n"
                 "Tracks every frame of SOURCE against the running model, publishes poses over\n"
                 "ZeroMQ, and writes the trajectory and model. Ctrl-C stops cleanly: every pose\n"
                 "computed so far is written and published.\n\n");
    kr_pipeline_options_help(out);
    fprintf(out,
            "  -q, --quiet             no status line\n"
            "      --progress SEC      when stderr is not a terminal, a progress line every SEC\n"
            "                          seconds (default 5; 0 = none)\n"
            "      --view [ADDR:]PORT  serve the live view in the browser on PORT (ADDR defaults to\n"
            "                          127.0.0.1; PORT 0 = any free port); it subscribes to\n"
            "                          --publish, or to a private ipc:// socket without it\n"
            "      --view-public       allow a view ADDR other than loopback (e.g. 0.0.0.0:8080)\n"
            "  -h, --help              this text\n\n"
            "example: kinreg run tum:../shared/data/tum/fr1_xyz_head --intrinsics fr1 -t traj.txt "
            "-p tcp://*:5555\n\n"
            "exit status: 0 the source ended or Ctrl-C/SIGTERM stopped the run (every pose\n"
            "computed is written and published), 1 the run failed, 2 a usage error,\n"
            "3 the sensor stopped delivering frames (--stall-timeout), 4 the trajectory or\n"
            "the model could not be written (full disk, file-size limit, I/O error: the\n"
            "message names the file and the cause; poses were still published and the\n"
            "trajectory keeps the poses written before the failure, whole lines only).\n");
}

/* Exit code for a pipeline status. */
int kr_exit_code(kr_status s)
{
    if (s == KR_OK || s == KR_ERR_INTERRUPTED) return KR_EXIT_OK;
    if (s == KR_ERR_STALLED) return KR_EXIT_STALLED;
    return KR_EXIT_FAILURE;
}

/* Creates and runs a pipeline with the status line and Ctrl-C handling;
 * *out receives the pipeline (NULL when it could not be created) for the
 * caller to inspect and destroy. Errors are printed prefixed with `who`. */
kr_status kr_run_pipeline(kr_pipeline_config *cfg, const char *who, bool quiet, kr_pipeline **out,
                          kr_pipeline_stats *stats)
{
    static kr_status_line line;
    kr_stop_signals_start(); /* first: a signal during start-up stops the run like a later one */
    kr_status_line_init(&line, quiet, 0);
    line.interval = kr_progress_interval_s;
    cfg->on_frame = kr_status_line_frame;
    cfg->user = &line;
    *out = NULL;
    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, cfg);
    if (s != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, kr_strerror(s), kr_last_error());
        return s;
    }
    line.total = kr_source_length(kr_pipeline_source(p));
    /* Say what was assumed and why: intrinsics, depth units, backend. */
    fprintf(stderr, "%s: %s on %s (--backend %s%s)\n", who, kr_source_describe(kr_pipeline_source(p)),
            kr_device_describe(kr_pipeline_device(p)), kr_backend_name(cfg->device.backend),
            cfg->device.backend == KR_BACKEND_AUTO ? (kr_cuda_available() ? ": a GPU is present" : ": no GPU found")
                                                   : "");
    fprintf(stderr, "%s: %s\n", who, kr_source_settings(kr_pipeline_source(p)));
    kr_stop_signals_attach(p);
    s = kr_pipeline_run(p);
    kr_stop_signals_attach(NULL);
    kr_pipeline_get_stats(p, stats);
    kr_status_line_finish(&line, stats);
    if (s != KR_OK) fprintf(stderr, "%s: %s: %s\n", who, kr_strerror(s), kr_last_error());
    *out = p;
    return s;
}

typedef struct {
    bool quiet;
    const char *view;  /* --view [ADDR:]PORT, NULL = none */
    bool view_public;
} run_options;

static int run_option(int opt, const char *arg, void *user)
{
    run_options *o = user;
    if (opt == 'P') return kr_progress_option(arg);
    if (opt == 'V') {
        o->view = arg;
        return 0;
    }
    if (opt == 'W') {
        o->view_public = true;
        return 0;
    }
    if (opt != 'q') return -1;
    o->quiet = true;
    return 0;
}

/* Where the view subscribes: the --publish endpoint as seen from this
 * machine, or a private ipc:// socket the pipeline then publishes on.
 * Returns false after printing why the endpoint cannot be watched. */
static bool view_endpoint(kr_pipeline_config *cfg, char *out, size_t size, char *ipc, size_t ipc_size)
{
    const char *ep = cfg->publish.endpoint;
    if (!ep || !*ep) {
        const char *tmp = getenv("TMPDIR");
        snprintf(ipc, ipc_size, "ipc://%s/kinreg-view-%ld.sock", tmp && *tmp ? tmp : "/tmp", (long)getpid());
        cfg->publish.endpoint = ipc;
        snprintf(out, size, "%s", ipc);
        return true;
    }
    const char *colon = strrchr(ep, ':');
    if (!strncmp(ep, "tcp://", 6) && colon && colon > ep + 6) {
        if (!strcmp(colon + 1, "*")) {
            fprintf(stderr, "kinreg run: --view needs a fixed --publish port, not %s (or leave --publish out)\n",
                    ep);
            return false;
        }
        /* A wildcard or any-interface bind is reached on loopback here. */
        const char *host = ep + 6;
        size_t hn = (size_t)(colon - host);
        bool any = (hn == 1 && host[0] == '*') || (hn == 7 && !strncmp(host, "0.0.0.0", 7));
        if (any) snprintf(out, size, "tcp://127.0.0.1%s", colon);
        else snprintf(out, size, "%s", ep);
        return true;
    }
    snprintf(out, size, "%s", ep);
    return true;
}

int kr_cmd_run(int argc, char **argv)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    /* The trajectory streams to -t: memory keeps only the last poses, so
     * hours of tracking do not grow the process (docs/SECURITY.md). */
    cfg.trajectory_keep = 1024;
    run_options ro = {0};
    static const struct option own[] = {{"quiet", no_argument, 0, 'q'},
                                        {"progress", required_argument, 0, 'P'},
                                        {"view", required_argument, 0, 'V'},
                                        {"view-public", no_argument, 0, 'W'},
                                        {0, 0, 0, 0}};
    const kr_command_options opts = {own, "q", run_option, &ro, help};
    int rc = kr_parse_command(argc, argv, &cfg, &opts);
    if (rc >= 0) return rc;
    if (optind < argc) cfg.source.uri = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "kinreg run: unexpected argument '%s'\n", argv[optind]);
        return KR_EXIT_USAGE;
    }

    /* A live scan's model is written last: check every output path first. */
    if (cfg.trajectory_path && !kr_output_writable("kinreg run", "--trajectory", cfg.trajectory_path))
        return KR_EXIT_FAILURE;
    if (cfg.model_path && !kr_output_writable("kinreg run", "--save-model", cfg.model_path)) return KR_EXIT_FAILURE;
    if (cfg.trajectory_refined_path &&
        !kr_output_writable("kinreg run", "--trajectory-refined", cfg.trajectory_refined_path))
        return KR_EXIT_FAILURE;
    if (cfg.trajectory_final_path &&
        !kr_output_writable("kinreg run", "--trajectory-final", cfg.trajectory_final_path))
        return KR_EXIT_FAILURE;

    kr_view *view = NULL;
    if (ro.view) {
        char endpoint[300], ipc[300];
        if (!view_endpoint(&cfg, endpoint, sizeof endpoint, ipc, sizeof ipc)) return KR_EXIT_USAGE;
        kr_view_config vc = {.endpoint = endpoint, .http = ro.view, .public_bind = ro.view_public};
        int vrc = kr_view_start(&view, &vc, "kinreg run");
        if (vrc) return vrc;
    }

    kr_pipeline_stats stats;
    kr_pipeline *p = NULL;
    kr_status s = kr_run_pipeline(&cfg, "kinreg run", ro.quiet, &p, &stats);
    if (view) {
        /* Let the last poses and the final status reach the pages. */
        if (p) usleep(500000);
        kr_view_stop(&view);
    }
    if (!p) return s == KR_ERR_INVALID_ARG ? KR_EXIT_USAGE : KR_EXIT_FAILURE;
    /* Said only when true: a failed write was reported with its cause. */
    if (cfg.trajectory_path && !stats.trajectory_failed)
        fprintf(stderr, "kinreg run: trajectory written to %s (%llu poses)\n", cfg.trajectory_path,
                (unsigned long long)stats.poses_written);
    else if (cfg.trajectory_path)
        fprintf(stderr, "kinreg run: the trajectory %s is incomplete: %llu of %llu poses\n",
                cfg.trajectory_path, (unsigned long long)stats.poses_written,
                (unsigned long long)stats.frames_out);
    if (cfg.model_path && !stats.model_save_failed &&
        (s == KR_OK || s == KR_ERR_STALLED || stats.trajectory_failed))
        fprintf(stderr, "kinreg run: model written to %s\n", cfg.model_path);
    if (cfg.trajectory_refined_path && s == KR_OK)
        fprintf(stderr, "kinreg run: refined trajectory written to %s\n", cfg.trajectory_refined_path);
    if (cfg.trajectory_final_path && s == KR_OK)
        fprintf(stderr, "kinreg run: final trajectory written to %s\n", cfg.trajectory_final_path);
    kr_pipeline_destroy(&p);
    if (stats.trajectory_failed || stats.model_save_failed) return KR_EXIT_OUTPUT;
    return kr_exit_code(s);
}
