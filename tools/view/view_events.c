/* Event data for the view's page (tools/view/view_events.h). */
#include "view_events.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct {
    char *s;
    size_t n, cap;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    if (t->n + 1 >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    if (k > 0) t->n = t->n + (size_t)k < t->cap ? t->n + (size_t)k : t->cap - 1;
}

/* JSON has no NaN or infinity: null, as `kinreg sub` prints them. */
static void number(text *t, const char *key, double v)
{
    if (isfinite(v))
        add(t, ",\"%s\":%.17g", key, v);
    else
        add(t, ",\"%s\":null", key);
}

size_t kr_view_pose_json(const kr_pose_msg *p, uint64_t gap, char *out, size_t cap)
{
    text t = {out, 0, cap};
    add(&t, "{\"topic\":\"%s\",\"seq\":%" PRIu64 ",\"frame\":%" PRIu64, kr_topic_name(p->topic),
        p->seq, p->frame_index);
    number(&t, "timestamp", p->timestamp);
    add(&t, ",\"t\":[%.17g,%.17g,%.17g],\"q\":[%.17g,%.17g,%.17g,%.17g]", p->t[0], p->t[1], p->t[2],
        p->q[0], p->q[1], p->q[2], p->q[3]);
    add(&t, ",\"state\":\"%s\",\"method\":\"%s\",\"iterations\":%u", kr_wire_state_name(p->state),
        kr_method_name(p->method), p->iterations);
    number(&t, "inlier_fraction", p->inlier_fraction);
    number(&t, "rms", p->rms);
    number(&t, "condition", p->condition);
    number(&t, "latency_ms", p->latency_ms);
    add(&t, ",\"gap\":%" PRIu64 "}", gap);
    return t.n;
}

size_t kr_view_status_json(const kr_status_msg *s, uint64_t gap, char *out, size_t cap)
{
    text t = {out, 0, cap};
    add(&t, "{\"topic\":\"status\",\"seq\":%" PRIu64 ",\"event\":\"%s\",\"state\":\"%s\"", s->seq,
        kr_event_name(s->event), kr_wire_state_name(s->state));
    add(&t,
        ",\"frames_in\":%" PRIu64 ",\"frames_out\":%" PRIu64 ",\"frames_dropped\":%" PRIu64
        ",\"frames_lost\":%" PRIu64 ",\"model_points\":%" PRIu64 ",\"frames_total\":%" PRIu64,
        s->frames_in, s->frames_out, s->frames_dropped, s->frames_lost, s->model_points,
        s->frames_total);
    number(&t, "fps", s->fps);
    add(&t, ",\"text\":\"");
    /* The text is the sender's UTF-8: escape what JSON and SSE lines need. */
    for (const unsigned char *c = (const unsigned char *)s->text; *c; c++) {
        if (*c == '"' || *c == '\\')
            add(&t, "\\%c", *c);
        else if (*c < 0x20)
            add(&t, "\\u%04x", *c);
        else
            add(&t, "%c", *c);
    }
    add(&t, "\",\"gap\":%" PRIu64 "}", gap);
    return t.n;
}

size_t kr_view_base64(const uint8_t *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[k++] = abc[(v >> 18) & 63];
        out[k++] = abc[(v >> 12) & 63];
        out[k++] = i + 1 < n ? abc[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[k] = '\0';
    return k;
}
