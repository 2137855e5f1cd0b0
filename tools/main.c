/* kinreg — command-line entry: dispatches to a subcommand. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tools/cli/stdout_check.h"
#include "tools/cli/stop_signals.h"
#include "kinreg/device.h"
#include "kinreg/transport.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"run", kr_cmd_run, "track a source, publish poses, write trajectory and model"},
    {"demo", kr_cmd_demo, "track the built-in synthetic scan and report ATE and fps"},
    {"sub", kr_cmd_sub, "subscribe to a pose stream and print TUM or JSON lines"},
    {"view", kr_cmd_view, "serve a live view of a pose stream in the browser"},
    {"eval", kr_cmd_eval, "ATE and RPE of an estimated trajectory against ground truth"},
    {"bench", kr_cmd_bench, "per-stage timings (medians) as a table and as JSON"},
    {"record", kr_cmd_record, "write a sensor's depth frames as a fakenect dump or TUM sequence"},
    {"refine", kr_cmd_refine, "register a set of range scans jointly (multi-view distance fields)"},
    {"mesh", kr_cmd_mesh, "fuse a replay at given poses into a surface mesh (PLY)"},
    {"convert", kr_cmd_convert, "rewrite a TUM sequence as a fakenect dump or the reverse"},
    {"devices", kr_cmd_devices, "list the Kinects libfreenect can see"},
    {"register", kr_cmd_register, "align two point sets (PLY) with EM-ICP or Softassign"},
    {"keygen", kr_cmd_keygen, "make a CURVE key pair for encrypted, authenticated publishing"},
};

/* Which engines this build carries, for --version. */
static const char *kr_build_backends(void)
{
#ifdef KINREG_HAVE_CUDA
    return "backends: cpu (OpenMP), cuda";
#else
    return "backends: cpu (OpenMP); built without CUDA";
#endif
}

static void usage(FILE *out)
{
    fprintf(out, "usage: kinreg COMMAND [OPTIONS]   (kinreg COMMAND --help for details)\n"
                 "       kinreg --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(
        out,
        "\nexit status: 0 success (run: also after Ctrl-C or SIGTERM), 1 failure, 2 usage error,\n"
        "3 the sensor stopped delivering frames (run), 4 an output (a file, standard output) "
        "could\n"
        "not be written\n");
}

int main(int argc, char **argv)
{
    /* run, demo and mesh take Ctrl-C and SIGTERM on a thread of their own;
     * from the first instruction on, a signal waits for it
     * (tools/cli/stop_signals.h). */
    if (argc > 1 &&
        (!strcmp(argv[1], "run") || !strcmp(argv[1], "demo") || !strcmp(argv[1], "mesh")))
        kr_stop_signals_block();
    /* Idle OpenMP threads must not spin on the pipeline threads' cores; the
     * policy is read when libgomp loads, so this re-executes the program with
     * OMP_WAIT_POLICY=passive unless the user chose one (kinreg/device.h). */
    kr_openmp_prefer_passive(argv);
    /* Bounded memory over hours: model snapshots allocate and free buffers
     * of megabytes many times a minute. glibc raises its mmap threshold the
     * first time such a block is freed and from then on serves them from
     * heap arenas, which fragment: +14 MiB over 500 synthetic frames with
     * the model already at its cap, against +4 MiB with the threshold held
     * at its 128 KiB default (tests/test_memory.c). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    /* Every command's output is checked: a write that fails is said, with
     * the file and the cause, and ends in exit status 4 (stdout_check.h). */
    kr_stdout_init();
    if (argc < 2) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return kr_stdout_close("kinreg", KR_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("kinreg %s (wire protocol %d, %s)\n", KINREG_VERSION, KR_WIRE_VERSION, kr_build_backends());
        return kr_stdout_close("kinreg", KR_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            char who[32];
            snprintf(who, sizeof who, "kinreg %s", commands[i].name);
            return kr_stdout_close(who, commands[i].fn(argc - 1, argv + 1));
        }
    fprintf(stderr, "kinreg: unknown %s '%s' (see 'kinreg --help')\n", argv[1][0] == '-' ? "option" : "command",
            argv[1]);
    return KR_EXIT_USAGE;
}
