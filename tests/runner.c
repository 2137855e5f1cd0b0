/* kinreg test runner: `kinreg_tests MODULE [TEST]` runs one module's tests (or
 * one test); `kinreg_tests --list` lists them with their tags. Exit 0 all
 * passed, 1 a failure, 77 when every test of the selection skipped (CTest
 * SKIP_RETURN_CODE). KINREG_TEST_SKIP=TAG[,TAG...] leaves out the cases
 * carrying one of those tags (the sanitizer passes: scripts/sanitize.sh);
 * they are not run and not counted, and a line says how many. */
#include "kr_test.h"

#include "kinreg/device.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 1024

static struct {
    const char *module, *name, *tags;
    kr_test_fn fn;
} tests[MAX_TESTS];
static int test_count;
static bool current_failed, current_skipped;
static char skip_reason[512];
static char tmpdir[256];

void kr_test_register(const char *module, const char *name, const char *tags, kr_test_fn fn)
{
    if (test_count < MAX_TESTS) {
        tests[test_count].module = module;
        tests[test_count].name = name;
        tests[test_count].tags = tags;
        tests[test_count].fn = fn;
        test_count++;
    }
}

void kr_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    current_failed = true;
}

void kr_test_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
    current_skipped = true;
}

bool kr_test_failed(void)
{
    return current_failed;
}

const char *kr_test_data_dir(void)
{
    static char path[1024];
    const char *env = getenv("KINREG_DATA");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/../shared/data", KINREG_SOURCE_DIR);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : NULL;
}

/* Other names the shared data's folders go by, so KINREG_DATA may point at
 * data laid out as downloaded: the TUM sequence under its original name
 * (rgbd_dataset_freiburg1_xyz; the tests read its first frames), each folder
 * directly under KINREG_DATA without the tum/ fakenect/ level, or KINREG_DATA
 * naming the sequence or dump folder itself. */
static const struct {
    const char *prefix; /* as the tests name it */
    const char *alias[4];
} data_aliases[] = {
    {"tum/fr1_xyz_head",
     {"tum/rgbd_dataset_freiburg1_xyz", "rgbd_dataset_freiburg1_xyz", "fr1_xyz_head", NULL}},
    {"fakenect/planes", {"planes", NULL}},
    {"bunny", {"bunny/data", NULL}},
};

static bool data_path(char *path, size_t size, const char *dir, const char *folder, const char *rest)
{
    int n = folder ? snprintf(path, size, "%s/%s%s", dir, folder, rest) : snprintf(path, size, "%s%s", dir, rest);
    struct stat st;
    return n > 0 && (size_t)n < size && stat(path, &st) == 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

const char *kr_test_data(const char *relative)
{
    static _Thread_local char path[1024];
    const char *dir = kr_test_data_dir();
    if (!dir) return NULL;
    if (data_path(path, sizeof path, dir, relative, "")) return path;
    for (size_t i = 0; i < sizeof data_aliases / sizeof data_aliases[0]; i++) {
        size_t len = strlen(data_aliases[i].prefix);
        if (strncmp(relative, data_aliases[i].prefix, len) != 0 || (relative[len] && relative[len] != '/'))
            continue;
        const char *rest = relative + len; /* "" or "/file" */
        for (int k = 0; data_aliases[i].alias[k]; k++)
            if (data_path(path, sizeof path, dir, data_aliases[i].alias[k], rest)) return path;
        /* KINREG_DATA is the folder itself. */
        const char *last = base_name(data_aliases[i].prefix), *mine = base_name(dir);
        bool named = strcmp(mine, last) == 0;
        for (int k = 0; !named && data_aliases[i].alias[k]; k++)
            named = strcmp(mine, base_name(data_aliases[i].alias[k])) == 0;
        if (named && data_path(path, sizeof path, dir, NULL, rest)) return path;
    }
    return NULL;
}

const char *kr_test_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/kinreg_test_XXXXXX");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            tmpdir[0] = '\0';
            return "/tmp";
        }
    }
    return tmpdir;
}

/* The kinreg program the build made, or $KINREG_TOOL: a copy of the build
 * run elsewhere (the GPU machine's carried folder) has it at another path. */
const char *kr_test_tool(void)
{
    const char *env = getenv("KINREG_TOOL");
    return env && *env ? env : KINREG_TOOL_PATH;
}

kr_status kr_test_open_dir_source(const char *scheme, const char *dir, bool skip_bad, kr_source **src)
{
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[1024];
    snprintf(uri, sizeof uri, "%s:%s", scheme, dir);
    cfg.uri = uri;
    cfg.skip_bad = skip_bad;
    return kr_source_create(src, &cfg);
}

int kr_test_shell(const char *cmd, char *out, size_t size)
{
    char full[9216], path[512];
    snprintf(path, sizeof path, "%s/shell_output.txt", kr_test_tmpdir());
    snprintf(full, sizeof full, "( %s ) > '%s' 2>&1", cmd, path);
    /* A loaded machine (ASan processes of tens of TB of reserved address
     * space, two at a time) can refuse a fork for a moment: try again rather
     * than fail the case, and say so when it never starts. */
    int rc = -1;
    for (int attempt = 0; attempt < 10; attempt++) {
        rc = system(full);
        if (rc != -1) break;
        int err = errno;
        printf("    (the shell could not start: %s; trying again)\n", strerror(err));
        usleep(500 * 1000);
    }
    if (rc != -1 && WIFSIGNALED(rc))
        printf("    (the shell was ended by signal %d: %s)\n", WTERMSIG(rc),
               strsignal(WTERMSIG(rc)));
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(out, 1, size - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int kr_test_run_tool(const char *env, const char *args, char *out, size_t size)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s '%s' %s", env ? env : "", kr_test_tool(), args);
    return kr_test_shell(cmd, out, size);
}

/* Whether the space-separated `tags` hold one of the comma-separated words
 * of `skip` (KINREG_TEST_SKIP). */
static bool tagged(const char *tags, const char *skip)
{
    for (const char *w = skip; *w;) {
        size_t n = strcspn(w, ",");
        for (const char *t = tags; n && *t;) {
            size_t m = strcspn(t, " ");
            if (m == n && strncmp(t, w, n) == 0) return true;
            t += m;
            t += strspn(t, " ");
        }
        w += n;
        w += strspn(w, ",");
    }
    return false;
}

static void remove_tmpdir(void)
{
    if (tmpdir[0] && !getenv("KINREG_KEEP_TMP")) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

/* Each case's wall time and CPU time go on its result line: the CI log then
 * says which cases the suite's minutes go to, and which of them use the
 * cores (on 2 cores, two modules at a time, the CPU bounds the run; a case
 * that waits on a paced replay or a socket does not). */
static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This process's CPU time and that of the children it has waited for (the
 * kinreg program and shells a case runs), user and system. */
static double cpu_seconds(void)
{
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    const struct timeval *t[] = {&self.ru_utime, &self.ru_stime, &children.ru_utime,
                                 &children.ru_stime};
    double sum = 0;
    for (int i = 0; i < 4; i++)
        sum += (double)t[i]->tv_sec + 1e-6 * (double)t[i]->tv_usec;
    return sum;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf("usage: kinreg_tests MODULE [TEST] | --list\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--list")) {
        for (int i = 0; i < test_count; i++)
            printf("%s %s%s%s\n", tests[i].module, tests[i].name, tests[i].tags[0] ? " " : "",
                   tests[i].tags);
        return 0;
    }
    /* As the kinreg program does (tools/main.c): idle OpenMP threads that
     * spin take the cores of the module beside them under `ctest -j` (two
     * modules at once took 125 s spinning, 79 s passive on 2 cores). */
    (void)kr_openmp_prefer_passive(argv);
    atexit(remove_tmpdir);
    const char *skip = getenv("KINREG_TEST_SKIP");
    int ran = 0, passed = 0, failed = 0, skipped = 0, left_out = 0;
    for (int i = 0; i < test_count; i++) {
        if (strcmp(tests[i].module, argv[1]) != 0) continue;
        if (argc > 2 && strcmp(tests[i].name, argv[2]) != 0) continue;
        if (skip && tagged(tests[i].tags, skip)) {
            left_out++;
            continue;
        }
        current_failed = current_skipped = false;
        kr_error_clear();
        printf("[ RUN  ] %s.%s\n", tests[i].module, tests[i].name);
        fflush(stdout);
        double t0 = wall_seconds(), c0 = cpu_seconds();
        tests[i].fn();
        double took = wall_seconds() - t0, cpu = cpu_seconds() - c0;
        ran++;
        if (current_failed) {
            failed++;
            printf("[ FAIL ] %s.%s (%.1f s, CPU %.1f s)\n", tests[i].module, tests[i].name, took,
                   cpu);
        } else if (current_skipped) {
            skipped++;
            printf("[ SKIP ] %s.%s: %s\n", tests[i].module, tests[i].name, skip_reason);
        } else {
            passed++;
            printf("[  OK  ] %s.%s (%.1f s, CPU %.1f s)\n", tests[i].module, tests[i].name, took,
                   cpu);
        }
        fflush(stdout);
    }
    if (left_out)
        printf("%s: %d case%s left out (tagged %s: KINREG_TEST_SKIP)\n", argv[1], left_out,
               left_out == 1 ? "" : "s", skip);
    if (ran == 0 && left_out) return 77;
    if (ran == 0) {
        fprintf(stderr, "no test matches '%s%s%s'\n", argv[1], argc > 2 ? "." : "", argc > 2 ? argv[2] : "");
        return 1;
    }
    printf("%s: %d passed, %d failed, %d skipped\n", argv[1], passed, failed, skipped);
    if (failed) return 1;
    return passed == 0 ? 77 : 0;
}
