/* Status line: frames, input and output fps, tracking state, model size,
 * drops, latency; and the summary with latency percentiles at the end. */
#include "status_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void kr_status_line_init(kr_status_line *line, bool quiet, unsigned total)
{
    line->enabled = !quiet;
    line->terminal = isatty(STDERR_FILENO);
    line->interval = KR_PROGRESS_INTERVAL_S;
    line->last_print = 0;
    line->total = total;
}

int kr_terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

void kr_status_line_format(char *buf, size_t size, int width, const kr_frame_result *r,
                           const kr_pipeline_stats *st, unsigned total)
{
    char progress[32] = "";
    if (total) snprintf(progress, sizeof progress, "/%u", total);
    /* Latency: capture → publish of the last pose sent, or capture → pose
     * ready before the first one has left. */
    double latency = st->latency_last_ms > 0 ? st->latency_last_ms : r->latency_ms;
    const char *state = kr_track_state_name(r->track.state);
    unsigned long long out = st->frames_out, lost = st->frames_lost, dropped = st->frames_dropped,
                       points = st->model_points;
    size_t limit = width > 1 ? (size_t)width - 1 : 0;
    if (limit >= size) limit = size - 1;
    /* Longest first; the first that fits is used (about 105, 75, 50 columns). */
    snprintf(buf, size,
             "frame %llu%s | in %.1f fps, out %.1f fps | %s | model %llu pts | LOST %llu | dropped "
             "%llu | "
             "latency %.1f ms",
             out, progress, st->input_fps, st->fps, state, points, lost, dropped, latency);
    if (strlen(buf) <= limit) return;
    snprintf(buf, size, "frame %llu%s | %.1f fps | %s | LOST %llu | drop %llu | %.0f ms", out,
             progress, st->fps, state, lost, dropped, latency);
    if (strlen(buf) <= limit) return;
    snprintf(buf, size, "%llu%s %.0ffps %s L%llu", out, progress, st->fps, state, lost);
    if (strlen(buf) > limit) buf[limit] = '\0';
}

void kr_status_line_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    kr_status_line *line = user;
    if (!line->enabled) return;
    double now = kr_now();
    if (!line->terminal) {
        /* A file or pipe: no redraws, a plain line every few seconds. */
        if (line->interval <= 0) return;
        if (line->last_print == 0) line->last_print = now;
        if (now - line->last_print < line->interval) return;
        line->last_print = now;
        char text[256];
        kr_status_line_format(text, sizeof text, (int)sizeof text, r, st, line->total);
        fprintf(stderr, "kinreg: %s\n", text);
        fflush(stderr);
        return;
    }
    if (now - line->last_print < 0.2) return;
    line->last_print = now;
    char text[256];
    /* One column for the leading space. */
    kr_status_line_format(text, sizeof text, kr_terminal_width() - 1, r, st, line->total);
    fprintf(stderr, "\r\033[K %s", text);
    fflush(stderr);
}

void kr_status_line_finish(kr_status_line *line, const kr_pipeline_stats *st)
{
    if (line->enabled && line->terminal) fprintf(stderr, "\r\033[K");
    fprintf(stderr,
            "kinreg: %llu frames in %.2f s (%.1f frames/s), LOST %llu, dropped %llu, skipped %llu, "
            "model %llu points\n",
            (unsigned long long)st->frames_out, st->elapsed_s, st->fps,
            (unsigned long long)st->frames_lost, (unsigned long long)st->frames_dropped,
            (unsigned long long)st->frames_skipped, (unsigned long long)st->model_points);
    if (st->keyframes)
        fprintf(stderr,
                "kinreg: live refiner: %llu keyframes, %llu windows refined (%llu moved them, "
                "%llu failed), the last in %.0f ms; model re-fused %llu times\n",
                (unsigned long long)st->keyframes, (unsigned long long)st->refinements,
                (unsigned long long)st->refine_corrections, (unsigned long long)st->refine_failures,
                st->refine_ms_last, (unsigned long long)st->refine_refusions);
    if (st->losses)
        fprintf(stderr,
                "kinreg: loss events %llu, ended %llu (%llu within 3 frames with depth); recovery "
                "searches %llu found the pose, %llu failed, %.1f ms each on average\n",
                (unsigned long long)st->losses, (unsigned long long)st->losses_ended,
                (unsigned long long)st->losses_ended_fast, (unsigned long long)st->recoveries,
                (unsigned long long)st->recovery_failures,
                st->recoveries + st->recovery_failures
                    ? st->recovery_ms_total / (double)(st->recoveries + st->recovery_failures)
                    : 0.0);
    if (st->frames_filled + st->frames_interpolated + st->frames_unfilled)
        fprintf(stderr,
                "kinreg: final trajectory: %llu LOST frames tracked backwards, %llu covered ones "
                "interpolated, %llu keep their published pose (%.0f ms at the end)\n",
                (unsigned long long)st->frames_filled, (unsigned long long)st->frames_interpolated,
                (unsigned long long)st->frames_unfilled, st->fill_ms);
    if (st->frames_out)
        fprintf(stderr, "kinreg: latency capture -> publish: median %.2f ms, p99 %.2f ms\n",
                st->latency_median_ms, st->latency_p99_ms);
    if (st->messages_dropped)
        fprintf(stderr,
                "kinreg: publisher dropped %llu messages: a subscriber read too slowly (they see "
                "sequence gaps)\n",
                (unsigned long long)st->messages_dropped);
}
