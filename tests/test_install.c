/* The install rules, the pkg-config file and the CMake package: install
 * into a fresh prefix, build a small program against it with pkg-config
 * alone and with find_package(kinreg) alone, run both. In a sanitizer build
 * (KINREG_SANITIZE) the consumers link the sanitizer runtime the installed
 * library needs (KINREG_CONSUMER_FLAGS); otherwise that is empty. */
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
             "'%s' -std=c11 -Wall -Werror %s consumer.c -o consumer $(pkg-config --cflags --libs kinreg) && "
             "LD_LIBRARY_PATH='%s/prefix/" KINREG_INSTALL_LIBDIR "'${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./consumer > out.txt",
             tmp, tmp, KINREG_C_COMPILER, KINREG_CONSUMER_FLAGS, tmp);
    CHECK_EQ(sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/out.txt", tmp);
    f = fopen(cmd, "r");
    REQUIRE(f != NULL);
    int poses = -1;
    CHECK_EQ(fscanf(f, "%d", &poses), 1);
    fclose(f);
    CHECK_EQ(poses, 12); /* one pose per frame, through the installed library */
}

KR_TEST(install, cmake_package_consumer_builds_and_runs)
{
    const char *tmp = kr_test_tmpdir();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s/cmake_prefix' >/dev/null", KINREG_CMAKE_COMMAND,
             KINREG_BINARY_DIR, tmp);
    REQUIRE(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/cmake_consumer'", tmp);
    REQUIRE(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/cmake_consumer/CMakeLists.txt", tmp);
    FILE *f = fopen(cmd, "w");
    REQUIRE(f != NULL);
    fputs("cmake_minimum_required(VERSION 3.16)\nproject(consumer LANGUAGES C)\n"
          "find_package(kinreg 0.1 REQUIRED)\n"
          "add_executable(consumer consumer.c)\n"
          "target_link_libraries(consumer PRIVATE kinreg::kinreg)\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/cmake_consumer/consumer.c", tmp);
    f = fopen(cmd, "w");
    REQUIRE(f != NULL);
    fputs("#include <stdio.h>\n#include <kinreg/pipeline.h>\n"
          "int main(void) {\n"
          "  kr_pipeline_config cfg; kr_pipeline_config_default(&cfg);\n"
          "  cfg.source.max_frames = 7; cfg.device.backend = KR_BACKEND_CPU;\n"
          "  kr_pipeline *p = NULL; kr_status s = kr_pipeline_create(&p, &cfg);\n"
          "  if (s == KR_OK) s = kr_pipeline_run(p);\n"
          "  if (s != KR_OK) { fprintf(stderr, \"%s: %s\\n\", kr_strerror(s), kr_last_error()); return 1; }\n"
          "  printf(\"%zu\\n\", kr_pipeline_trajectory(p)->count);\n"
          "  kr_pipeline_destroy(&p); return 0;\n}\n",
          f);
    fclose(f);
    /* Only CMAKE_PREFIX_PATH tells the consumer where kinreg is; the
     * installed library is found at run time through the build's RPATH. */
    snprintf(cmd, sizeof cmd,
             "cd '%s/cmake_consumer' && '%s' -S . -B build -DCMAKE_PREFIX_PATH='%s/cmake_prefix' "
             "-DCMAKE_C_COMPILER='%s' -DCMAKE_EXE_LINKER_FLAGS='%s' > cmake.log 2>&1 && '%s' --build build >> cmake.log 2>&1 && "
             "./build/consumer > out.txt",
             tmp, KINREG_CMAKE_COMMAND, tmp, KINREG_C_COMPILER, KINREG_CONSUMER_FLAGS, KINREG_CMAKE_COMMAND);
    CHECK_MSG(sh(cmd) == 0, "see %s/cmake_consumer/cmake.log", tmp);
    snprintf(cmd, sizeof cmd, "%s/cmake_consumer/out.txt", tmp);
    f = fopen(cmd, "r");
    REQUIRE(f != NULL);
    int poses = -1;
    CHECK_EQ(fscanf(f, "%d", &poses), 1);
    fclose(f);
    CHECK_EQ(poses, 7);
    /* A request for another minor version is refused (0.x may break). */
    snprintf(cmd, sizeof cmd,
             "cd '%s/cmake_consumer' && sed -i 's/find_package(kinreg 0.1 REQUIRED)/find_package(kinreg 0.9 REQUIRED)/' "
             "CMakeLists.txt && '%s' -S . -B build2 -DCMAKE_PREFIX_PATH='%s/cmake_prefix' > /dev/null 2>&1",
             tmp, KINREG_CMAKE_COMMAND, tmp);
    CHECK(sh(cmd) != 0);
}
