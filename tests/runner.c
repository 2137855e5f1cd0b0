/* kinreg test runner: `kinreg_tests MODULE [TEST]` runs one module's tests (or
 * one test); `kinreg_tests --list` lists them. Exit 0 all passed, 1 a failure,
 * 77 when every test of the selection skipped (CTest SKIP_RETURN_CODE). */
#include "kr_test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 1024

static struct {
    const char *module, *name;
    kr_test_fn fn;
} tests[MAX_TESTS];
static int test_count;
static bool current_failed, current_skipped;
static char skip_reason[512];
static char tmpdir[256];

void kr_test_register(const char *module, const char *name, kr_test_fn fn)
{
    if (test_count < MAX_TESTS) {
        tests[test_count].module = module;
        tests[test_count].name = name;
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

const char *kr_test_data(const char *relative)
{
    static _Thread_local char path[1024];
    const char *dir = kr_test_data_dir();
    if (!dir) return NULL;
    int n = snprintf(path, sizeof path, "%s/%s", dir, relative);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    struct stat st;
    return stat(path, &st) == 0 ? path : NULL;
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

const char *kr_test_tool(void)
{
    return KINREG_TOOL_PATH;
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

int kr_test_run_tool(const char *env, const char *args, char *out, size_t size)
{
    char cmd[4096], path[512];
    snprintf(path, sizeof path, "%s/tool_output.txt", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s '%s' %s > '%s' 2>&1", env ? env : "", kr_test_tool(), args, path);
    int rc = system(cmd);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(out, 1, size - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void remove_tmpdir(void)
{
    if (tmpdir[0] && !getenv("KINREG_KEEP_TMP")) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf("usage: kinreg_tests MODULE [TEST] | --list\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--list")) {
        for (int i = 0; i < test_count; i++) printf("%s %s\n", tests[i].module, tests[i].name);
        return 0;
    }
    atexit(remove_tmpdir);
    int ran = 0, passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < test_count; i++) {
        if (strcmp(tests[i].module, argv[1]) != 0) continue;
        if (argc > 2 && strcmp(tests[i].name, argv[2]) != 0) continue;
        current_failed = current_skipped = false;
        kr_error_clear();
        printf("[ RUN  ] %s.%s\n", tests[i].module, tests[i].name);
        fflush(stdout);
        tests[i].fn();
        ran++;
        if (current_failed) {
            failed++;
            printf("[ FAIL ] %s.%s\n", tests[i].module, tests[i].name);
        } else if (current_skipped) {
            skipped++;
            printf("[ SKIP ] %s.%s: %s\n", tests[i].module, tests[i].name, skip_reason);
        } else {
            passed++;
            printf("[  OK  ] %s.%s\n", tests[i].module, tests[i].name);
        }
        fflush(stdout);
    }
    if (ran == 0) {
        fprintf(stderr, "no test matches '%s%s%s'\n", argv[1], argc > 2 ? "." : "", argc > 2 ? argv[2] : "");
        return 1;
    }
    printf("%s: %d passed, %d failed, %d skipped\n", argv[1], passed, failed, skipped);
    if (failed) return 1;
    return passed == 0 ? 77 : 0;
}
