/* Trajectory plot: ground truth and the aligned estimate in two panels (top
 * view x–y, side view x–z), equal scale on both axes so shapes are not
 * distorted, metre ticks, a legend and the ATE in the title. The ground
 * truth is a wide grey band under the estimate's thin red line: where the
 * estimate is right the truth still shows on both sides of it (drawn alike,
 * the estimate hid it). The plot is SVG; a PNG is that SVG rendered by
 * librsvg (with cairo and the system's fonts), so both show the same
 * picture with real, antialiased text. */
#include <math.h>
#include <cairo.h>
#include <librsvg/rsvg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/files.h"
#include "kinreg/eval.h"

/* The ground truth's band and the estimate's line (SVG user units = PNG
 * pixels). */
#define GT_COLOUR "#9e9e9e"
#define GT_WIDTH 5
#define EST_COLOUR "#d62728"
#define EST_WIDTH 2
#define MARK_COLOUR "#ff7f0e"
#define MARK_RADIUS 3

enum {
    PANEL_X0 = 90,    /* left edge of the first panel */
    PANEL_Y0 = 70,    /* top edge of both panels */
    PANEL_SIZE = 380, /* square panels: equal scale on both axes */
    PANEL_STEP = 480, /* distance between the panels' left edges */
    LEGEND_Y = 520,
};

typedef struct {
    double lo_h, lo_v, span; /* data window (m): [lo, lo + span] on both axes */
    double tick;             /* tick spacing (m) */
    int axis_v;              /* 1 = y, 2 = z */
} panel;

typedef struct {
    const kr_trajectory *gt;
    double *est; /* aligned estimate positions, 3 per pose */
    size_t nest;
    const bool *marked; /* NULL, or one per estimate pose: drawn as a dot */
    const char *label;  /* the legend's name for the dots */
    size_t nmarked;
    panel p[2];
    char title[160];
} layout;

/* 1, 2 or 5 × 10^k, the smallest not below `raw`. */
static double nice_step(double raw)
{
    double e = pow(10, floor(log10(raw))), m = raw / e;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
}

static void panel_fit(panel *p, int axis_v, const kr_trajectory *gt, const double *est, size_t nest)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (size_t i = 0; i < gt->count + nest; i++) {
        const double *q = i < gt->count ? gt->poses[i].t : est + 3 * (i - gt->count);
        double v[2] = {q[0], q[axis_v]};
        for (int k = 0; k < 2; k++) {
            if (!isfinite(v[k])) continue;
            lo[k] = fmin(lo[k], v[k]);
            hi[k] = fmax(hi[k], v[k]);
        }
    }
    for (int k = 0; k < 2; k++)
        if (!(lo[k] <= hi[k])) lo[k] = hi[k] = 0;
    /* 8% margin, at least 10 cm so a trajectory standing still is visible. */
    double span = fmax(fmax(hi[0] - lo[0], hi[1] - lo[1]) * 1.16, 0.1);
    p->axis_v = axis_v;
    p->span = span;
    p->lo_h = 0.5 * (lo[0] + hi[0]) - 0.5 * span;
    p->lo_v = 0.5 * (lo[1] + hi[1]) - 0.5 * span;
    p->tick = nice_step(span / 6);
}

static double to_px(const panel *p, int index, double h)
{
    return PANEL_X0 + index * PANEL_STEP + (h - p->lo_h) / p->span * PANEL_SIZE;
}

static double to_py(const panel *p, double v)
{
    return PANEL_Y0 + PANEL_SIZE - (v - p->lo_v) / p->span * PANEL_SIZE;
}

/* Tick label: a multiple of the tick step, printed without noise digits. */
static void tick_label(double v, double step, char *buf, size_t size)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < 1e-9 * step) v = 0;
    snprintf(buf, size, "%.*f", decimals, v);
}

static const char *const axis_name[3] = {"x", "y", "z"};
static const char *const panel_name[2] = {"top view (x-y)", "side view (x-z)"};

/* ---- SVG ------------------------------------------------------------------ */

static void svg_polyline(FILE *f, const layout *L, int index, int which)
{
    const panel *p = &L->p[index];
    size_t n = which ? L->nest : L->gt->count;
    fprintf(f,
            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%d\" stroke-linejoin=\"round\" "
            "stroke-linecap=\"round\" points=\"",
            which ? EST_COLOUR : GT_COLOUR, which ? EST_WIDTH : GT_WIDTH);
    for (size_t i = 0; i < n; i++) {
        const double *q = which ? L->est + 3 * i : L->gt->poses[i].t;
        if (!isfinite(q[0]) || !isfinite(q[p->axis_v])) continue;
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", to_px(p, index, q[0]), to_py(p, q[p->axis_v]));
    }
    fputs("\"/>\n", f);
}

static void svg_marks(FILE *f, const layout *L, int index)
{
    const panel *p = &L->p[index];
    for (size_t i = 0; L->marked && i < L->nest; i++) {
        const double *q = L->est + 3 * i;
        if (!L->marked[i] || !isfinite(q[0]) || !isfinite(q[p->axis_v])) continue;
        fprintf(f, "<circle class=\"mark\" cx=\"%.2f\" cy=\"%.2f\" r=\"%d\" fill=\"%s\"/>\n",
                to_px(p, index, q[0]), to_py(p, q[p->axis_v]), MARK_RADIUS, MARK_COLOUR);
    }
}

/* The plot as SVG text, to a file or to memory (the PNG's source). */
static void emit_svg(FILE *f, const layout *L)
{
    int width = KR_EVAL_PLOT_WIDTH, height = KR_EVAL_PLOT_HEIGHT;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
            "%d\" "
            "font-family=\"sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"32\" text-anchor=\"middle\" font-size=\"20\">%s</text>\n",
            width, height, width, height, width, height, width / 2, L->title);
    for (int k = 0; k < 2; k++) {
        const panel *p = &L->p[k];
        int x0 = PANEL_X0 + k * PANEL_STEP, y0 = PANEL_Y0;
        fprintf(f, "<g id=\"panel-%s\">\n", k ? "xz" : "xy");
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
                x0 + PANEL_SIZE / 2, y0 - 10, panel_name[k]);
        /* Grid lines and tick labels at multiples of the tick step. */
        for (int axis = 0; axis < 2; axis++) {
            double lo = axis ? p->lo_v : p->lo_h;
            for (double v = ceil(lo / p->tick) * p->tick; v <= lo + p->span + 1e-9 * p->tick;
                 v += p->tick) {
                char label[32];
                tick_label(v, p->tick, label, sizeof label);
                if (axis == 0) {
                    double x = to_px(p, k, v);
                    fprintf(
                        f,
                        "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#dddddd\"/>\n"
                        "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" "
                        "font-size=\"12\">%s</text>\n",
                        x, y0, x, y0 + PANEL_SIZE, x, y0 + PANEL_SIZE + 16, label);
                } else {
                    double y = to_py(p, v);
                    fprintf(
                        f,
                        "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#dddddd\"/>\n"
                        "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\" "
                        "font-size=\"12\">%s</text>\n",
                        x0, y, x0 + PANEL_SIZE, y, x0 - 6, y + 4, label);
                }
            }
        }
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                "stroke=\"#444444\"/>\n",
                x0, y0, PANEL_SIZE, PANEL_SIZE);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">x [m]</text>\n",
                x0 + PANEL_SIZE / 2, y0 + PANEL_SIZE + 36);
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\" "
                "transform=\"rotate(-90 %d %d)\">%s "
                "[m]</text>\n",
                x0 - 58, y0 + PANEL_SIZE / 2, x0 - 58, y0 + PANEL_SIZE / 2, axis_name[p->axis_v]);
        svg_polyline(f, L, k, 0);
        svg_polyline(f, L, k, 1);
        svg_marks(f, L, k);
        fputs("</g>\n", f);
    }
    int lx = width / 2 - 190;
    fprintf(f,
            "<g id=\"legend\" font-size=\"14\">\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%d\"/>\n"
            "<text x=\"%d\" y=\"%d\">ground truth</text>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%d\"/>\n"
            "<text x=\"%d\" y=\"%d\">estimate (aligned)</text>\n",
            lx, LEGEND_Y, lx + 30, LEGEND_Y, GT_COLOUR, GT_WIDTH, lx + 38, LEGEND_Y + 5, lx + 170,
            LEGEND_Y, lx + 200, LEGEND_Y, EST_COLOUR, EST_WIDTH, lx + 208, LEGEND_Y + 5);
    if (L->nmarked) {
        fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"%s\"/>\n<text x=\"%d\" y=\"%d\">",
                lx + 400, LEGEND_Y, MARK_RADIUS, MARK_COLOUR, lx + 410, LEGEND_Y + 5);
        for (const char *c = L->label; *c; c++) /* the caller's text, as text */
            fputs(*c == '<'   ? "&lt;"
                  : *c == '>' ? "&gt;"
                  : *c == '&' ? "&amp;"
                              : (char[2]){*c, 0},
                  f);
        fputs("</text>\n", f);
    }
    fputs("</g>\n</svg>\n", f);
}

/* Both writers go through kr_output: the plot is written whole or not at
 * all, and a failure leaves the file that was there before untouched. */
static kr_status write_svg(const char *path, const layout *L)
{
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the plot", false);
    if (st != KR_OK) return st;
    emit_svg(o.f, L);
    return kr_output_commit(&o);
}

/* cairo's PNG writer hands the encoded bytes here. */
static cairo_status_t png_bytes(void *closure, const unsigned char *data, unsigned int length)
{
    return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS
                                                      : CAIRO_STATUS_WRITE_ERROR;
}

static kr_status write_png(const char *path, const layout *L)
{
    char *svg = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&svg, &len);
    if (!mem) return kr_error(KR_ERR_NOMEM, "plot %s: cannot hold the picture in memory", path);
    emit_svg(mem, L);
    if (fclose(mem) != 0) {
        free(svg);
        return kr_error(KR_ERR_NOMEM, "plot %s: cannot hold the picture in memory", path);
    }
    GError *gerr = NULL;
    RsvgHandle *handle = rsvg_handle_new_from_data((const guint8 *)svg, len, &gerr);
    free(svg);
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, KR_EVAL_PLOT_WIDTH, KR_EVAL_PLOT_HEIGHT);
    cairo_t *cr = cairo_create(surface);
    RsvgRectangle page = {0, 0, KR_EVAL_PLOT_WIDTH, KR_EVAL_PLOT_HEIGHT};
    bool drawn = handle && cairo_status(cr) == CAIRO_STATUS_SUCCESS &&
                 rsvg_handle_render_document(handle, cr, &page, &gerr);
    kr_status st = KR_OK;
    if (!drawn) {
        st = kr_error(KR_ERR_IO, "plot %s: librsvg could not draw it: %s", path,
                      gerr ? gerr->message : cairo_status_to_string(cairo_status(cr)));
    } else {
        kr_output o;
        st = kr_output_open(&o, path, "the plot", true);
        if (st == KR_OK) {
            cairo_surface_flush(surface);
            cairo_status_t cs = cairo_surface_write_to_png_stream(surface, png_bytes, o.f);
            /* A failed write is seen by the commit, with its cause. */
            if (cs != CAIRO_STATUS_SUCCESS && !ferror(o.f)) {
                kr_output_abort(&o);
                st = kr_error(KR_ERR_IO, "cannot write plot %s: %s", path,
                              cairo_status_to_string(cs));
            } else {
                st = kr_output_commit(&o);
            }
        }
    }
    if (gerr) g_error_free(gerr);
    if (handle) g_object_unref(handle);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    return st;
}

/* ---- entry ----------------------------------------------------------------- */

kr_status kr_eval_plot(const char *path, const kr_trajectory *gt, const kr_trajectory *est,
                       const kr_ate *ate)
{
    return kr_eval_plot_marked(path, gt, est, ate, NULL, NULL);
}

kr_status kr_eval_plot_marked(const char *path, const kr_trajectory *gt, const kr_trajectory *est,
                              const kr_ate *ate, const bool *marked, const char *label)
{
    if (!path || !gt || !est) return kr_error(KR_ERR_INVALID_ARG, "kr_eval_plot: NULL argument");
    const char *dot = strrchr(path, '.');
    int svg = dot && !strcasecmp(dot, ".svg"), png = dot && !strcasecmp(dot, ".png");
    if (!svg && !png)
        return kr_error(KR_ERR_INVALID_ARG,
                        "plot %s: unknown format (the file name must end in .svg or .png)", path);
    if ((gt->count && (!gt->poses || !gt->stamps)) || (est->count && (!est->poses || !est->stamps)))
        return kr_error(KR_ERR_INVALID_ARG, "kr_eval_plot: trajectory without arrays");

    /* Without a given ATE, align with the default association. */
    kr_ate own;
    if (!ate) {
        kr_status st = kr_eval_ate(gt, est, 0, &own);
        if (st != KR_OK) return st;
        ate = &own;
    }

    /* Ground truth only over the estimate's time span (plus the default
     * association window): a long ground truth beside a short run otherwise
     * set the scale and squeezed the estimate into a corner. When none of it
     * falls in the span (different clocks), all of it is drawn. */
    kr_trajectory span = {0};
    double t0 = INFINITY, t1 = -INFINITY;
    for (size_t i = 0; i < est->count; i++) {
        t0 = fmin(t0, est->stamps[i]);
        t1 = fmax(t1, est->stamps[i]);
    }
    for (size_t i = 0; i < gt->count; i++)
        if (gt->stamps[i] >= t0 - 0.02 && gt->stamps[i] <= t1 + 0.02 &&
            kr_trajectory_push(&span, gt->stamps[i], &gt->poses[i]) != KR_OK) {
            kr_trajectory_free(&span);
            return kr_error(KR_ERR_NOMEM, "plot %s: cannot allocate the ground truth", path);
        }
    if (span.count) gt = &span;

    layout L = {.gt = gt, .nest = est->count, .marked = marked, .label = label ? label : "marked"};
    for (size_t i = 0; marked && i < est->count; i++)
        L.nmarked += marked[i];
    L.est = malloc((est->count ? est->count : 1) * 3 * sizeof *L.est);
    if (!L.est) {
        kr_trajectory_free(&span);
        return kr_error(KR_ERR_NOMEM, "plot %s: cannot allocate %zu points", path, est->count);
    }
    for (size_t i = 0; i < est->count; i++)
        kr_pose_apply(&ate->alignment, est->poses[i].t, L.est + 3 * i);
    panel_fit(&L.p[0], 1, gt, L.est, L.nest);
    panel_fit(&L.p[1], 2, gt, L.est, L.nest);
    snprintf(L.title, sizeof L.title, "ATE RMSE %.2f cm (%zu pairs)", ate->rmse * 100, ate->pairs);

    kr_status st = svg ? write_svg(path, &L) : write_png(path, &L);
    free(L.est);
    kr_trajectory_free(&span);
    return st;
}
