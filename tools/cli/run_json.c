/* The run's summary as JSON (run_json.h). */
#include "run_json.h"

#include "terminal_text.h" /* kr_json_string */

void kr_run_json_members(FILE *f, const char *source, const char *backend,
                         const kr_pipeline_stats *st, const char *error)
{
    unsigned long long searches = st->recoveries + st->recovery_failures;
    fputs("\"source\":", f);
    kr_json_string(f, source);
    fputs(",\"backend\":", f);
    kr_json_string(f, backend);
    fprintf(f,
            ",\"frames_in\":%llu,\"frames_out\":%llu,\"frames_lost\":%llu,"
            "\"frames_dropped\":%llu,\"frames_skipped\":%llu,\"elapsed_s\":%.3f,\"fps\":%.2f,"
            "\"loss_events\":%llu,\"loss_events_ended\":%llu,\"loss_events_ended_within_3\":%llu,"
            "\"recovery_searches_found\":%llu,\"recovery_searches_failed\":%llu,"
            "\"recovery_ms_mean\":%.3f,\"frames_filled\":%llu,\"frames_interpolated\":%llu,"
            "\"frames_unfilled\":%llu,\"latency_median_ms\":%.3f,\"latency_p99_ms\":%.3f,"
            "\"model_points\":%llu,\"poses_written\":%llu,\"trajectory_failed\":%s,"
            "\"model_save_failed\":%s,\"keyframes\":%llu,\"refinements\":%llu,",
            (unsigned long long)st->frames_in, (unsigned long long)st->frames_out,
            (unsigned long long)st->frames_lost, (unsigned long long)st->frames_dropped,
            (unsigned long long)st->frames_skipped, st->elapsed_s, st->fps,
            (unsigned long long)st->losses, (unsigned long long)st->losses_ended,
            (unsigned long long)st->losses_ended_fast, (unsigned long long)st->recoveries,
            (unsigned long long)st->recovery_failures,
            searches ? st->recovery_ms_total / (double)searches : 0.0,
            (unsigned long long)st->frames_filled, (unsigned long long)st->frames_interpolated,
            (unsigned long long)st->frames_unfilled, st->latency_median_ms, st->latency_p99_ms,
            (unsigned long long)st->model_points, (unsigned long long)st->poses_written,
            st->trajectory_failed ? "true" : "false", st->model_save_failed ? "true" : "false",
            (unsigned long long)st->keyframes, (unsigned long long)st->refinements);
    fputs("\"error\":", f);
    if (error)
        kr_json_string(f, error);
    else
        fputs("null", f);
}
