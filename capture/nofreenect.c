/* Built without libfreenect: the live Kinect source and device listing
 * explain how to get them instead of failing obscurely. */
#include "capture/source_impl.h"

#define NO_FREENECT                                                                                \
    "this kinreg was built without libfreenect: install libfreenect-dev (Debian) and rebuild to "  \
    "use a live Kinect; recorded dumps still play with fakenect:DIR"

kr_status kr_kinect_open(kr_source *src, const char *device, const kr_source_config *cfg,
                         const kr_intrinsics *want)
{
    (void)src, (void)device, (void)cfg, (void)want;
    return kr_error(KR_ERR_UNSUPPORTED, NO_FREENECT);
}

kr_status kr_kinect_enumerate(kr_kinect_list *out)
{
    (void)out;
    return kr_error(KR_ERR_UNSUPPORTED, NO_FREENECT);
}
