/* Colour PNG images into 8-bit RGB (capture/png_colour.h). */
#include "capture/png_colour.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"

kr_status kr_png_read_rgb8(const char *path, const char *where, int want_w, int want_h,
                           uint8_t **out)
{
    char why[160];
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "%s: cannot open %s: %s", where, path, why);
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_stdio(&image, f)) {
        fclose(f);
        return kr_error(KR_ERR_FORMAT, "%s: %s is not a readable PNG: %s", where, path,
                        image.message);
    }
    if ((int)image.width != want_w || (int)image.height != want_h) {
        png_image_free(&image);
        fclose(f);
        return kr_error(KR_ERR_SIZE,
                        "%s: %s is %ux%u, the depth %dx%d: the colour must be "
                        "registered to the depth",
                        where, path, image.width, image.height, want_w, want_h);
    }
    image.format = PNG_FORMAT_RGB;
    uint8_t *rgb = malloc(PNG_IMAGE_SIZE(image));
    if (!rgb) {
        png_image_free(&image);
        fclose(f);
        return kr_error(KR_ERR_NOMEM, "%s: out of memory for %s", where, path);
    }
    int ok = png_image_finish_read(&image, NULL, rgb, 0, NULL);
    fclose(f);
    if (!ok) {
        free(rgb);
        return kr_error(KR_ERR_FORMAT, "%s: %s is corrupt: %s", where, path, image.message);
    }
    *out = rgb;
    return KR_OK;
}
