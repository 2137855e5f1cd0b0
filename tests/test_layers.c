/* The layering check (scripts/check_layers.sh, docs/DESIGN.md §3): the real
 * tree passes, and planted violations — an upward include, a sibling include,
 * a public header of a higher layer, CUDA outside CUDA sources, another room's
 * private header, a room calling the room that holds it, two rooms including
 * each other, the program reaching past the public API, a call without an
 * include, two files calling each other, the program calling a hidden
 * function — each make it fail and name the file. Without the planted
 * failures the check could be a no-op. */
#include "kr_test.h"

#include <stdlib.h>

/* a script over the source tree and planted files: nothing of kinreg's runs */
KR_LABELS("script");

static char out[1 << 15];

static int sh(const char *cmd)
{
    return kr_test_shell(cmd, out, sizeof out);
}

static const char *script(void)
{
    return KINREG_SOURCE_DIR "/scripts/check_layers.sh";
}

/* A copy of the layered folders and public headers in a fresh directory. */
static const char *copy_tree(const char *name)
{
    static char dir[512];
    char cmd[8192];
    snprintf(dir, sizeof dir, "%s/%s", kr_test_tmpdir(), name);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cd '%s' && cp -r core gpu capture fusion transport eval pipeline "
             "tools include '%s'/",
             dir, KINREG_SOURCE_DIR, dir);
    return sh(cmd) == 0 ? dir : NULL;
}

KR_TEST(layers, the_tree_and_its_calls_respect_the_layers)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' --objects '%s/CMakeFiles/kinreg_objects.dir' --program "
             "'%s/CMakeFiles/kinreg_tool.dir' --library '%s/libkinreg.so' '%s'",
             script(), KINREG_BINARY_DIR, KINREG_BINARY_DIR, KINREG_BINARY_DIR, KINREG_SOURCE_DIR);
    CHECK_EQ(sh(cmd), 0);
    CHECK_CONTAINS(out, "check_layers: OK");
    /* It looked at the library's calls, not at an empty directory. */
    unsigned calls = 0;
    const char *c = strstr(out, "include lines, ");
    CHECK(c && sscanf(c, "include lines, %u calls", &calls) == 1);
    CHECK_GT(calls, 100);
}

KR_TEST(layers, planted_includes_fail_and_name_the_file)
{
    const char *dir = copy_tree("planted_includes");
    REQUIRE(dir != NULL);
    struct {
        const char *file, *line, *expect;
    } plants[] = {
        /* the ground floor reaching up into the composing layer */
        {"core/pose.c", "#include \"pipeline/track/track_internal.h\"", "core/pose.c:"},
        /* a sibling: capture/ may use only core/ */
        {"capture/source.c", "#include \"fusion/voxel_map.h\"", "capture/source.c:"},
        /* a public header owned by a higher layer */
        {"transport/wire.c", "#include \"kinreg/pipeline.h\"", "transport/wire.c:"},
        /* CUDA outside CUDA sources */
        {"fusion/model.c", "#include <cuda_runtime.h>", "fusion/model.c:"},
        {"pipeline/track/track.c", "#include \"gpu/context.cuh\"", "a CUDA header"},
        /* another room's private header */
        {"pipeline/recover/recover.c", "#include \"pipeline/track/track_internal.h\"",
         "private to pipeline/track/"},
        /* a room calling the room that composes it */
        {"pipeline/track/track.c", "#include \"pipeline/outbox.h\"", "the room that holds"},
        /* two rooms including each other (recover already includes register) */
        {"pipeline/register/subsample.c", "#include \"pipeline/recover/recover.h\"",
         "rooms include each other in a circle"},
        /* the program past the public API */
        {"tools/cmd_eval.c", "#include \"core/pose_kernels.h\"", "only the public API"},
    };
    const size_t n = sizeof plants / sizeof plants[0];
    char cmd[8192];
    /* The untouched copy passes, so each failure below is the plant's. */
    snprintf(cmd, sizeof cmd, "'%s' '%s'", script(), dir);
    REQUIRE(sh(cmd) == 0);
    for (size_t i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "cp '%s/%s' '%s/%s.orig' && echo '%s' >> '%s/%s' && '%s' '%s'",
                 dir, plants[i].file, dir, plants[i].file, plants[i].line, dir, plants[i].file,
                 script(), dir);
        CHECK_MSG(sh(cmd) == 1, "planting %s in %s: expected exit 1: %s", plants[i].line,
                  plants[i].file, out);
        CHECK_CONTAINS(out, plants[i].expect);
        CHECK_CONTAINS(out, "1 violation");
        snprintf(cmd, sizeof cmd, "mv '%s/%s.orig' '%s/%s'", dir, plants[i].file, dir,
                 plants[i].file);
        REQUIRE(sh(cmd) == 0);
    }
    /* A new folder of sources must be given a layer. */
    snprintf(cmd, sizeof cmd, "mkdir '%s/refine' && touch '%s/refine/solver.c' && '%s' '%s'", dir,
             dir, script(), dir);
    CHECK_EQ(sh(cmd), 1);
    CHECK_CONTAINS(out, "refine/");
}

/* Calls are checked on object files: a hand-written prototype dodges the
 * include check but not this, and two files calling each other are found. */
KR_TEST(layers, planted_calls_fail_upward_and_in_circles)
{
    const char *dir = copy_tree("planted_calls");
    REQUIRE(dir != NULL);
    struct {
        const char *src, *code;
    } files[] = {
        {"core/plant_a", "void kr_plant_b(void); void kr_plant_a(void) { kr_plant_b(); }"},
        {"core/plant_b", "void kr_plant_a(void); void kr_plant_b(void) { kr_plant_a(); }"},
        {"core/plant_c", "void kr_plant_step(void); void kr_plant_c(void) { kr_plant_step(); }"},
        {"pipeline/plant_d", "void kr_plant_step(void) {}"},
    };
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/obj/core' '%s/obj/pipeline'", dir, dir);
    REQUIRE(sh(cmd) == 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(cmd, sizeof cmd, "echo '%s' > '%s/%s.c' && '%s' -c '%s/%s.c' -o '%s/obj/%s.c.o'",
                 files[i].code, dir, files[i].src, KINREG_C_COMPILER, dir, files[i].src, dir,
                 files[i].src);
        REQUIRE(sh(cmd) == 0);
    }
    snprintf(cmd, sizeof cmd, "'%s' --objects '%s/obj' '%s'", script(), dir, dir);
    CHECK_EQ(sh(cmd), 1);
    CHECK_CONTAINS(out, "core/plant_c.c calls kr_plant_step in pipeline/plant_d.c");
    CHECK_CONTAINS(out, "circle");
    CHECK_CONTAINS(out, "core/plant_a.c");
    CHECK_CONTAINS(out, "2 violation");

    /* An object whose source is gone (left over from a move) is ignored. */
    snprintf(cmd, sizeof cmd,
             "rm '%s/core/plant_a.c' '%s/core/plant_c.c' && '%s' --objects '%s/obj' '%s'", dir, dir,
             script(), dir, dir);
    CHECK_EQ(sh(cmd), 0);
}

/* The program calls only what the shared library exports: a call into a
 * hidden library function is named, an exported one passes. */
KR_TEST(layers, planted_program_call_to_a_hidden_function_fails)
{
    const char *dir = copy_tree("planted_program");
    REQUIRE(dir != NULL);
    char cmd[8192];
    snprintf(
        cmd, sizeof cmd,
        "mkdir -p '%s/obj/core' '%s/prog/tools' && cd '%s' && "
        "echo 'void kr_plant_public(void) {} void kr_plant_hidden(void) {}' > core/plant_lib.c && "
        "'%s' -c -fPIC core/plant_lib.c -o obj/core/plant_lib.c.o && "
        "echo '__attribute__((visibility(\"default\"))) void kr_plant_public(void) {} "
        "__attribute__((visibility(\"hidden\"))) void kr_plant_hidden(void) {}' > lib.c && "
        "'%s' -shared -fPIC lib.c -o libplant.so && "
        "echo 'void kr_plant_public(void); void kr_plant_hidden(void); "
        "void kr_plant_main(void) { kr_plant_public(); kr_plant_hidden(); }' > tools/plant_main.c "
        "&& "
        "'%s' -c tools/plant_main.c -o prog/tools/plant_main.c.o",
        dir, dir, dir, KINREG_C_COMPILER, KINREG_C_COMPILER, KINREG_C_COMPILER);
    REQUIRE(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd,
             "'%s' --objects '%s/obj' --program '%s/prog' --library '%s/libplant.so' '%s'",
             script(), dir, dir, dir, dir);
    CHECK_EQ(sh(cmd), 1);
    CHECK_CONTAINS(out, "tools/plant_main.c calls kr_plant_hidden");
    CHECK_CONTAINS(out, "1 violation");
    CHECK(strstr(out, "kr_plant_public") == NULL);
}
