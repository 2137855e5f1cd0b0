/* kinreg — trajectory evaluation: absolute trajectory error after rigid
 * alignment (Horn/Umeyama) and relative pose error, as in the TUM benchmark. */
#ifndef KINREG_EVAL_H
#define KINREG_EVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "kinreg/horn.h" /* kr_horn, declared here before it had a header of its own */
#include "kinreg/trajectory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t pairs;              /* associated pose pairs */
    double rmse, mean, median, max; /* translational error after alignment, m */
    kr_pose alignment;         /* maps the estimate onto the ground truth */
} kr_ate;

typedef struct {
    size_t pairs;
    double rmse, mean, median; /* translational drift per `delta` seconds, m */
    double rot_rmse_deg;
} kr_rpe;

/* Associates each estimate with the nearest ground-truth stamp within max_dt
 * (default 0.02 s when 0) and computes ATE. KR_ERR_EMPTY below 3 pairs. */
KR_API kr_status kr_eval_ate(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, kr_ate *out);
/* ATE with the estimate aligned by its earliest associated pose alone (the
 * rigid motion that puts it on its ground-truth partner; evo's --align_origin)
 * instead of Horn over all pairs: errors then grow with drift from the start. */
KR_API kr_status kr_eval_ate_start(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, kr_ate *out);
/* RPE over pairs `delta` seconds apart (1.0 when 0). */
KR_API kr_status kr_eval_rpe(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, double delta,
                             kr_rpe *out);
/* Plot of the ground truth and the aligned estimate (top view x–y and x–z);
 * the format follows the extension: .svg or .png (anything else is
 * KR_ERR_INVALID_ARG). ate may be NULL: the plot then computes it with the
 * default association window. The image is KR_EVAL_PLOT_WIDTH ×
 * KR_EVAL_PLOT_HEIGHT pixels (SVG user units). */
#define KR_EVAL_PLOT_WIDTH 1000
#define KR_EVAL_PLOT_HEIGHT 560
KR_API kr_status kr_eval_plot(const char *path, const kr_trajectory *gt, const kr_trajectory *est,
                              const kr_ate *ate);
/* The same with some of the estimate's poses marked (marked[i] for pose i
 * of est; e.g. the frames that were LOST and placed after the run): each is
 * an orange dot on the estimate, and the legend names them `label`. */
KR_API kr_status kr_eval_plot_marked(const char *path, const kr_trajectory *gt,
                                     const kr_trajectory *est, const kr_ate *ate,
                                     const bool *marked, const char *label);

#ifdef __cplusplus
}
#endif
#endif
