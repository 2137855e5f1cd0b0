/* Names of the Kinect depth modes, for the command line and descriptions. */
#include "kinreg/kinect.h"

#include <string.h>

static const char *const names[] = {"11bit", "mm", "registered"};

kr_status kr_kinect_depth_mode_parse(const char *text, kr_kinect_depth_mode *out)
{
    for (int i = 0; i < 3; i++)
        if (text && strcmp(text, names[i]) == 0) {
            *out = (kr_kinect_depth_mode)i;
            return KR_OK;
        }
    return kr_error(KR_ERR_INVALID_ARG, "unknown depth mode '%s': use 11bit, mm or registered",
                    text ? text : "(null)");
}

const char *kr_kinect_depth_mode_name(kr_kinect_depth_mode mode)
{
    return (unsigned)mode < 3 ? names[mode] : "unknown";
}
