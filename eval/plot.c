/* Trajectory plot: ground truth and the aligned estimate in two panels (top
 * view x–y, side view x–z), equal scale on both axes so shapes are not
 * distorted, metre ticks, a legend and the ATE in the title. The ground
 * truth is a wide grey band under the estimate's thin red line: where the
 * estimate is right the truth still shows on both sides of it (drawn alike,
 * the estimate hid it). One layout is
 * computed once and drawn by two back ends: SVG text and an RGB raster saved
 * with libpng (lines by Bresenham, labels in a built-in 5×7 bitmap font, so the
 * PNG needs no font library). */
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/files.h"
#include "kinreg/eval.h"

/* The ground truth's band and the estimate's line (SVG user units = PNG
 * pixels). */
#define GT_COLOUR "#9e9e9e"
#define GT_RGB 0x9e9e9eu
#define GT_WIDTH 5
#define EST_COLOUR "#d62728"
#define EST_RGB 0xd62728u
#define EST_WIDTH 2
#define MARK_COLOUR "#ff7f0e"
#define MARK_RGB 0xff7f0eu
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

/* Both writers go through kr_output: the plot is written whole or not at
 * all, and a failure leaves the file that was there before untouched. */
static kr_status write_svg(const char *path, const layout *L)
{
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the plot", false);
    if (st != KR_OK) return st;
    FILE *f = o.f;
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
    return kr_output_commit(&o);
}

/* ---- raster ---------------------------------------------------------------- */

typedef struct {
    uint8_t *rgb;
    int w, h;
} image;

static void put(image *im, int x, int y, uint32_t c)
{
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return;
    uint8_t *p = im->rgb + 3 * ((size_t)y * im->w + x);
    p[0] = (uint8_t)(c >> 16);
    p[1] = (uint8_t)(c >> 8);
    p[2] = (uint8_t)c;
}

/* Bresenham; a pen of N draws an N×N dot per step, about the line (2 for the
 * estimate's line, 5 for the ground truth's band). */
static void line(image *im, double fx0, double fy0, double fx1, double fy1, uint32_t c, int pen)
{
    int x0 = (int)lround(fx0), y0 = (int)lround(fy0), x1 = (int)lround(fx1), y1 = (int)lround(fy1);
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1,
        err = dx + dy;
    for (;;) {
        for (int a = -(pen - 1) / 2; a <= pen / 2; a++)
            for (int b = -(pen - 1) / 2; b <= pen / 2; b++)
                put(im, x0 + a, y0 + b, c);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* 5×7 glyphs for the characters the plot writes; rows top to bottom, '1' is
 * ink. Anything else draws as a blank. */
/* clang-format off */
static const struct {
    char c;
    const char *rows;
} glyphs[] = {
    {'0', "01110100011001110101110011000101110"}, {'1', "00100011000010000100001000010001110"},
    {'2', "01110100010000100010001000100011111"}, {'3', "11111000100010000010000011000101110"},
    {'4', "00010001100101010010111110001000010"}, {'5', "11111100001111000001000011000101110"},
    {'6', "00110010001000011110100011000101110"}, {'7', "11111000010001000100010000100001000"},
    {'8', "01110100011000101110100011000101110"}, {'9', "01110100011000101111000010001001100"},
    {'.', "00000000000000000000000000110001100"}, {'-', "00000000000000011111000000000000000"},
    {'(', "00010001000100001000010000010000010"}, {')', "01000001000001000010000100010001000"},
    {'[', "01110010000100001000010000100001110"}, {']', "01110000100001000010000100001001110"},
    {':', "00000011000110000000011000110000000"}, {',', "00000000000000000000001100010001000"},
    {'A', "01110100011000111111100011000110001"}, {'E', "11111100001000011110100001000011111"},
    {'M', "10001110111010110101100011000110001"}, {'R', "11110100011000111110101001001010001"},
    {'S', "01111100001000001110000010000111110"}, {'T', "11111001000010000100001000010000100"},
    {'a', "00000000000111000001011111000101111"}, {'c', "00000000000111010000100001000101110"},
    {'d', "00001000010110110011100011000101111"}, {'e', "00000000000111010001111111000001110"},
    {'f', "00110010010100011100010000100001000"}, {'g', "00000011111000110001011110000101110"},
    {'h', "10000100001011011001100011000110001"}, {'i', "00100000000110000100001000010001110"},
    {'l', "01100001000010000100001000010001110"}, {'m', "00000000001101010101101011000110001"},
    {'n', "00000000001011011001100011000110001"}, {'o', "00000000000111010001100011000101110"},
    {'p', "00000000001111010001111101000010000"}, {'r', "00000000001011011001100001000010000"},
    {'s', "00000000000111010000011100000111110"}, {'t', "01000010001110001000010000100100110"},
    {'u', "00000000001000110001100011001101101"}, {'v', "00000000001000110001100010101000100"},
    {'w', "00000000001000110001101011010101010"}, {'x', "00000000001000101010001000101010001"},
    {'y', "00000000001000110001011110000101110"}, {'z', "00000000001111100010001000100011111"},
};
/* clang-format on */

static const char *glyph(char c)
{
    for (size_t i = 0; i < sizeof glyphs / sizeof glyphs[0]; i++)
        if (glyphs[i].c == c) return glyphs[i].rows;
    return NULL;
}

/* Draws text with its left edge at x (align 0), centred (1) or right-aligned
 * (2), its vertical middle at y; scale enlarges each font pixel. */
static void text(image *im, int x, int y, const char *s, int scale, int align, uint32_t c)
{
    int adv = 6 * scale, width = (int)strlen(s) * adv - scale;
    x -= align == 1 ? width / 2 : align == 2 ? width : 0;
    y -= 7 * scale / 2;
    for (; *s; s++, x += adv) {
        const char *g = glyph(*s);
        if (!g) continue;
        for (int r = 0; r < 7; r++)
            for (int col = 0; col < 5; col++)
                if (g[5 * r + col] == '1')
                    for (int a = 0; a < scale; a++)
                        for (int b = 0; b < scale; b++)
                            put(im, x + col * scale + a, y + r * scale + b, c);
    }
}

static void raster_polyline(image *im, const layout *L, int index, int which)
{
    const panel *p = &L->p[index];
    size_t n = which ? L->nest : L->gt->count;
    double px = 0, py = 0;
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        const double *q = which ? L->est + 3 * i : L->gt->poses[i].t;
        if (!isfinite(q[0]) || !isfinite(q[p->axis_v])) continue;
        double x = to_px(p, index, q[0]), y = to_py(p, q[p->axis_v]);
        if (have) line(im, px, py, x, y, which ? EST_RGB : GT_RGB, which ? EST_WIDTH : GT_WIDTH);
        px = x, py = y, have = 1;
    }
}

static void rasterise(image *im, const layout *L)
{
    memset(im->rgb, 255, (size_t)im->w * im->h * 3);
    const uint32_t black = 0x000000, grid = 0xdddddd, frame = 0x444444;
    text(im, im->w / 2, 30, L->title, 2, 1, black);
    for (int k = 0; k < 2; k++) {
        const panel *p = &L->p[k];
        int x0 = PANEL_X0 + k * PANEL_STEP, y0 = PANEL_Y0, x1 = x0 + PANEL_SIZE,
            y1 = y0 + PANEL_SIZE;
        text(im, x0 + PANEL_SIZE / 2, y0 - 16, panel_name[k], 2, 1, black);
        for (int axis = 0; axis < 2; axis++) {
            double lo = axis ? p->lo_v : p->lo_h;
            for (double v = ceil(lo / p->tick) * p->tick; v <= lo + p->span + 1e-9 * p->tick;
                 v += p->tick) {
                char label[32];
                tick_label(v, p->tick, label, sizeof label);
                if (axis == 0) {
                    double x = to_px(p, k, v);
                    line(im, x, y0, x, y1, grid, 1);
                    line(im, x, y1, x, y1 + 5, frame, 1);
                    text(im, (int)lround(x), y1 + 18, label, 2, 1, black);
                } else {
                    double y = to_py(p, v);
                    line(im, x0, y, x1, y, grid, 1);
                    line(im, x0 - 5, y, x0, y, frame, 1);
                    text(im, x0 - 8, (int)lround(y), label, 2, 2, black);
                }
            }
        }
        line(im, x0, y0, x1, y0, frame, 1);
        line(im, x1, y0, x1, y1, frame, 1);
        line(im, x1, y1, x0, y1, frame, 1);
        line(im, x0, y1, x0, y0, frame, 1);
        text(im, x0 + PANEL_SIZE / 2, y1 + 42, "x [m]", 2, 1, black);
        char vlabel[16];
        snprintf(vlabel, sizeof vlabel, "%s [m]", axis_name[p->axis_v]);
        text(im, x0 - 46, y0 - 12, vlabel, 2, 1, black);
        raster_polyline(im, L, k, 0);
        raster_polyline(im, L, k, 1);
        for (size_t i = 0; L->marked && i < L->nest; i++) {
            const double *q = L->est + 3 * i;
            if (!L->marked[i] || !isfinite(q[0]) || !isfinite(q[p->axis_v])) continue;
            double x = to_px(p, k, q[0]), y = to_py(p, q[p->axis_v]);
            line(im, x, y, x, y, MARK_RGB, 2 * MARK_RADIUS + 1);
        }
    }
    int lx = im->w / 2 - 190;
    line(im, lx, LEGEND_Y, lx + 30, LEGEND_Y, GT_RGB, GT_WIDTH);
    text(im, lx + 38, LEGEND_Y, "ground truth", 2, 0, black);
    line(im, lx + 200, LEGEND_Y, lx + 230, LEGEND_Y, EST_RGB, EST_WIDTH);
    text(im, lx + 238, LEGEND_Y, "estimate (aligned)", 2, 0, black);
    if (L->nmarked) {
        line(im, lx + 400, LEGEND_Y, lx + 400, LEGEND_Y, MARK_RGB, 2 * MARK_RADIUS + 1);
        text(im, lx + 410, LEGEND_Y, L->label, 2, 0, black);
    }
}

typedef struct {
    char message[200];
} png_err;

/* libpng reports errors through this callback, which must not return. */
static void on_png_error(png_structp png, png_const_charp msg)
{
    png_err *e = png_get_error_ptr(png);
    snprintf(e->message, sizeof e->message, "%s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* The part libpng may longjmp out of; nothing it changes lives in
 * registers across the jump. Returns 0 on success. */
static int encode_png(png_structp png, png_infop info, FILE *f, const image *im)
{
    if (setjmp(png_jmpbuf(png))) return 1;
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)im->w, (png_uint_32)im->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < im->h; y++)
        png_write_row(png, im->rgb + (size_t)y * im->w * 3);
    png_write_end(png, NULL);
    return 0;
}

static kr_status write_png(const char *path, const image *im)
{
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the plot", true);
    if (st != KR_OK) return st;
    png_err err = {""};
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        kr_output_abort(&o);
        return kr_error(KR_ERR_NOMEM, "cannot write plot %s: libpng could not start", path);
    }
    int failed = encode_png(png, info, o.f, im);
    png_destroy_write_struct(&png, &info);
    /* A failed write is seen by the commit too, with its cause (libpng
     * only says "Write Error"). */
    if (failed && !ferror(o.f)) {
        kr_output_abort(&o);
        return kr_error(KR_ERR_IO, "cannot write plot %s: %s", path, err.message);
    }
    return kr_output_commit(&o);
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

    kr_status st;
    if (svg) {
        st = write_svg(path, &L);
    } else {
        image im = {NULL, KR_EVAL_PLOT_WIDTH, KR_EVAL_PLOT_HEIGHT};
        im.rgb = malloc((size_t)im.w * im.h * 3);
        if (!im.rgb) {
            free(L.est);
            kr_trajectory_free(&span);
            return kr_error(KR_ERR_NOMEM, "plot %s: cannot allocate the image", path);
        }
        rasterise(&im, &L);
        st = write_png(path, &im);
        free(im.rgb);
    }
    free(L.est);
    kr_trajectory_free(&span);
    return st;
}
