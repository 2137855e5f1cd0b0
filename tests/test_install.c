/* The install rules and the pkg-config file: install into a fresh prefix,
 * build a small program against it with pkg-config alone, run it. */
#include "kr_test.h"

#include <stdlib.h>

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

KR_TEST(install, pkg_config_consumer_builds_and_runs)
{
    if (sh("command -v pkg-config >/dev/null 2>&1") != 0) SKIP("pkg-config is not installed");
    const char *tmp = kr_test_tmpdir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s/prefix' >/dev/null", KINREG_CMAKE_COMMAND,
             KINREG_BINARY_DIR, tmp);
    REQUIRE(sh(cmd) == 0);

    /* A consumer that only knows the installed headers and library. */
    snprintf(cmd, sizeof cmd, "%s/consumer.c", tmp);
    FILE *f = fopen(cmd, "w");
    REQUIRE(f != NULL);
    fputs("#include <stdio.h>\n#include <kinreg/pipeline.h>\n#include <kinreg/eval.h>\n"
          "int main(void) {\n"
          "  kr_pipeline_config cfg; kr_pipeline_config_default(&cfg);\n"
          "  cfg.source.max_frames = 12; cfg.device.backend = KR_BACKEND_CPU;\n"
          "  kr_pipeline *p = NULL; kr_status s = kr_pipeline_create(&p, &cfg);\n"
          "  if (s == KR_OK) s = kr_pipeline_run(p);\n"
          "  if (s != KR_OK) { fprintf(stderr, \"%s: %s\\n\", kr_strerror(s), kr_last_error()); return 1; }\n"
          "  printf(\"%zu\\n\", kr_pipeline_trajectory(p)->count);\n"
          "  kr_pipeline_destroy(&p); return p != NULL;\n}\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && export PKG_CONFIG_PATH='%s/prefix/" KINREG_INSTALL_LIBDIR "/pkgconfig'${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} && "
             "'%s' -std=c11 -Wall -Werror consumer.c -o consumer $(pkg-config --cflags --libs kinreg) && "
             "LD_LIBRARY_PATH='%s/prefix/" KINREG_INSTALL_LIBDIR "'${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./consumer > out.txt",
             tmp, tmp, KINREG_C_COMPILER, tmp);
    CHECK_EQ(sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/out.txt", tmp);
    f = fopen(cmd, "r");
    REQUIRE(f != NULL);
    int poses = -1;
    CHECK_EQ(fscanf(f, "%d", &poses), 1);
    fclose(f);
    CHECK_EQ(poses, 12); /* one pose per frame, through the installed library */
}
