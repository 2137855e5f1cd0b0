/* fakenect INDEX.txt (capture/fakenect_dump.c), through the public source
 * API as `kinreg run fakenect:DIR` opens it. File names in the index are
 * resolved inside the private directory, which holds no frames: reading the
 * first one fails cleanly. */
#include "fuzz_input.h"
#include "kinreg/source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write("INDEX.txt", data, size);
    char uri[300];
    snprintf(uri, sizeof uri, "fakenect:%s", fuzz_dir());
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.intrinsics = "kinect";
    kr_source *src = NULL;
    if (kr_source_create(&src, &cfg) == KR_OK) {
        kr_frame frame;
        if (kr_source_read(src, &frame) == KR_OK) kr_frame_release(&frame);
        kr_source_destroy(&src);
    }
    return 0;
}
