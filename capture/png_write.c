/* libpng encoding of 16-bit depth PNGs for the TUM recorder. */
#include "capture/png_depth.h"
#include "core/files.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char message[200]; /* libpng's error text */
} png_sink;

static void on_error(png_structp png, png_const_charp msg)
{
    png_sink *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    kr_log(KR_LOG_DEBUG, "libpng: %s", msg);
}

/* The part libpng may longjmp out of; it changes nothing that lives in
 * registers across the jump. Returns 0 on success. */
static int encode(png_structp png, png_infop info, FILE *f, int w, int h, const uint16_t *s)
{
    if (setjmp(png_jmpbuf(png))) return 1;
    png_init_io(png, f);
    /* Level 1 costs a few ms per 640x480 frame where the default costs tens,
     * for files about 10% larger: recording must keep up with 30 Hz. */
    png_set_compression_level(png, 1);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 16, PNG_COLOR_TYPE_GRAY,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    /* PNG stores big-endian samples. */
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe == 1) png_set_swap(png);
    for (int y = 0; y < h; y++)
        png_write_row(png, (png_const_bytep)(s + (size_t)y * (size_t)w));
    png_write_end(png, info);
    return 0;
}

kr_status kr_png_write_depth16(const char *path, int width, int height, const uint16_t *samples)
{
    /* Whole or not at all: a failure leaves no half frame (and no frame). */
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the depth image", true);
    if (st != KR_OK) return st;
    png_sink sink = {""};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        kr_output_abort(&o);
        return kr_error(KR_ERR_NOMEM, "cannot create a libpng writer for %s", path);
    }
    int failed = encode(png, info, o.f, width, height, samples);
    png_destroy_write_struct(&png, &info);
    /* A failed fwrite is reported by the commit with its cause (libpng
     * only says "Write Error"); anything else libpng refused is said here. */
    if (failed && !ferror(o.f)) {
        kr_output_abort(&o);
        return kr_error(KR_ERR_IO, "cannot write depth image %s: %s", path, sink.message);
    }
    return kr_output_commit(&o);
}
