/* kinreg run — track a source, publish poses, write trajectory and model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "tools/cli/output_path.h"
#include "tools/cli/pipeline_options.h"
#include "tools/cli/run_json.h"
#include "tools/cli/status_options.h"
#include "tools/cli/status_line.h"
#include "tools/cli/stop_signals.h"
#include "tools/view/view.h"

/* Exit code for a pipeline status. */
/* Creates and runs a pipeline with the status line and Ctrl-C handling;
 * *out receives the pipeline (NULL when it could not be created) for the
 * caller to inspect and destroy. Errors are printed prefixed with `who`. */
kr_status kr_run_pipeline(kr_pipeline_config *cfg, const char *who, const kr_status_options *status,
                          kr_pipeline **out, kr_pipeline_stats *stats)
{
    static kr_status_line line;
    kr_stop_signals_start(); /* first: a signal during start-up stops the run like a later one */
    kr_status_options_apply(status);
    kr_status_line_init(&line, status->quiet, 0);
    line.interval = status->progress_s;
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
    fprintf(stderr, "%s: %s on %s (--backend %s%s)\n", who,
            kr_source_describe(kr_pipeline_source(p)), kr_device_describe(kr_pipeline_device(p)),
            kr_backend_name(cfg->device.backend),
            cfg->device.backend == KR_BACKEND_AUTO
                ? (kr_cuda_available() ? ": a GPU is present" : ": no GPU found")
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
    kr_pipeline_config cfg;
    kr_status_options status;
    const char *view; /* --view [ADDR:]PORT, NULL = none */
    bool view_public;
    bool json;
} run_options;

#define RUN_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                 \
    TEXT(KR_HELP("usage: kinreg run [OPTIONS] [SOURCE]\n\n"                                        \
                 "Tracks every frame of SOURCE against the running model, publishes poses over\n"  \
                 "ZeroMQ, and writes the trajectory and model. Ctrl-C stops cleanly: every pose\n" \
                 "computed so far is written and published.\n\n"))                                 \
    GROUP(kr_pipeline_option_table, cfg, KR_SHOW_ALL)                                              \
    GROUP(kr_status_option_table, status, KR_SHOW_ALL)                                             \
    OPT(VIEW, (0, "view", "[ADDR:]PORT", KR_TEXT), o->view = arg,                                  \
        KR_HELP("serve the live view in the browser on PORT (ADDR defaults to\n"                   \
                "127.0.0.1; PORT 0 = any free port); it subscribes to\n"                           \
                "--publish, or to a private ipc:// socket without it"))                            \
    OPT(VIEW_PUBLIC, KR_OPT_VIEW_PUBLIC, o->view_public = true,                                    \
        KR_HELP("allow a view ADDR other than loopback (e.g. 0.0.0.0:8080)"))                      \
    OPT(JSON, KR_OPT_JSON, o->json = true,                                                         \
        KR_HELP("at the end, the run summary as one JSON object on standard\n"                     \
                "output (the summary lines stay on stderr)"))                                      \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nexample: kinreg run tum:../shared/data/tum/fr1_xyz_head --intrinsics fr1 "     \
                 "-t traj.txt -p tcp://*:5555\n\n"                                                 \
                 "exit status: 0 the source ended or Ctrl-C/SIGTERM stopped the run (every pose\n" \
                 "computed is written and published), 1 the run failed, 2 a usage error,\n"        \
                 "3 the sensor stopped delivering frames (--stall-timeout), 4 the trajectory,\n"   \
                 "the model or standard output could not be written (full disk, file-size\n"       \
                 "limit, I/O error: the message names the file and the cause; poses were still\n"  \
                 "published and the trajectory keeps the poses written before the failure,\n"      \
                 "whole lines only).\n"))
KR_OPTION_TABLE(run_option_table, RUN_OPTIONS, run_options, o, NULL);

static const kr_command run_command = {"run", &run_option_table, KR_HELP_LAYOUT_DEFAULT, 0, NULL};

/* Where the view subscribes: the --publish endpoint as seen from this
 * machine, or a private ipc:// socket the pipeline then publishes on.
 * Returns false after printing why the endpoint cannot be watched. */
static bool view_endpoint(kr_pipeline_config *cfg, char *out, size_t size, char *ipc,
                          size_t ipc_size)
{
    const char *ep = cfg->publish.endpoint;
    if (!ep || !*ep) {
        const char *tmp = getenv("TMPDIR");
        snprintf(ipc, ipc_size, "ipc://%s/kinreg-view-%ld.sock", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid());
        cfg->publish.endpoint = ipc;
        snprintf(out, size, "%s", ipc);
        return true;
    }
    const char *colon = strrchr(ep, ':');
    if (!strncmp(ep, "tcp://", 6) && colon && colon > ep + 6) {
        if (!strcmp(colon + 1, "*")) {
            fprintf(stderr,
                    "kinreg run: --view needs a fixed --publish port, not %s (or leave --publish "
                    "out)\n",
                    ep);
            return false;
        }
        /* A wildcard or any-interface bind is reached on loopback here. */
        const char *host = ep + 6;
        size_t hn = (size_t)(colon - host);
        bool any = (hn == 1 && host[0] == '*') || (hn == 7 && !strncmp(host, "0.0.0.0", 7));
        if (any)
            snprintf(out, size, "tcp://127.0.0.1%s", colon);
        else
            snprintf(out, size, "%s", ep);
        return true;
    }
    snprintf(out, size, "%s", ep);
    return true;
}

int kr_cmd_run(int argc, char **argv)
{
    run_options ro = {.status = KR_STATUS_OPTIONS_DEFAULT};
    kr_pipeline_config_default(&ro.cfg);
    /* The trajectory streams to -t: memory keeps only the last poses, so
     * hours of tracking do not grow the process (docs/SECURITY.md). */
    ro.cfg.trajectory_keep = 1024;
    int rc = kr_command_parse(&run_command, argc, argv, &ro);
    if (rc >= 0) return rc;
    kr_pipeline_config cfg = ro.cfg;
    if (optind < argc) cfg.source.uri = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "kinreg run: unexpected argument '%s'\n", argv[optind]);
        return KR_EXIT_USAGE;
    }

    /* A live scan's model is written last: check every output path first. */
    if (cfg.trajectory_path &&
        !kr_output_writable("kinreg run", "--trajectory", cfg.trajectory_path))
        return KR_EXIT_USAGE;
    if (cfg.model_path && !kr_output_writable("kinreg run", "--save-model", cfg.model_path))
        return KR_EXIT_USAGE;
    if (cfg.mesh_path && !kr_output_writable("kinreg run", "--mesh", cfg.mesh_path))
        return KR_EXIT_USAGE;
    if (cfg.trajectory_refined_path &&
        !kr_output_writable("kinreg run", "--trajectory-refined", cfg.trajectory_refined_path))
        return KR_EXIT_USAGE;
    if (cfg.trajectory_final_path &&
        !kr_output_writable("kinreg run", "--trajectory-final", cfg.trajectory_final_path))
        return KR_EXIT_USAGE;

    kr_view *view = NULL;
    /* The pipeline publishes on `ipc` (cfg.publish.endpoint points into it)
     * until it is destroyed: it lives as long as the function. */
    char endpoint[300], ipc[300];
    if (ro.view) {
        if (!view_endpoint(&cfg, endpoint, sizeof endpoint, ipc, sizeof ipc)) return KR_EXIT_USAGE;
        kr_view_config vc = {.endpoint = endpoint,
                             .http = ro.view,
                             .public_bind = ro.view_public,
                             .http_option = "--view"};
        int vrc = kr_view_start(&view, &vc, "kinreg run");
        if (vrc) return vrc;
    }

    kr_pipeline_stats stats;
    kr_pipeline *p = NULL;
    kr_status s = kr_run_pipeline(&cfg, "kinreg run", &ro.status, &p, &stats);
    char error[600] = "";
    if (s != KR_OK) snprintf(error, sizeof error, "%s: %s", kr_strerror(s), kr_last_error());
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
    if (cfg.mesh_path && !stats.mesh_save_failed &&
        (s == KR_OK || s == KR_ERR_STALLED || stats.trajectory_failed || stats.model_save_failed))
        fprintf(stderr,
                "kinreg run: mesh written to %s (%zu vertices, %zu triangles from %llu frames; "
                "%llu skipped while the surface was busy)\n",
                cfg.mesh_path, stats.mesh_vertices, stats.mesh_faces,
                (unsigned long long)stats.mesh_frames, (unsigned long long)stats.mesh_skipped);
    if (stats.mesh_refreshes)
        fprintf(stderr,
                "kinreg run: the surface meshed for viewers %llu times (the last %zu triangles; "
                "%.0f ms each to mesh and pack)\n",
                (unsigned long long)stats.mesh_refreshes, stats.mesh_refresh_faces,
                1e3 * stats.mesh_refresh_s);
    if (cfg.trajectory_refined_path && s == KR_OK)
        fprintf(stderr, "kinreg run: refined trajectory written to %s\n",
                cfg.trajectory_refined_path);
    if (cfg.trajectory_final_path && s == KR_OK)
        fprintf(stderr, "kinreg run: final trajectory written to %s\n", cfg.trajectory_final_path);
    if (ro.json) {
        putchar('{');
        kr_run_json_members(stdout, kr_source_describe(kr_pipeline_source(p)),
                            kr_device_describe(kr_pipeline_device(p)), &stats,
                            s == KR_OK ? NULL : error);
        fputs("}\n", stdout);
    }
    kr_pipeline_destroy(&p);
    if (stats.trajectory_failed || stats.model_save_failed || stats.mesh_save_failed)
        return KR_EXIT_OUTPUT;
    return kr_exit_code(s);
}
