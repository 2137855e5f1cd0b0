/* Numeric options are range-checked before any conversion (issue 14, item
 * 7): each value that once overflowed a float-to-int conversion or was taken
 * silently (an empty model, an unpaced run, no wait at all) is refused with
 * exit status 2 and one line naming the option, the value and the allowed
 * range; values at the edges of the ranges are still taken. Every other
 * refusal of the command line is one line too, before any work: a number
 * out of range on run, demo and bench, an unknown option (with a hint), an
 * output path that cannot be written, a port beyond 65535, options bench
 * would ignore (issue 11: each of those failed before its fix). Built with
 * UndefinedBehaviorSanitizer, no run may print a runtime error:
 *   cmake -S . -B build-ubsan -DKINREG_CUDA=OFF -DKINREG_WERROR=ON \
 *     "-DCMAKE_C_FLAGS=-fsanitize=undefined,float-cast-overflow,float-divide-by-zero \
 *      -fno-sanitize-recover=undefined,float-cast-overflow" \
 *     "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=undefined,float-cast-overflow" \
 *     -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=undefined && cmake --build build-ubsan -j2
 *   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build-ubsan/tests/kinreg_tests options
 * (GCC's -fsanitize=undefined leaves float-cast-overflow out: name it.) */
#include "kr_test.h"

static char out[1 << 16];

/* `kinreg ARGS`: exit status 2 and a refusal naming `option` and a range. */
static void check_refused(const char *args, const char *option)
{
    int rc = kr_test_run_tool(NULL, args, out, sizeof out);
    CHECK_MSG(rc == 2, "kinreg %s: exit %d, expected 2 (a usage error): %s", args, rc, out);
    CHECK_CONTAINS(out, option);
    CHECK_CONTAINS(out, "is not allowed: expected");
    CHECK_MSG(strstr(out, " from ") || strstr(out, " at most ") || strstr(out, ".."),
              "kinreg %s: no allowed range in '%s'", args, out);
    CHECK_MSG(!strstr(out, "runtime error"), "kinreg %s: undefined behaviour: %s", args, out);
}

static void check_taken(const char *args)
{
    int rc = kr_test_run_tool(NULL, args, out, sizeof out);
    CHECK_MSG(rc == 0, "kinreg %s: exit %d, expected 0: %s", args, rc, out);
    CHECK_MSG(!strstr(out, "runtime error"), "kinreg %s: undefined behaviour: %s", args, out);
}

/* The values reported in issue 14, and their neighbours. */
KR_TEST(options, run_refuses_values_out_of_range)
{
    static const struct {
        const char *args, *option;
    } cases[] = {
        {"run -q -n 3e9", "--frames"},
        {"run -q -n 2147483648", "--frames"},
        {"run -q -n 0", "--frames"},
        {"run -q --seed 1e20", "--seed"},
        {"run -q --seed 4294967296", "--seed"},
        {"run -q --seed -1", "--seed"},
        {"run -q --threads 1e10", "--threads"},
        {"run -q --threads -1", "--threads"},
        {"run -q --active-window 1e12", "--active-window"},
        {"run -q --rebuild-every 1e12", "--rebuild-every"},
        {"run -q --wait-subscriber 1e12", "--wait-subscriber"},
        {"run -q --rate 1e-300", "--rate"},
        {"run -q --rate 0", "--rate"},
        {"run -q --voxel 1e-30", "--voxel"},
        {"run -q --intrinsics 1e30,1e30,320,240", "--intrinsics"},
        {"run -q --intrinsics 525,525,1e30,240", "--intrinsics"},
        {"run -q --intrinsics 525,525,320,240,1e30,0,0,0,0", "--intrinsics"},
        {"run -q --iterations -5", "--iterations"},
        {"run -q --iterations 1e12", "--iterations"},
        {"run -q --stall-timeout 1e-300", "--stall-timeout"},
        {"run -q --duration 1e300", "--duration"},
        {"run -q --depth-scale 1e-300", "--depth-scale"},
        {"run -q --every 1e300", "--every"},
        {"run -q --progress 1e300", "--progress"},
        {"run -q --gate nan", "--gate"},
        {"run -q --recover-radius 0", "--recover-radius"},
        {"run -q --recover-radius inf", "--recover-radius"},
        {"run -q --voxel inf", "--voxel"},
        {"run -q --fill-frames -1", "--fill-frames"},
        {"run -q --fill-frames 1.5", "--fill-frames"},
        {"demo -q --threads 99999999999", "--threads"},
        {"bench --seed 1e20", "--seed"},
        {"record -n 3e9 /nonexistent/x synthetic", "--frames"},
        {"record --jumps -1 /nonexistent/x synthetic", "--jumps"},
        {"record --covered-frames 0 /nonexistent/x synthetic", "--covered-frames"},
        {"convert -n -1 /nonexistent/x /nonexistent/y", "--frames"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refused(cases[i].args, cases[i].option);
}

KR_TEST(options, refine_and_register_refuse_values_out_of_range)
{
    static const struct {
        const char *args, *option;
    } cases[] = {
        {"refine --synthetic 3 -q --iterations -5", "--iterations"},
        {"refine --synthetic 3 -q --levels 99999999999", "--levels"},
        {"refine --synthetic 3 -q --cell 1e-30", "--cell"},
        {"refine --synthetic 3 -q --band 1e10", "--band"},
        {"refine --synthetic 3 -q --points 3e9", "--points"},
        {"refine --synthetic 3 -q --subset 5", "--subset"},
        {"refine --synthetic 3 -q --seed -1", "--seed"},
        {"refine --synthetic 3 -q --gauge 1e10", "--gauge"},
        {"refine --synthetic 99999999999 -q", "--synthetic"},
        {"register --synthetic 100 --threads 99999999999", "--threads"},
        {"register --synthetic 1e12", "--synthetic"},
        {"register --synthetic 100 --repeat 9999999999999", "--repeat"},
        {"register --synthetic 100 --subsample -1", "--subsample"},
        {"register --synthetic 100 --extent 1e309", "--extent"},
        {"register --synthetic 100 --seed -1", "--seed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refused(cases[i].args, cases[i].option);
}

/* The edges of the ranges are values, not errors. */
KR_TEST(options, values_at_the_edges_are_taken)
{
    check_taken("run -q -b cpu -n 1 --seed 4294967295 --threads 0 --rate 1000 --voxel 0.001 "
                "--wait-subscriber 0");
    check_taken(
        "run -q -b cpu -n 1 --active-window 2147483647 --rebuild-every 2147483647 --progress 0");
    check_taken("run -q -b cpu -n 1 --intrinsics 100000,1,-100000,100000,1000,-1000,0,0,0");
    check_taken("run -q -b cpu -n 1 --fill-frames 0");
}

/* ---- the command line: every refusal one line, before any work ------------ */

static int kinreg(const char *args)
{
    return kr_test_run_tool(NULL, args, out, sizeof out);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

KR_TEST(options, every_rejected_number_names_option_value_and_range)
{
    /* Each of these exited 2 printing nothing; 1e12 frames overflowed an int. */
    static const struct {
        const char *args, *option, *value;
    } bad[] = {
        {"--voxel -1", "--voxel", "'-1'"},
        {"-n -5", "--frames", "'-5'"},
        {"--frames 0", "--frames", "'0'"},
        {"--frames 1e12", "--frames", "'1e12'"},
        {"--frames 2.5", "--frames", "'2.5'"},
        {"--voxel 0", "--voxel", "'0'"},
        {"--gate -1", "--gate", "'-1'"},
        {"--duration -1", "--duration", "'-1'"},
        {"--depth-scale 0", "--depth-scale", "'0'"},
        {"--active-window 0", "--active-window", "'0'"},
        {"--rebuild-every 0", "--rebuild-every", "'0'"},
        {"--stall-timeout -1", "--stall-timeout", "'-1'"},
        {"--wait-subscriber -1", "--wait-subscriber", "'-1'"},
        {"--threads -1", "--threads", "'-1'"},
        {"--seed -3", "--seed", "'-3'"},
        {"--iterations 6,x", "--iterations", "'6,x'"},
        {"--rate nan", "--rate", "'nan'"},
    };
    const char *commands[] = {"run", "demo", "bench"};
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char args[256];
            snprintf(args, sizeof args, "%s -b cpu %s", commands[c], bad[i].args);
            CHECK_MSG(kinreg(args) == 2, "%s: exit status", args);
            CHECK_MSG(strstr(out, bad[i].option) && strstr(out, bad[i].value) &&
                          strstr(out, "expected"),
                      "%s: '%s'", args, out);
            CHECK_MSG(count_lines(out) == 1, "%s: %d lines: '%s'", args, count_lines(out), out);
        }
    }
}

KR_TEST(options, unknown_option_is_one_line_with_a_hint)
{
    /* It printed the whole help text (register and refine: getopt's line
     * and 50-60 lines of help). */
    const char *commands[] = {"run", "demo", "bench",    "eval",   "record", "convert",
                              "sub", "view", "register", "refine", "keygen", "devices"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[128], hint[64];
        snprintf(args, sizeof args, "%s --no-such-option", commands[i]);
        CHECK_EQ(kinreg(args), 2);
        CHECK_CONTAINS(out, "--no-such-option");
        snprintf(hint, sizeof hint, "kinreg %s --help", commands[i]);
        CHECK_CONTAINS(out, hint);
        CHECK_MSG(count_lines(out) == 1, "%s: %d lines", args, count_lines(out));
    }
    CHECK_EQ(kinreg("run --voxel"), 2);
    CHECK_CONTAINS(out, "'--voxel' needs a value");
    CHECK_EQ(kinreg("frobnicate"), 2);
    CHECK_EQ(count_lines(out), 1);
    CHECK_CONTAINS(out, "kinreg --help");
    /* Missing or extra operands: one line too, not the help. */
    const char *operands[] = {"eval a.txt",     "record", "convert a", "sub",
                              "register a.ply", "refine", "keygen"};
    for (size_t i = 0; i < sizeof operands / sizeof operands[0]; i++) {
        CHECK_MSG(kinreg(operands[i]) == 2, "kinreg %s: not a usage error: %s", operands[i], out);
        CHECK_MSG(count_lines(out) == 1, "kinreg %s: %d lines", operands[i], count_lines(out));
        CHECK_CONTAINS(out, " --help')");
    }
}

/* One name, one meaning: -b/--backend picks the hardware in every command
 * that computes (register said --engine and refused -b with its help). */
KR_TEST(options, backend_is_b_in_every_command_that_computes)
{
    const char *commands[] = {"run", "demo", "bench", "refine", "register"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "%s -b gpu", commands[i]);
        CHECK_MSG(kinreg(args) == 2, "kinreg %s: not a usage error: %s", args, out);
        CHECK_CONTAINS(out, "--backend 'gpu' is not allowed: expected auto, cpu or cuda");
        CHECK_EQ(count_lines(out), 1);
    }
    /* register's -b cpu is its cpu engine: the same pose as --engine cpu. */
    char by_engine[256] = "", *at;
    CHECK_EQ(kinreg("register --engine cpu --method emicp --synthetic 400 --seed 3"), 0);
    CHECK_CONTAINS(out, "emicp on cpu");
    if ((at = strstr(out, "tum: ")) != NULL)
        snprintf(by_engine, sizeof by_engine, "%.*s", (int)strcspn(at, "\n"), at);
    CHECK_EQ(kinreg("register -b cpu --method emicp --synthetic 400 --seed 3"), 0);
    CHECK_CONTAINS(out, "emicp on cpu");
    CHECK_MSG(by_engine[0] && strstr(out, by_engine), "-b cpu:\n%s\n--engine cpu: %s", out,
              by_engine);
}

/* One letter, one option: in every command's help, a short name stands for
 * the same long name, and --json is a flag. sub's -t was --topics and -n
 * --count (run: --trajectory, --frames), demo's -o --out (refine: --output),
 * bench's --json took a FILE. */
KR_TEST(options, short_names_mean_one_thing_in_every_command)
{
    const char *commands[] = {"run", "demo",     "bench",  "eval",   "record",  "convert",
                              "sub", "register", "refine", "keygen", "devices", "view"};
    char letters[128][32];
    char seen_in[128][16];
    memset(letters, 0, sizeof letters);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        if (kinreg(args) != 0) continue; /* view without libmicrohttpd */
        for (const char *line = out, *next; *line; line = next) {
            size_t len = strcspn(line, "\n");
            next = line + len + (line[len] == '\n');
            char letter, name[32];
            if (sscanf(line, "  -%c, --%31[a-z-]", &letter, name) == 2 &&
                (unsigned char)letter < 128) {
                if (!letters[(int)letter][0]) {
                    snprintf(letters[(int)letter], sizeof letters[0], "%s", name);
                    snprintf(seen_in[(int)letter], sizeof seen_in[0], "%s", commands[i]);
                }
                CHECK_MSG(!strcmp(letters[(int)letter], name), "-%c is --%s in %s but --%s in %s",
                          letter, letters[(int)letter], seen_in[(int)letter], name, commands[i]);
            }
            /* An option line (the name within its first columns) of --json. */
            const char *json = strstr(line, "--json");
            if (json && json - line <= 8 && (size_t)(json - line) < len) {
                const char *after = json + strlen("--json");
                CHECK_MSG(!(after[0] == ' ' && after[1] >= 'A' && after[1] <= 'Z'),
                          "%s: --json takes a value: %.*s", commands[i], (int)len, line);
            }
        }
    }
    CHECK(!strcmp(letters['n'], "frames"));
    CHECK(!strcmp(letters['t'], "trajectory"));
    CHECK(!strcmp(letters['o'], "output"));

    /* The retired letters still work for a while, and say the new name. */
    CHECK_EQ(kinreg("sub -t bogus ipc:///nonexistent/kinreg.sock"), 2);
    CHECK_CONTAINS(out, "kinreg sub: warning: -t is retired here, write --topics");
    CHECK_CONTAINS(out, "unknown topic 'bogus'");
    CHECK_EQ(kinreg("sub -n 0 ipc:///nonexistent/kinreg.sock"), 2);
    CHECK_CONTAINS(out, "write --count");
    CHECK_CONTAINS(out, "--count needs a positive integer, not '0'");
    /* `bench --json FILE` as it was: one line that says what to write. */
    CHECK_EQ(kinreg("bench -b cpu --json report.json"), 2);
    CHECK_EQ(count_lines(out), 1);
    CHECK_CONTAINS(out, "-o report.json");
}

/* bench's help said both "the first 300 frames" and "default: the whole
 * source" for -n, and its table printed seven "(device)" rows of 0.000 on
 * the CPU. */
KR_TEST(options, bench_says_what_it_runs)
{
    CHECK_EQ(kinreg("bench --help"), 0);
    CHECK_CONTAINS(out, "stop after N frames (default 300;");
    CHECK_MSG(!strstr(out, "whole source"), "%s", out);
    CHECK_EQ(kinreg("bench -q -b cpu -n 3"), 0);
    CHECK_CONTAINS(out, "frames (LOST 0), backend cpu");
    CHECK_CONTAINS(out, "frame total");
    CHECK_MSG(!strstr(out, "(device)"), "%s", out);
}

/* -v/--log-level: the library's messages run and demo show (info by
 * default: what the run does at its end; warning with -q). */
KR_TEST(options, log_level_is_checked_and_applied)
{
    CHECK_EQ(kinreg("run -v loud -n 2"), 2);
    CHECK_CONTAINS(out,
                   "--log-level 'loud' is not allowed: expected error, warning, info or debug");
    CHECK_EQ(count_lines(out), 1);
    /* A covered stretch at the end: the final trajectory's filling is said
     * at info, not at error. */
    CHECK_EQ(kinreg("run -b cpu --covered 1 --covered-frames 5 --duration 1.5 "
                    "--trajectory-final /dev/null --progress 0"),
             0);
    CHECK_CONTAINS(out, "kinreg: info: filling in");
    CHECK_EQ(kinreg("run -b cpu --covered 1 --covered-frames 5 --duration 1.5 "
                    "--trajectory-final /dev/null --progress 0 -v error"),
             0);
    CHECK_MSG(!strstr(out, "kinreg: info:"), "-v error printed info: %s", out);
}

KR_TEST(options, model_path_is_checked_before_the_run)
{
    /* The scan ran to the end and then lost the model. */
    /* A path that cannot be written is a usage error, as a bad value is. */
    CHECK_EQ(kinreg("run -q -b cpu -n 3 -m /nonexistent-kinreg-dir/x.ply"), 2);
    CHECK_CONTAINS(out, "--save-model /nonexistent-kinreg-dir/x.ply");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
    char args[512];
    snprintf(args, sizeof args, "run -q -b cpu -n 3 -m '%s'", kr_test_tmpdir());
    CHECK_EQ(kinreg(args), 2);
    CHECK_CONTAINS(out, "is a directory");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
}

KR_TEST(options, publish_port_out_of_range_is_refused)
{
    /* A tcp port of 99999 was accepted and bound a random port. */
    CHECK_EQ(kinreg("run -q -b cpu -n 2 -p 'tcp://*:99999'"), 2);
    CHECK_CONTAINS(out, "tcp://*:99999");
    CHECK_CONTAINS(out, "1..65535");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
    CHECK_EQ(kinreg("run -q -b cpu -n 2 -p 'tcp://127.0.0.1:0x10'"), 2);
}

KR_TEST(options, bench_takes_quiet_and_refuses_what_it_ignores)
{
    /* bench rejected -q and listed (and silently ignored) output options. */
    CHECK_EQ(kinreg("bench -q -b cpu -n 2"), 0);
    CHECK_CONTAINS(out, "frame total");
    CHECK_MSG(!strstr(out, "timing stages"), "%s", out);
    const char *unused[] = {"-t x.txt", "-m x.ply", "-p tcp://127.0.0.1:5555", "--rate 1",
                            "--wait-subscriber 1"};
    const char *names[] = {"--trajectory", "--save-model", "--publish", "--rate",
                           "--wait-subscriber"};
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "bench -q -b cpu -n 2 %s", unused[i]);
        CHECK_EQ(kinreg(args), 2);
        CHECK_CONTAINS(out, names[i]);
        CHECK_CONTAINS(out, "not used by bench");
    }
    CHECK_EQ(kinreg("bench --help"), 0);
    CHECK_MSG(!strstr(out, "--trajectory") && !strstr(out, "--publish"),
              "bench help lists unused options");
}

KR_TEST(options, recording_directory_is_checked_before_the_source_opens)
{
    /* Output paths are checked before any work: a recording's too. */
    CHECK_EQ(kinreg("record -q -n 2 /nonexistent-kinreg-dir/take synthetic"), 2);
    CHECK_CONTAINS(
        out,
        "DIR /nonexistent-kinreg-dir/take cannot be created: no directory /nonexistent-kinreg-dir");
    CHECK_MSG(!strstr(out, "synthetic:1"), "the source was opened first: '%s'", out);
    CHECK_EQ(kinreg("convert -q synthetic /nonexistent-kinreg-dir/out"), 2);
    CHECK_CONTAINS(out, "OUTPUT /nonexistent-kinreg-dir/out cannot be created");
}
