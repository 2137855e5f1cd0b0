/* libpng decoding of 16-bit depth PNGs. The file is read whole into a reused
 * buffer and decoded straight into the frame's sample buffer, so the only
 * per-frame allocation besides libpng's own structs is the frame itself. */
#include "capture/png_depth.h"
#include "core/files.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const unsigned char *data;
    size_t size, pos;
    char message[200]; /* libpng's error text */
} png_source;

static void on_error(png_structp png, png_const_charp msg)
{
    png_source *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    kr_log(KR_LOG_DEBUG, "libpng: %s", msg);
}

static void read_bytes(png_structp png, png_bytep dst, png_size_t n)
{
    png_source *s = png_get_io_ptr(png);
    if (n > s->size - s->pos) png_error(png, "file is truncated");
    memcpy(dst, s->data + s->pos, n);
    s->pos += n;
}

/* Reads the whole file into r->file; returns its size through *size. */
static kr_status slurp(kr_png_reader *r, const char *path, const char *where, size_t *size)
{
    char why[160];
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open depth image %s (%s): %s", path, where, why);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return kr_error(KR_ERR_IO, "depth image %s (%s) is not a regular file", path, where);
    }
    size_t n = (size_t)sb.st_size;
    if (n > r->file_cap) {
        unsigned char *p = realloc(r->file, n);
        if (!p) {
            fclose(f);
            return kr_error(KR_ERR_NOMEM, "cannot buffer %zu bytes of %s", n, path);
        }
        r->file = p;
        r->file_cap = n;
    }
    size_t got = n ? fread(r->file, 1, n, f) : 0;
    int failed = ferror(f);
    fclose(f);
    if (failed || got != n)
        return kr_error(KR_ERR_IO, "cannot read depth image %s (%s): %s", path, where,
                        failed ? strerror(errno) : "file changed while reading");
    *size = n;
    return KR_OK;
}

static kr_status ensure_rows(kr_png_reader *r, size_t h)
{
    if (h <= r->rows_cap) return KR_OK;
    void **p = realloc(r->rows, h * sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu PNG row pointers", h);
    r->rows = p;
    r->rows_cap = h;
    return KR_OK;
}

typedef struct {
    png_structp png;
    png_infop info;
    uint16_t *pixels; /* allocated inside the protected region */
    kr_status status; /* set before a non-libpng early exit */
} decode_state;

static const char *color_name(int ct)
{
    switch (ct) {
    case PNG_COLOR_TYPE_GRAY:
        return "grayscale";
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return "grayscale+alpha";
    case PNG_COLOR_TYPE_RGB:
        return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA:
        return "RGBA";
    case PNG_COLOR_TYPE_PALETTE:
        return "palette";
    default:
        return "unknown colour type";
    }
}

/* The part libpng may longjmp out of. Everything it changes lives in *d (in
 * memory, not registers), so nothing is clobbered by the jump. Returns 0 on
 * success, 1 on a libpng error (message in the png_source), 2 when
 * d->status holds a validation error. */
static int decode(decode_state *d, kr_png_reader *r, const char *path, const char *where,
                  int want_w, int want_h)
{
    if (setjmp(png_jmpbuf(d->png))) return 1;
    png_read_info(d->png, d->info);
    png_uint_32 w, h;
    int depth, ct, interlace;
    png_get_IHDR(d->png, d->info, &w, &h, &depth, &ct, &interlace, NULL, NULL);
    if (depth != 16 || ct != PNG_COLOR_TYPE_GRAY) {
        d->status = kr_error(KR_ERR_SIZE,
                             "depth image %s (%s) is %d-bit %s, expected 16-bit grayscale "
                             "(a TUM depth PNG)",
                             path, where, depth, color_name(ct));
        return 2;
    }
    if ((int)w != want_w || (int)h != want_h || w > 65535 || h > 65535) {
        d->status = kr_error(KR_ERR_SIZE,
                             "depth image %s (%s) is %ux%u, expected %dx%d (the intrinsics' "
                             "size; choose matching intrinsics)",
                             path, where, (unsigned)w, (unsigned)h, want_w, want_h);
        return 2;
    }
    if ((d->status = ensure_rows(r, h)) != KR_OK) return 2;
    d->pixels = malloc((size_t)w * h * sizeof *d->pixels);
    if (!d->pixels) {
        d->status =
            kr_error(KR_ERR_NOMEM, "cannot allocate a %ux%u depth frame", (unsigned)w, (unsigned)h);
        return 2;
    }
    /* PNG stores big-endian samples. */
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe == 1) png_set_swap(d->png);
    if (interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(d->png);
    png_read_update_info(d->png, d->info);
    for (png_uint_32 y = 0; y < h; y++)
        r->rows[y] = d->pixels + (size_t)y * w;
    png_read_image(d->png, (png_bytepp)r->rows);
    png_read_end(d->png, NULL);
    return 0;
}

kr_status kr_png_read_depth16(kr_png_reader *r, const char *path, const char *where, int want_w,
                              int want_h, uint16_t **out)
{
    size_t size = 0;
    kr_status st = slurp(r, path, where, &size);
    if (st != KR_OK) return st;
    if (size < 8 || png_sig_cmp(r->file, 0, 8) != 0)
        return kr_error(KR_ERR_FORMAT, "depth image %s (%s) is not a PNG file%s", path, where,
                        size < 8 ? " (empty or truncated)" : "");

    png_source src = {r->file, size, 0, ""};
    decode_state d = {0};
    d.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    if (d.png) d.info = png_create_info_struct(d.png);
    if (!d.png || !d.info) {
        png_destroy_read_struct(&d.png, NULL, NULL);
        return kr_error(KR_ERR_NOMEM, "cannot create a libpng reader for %s", path);
    }
    png_set_read_fn(d.png, &src, read_bytes);
    int rc = decode(&d, r, path, where, want_w, want_h);
    png_destroy_read_struct(&d.png, &d.info, NULL);
    if (rc != 0) {
        free(d.pixels);
        if (rc == 2) return d.status;
        return kr_error(KR_ERR_FORMAT, "depth image %s (%s) is corrupt: %s", path, where,
                        src.message[0] ? src.message : "libpng error");
    }
    *out = d.pixels;
    return KR_OK;
}

void kr_png_reader_free(kr_png_reader *r)
{
    if (!r) return;
    free(r->file);
    free(r->rows);
    memset(r, 0, sizeof *r);
}
