/* TUM depth.txt (capture/tum_source.c), through the public source API as
 * `kinreg run tum:DIR` opens it: the listing is parsed whole at open; the
 * first frame is read too (its PNG is usually missing: an error, not a crash). */
#include "fuzz_input.h"

/* On 4 or more cores a TUM source starts PNG decoder threads at open, which
 * per input cost ten times the parse (4 k executions/s on 16 cores against
 * 25-45 k on 2): decode on demand, as on 2 cores. The listing's parser, what
 * this harness is for, is the same either way. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("KINREG_DECODE_THREADS", "0", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write("depth.txt", data, size);
    fuzz_open_source("tum", "fr1");
    return 0;
}
