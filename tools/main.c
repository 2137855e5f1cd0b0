/* kinreg — command-line entry: dispatches to a subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kinreg/transport.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"run", kr_cmd_run, "track a source, publish poses, write trajectory and model"},
    {"demo", kr_cmd_demo, "track the built-in synthetic scan and report ATE and fps"},
    {"sub", kr_cmd_sub, "subscribe to a pose stream and print TUM or JSON lines"},
    {"eval", kr_cmd_eval, "ATE and RPE of an estimated trajectory against ground truth"},
    {"bench", kr_cmd_bench, "per-stage timings (medians) as a table and as JSON"},
    {"record", kr_cmd_record, "write a sensor's depth frames as a fakenect dump or TUM sequence"},
    {"convert", kr_cmd_convert, "rewrite a TUM sequence as a fakenect dump or the reverse"},
    {"devices", kr_cmd_devices, "list the Kinects libfreenect can see"},
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
}

/* The pipeline runs several threads beside its OpenMP teams (capture, model
 * rebuilds, publisher). libgomp's default lets idle team threads spin between
 * parallel regions, which steals those threads' cores: measured on the 2-core
 * development machine, the synthetic demo went from 35 to 41 frames/s with
 * a passive wait policy. libgomp reads the policy once, when it loads, so the
 * program re-executes itself with it set unless the user chose one. */
static void prefer_passive_openmp_waits(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the default policy */
}

int main(int argc, char **argv)
{
    prefer_passive_openmp_waits(argv);
    if (argc < 2) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return KR_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("kinreg %s (wire protocol %d, %s)\n", KINREG_VERSION, KR_WIRE_VERSION, kr_build_backends());
        return KR_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kinreg: unknown %s '%s' (see 'kinreg --help')\n", argv[1][0] == '-' ? "option" : "command",
            argv[1]);
    return KR_EXIT_USAGE;
}
