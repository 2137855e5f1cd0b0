/* PLY point reader (capture/ply_read.c): ASCII and binary headers, any
 * elements and properties. A header may claim any vertex count; the reader
 * must refuse counts the file cannot hold rather than allocate them. */
#include "kinreg/scan.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("in.ply", data, size);
    float *xyz = NULL;
    size_t n = 0;
    if (kr_scan_read_ply(path, &xyz, &n) == KR_OK) {
        for (size_t i = 0; i < 3 * n; i++) /* every value written: ASan/MSan see reads */
            if (xyz[i] != xyz[i]) abort(); /* the reader promises finite values */
        free(xyz);
    }
    return 0;
}
