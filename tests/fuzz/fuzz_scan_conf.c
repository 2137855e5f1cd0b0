/* Stanford scan sets, .conf files (capture/scan_conf.c). */
#include "kinreg/scan.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("scans.conf", data, size);
    kr_scan_set conf = {0};
    if (kr_scan_set_read(path, &conf) == KR_OK) {
        if (conf.n <= 0) abort(); /* KR_ERR_EMPTY otherwise */
        for (int i = 0; i < conf.n; i++)
            if (!conf.scans[i].file || !conf.scans[i].path) abort();
        kr_scan_set_free(&conf);
    }
    return 0;
}
