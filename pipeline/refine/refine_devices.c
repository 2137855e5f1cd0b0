/* kr_refine_devices_parse and kr_refine_solver (include/kinreg/refine.h). */
#include <stdlib.h>
#include <string.h>

#include "pipeline/refine/refine_solve.h"
#include "gpu/engine.h"
#include "kinreg/refine.h"

const char *kr_refine_solver(void)
{
    return kr_refine_solver_name();
}

kr_status kr_refine_devices_parse(const char *text, int devices[KR_REFINE_MAX_DEVICES], int *n)
{
    if (!text || !devices || !n)
        return kr_error(KR_ERR_INVALID_ARG, "refine: devices: needs a list and its outputs");
    char why[256] = "";
    int visible = kr_gpu_device_count(why, sizeof why);
    if (visible < 1)
        return kr_error(KR_ERR_NO_DEVICE, "--devices %s: no CUDA device is visible (%s)", text,
                        why[0] ? why : "no CUDA in this build");
    int list[KR_REFINE_MAX_DEVICES], count = 0;
    if (strcmp(text, "all") == 0) {
        for (int d = 0; d < visible && d < KR_REFINE_MAX_DEVICES; d++)
            list[count++] = d;
    } else {
        const char *p = text;
        while (*p) {
            char *end;
            long d = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',') || d < 0)
                return kr_error(KR_ERR_INVALID_ARG,
                                "--devices '%s': expected 'all' or device ordinals like 0,1", text);
            if (d >= visible)
                return kr_error(KR_ERR_INVALID_ARG,
                                "--devices '%s': device %ld is not visible (%d device%s: 0..%d)",
                                text, d, visible, visible == 1 ? "" : "s", visible - 1);
            if (count == KR_REFINE_MAX_DEVICES)
                return kr_error(KR_ERR_INVALID_ARG, "--devices '%s': at most %d devices", text,
                                KR_REFINE_MAX_DEVICES);
            list[count++] = (int)d;
            p = *end ? end + 1 : end;
        }
        if (count == 0)
            return kr_error(KR_ERR_INVALID_ARG,
                            "--devices '%s': expected 'all' or device ordinals like 0,1", text);
    }
    memcpy(devices, list, sizeof *list * (size_t)count);
    *n = count;
    return KR_OK;
}
