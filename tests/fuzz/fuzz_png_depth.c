/* 16-bit PNG depth images through libpng (capture/png_depth.c). The wanted
 * size is taken from the input's own IHDR when it is small (so that the
 * fuzzer reaches row decoding with tiny images), else TUM's 640×480. One
 * reader is reused across inputs, as the replay reuses it across frames. */
#include "capture/png_depth.h"
#include "fuzz_input.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kr_png_reader reader;
    const char *path = fuzz_write("in.png", data, size);
    int w = 640, h = 480;
    if (size >= 24 && be32(data + 16) >= 1 && be32(data + 16) <= 64 && be32(data + 20) >= 1 &&
        be32(data + 20) <= 64) {
        w = (int)be32(data + 16);
        h = (int)be32(data + 20);
    }
    uint16_t *out = NULL;
    if (kr_png_read_depth16(&reader, path, "fuzz", w, h, &out) == KR_OK) {
        unsigned sum = 0;
        for (int i = 0; i < w * h; i++) /* touch every sample */
            sum += out[i];
        free(out);
        if (sum == 0xFFFFFFFFu) return -1;
    }
    return 0;
}
