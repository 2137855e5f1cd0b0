/* kinreg-intrinsics.txt (capture/intrinsics_file.c). */
#include <math.h>

#include "capture/intrinsics_file.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write(KR_INTRINSICS_FILE, data, size);
    kr_intrinsics k;
    if (kr_intrinsics_file_read(path, &k) == KR_OK) {
        /* What the header promises: 1..8192 pixels, positive focal lengths. */
        if (k.width < 1 || k.width > 8192 || k.height < 1 || k.height > 8192 || !(k.fx > 0) ||
            !(k.fy > 0) || !isfinite(k.cx) || !isfinite(k.cy))
            abort();
    }
    return 0;
}
