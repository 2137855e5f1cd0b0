/* fakenect PGM depth frames (capture/pgm_depth.c). The wanted size is the
 * Kinect's 640×480 or, to let the fuzzer reach the sample checks with small
 * inputs, 4×3 (tests/fuzz/corpus/pgm_depth holds one of each size class). */
#include "capture/pgm_depth.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("in.pgm", data, size);
    static const int sizes[2][2] = {{640, 480}, {4, 3}};
    for (int s = 0; s < 2; s++) {
        uint16_t *out = NULL;
        if (kr_pgm_read_depth(path, "fuzz", sizes[s][0], sizes[s][1], &out) == KR_OK) {
            for (int i = 0; i < sizes[s][0] * sizes[s][1]; i++)
                if (out[i] > 2047) abort(); /* the reader refuses samples above 11 bits */
            free(out);
        }
    }
    return 0;
}
