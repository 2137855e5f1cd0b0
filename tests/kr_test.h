/* kinreg test harness: tests register themselves per module; checks print both
 * sides on failure and let the test continue (REQUIRE_* stop it). */
#ifndef KR_TEST_H
#define KR_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kinreg/source.h"
#include "kinreg/status.h"

typedef void (*kr_test_fn)(void);

/* Registers a case; `tags` ("" or words separated by spaces) say how it may
 * be selected: KINREG_TEST_SKIP=long,deadline leaves out the cases tagged
 * long or deadline (tests/CMakeLists.txt lists the tags and labels). */
void kr_test_register(const char *module, const char *name, const char *tags, kr_test_fn fn);
void kr_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kr_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool kr_test_failed(void);

/* ../shared/data beside the checkout, or $KINREG_DATA; NULL when absent. */
const char *kr_test_data_dir(void);
/* Path of a shared-data entry ("tum/fr1_xyz_head"), or NULL when absent. */
const char *kr_test_data(const char *relative);
/* A fresh private temporary directory for this test run (removed at exit). */
const char *kr_test_tmpdir(void);
/* Path of the kinreg program built with the tests. */
const char *kr_test_tool(void);
/* Opens the source "SCHEME:DIR" (e.g. "tum", "fakenect") with default
 * settings and the given skip_bad. */
kr_status kr_test_open_dir_source(const char *scheme, const char *dir, bool skip_bad, kr_source **src);
/* Runs a shell command with stdout and stderr captured in `out` (truncated
 * to size); returns its exit status, -1 when it did not exit normally. */
int kr_test_shell(const char *cmd, char *out, size_t size);
/* Runs `ENV kinreg ARGS` through the shell (ENV: "VAR=value ..." or NULL)
 * with stdout and stderr captured in `out`; returns the exit code. */
int kr_test_run_tool(const char *env, const char *args, char *out, size_t size);

/* A little-endian unsigned integer of `bytes` bytes at p, read by hand (the
 * wire tests' independent reading of the documented offsets). */
static inline uint64_t kr_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Deterministic test randomness: uniform in [0, 1) from a 32-bit LCG state,
 * and standard normal by Box–Muller. Seeded per test, so failures repeat. */
static inline double kr_urand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffffff) / (double)0x1000000;
}

static inline double kr_nrand(unsigned *s)
{
    double u = kr_urand(s), v = kr_urand(s);
    if (u < 1e-12) u = 1e-12;
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

#define KR_TEST(module, name) KR_TEST_TAGGED(module, name, "")

/* A case with tags: `KR_TEST_TAGGED(pipeline, x, "long")` at the start of a
 * line, on one line (tests/CMakeLists.txt reads the tags from there and
 * labels the module with them). */
#define KR_TEST_TAGGED(module, name, tags)                                                         \
    static void test_##module##_##name(void);                                                      \
    __attribute__((constructor)) static void register_##module##_##name(void)                      \
    {                                                                                              \
        kr_test_register(#module, #name, tags, test_##module##_##name);                            \
    }                                                                                              \
    static void test_##module##_##name(void)

/* The module's CTest labels, one line per test file at the start of a line:
 * `KR_LABELS("threads fakenect");`. tests/CMakeLists.txt reads it (the C
 * compiler only checks that it is a string). */
#define KR_LABELS(labels) _Static_assert(sizeof(labels) > 0, labels)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) kr_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                         \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) kr_test_fail(__FILE__, __LINE__, __VA_ARGS__);                                \
    } while (0)

#define CHECK_INT(op, a, b)                                                                        \
    do {                                                                                           \
        long long kr_a_ = (long long)(a), kr_b_ = (long long)(b);                                  \
        if (!(kr_a_ op kr_b_))                                                                     \
            kr_test_fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, kr_a_, kr_b_); \
    } while (0)
#define CHECK_EQ(a, b) CHECK_INT(==, a, b)
#define CHECK_NE(a, b) CHECK_INT(!=, a, b)

#define CHECK_DBL(op, a, b)                                                                        \
    do {                                                                                           \
        double kr_a_ = (double)(a), kr_b_ = (double)(b);                                           \
        if (!(kr_a_ op kr_b_))                                                                     \
            kr_test_fail(__FILE__, __LINE__, "%s %s %s: %.9g vs %.9g", #a, #op, #b, kr_a_, kr_b_); \
    } while (0)
#define CHECK_LT(a, b) CHECK_DBL(<, a, b)
#define CHECK_LE(a, b) CHECK_DBL(<=, a, b)
#define CHECK_GT(a, b) CHECK_DBL(>, a, b)
#define CHECK_GE(a, b) CHECK_DBL(>=, a, b)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double kr_a_ = (double)(a), kr_b_ = (double)(b), kr_t_ = (double)(tol);                    \
        if (!(fabs(kr_a_ - kr_b_) <= kr_t_))                                                       \
            kr_test_fail(__FILE__, __LINE__, "%s ≈ %s: %.9g vs %.9g (|diff| %.3g > tol %.3g)", #a, \
                         #b, kr_a_, kr_b_, fabs(kr_a_ - kr_b_), kr_t_);                            \
    } while (0)

#define CHECK_STATUS(expr, expected)                                                               \
    do {                                                                                           \
        kr_status kr_s_ = (expr), kr_e_ = (expected);                                              \
        if (kr_s_ != kr_e_)                                                                        \
            kr_test_fail(__FILE__, __LINE__, "%s: got %d (%s: %s), expected %d (%s)", #expr, kr_s_, \
                         kr_strerror(kr_s_), kr_last_error(), kr_e_, kr_strerror(kr_e_));          \
    } while (0)
#define CHECK_OK(expr) CHECK_STATUS(expr, KR_OK)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *kr_a_ = (a), *kr_b_ = (b);                                                     \
        if (!kr_a_ || !kr_b_ || strcmp(kr_a_, kr_b_) != 0)                                         \
            kr_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", #a, #b,                 \
                         kr_a_ ? kr_a_ : "(null)", kr_b_ ? kr_b_ : "(null)");                      \
    } while (0)
/* haystack contains needle */
#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *kr_h_ = (hay), *kr_n_ = (needle);                                              \
        if (!kr_h_ || !strstr(kr_h_, kr_n_))                                                       \
            kr_test_fail(__FILE__, __LINE__, "%s contains \"%s\": \"%s\"", #hay, kr_n_,            \
                         kr_h_ ? kr_h_ : "(null)");                                                \
    } while (0)

/* Stop the current test when a check so far failed (later steps depend on it). */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        CHECK(cond);                                                                               \
        if (kr_test_failed()) return;                                                              \
    } while (0)
#define REQUIRE_OK(expr)                                                                           \
    do {                                                                                           \
        CHECK_OK(expr);                                                                            \
        if (kr_test_failed()) return;                                                              \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        kr_test_skip(__VA_ARGS__);                                                                 \
        return;                                                                                    \
    } while (0)

#endif
