/* Named pinhole intrinsics: the TUM RGB-D calibrations of the three Freiburg
 * Kinects and the commonly used Kinect v1 default. */
#include "kinreg/source.h"

#include <string.h>

typedef struct {
    const char *name;
    kr_intrinsics k;
} preset;

static const preset presets[] = {
    /* fr1 and fr2 depth is registered to the colour camera by the driver
     * without undistortion, so it carries that camera's lens distortion
     * (TUM RGB-D calibration); fr3 images were undistorted at recording. */
    {"fr1", {640, 480, 517.3f, 516.5f, 318.6f, 255.3f, 0.2624f, -0.9531f, -0.0054f, 0.0026f, 1.1633f}},
    {"fr2", {640, 480, 520.9f, 521.0f, 325.1f, 249.7f, 0.2312f, -0.7849f, -0.0033f, -0.0001f, 0.9172f}},
    {"fr3", {640, 480, 535.4f, 539.2f, 320.1f, 247.6f, 0, 0, 0, 0, 0}},
    {"default", {640, 480, 525.0f, 525.0f, 319.5f, 239.5f, 0, 0, 0, 0, 0}},
    /* The Kinect v1 depth (IR) camera as OpenNI reports it from the device's
     * zero-plane data: 120 mm / (2 · 0.1052 mm) = 570.3 px. */
    {"kinect", {640, 480, 570.3f, 570.3f, 319.5f, 239.5f, 0, 0, 0, 0, 0}},
};

kr_status kr_intrinsics_preset(const char *name, kr_intrinsics *out)
{
    if (!name || !out)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_intrinsics_preset: name and output must not be NULL");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name) == 0) {
            *out = presets[i].k;
            return KR_OK;
        }
    }
    return kr_error(KR_ERR_INVALID_ARG,
                    "unknown intrinsics preset '%s': use fr1, fr2, fr3, default or kinect", name);
}
