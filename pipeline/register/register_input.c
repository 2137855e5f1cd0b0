/* The point sets kinreg register reads (kr_register_read_points, kinreg/register.h). */
#include "kinreg/register.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "capture/pgm_depth.h"
#include "kinreg/scan.h"
#include "capture/png_depth.h"
#include "kinreg/device.h"
#include "kinreg/preprocess.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* The finest level's valid points, as the tracker would see the frame. */
static kr_status frame_points(const kr_frame *f, const kr_intrinsics *K, const char *path,
                              float **xyz, size_t *n)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    kr_status s = kr_device_create(&dev, &dc);
    if (s != KR_OK) return s;
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_pyramid pyr = {0};
    if ((s = kr_preprocess(dev, &pc, f, K, &pyr)) == KR_OK) {
        const kr_cloud *c = &pyr.level[0];
        size_t total = (size_t)c->width * c->height, k = 0;
        float *p = malloc(3 * (total ? total : 1) * sizeof *p);
        if (!p) {
            s = kr_error(KR_ERR_NOMEM, "%s: no memory for %zu points", path, total);
        } else {
            for (size_t i = 0; i < total; i++)
                if (isfinite(c->points[3 * i + 2]))
                    memcpy(p + 3 * k++, c->points + 3 * i, 3 * sizeof *p);
            if (k == 0) {
                free(p);
                s = kr_error(KR_ERR_EMPTY, "%s: no pixel has a valid depth", path);
            } else {
                *xyz = p;
                *n = k;
            }
        }
    }
    kr_pyramid_free(&pyr);
    kr_device_destroy(&dev);
    return s;
}

kr_status kr_register_read_points(const char *path, const kr_intrinsics *K, float depth_scale,
                                  float **xyz, size_t *n)
{
    bool png = ends_with(path, ".png"), pgm = ends_with(path, ".pgm");
    if (!png && !pgm) return kr_scan_read_ply(path, xyz, n);
    kr_frame f = {.width = K->width,
                  .height = K->height,
                  .encoding = png ? KR_DEPTH_SCALED : KR_DEPTH_DISPARITY11,
                  .depth_scale = depth_scale};
    kr_status s;
    if (png) {
        kr_png_reader r = {0};
        s = kr_png_read_depth16(&r, path, path, K->width, K->height, &f.raw);
        kr_png_reader_free(&r);
    } else {
        s = kr_pgm_read_depth(path, path, K->width, K->height, &f.raw);
    }
    if (s != KR_OK) return s;
    s = frame_points(&f, K, path, xyz, n);
    kr_frame_release(&f);
    return s;
}
