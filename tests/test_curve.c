/* CURVE publishing (issue 14, item 3): key files as kinreg keygen writes
 * them (checked against libzmq's own key derivation), their errors, an
 * allowed subscriber that receives every pose while an unknown key and a
 * plain subscriber receive nothing, the programs end to end, and the warning
 * for a plain-text stream on a public endpoint.
 *
 * Program tests take $KINREG_TEST_TOOL when set (see test_guard.c). */
#include "kr_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "kinreg/frame.h"
#include "kinreg/transport.h"

static const char *tool(void)
{
    const char *env = getenv("KINREG_TEST_TOOL");
    return env && *env ? env : kr_test_tool();
}

static const char *tmp_path(const char *name)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", kr_test_tmpdir(), name);
    return p;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0) return;
    if (write(fd, text, strlen(text)) < 0) perror(path);
    fchmod(fd, mode);
    close(fd);
}

static bool need_curve(void)
{
    return kr_curve_available();
}

/* ---- key files ----------------------------------------------------------------- */

KR_TEST(curve, keypair_files_round_trip)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair kp, back;
    REQUIRE_OK(kr_curve_keypair_new(&kp));
    /* Independent check: libzmq derives the same public key from the secret. */
    char derived[41];
    REQUIRE(zmq_curve_public(derived, kp.secret_key) == 0);
    CHECK_STR(derived, kp.public_key);

    const char *base = tmp_path("alice");
    REQUIRE_OK(kr_curve_keypair_save(&kp, base));
    struct stat sb;
    REQUIRE(stat(tmp_path("alice.key_secret"), &sb) == 0);
    CHECK_EQ(sb.st_mode & 0777, 0600);
    REQUIRE(stat(tmp_path("alice.key"), &sb) == 0);
    CHECK_EQ(sb.st_mode & 0777, 0644);
    CHECK_OK(kr_curve_keypair_load(tmp_path("alice.key_secret"), &back));
    CHECK_STR(back.public_key, kp.public_key);
    CHECK_STR(back.secret_key, kp.secret_key);
    char pub[41];
    CHECK_OK(kr_curve_public_load(tmp_path("alice.key"), pub));
    CHECK_STR(pub, kp.public_key);
    CHECK_OK(kr_curve_public_load(tmp_path("alice.key_secret"), pub));
    CHECK_STR(pub, kp.public_key);
    /* The public file holds no secret. */
    FILE *f = fopen(tmp_path("alice.key"), "r");
    char text[1024] = {0};
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    CHECK(strstr(text, kp.public_key) && !strstr(text, kp.secret_key) &&
          !strstr(text, "secret-key"));
    /* Never overwritten. */
    kr_curve_keypair other;
    REQUIRE_OK(kr_curve_keypair_new(&other));
    CHECK_STATUS(kr_curve_keypair_save(&other, base), KR_ERR_EXISTS);
    CHECK_CONTAINS(kr_last_error(), "already exists");
    CHECK_OK(kr_curve_keypair_load(tmp_path("alice.key_secret"), &back));
    CHECK_STR(back.secret_key, kp.secret_key);
}

/* czmq and pyzmq write the same format; a certificate of theirs loads. */
KR_TEST(curve, czmq_certificate_loads)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    char pub[41], sec[41];
    REQUIRE(zmq_curve_keypair(pub, sec) == 0);
    char text[512];
    snprintf(text, sizeof text,
             "#   ****  Generated on 2026-11-23 by CZMQ  ****\n"
             "#   ZeroMQ CURVE **Secret** Certificate\n\nmetadata\n    name = \"x\"\ncurve\n"
             "    public-key = \"%s\"\n    secret-key = \"%s\"\n",
             pub, sec);
    write_text(tmp_path("czmq.key_secret"), text, 0600);
    kr_curve_keypair kp;
    CHECK_OK(kr_curve_keypair_load(tmp_path("czmq.key_secret"), &kp));
    CHECK_STR(kp.public_key, pub);
    CHECK_STR(kp.secret_key, sec);
}

KR_TEST(curve, bad_key_files_give_clear_errors)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair kp, good;
    char pub[41];
    REQUIRE_OK(kr_curve_keypair_new(&good));
    REQUIRE_OK(kr_curve_keypair_save(&good, tmp_path("good")));

    CHECK_STATUS(kr_curve_keypair_load(tmp_path("missing.key_secret"), &kp), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "missing.key_secret");
    CHECK_CONTAINS(kr_last_error(), "kinreg keygen");
    CHECK_STATUS(kr_curve_public_load(tmp_path("missing.key"), pub), KR_ERR_IO);

    /* The public file where the secret one belongs. */
    CHECK_STATUS(kr_curve_keypair_load(tmp_path("good.key"), &kp),
                 KR_ERR_INVALID_ARG); /* mode 0644 */
    chmod(tmp_path("good.key"), 0600);
    CHECK_STATUS(kr_curve_keypair_load(tmp_path("good.key"), &kp), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "holds no secret-key");

    /* A secret readable by others. */
    chmod(tmp_path("good.key_secret"), 0644);
    CHECK_STATUS(kr_curve_keypair_load(tmp_path("good.key_secret"), &kp), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "chmod 600");
    chmod(tmp_path("good.key_secret"), 0600);

    /* Truncated key: 39 characters. */
    char text[512];
    snprintf(text, sizeof text, "curve\n    public-key = \"%.39s\"\n", good.public_key);
    write_text(tmp_path("short.key"), text, 0644);
    CHECK_STATUS(kr_curve_public_load(tmp_path("short.key"), pub), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "short.key line 2");
    CHECK_CONTAINS(kr_last_error(), "40 Z85 characters");

    /* A character outside Z85. */
    snprintf(text, sizeof text, "public-key = \"%.39s~\"\n", good.public_key);
    write_text(tmp_path("tilde.key"), text, 0644);
    CHECK_STATUS(kr_curve_public_load(tmp_path("tilde.key"), pub), KR_ERR_FORMAT);

    /* Mismatched pair: one key's public beside another's secret. */
    kr_curve_keypair other;
    REQUIRE_OK(kr_curve_keypair_new(&other));
    snprintf(text, sizeof text, "public-key = \"%s\"\nsecret-key = \"%s\"\n", good.public_key,
             other.secret_key);
    write_text(tmp_path("mixed.key_secret"), text, 0600);
    CHECK_STATUS(kr_curve_keypair_load(tmp_path("mixed.key_secret"), &kp), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "does not belong");

    /* No key at all, and a binary file. */
    write_text(tmp_path("empty.key"), "# nothing here\n", 0644);
    CHECK_STATUS(kr_curve_public_load(tmp_path("empty.key"), pub), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "no public-key");
    int fd = open(tmp_path("binary.key"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        CHECK(write(fd,
                    "\x7f"
                    "ELF\0\0\1",
                    7) == 7);
        close(fd);
    }
    CHECK_STATUS(kr_curve_public_load(tmp_path("binary.key"), pub), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "binary");
}

KR_TEST(curve, allow_list_reads_joined_public_keys)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair a, b;
    REQUIRE_OK(kr_curve_keypair_new(&a));
    REQUIRE_OK(kr_curve_keypair_new(&b));
    char text[1024];
    snprintf(text, sizeof text,
             "# allowed\ncurve\n    public-key = \"%s\"\ncurve\n    public-key = \"%s\"\n"
             "    public-key = \"%s\"\n",
             a.public_key, b.public_key, a.public_key);
    write_text(tmp_path("allowed"), text, 0644);
    char(*keys)[KR_CURVE_KEY_LEN + 1] = NULL;
    size_t n = 0;
    REQUIRE_OK(kr_curve_allow_load(tmp_path("allowed"), &keys, &n));
    CHECK_EQ(n, 2); /* the repeated key once */
    CHECK_STR(keys[0], a.public_key);
    CHECK_STR(keys[1], b.public_key);
    free(keys);
    /* A secret key in an allow-list is a mistake worth stopping for. */
    snprintf(text, sizeof text, "public-key = \"%s\"\nsecret-key = \"%s\"\n", a.public_key,
             a.secret_key);
    write_text(tmp_path("leaky"), text, 0644);
    CHECK_STATUS(kr_curve_allow_load(tmp_path("leaky"), &keys, &n), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "secret-key");
    write_text(tmp_path("none"), "\n", 0644);
    CHECK_STATUS(kr_curve_allow_load(tmp_path("none"), &keys, &n), KR_ERR_FORMAT);
}

/* ---- publishing over loopback ----------------------------------------------------- */

static kr_subscriber *curve_subscriber(const char *endpoint, const char *server_pub,
                                       const kr_curve_keypair *own)
{
    kr_subscriber_config cfg;
    kr_subscriber_config_default(&cfg);
    cfg.endpoint = endpoint;
    if (own) {
        cfg.curve_server_key = server_pub;
        cfg.curve_public_key = own->public_key;
        cfg.curve_secret_key = own->secret_key;
    }
    kr_subscriber *sub = NULL;
    CHECK_OK(kr_subscriber_open(&sub, &cfg));
    return sub;
}

KR_TEST(curve, only_the_allowed_subscriber_receives)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair server, alice, mallory;
    REQUIRE_OK(kr_curve_keypair_new(&server));
    REQUIRE_OK(kr_curve_keypair_new(&alice));
    REQUIRE_OK(kr_curve_keypair_new(&mallory));
    const char *allow[] = {alice.public_key};
    kr_publisher_config cfg;
    kr_publisher_config_default(&cfg);
    cfg.endpoint = "tcp://127.0.0.1:*";
    cfg.curve_secret_key = server.secret_key;
    cfg.curve_allow = allow;
    cfg.curve_allow_count = 1;
    kr_publisher *pub = NULL;
    REQUIRE_OK(kr_publisher_create(&pub, &cfg));
    const char *ep = kr_publisher_endpoint(pub);
    kr_subscriber *plain = curve_subscriber(ep, NULL, NULL);
    kr_subscriber *unknown = curve_subscriber(ep, server.public_key, &mallory);
    /* Mallory knows the server's key but holds a wrong one for it: also refused. */
    kr_subscriber *good = curve_subscriber(ep, server.public_key, &alice);
    REQUIRE(plain && unknown && good);
    /* Only an authenticated peer can subscribe, so this waits for Alice. */
    REQUIRE_OK(kr_publisher_wait_subscriber(pub, 10000));

    enum { N = 300 };
    kr_pose_msg p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < N; i++) {
        p.frame_index = (uint64_t)i;
        p.t[0] = 0.001 * i;
        CHECK_OK(kr_publisher_send_pose(pub, &p));
    }
    int got = 0;
    kr_message m;
    while (got < N && kr_subscriber_receive(good, 2000, &m) == KR_OK) {
        if (m.topic != KR_TOPIC_POSE) continue;
        CHECK_EQ(m.pose.frame_index, got);
        CHECK_EQ(m.gap, 0);
        CHECK_NEAR(m.pose.t[0], 0.001 * got, 0);
        got++;
    }
    CHECK_EQ(got, N);
    CHECK_EQ(kr_publisher_dropped(pub), 0);
    CHECK_STATUS(kr_subscriber_receive(plain, 300, &m), KR_END);
    /* Mallory hears nothing: at most that she was refused (curve.
     * refused_key_is_said_on_both_sides). */
    kr_status us = kr_subscriber_receive(unknown, 300, &m);
    CHECK_MSG(us == KR_END || us == KR_ERR_TRANSPORT, "Mallory's receive: %d", us);
    kr_publisher_guard_stats gs;
    kr_publisher_guard_get(pub, &gs);
    CHECK_GE(gs.clients_denied, 1); /* Mallory (the plain one fails before ZAP) */
    kr_subscriber_destroy(&plain);
    kr_subscriber_destroy(&unknown);
    kr_subscriber_destroy(&good);
    kr_publisher_destroy(&pub);
}

KR_TEST(curve, publisher_and_subscriber_refuse_half_configurations)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair server;
    REQUIRE_OK(kr_curve_keypair_new(&server));
    kr_publisher_config cfg;
    kr_publisher_config_default(&cfg);
    cfg.endpoint = "tcp://127.0.0.1:*";
    cfg.curve_secret_key = server.secret_key; /* no allow-list */
    kr_publisher *pub = NULL;
    CHECK_STATUS(kr_publisher_create(&pub, &cfg), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "allow-list");
    const char *allow[] = {"not a key"};
    cfg.curve_allow = allow;
    cfg.curve_allow_count = 1;
    CHECK_STATUS(kr_publisher_create(&pub, &cfg), KR_ERR_INVALID_ARG);
    cfg.curve_secret_key = NULL;
    CHECK_STATUS(kr_publisher_create(&pub, &cfg), KR_ERR_INVALID_ARG);
    CHECK(pub == NULL);
    kr_subscriber_config sc;
    kr_subscriber_config_default(&sc);
    sc.endpoint = "tcp://127.0.0.1:5555";
    sc.curve_server_key = server.public_key; /* no own pair */
    kr_subscriber *sub = NULL;
    CHECK_STATUS(kr_subscriber_open(&sub, &sc), KR_ERR_INVALID_ARG);
    CHECK(sub == NULL);
}

/* ---- programs ---------------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int count_pose_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += line[0] != '#' && line[0] != '\n';
    fclose(f);
    return n;
}

/* kinreg keygen, then kinreg run with CURVE and two kinreg sub: the allowed
 * one prints every pose, the one with an unknown key nothing. */
KR_TEST(curve, programs_end_to_end)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    char out[8192], cmd[4096];
    const char *dir = kr_test_tmpdir();
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && '%s' keygen srv && '%s' keygen ann && '%s' keygen eve && cp ann.key allowed",
        dir, tool(), tool(), tool());
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "wrote srv.key (public) and srv.key_secret");
    int port = free_port();
    REQUIRE(port > 0);
    enum { FRAMES = 30 };
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && T='%s' && "
        "{ $T sub --timeout 20 --curve-server srv.key --curve-secret ann.key_secret "
        "tcp://127.0.0.1:%d "
        "> ann.txt 2> ann.err & } && "
        "{ $T sub --timeout 4 --curve-server srv.key --curve-secret eve.key_secret "
        "tcp://127.0.0.1:%d "
        "> eve.txt 2> eve.err & } && "
        "{ $T sub --timeout 4 tcp://127.0.0.1:%d > plain.txt 2> plain.err & } && "
        "$T run synthetic --duration 1 -q --wait-subscriber 15 -p tcp://127.0.0.1:%d "
        "--curve-secret srv.key_secret --curve-allow allowed -t run.txt; rc=$?; wait; exit $rc",
        dir, tool(), port, port, port, port);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 0, "kinreg run exited %d:\n%s", rc, out);
    CHECK_MSG(!strstr(out, "readable by anyone"), "warned about an encrypted stream:\n%s", out);
    CHECK_EQ(count_pose_lines(tmp_path("run.txt")), FRAMES);
    CHECK_EQ(count_pose_lines(tmp_path("ann.txt")), FRAMES);
    CHECK_EQ(count_pose_lines(tmp_path("eve.txt")), 0);
    CHECK_EQ(count_pose_lines(tmp_path("plain.txt")), 0);

    /* Wrong files stop the programs with one clear line. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' run synthetic -n 1 -p tcp://127.0.0.1:%d --curve-secret srv.key "
             "--curve-allow allowed",
             dir, tool(), port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "srv.key");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' sub --curve-server nosuch.key --curve-secret ann.key_secret "
             "tcp://127.0.0.1:%d",
             dir, tool(), port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "nosuch.key");
    CHECK_CONTAINS(out, "kinreg keygen");
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && '%s' run synthetic -n 1 -p tcp://127.0.0.1:%d --curve-secret srv.key_secret "
        "--curve-allow srv.key_secret",
        dir, tool(), port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "secret-key");
}

/* ---- the plain-text warning ---------------------------------------------------------- */

KR_TEST(curve, public_endpoints_are_told_apart)
{
    static const struct {
        const char *ep;
        bool pub;
    } cases[] = {{"tcp://*:5555", true},           {"tcp://0.0.0.0:5555", true},
                 {"tcp://192.168.1.4:5555", true}, {"tcp://eth0:5555", true},
                 {"tcp://[::]:5555", true},        {"tcp://127.0.0.1:5555", false},
                 {"tcp://127.1.2.3:*", false},     {"tcp://localhost:5555", false},
                 {"tcp://lo:5555", false},         {"tcp://[::1]:5555", false},
                 {"ipc:///tmp/k.sock", false},     {"inproc://x", false},
                 {"ws://0.0.0.0:80", true},        {"", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(kr_endpoint_is_public(cases[i].ep) == cases[i].pub, "%s: expected %s",
                  cases[i].ep, cases[i].pub ? "public" : "local");
}

KR_TEST(curve, run_on_every_interface_without_keys_warns)
{
    int port = free_port();
    REQUIRE(port > 0);
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' run synthetic -n 3 -q -p 'tcp://*:%d'", tool(), port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    CHECK_CONTAINS(out, "readable by anyone");
    snprintf(cmd, sizeof cmd, "'%s' run synthetic -n 3 -q -p tcp://127.0.0.1:%d", tool(), port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    CHECK_MSG(!strstr(out, "readable by anyone"), "warned for loopback:\n%s", out);
    snprintf(cmd, sizeof cmd, "'%s' run synthetic -n 3 -q -p ipc://%s/k.sock", tool(),
             kr_test_tmpdir());
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    CHECK_MSG(!strstr(out, "readable by anyone"), "warned for ipc:\n%s", out);
}

static const char *python_with_zmq(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import zmq' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) return candidates[i];
    }
    return NULL;
}

/* The Python subscriber (python/kinreg) with the same key files. */
KR_TEST(curve, python_subscriber_end_to_end)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    const char *py = python_with_zmq();
    if (!py) SKIP("no python3 with pyzmq: install python3-zmq (apt) or pyzmq (pip)");
    char out[8192], cmd[4096];
    const char *dir = kr_test_tmpdir();
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' keygen pysrv && '%s' keygen pyann && '%s' keygen pyeve && cp "
             "pyann.key pyallowed",
             dir, tool(), tool(), tool());
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    int port = free_port();
    REQUIRE(port > 0);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && S='%s/tools/python/kinreg_sub.py' && "
             "{ %s $S --timeout 20 --curve-server pysrv.key --curve-secret pyann.key_secret "
             "tcp://127.0.0.1:%d "
             "> pyann.txt 2> pyann.err & } && "
             "{ %s $S --timeout 4 --curve-server pysrv.key --curve-secret pyeve.key_secret "
             "tcp://127.0.0.1:%d "
             "> pyeve.txt 2> pyeve.err & } && "
             "'%s' run synthetic --duration 1 -q --wait-subscriber 15 -p tcp://127.0.0.1:%d "
             "--curve-secret pysrv.key_secret --curve-allow pyallowed; rc=$?; wait; exit $rc",
             dir, KINREG_SOURCE_DIR, py, port, py, port, tool(), port);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 0, "kinreg run exited %d:\n%s", rc, out);
    CHECK_EQ(count_pose_lines(tmp_path("pyann.txt")), 30);
    CHECK_EQ(count_pose_lines(tmp_path("pyeve.txt")), 0);
    /* Bad key files: one line naming the file. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s '%s/tools/python/kinreg_sub.py' --curve-server pysrv.key "
             "--curve-secret pyann.key tcp://127.0.0.1:%d",
             dir, py, KINREG_SOURCE_DIR, port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "pyann.key");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s '%s/tools/python/kinreg_sub.py' --curve-server nosuch.key "
             "--curve-secret pyann.key_secret tcp://127.0.0.1:%d",
             dir, py, KINREG_SOURCE_DIR, port);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "nosuch.key");
    CHECK_CONTAINS(out, "kinreg keygen");
}

/* ---- the documented C examples compile ----------------------------------------------- */

/* Every ```c block of a document becomes the body of a function in one file,
 * its #include lines moved to the top; the file must compile cleanly. */
static int append_c_blocks(const char *doc, FILE *out, int first)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/%s", KINREG_SOURCE_DIR, doc);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    bool in = false;
    int n = first;
    while (fgets(line, sizeof line, f)) {
        if (!in && !strncmp(line, "```c", 4)) {
            in = true;
            fprintf(out, "int example_%d(void);\nint example_%d(void)\n{\n", n, n);
        } else if (in && !strncmp(line, "```", 3)) {
            in = false;
            fprintf(out, "    return 0;\n}\n");
            n++;
        } else if (in && strncmp(line, "#include", 8) != 0) {
            fputs(line, out);
        }
    }
    fclose(f);
    return n - first;
}

KR_TEST(curve, documented_c_examples_compile)
{
    const char *src = tmp_path("examples.c");
    FILE *out = fopen(src, "w");
    REQUIRE(out);
    fprintf(out, "#include <stdio.h>\n#include <kinreg/transport.h>\n");
    int a = append_c_blocks("PROTOCOL.md", out, 0);
    int b = append_c_blocks("SECURITY.md", out, 100);
    fclose(out);
    CHECK_GE(a, 2); /* the plain and the CURVE subscriber */
    CHECK_GE(b, 1);
    char cmd[4096], log[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' -std=c11 -Wall -Wextra -Werror -fsyntax-only -I'%s/include' '%s'",
             KINREG_C_COMPILER, KINREG_SOURCE_DIR, src);
    CHECK_MSG(kr_test_shell(cmd, log, sizeof log) == 0,
              "the documented examples do not compile:\n%s", log);
}

/* Issue 30, item 7: a key file is read only when it is a regular file. A
 * named pipe used to hold `kinreg sub --curve-server FIFO` forever, waiting
 * for a writer; /dev/zero is refused before a byte is read. */
KR_TEST(curve, key_files_must_be_regular_files)
{
    const char *fifo = tmp_path("key.fifo");
    unlink(fifo);
    REQUIRE(mkfifo(fifo, 0600) == 0);
    char key[KR_CURVE_KEY_LEN + 1];
    kr_curve_keypair kp;
    double t0 = kr_now();
    CHECK_STATUS(kr_curve_public_load(fifo, key), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), fifo);
    CHECK_CONTAINS(kr_last_error(), "named pipe");
    CHECK_STATUS(kr_curve_keypair_load(fifo, &kp), KR_ERR_IO);
    CHECK_STATUS(kr_curve_public_load("/dev/zero", key), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "a device");
    CHECK_LT(kr_now() - t0, 5);
    /* The hint for a missing file stays. */
    CHECK_STATUS(kr_curve_public_load(tmp_path("no_such.key"), key), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "make one with kinreg keygen NAME");
    /* And the program says so in one line, exit status 2, at once. */
    char out[4096], args[1200];
    snprintf(args, sizeof args,
             "'%s' sub --curve-server '%s' --curve-secret '%s' --timeout 30 tcp://127.0.0.1:9 2>&1",
             tool(), fifo, fifo);
    FILE *p = popen(args, "r");
    REQUIRE(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
    CHECK_CONTAINS(out, "named pipe");
    unlink(fifo);
}

/* What the publisher's log said (kr_log_set), joined. */
static char logged[8192];
static void collect_log(kr_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", message);
}

/* Issue 30, item 9: a subscriber whose key the publisher refuses used to see
 * only "no message ... (is a publisher running there?)", and the publisher
 * said nothing. Now the subscriber's receive fails with the reason, and the
 * publisher logs the refused address and key once. */
KR_TEST(curve, refused_key_is_said_on_both_sides)
{
    if (!need_curve()) SKIP("libzmq without CURVE");
    kr_curve_keypair server, alice, mallory;
    REQUIRE_OK(kr_curve_keypair_new(&server));
    REQUIRE_OK(kr_curve_keypair_new(&alice));
    REQUIRE_OK(kr_curve_keypair_new(&mallory));
    const char *allow[] = {alice.public_key};
    kr_publisher_config cfg;
    kr_publisher_config_default(&cfg);
    cfg.endpoint = "tcp://127.0.0.1:*";
    cfg.curve_secret_key = server.secret_key;
    cfg.curve_allow = allow;
    cfg.curve_allow_count = 1;
    logged[0] = '\0';
    kr_log_set(KR_LOG_WARN, collect_log, NULL);
    kr_publisher *pub = NULL;
    REQUIRE_OK(kr_publisher_create(&pub, &cfg));
    const char *ep = kr_publisher_endpoint(pub);
    kr_subscriber *sub = curve_subscriber(ep, server.public_key, &mallory);
    REQUIRE(sub);
    /* However long the handshake takes: the refusal is the answer. */
    kr_message m;
    kr_status st = KR_END;
    for (double t0 = kr_now(); st == KR_END && kr_now() - t0 < 60;)
        st = kr_subscriber_receive(sub, 200, &m);
    CHECK_STATUS(st, KR_ERR_TRANSPORT);
    CHECK_CONTAINS(kr_last_error(), "refused this subscriber's CURVE key");
    CHECK_CONTAINS(kr_last_error(), "--curve-allow");
    kr_subscriber_destroy(&sub);
    kr_publisher_destroy(&pub);
    kr_log_set(KR_LOG_WARN, NULL, NULL);
    char expect[200];
    snprintf(expect, sizeof expect, "refused a subscriber from 127.0.0.1: its CURVE public key %s",
             mallory.public_key);
    CHECK_CONTAINS(logged, expect);
    CHECK_CONTAINS(logged, "not on the allow-list");

    /* The program: one line with the reason, exit status 1, not a timeout. */
    const char *spub = tmp_path("refused_server.key"), *mkey = tmp_path("refused_mallory");
    char args[2048], out[4096];
    snprintf(args, sizeof args, "rm -f '%s' '%s.key' '%s.key_secret'; '%s' keygen '%s' >/dev/null",
             spub, mkey, mkey, tool(), mkey);
    REQUIRE(system(args) == 0);
    snprintf(args, sizeof args, "public-key = \"%s\"\n", server.public_key);
    write_text(spub, args, 0644);
    REQUIRE_OK(kr_publisher_create(&pub, &cfg));
    snprintf(args, sizeof args,
             "'%s' sub --curve-server '%s' --curve-secret '%s.key_secret' --timeout 60 '%s' 2>&1",
             tool(), spub, mkey, kr_publisher_endpoint(pub));
    FILE *p = popen(args, "r");
    REQUIRE(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
    CHECK_CONTAINS(out, "refused this subscriber's CURVE key");
    CHECK(strstr(out, "is a publisher running there") == NULL);
    kr_publisher_destroy(&pub);
}
