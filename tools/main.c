/* kinreg — command-line entry: dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
};

static void usage(FILE *out)
{
    fprintf(out, "usage: kinreg COMMAND [OPTIONS]   (kinreg COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-6s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return KR_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kinreg: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return KR_EXIT_USAGE;
}
