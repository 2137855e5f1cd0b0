/* fakenect INDEX.txt (capture/fakenect_dump.c), through the public source
 * API as `kinreg run fakenect:DIR` opens it. File names in the index are
 * resolved inside the private directory, which holds no frames: reading the
 * first one fails cleanly. */
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write("INDEX.txt", data, size);
    fuzz_open_source("fakenect", "kinect");
    return 0;
}
