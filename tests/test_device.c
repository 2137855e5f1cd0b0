/* The engine interface (gpu/device.c, gpu/openmp_waits.c) on the CPU backend:
 * what it tells a program that embeds the library. */
#include "kr_test.h"

#include <stdlib.h>

#include "kinreg/device.h"

static int warnings;
static void count_warnings(kr_log_level level, const char *message, void *user)
{
    (void)message, (void)user;
    warnings += level == KR_LOG_WARN;
}

KR_TEST(device, embedders_are_told_about_spinning_openmp_threads)
{
    /* An embedding program ran 3x slower without OMP_WAIT_POLICY=passive;
     * the library neither set it nor said so. */
    const char *saved = getenv("OMP_WAIT_POLICY");
    char keep[64] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    unsetenv("GOMP_SPINCOUNT");
    kr_device_config cfg;
    kr_device_config_default(&cfg);
    cfg.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    warnings = 0;
    kr_log_set(KR_LOG_WARN, count_warnings, NULL);

    setenv("OMP_WAIT_POLICY", "passive", 1);
    CHECK(kr_openmp_waits_passive());
    CHECK(kr_openmp_wait_policy_chosen());
    CHECK_OK(kr_openmp_prefer_passive(NULL)); /* a chosen policy: nothing to do, no exec */
    REQUIRE_OK(kr_device_create(&dev, &cfg));
    kr_device_destroy(&dev);
    CHECK_EQ(warnings, 0);

    setenv("OMP_WAIT_POLICY", "active", 1);
    CHECK(!kr_openmp_waits_passive());
    unsetenv("OMP_WAIT_POLICY");
    CHECK(!kr_openmp_wait_policy_chosen());
    for (int i = 0; i < 2; i++) {
        REQUIRE_OK(kr_device_create(&dev, &cfg));
        kr_device_destroy(&dev);
    }
    CHECK_EQ(warnings, 1); /* once per process */
    kr_log_set(KR_LOG_WARN, NULL, NULL);
    if (keep[0]) setenv("OMP_WAIT_POLICY", keep, 1);
}
