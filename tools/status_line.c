/* Status line: frames, input and output fps, tracking state, model size,
 * drops, latency; and the summary with latency percentiles at the end. */
#include "status_line.h"

#include <stdio.h>
#include <unistd.h>

void kr_status_line_init(kr_status_line *line, bool quiet, unsigned total)
{
    line->enabled = !quiet && isatty(STDERR_FILENO);
    line->last_print = 0;
    line->total = total;
}

void kr_status_line_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    kr_status_line *line = user;
    if (!line->enabled) return;
    double now = kr_now();
    if (now - line->last_print < 0.2) return;
    line->last_print = now;
    char progress[32] = "";
    if (line->total) snprintf(progress, sizeof progress, "/%u", line->total);
    /* Latency: capture → publish of the last pose sent, or capture → pose
     * ready before the first one has left. */
    double latency = st->latency_last_ms > 0 ? st->latency_last_ms : r->latency_ms;
    fprintf(stderr,
            "\r\033[K frame %llu%s | in %.1f fps, out %.1f fps | %s | model %llu pts | lost %llu | "
            "dropped %llu | latency %.1f ms",
            (unsigned long long)st->frames_out, progress, st->input_fps, st->fps,
            kr_track_state_name(r->track.state), (unsigned long long)st->model_points,
            (unsigned long long)st->frames_lost, (unsigned long long)st->frames_dropped, latency);
    fflush(stderr);
}

void kr_status_line_finish(kr_status_line *line, const kr_pipeline_stats *st)
{
    if (line->enabled) fprintf(stderr, "\r\033[K");
    fprintf(stderr,
            "kinreg: %llu frames in %.2f s (%.1f frames/s), lost %llu, dropped %llu, skipped %llu, "
            "model %llu points\n",
            (unsigned long long)st->frames_out, st->elapsed_s, st->fps,
            (unsigned long long)st->frames_lost, (unsigned long long)st->frames_dropped,
            (unsigned long long)st->frames_skipped, (unsigned long long)st->model_points);
    if (st->losses)
        fprintf(
            stderr,
            "kinreg: tracking lost %llu times, found again %llu (%llu within 3 frames with depth); "
            "recoveries %llu, failed attempts %llu, %.1f ms per attempt on average\n",
            (unsigned long long)st->losses, (unsigned long long)st->losses_ended,
            (unsigned long long)st->losses_ended_fast, (unsigned long long)st->recoveries,
            (unsigned long long)st->recovery_failures,
            st->recoveries + st->recovery_failures
                ? st->recovery_ms_total / (double)(st->recoveries + st->recovery_failures)
                : 0.0);
    if (st->frames_out)
        fprintf(stderr, "kinreg: latency capture -> publish: median %.2f ms, p99 %.2f ms\n",
                st->latency_median_ms, st->latency_p99_ms);
}
