/* TUM rgb.txt (capture/tum_colour.c), through the public source API as
 * `kinreg mesh tum:DIR` opens it (the colour stream asked for): beside a
 * one-frame depth.txt, the listing is parsed whole at open and the first
 * frame read, which takes the image nearest in time (usually missing: a
 * warning and no colour, not a crash). */
#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("KINREG_DECODE_THREADS", "0", 0); /* as fuzz_tum_depth_txt */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char depth[] = "1.000000 depth/a.png\n";
    fuzz_write("depth.txt", (const uint8_t *)depth, sizeof depth - 1);
    fuzz_write("rgb.txt", data, size);
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", fuzz_dir());
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.intrinsics = "fr1";
    cfg.colour = true;
    kr_source *src = NULL;
    if (kr_source_create(&src, &cfg) == KR_OK) {
        kr_frame frame;
        if (kr_source_read(src, &frame) == KR_OK) kr_frame_release(&frame);
        kr_source_destroy(&src);
    }
    return 0;
}
