/* The live view: the fan-out's bounded per-page buffers (a slow page drops
 * and counts, never holds up the stream or another page), the trajectory
 * sent to late joiners, and the whole view in a real browser: a replay with
 * --view, headless Chromium loading the page, the page's own state checked
 * against what `kinreg sub` received from the same stream. */
#include "kr_test.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The hub has no library home (it is the program's); compile it in here. */
#include "../tools/view/view_hub.c"

/* Everything a page can read now, as one string. */
static size_t drain(kr_view_hub *h, kr_view_client *c, char *out, size_t cap)
{
    size_t n = 0;
    ssize_t k;
    while (n < cap && (k = kr_view_client_read(h, c, out + n, cap - n, 0)) > 0)
        n += (size_t)k;
    out[n < cap ? n : cap - 1] = '\0';
    return n;
}

KR_TEST(view, slow_page_drops_and_counts_without_holding_up_others)
{
    kr_view_hub *h = kr_view_hub_create(1000, 16);
    REQUIRE(h);
    kr_view_client *fast = kr_view_hub_join(h), *slow = kr_view_hub_join(h);
    REQUIRE(fast && slow);
    static char got[200000], expect[200000];
    size_t greeting = drain(h, fast, got, sizeof got); /* retry + empty history */
    CHECK_CONTAINS(got, "event: history\ndata: []\n\n");
    char slow_greeting[1000];
    size_t slow_used = drain(h, slow, slow_greeting, sizeof slow_greeting);
    CHECK_EQ(slow_used, greeting);
    /* 100 events of 100 bytes each on the wire: the fast page reads after
     * every one, the slow page never. */
    size_t en = 0, fast_n = 0;
    for (int i = 0; i < 100; i++) {
        char data[80];
        snprintf(data, sizeof data, "{\"i\":%03d,\"pad\":\"%0*d\"}", i, 60, 0);
        kr_view_hub_broadcast(h, "pose", data, strlen(data));
        en += (size_t)snprintf(expect + en, sizeof expect - en, "event: pose\ndata: %s\n\n", data);
        fast_n += drain(h, fast, got + fast_n, sizeof got - fast_n);
    }
    CHECK_EQ(fast_n, en);
    CHECK(!memcmp(got, expect, en));
    CHECK_EQ(kr_view_client_dropped(h, fast), 0);
    /* The slow page kept the first events that fit, whole and in order, and
     * counted the rest. */
    size_t per = en / 100, kept = 1000 / per;
    CHECK_EQ(kr_view_client_dropped(h, slow), 100 - kept);
    CHECK_EQ(kr_view_hub_dropped(h), 100 - kept);
    size_t slow_n = drain(h, slow, got, sizeof got);
    CHECK_EQ(slow_n, kept * per);
    CHECK(!memcmp(got, expect, slow_n));
    /* Once it has read, it receives again, and its "hub" event tells it what it lost. */
    kr_view_hub_tick(h);
    drain(h, slow, got, sizeof got);
    char line[128];
    snprintf(line, sizeof line, "\"clients\":2,\"dropped\":%zu,", 100 - kept);
    CHECK_CONTAINS(got, line);
    /* Nothing waiting: 0 after the wait; closing ends the stream (-1). */
    CHECK_EQ(kr_view_client_read(h, slow, got, sizeof got, 0.01), 0);
    kr_view_hub_close(h);
    CHECK_EQ(kr_view_client_read(h, slow, got, sizeof got, 1), -1);
    kr_view_hub_leave(h, fast);
    CHECK_EQ(kr_view_hub_clients(h), 1);
    kr_view_hub_destroy(&h);
}

KR_TEST(view, late_page_gets_the_trajectory_and_a_restart_clears_it)
{
    kr_view_hub *h = kr_view_hub_create(1 << 16, 4);
    REQUIRE(h);
    const double t[3] = {0.5, -0.25, 2};
    for (uint64_t i = 0; i < 6; i++)
        kr_view_hub_note_pose(h, i, 100 + i, t, (int)(i % 3), false);
    kr_view_hub_note_status(h, "{\"event\":\"progress\"}", 20);
    kr_view_client *c = kr_view_hub_join(h);
    static char got[1 << 16];
    drain(h, c, got, sizeof got);
    /* Capacity 4: when full it keeps every other pose (100 102 then 104 105). */
    CHECK_CONTAINS(got, "event: history\ndata: [[100,0.5,-0.25,2,0,0],[102,0.5,-0.25,2,2,0],"
                        "[104,0.5,-0.25,2,1,0],[105,0.5,-0.25,2,2,0]]\n\n");
    CHECK_CONTAINS(got, "event: status\ndata: {\"event\":\"progress\"}\n\n");
    kr_view_hub_leave(h, c);
    /* Sequence number 0 again: the publisher restarted, the old path is gone. */
    kr_view_hub_note_pose(h, 0, 0, t, 0, false);
    kr_view_hub_note_pose(h, 0, 7, t, 0, true); /* a refined keyframe */
    c = kr_view_hub_join(h);
    drain(h, c, got, sizeof got);
    CHECK_CONTAINS(got, "data: [[0,0.5,-0.25,2,0,0],[7,0.5,-0.25,2,0,1]]\n\n");
    kr_view_hub_leave(h, c);
    kr_view_hub_destroy(&h);
}

/* ---- in a real browser -------------------------------------------------- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s) {
        s[fread(s, 1, (size_t)n, f)] = '\0';
    }
    fclose(f);
    return s;
}

/* The number after "key": in a JSON text (NaN when absent). */
static double json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

static bool json_array3(const char *json, const char *key, double v[3])
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":[", key);
    const char *p = strstr(json, pat);
    if (!p) return false;
    p += strlen(pat);
    for (int i = 0; i < 3; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p) return false;
        p = end + 1;
    }
    return true;
}

static bool json_true(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":true", key);
    return strstr(json, pat) != NULL;
}

/* The line of `lines` containing `needle` (a pointer to its start; NULL if none). */
static const char *line_with(const char *lines, const char *needle)
{
    const char *p = strstr(lines, needle);
    if (!p) return NULL;
    while (p > lines && p[-1] != '\n')
        p--;
    return p;
}

KR_TEST(view, page_in_headless_chromium_shows_the_stream)
{
    char out[4096], cmd[4096], browser[256] = "";
    if (kr_test_shell(
            "command -v chromium || command -v chromium-browser || command -v google-chrome", out,
            sizeof out) != 0)
        SKIP("no Chromium here (`scripts/setup.sh test` installs it)");
    sscanf(out, "%255s", browser);
    if (kr_test_run_tool(NULL, "view --help", out, sizeof out) != 0)
        SKIP("kinreg was built without the live view (libmicrohttpd-dev missing)");

    const char *tmp = kr_test_tmpdir();
    char shot[512];
    snprintf(shot, sizeof shot, "%s/view_test.png", KINREG_BINARY_DIR);
    unlink(shot);
    /* A replay at recorded speed with the view on any free port, and a
     * subscriber recording the same stream (poses and model headers). */
    snprintf(cmd, sizeof cmd,
             "cd '%s' || exit 1; timeout 90 '%s' run synthetic --duration 60 --rate 1 -q "
             "--progress 0 -p "
             "ipc://%s/view.sock "
             "--model-period 0.5 --view 127.0.0.1:0 > run.log 2>&1 & echo $! > '%s/run.pid'; "
             "timeout 90 '%s' sub --format json --topics pose,status,model --follow "
             "ipc://%s/view.sock > "
             "'%s/sub.jsonl' "
             "2> '%s/sub.err' & echo $! > '%s/sub.pid'",
             tmp, kr_test_tool(), tmp, tmp, kr_test_tool(), tmp, tmp, tmp, tmp);
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 100); do grep -q '\"topic\":\"pose\"' '%s/sub.jsonl' 2>/dev/null && "
             "grep -o 'http://127.0.0.1:[0-9]*/' '%s/run.log' && exit 0; sleep 0.1; done; cat "
             "'%s/run.log'; exit 1",
             tmp, tmp, tmp);
    int rc = kr_test_shell(cmd, out, sizeof out);
    char url[128] = "";
    if (rc == 0) sscanf(out, "%127s", url);
    CHECK_MSG(rc == 0 && url[0], "the view did not start: %s", out);
    if (url[0]) {
        /* ?still=60: the page stops listening after 60 poses and a whole
         * model, so the headless browser sees the network go quiet, runs
         * its timers on and then dumps the DOM and takes the screenshot. */
        snprintf(cmd, sizeof cmd,
                 "timeout 60 '%s' --headless --no-sandbox --disable-dev-shm-usage "
                 "--enable-unsafe-swiftshader "
                 "--virtual-time-budget=2000 --window-size=1280,800 --screenshot='%s' --dump-dom "
                 "'%s?still=60' "
                 "> '%s/dom.html' 2> '%s/chromium.log'",
                 browser, shot, url, tmp, tmp);
        rc = kr_test_shell(cmd, out, sizeof out);
        CHECK_MSG(rc == 0, "chromium exited with %d (see %s/chromium.log)", rc, tmp);
    }
    snprintf(
        cmd, sizeof cmd,
        "for f in sub run; do kill $(cat '%s/$f.pid'); done; "
        "for i in $(seq 50); do kill -0 $(cat '%s/run.pid') 2>/dev/null || exit 0; sleep 0.1; done",
        tmp, tmp);
    kr_test_shell(cmd, out, sizeof out);
    if (!url[0]) return;

    char path[512];
    snprintf(path, sizeof path, "%s/dom.html", tmp);
    char *dom = read_all(path);
    snprintf(path, sizeof path, "%s/sub.jsonl", tmp);
    char *sub = read_all(path);
    REQUIRE(dom && sub);
    const char *state = strstr(dom, "<pre id=\"kinreg-state\">");
    CHECK_MSG(state != NULL, "no state element in the page");
    if (state) {
        /* The page's own state: it ran three.js with WebGL, got poses and a
         * whole model snapshot. */
        CHECK(json_true(state, "three"));
        CHECK(json_true(state, "webgl"));
        CHECK(json_true(state, "stopped"));
        CHECK_GE(json_number(state, "poses"), 60);
        CHECK_GE(json_number(state, "model_snapshots"), 1);
        double points = json_number(state, "model_points");
        CHECK_GT(points, 1000);
        CHECK_LE(points, 100000);
        /* The last pose it shows is the stream's pose of that frame, to the bit. */
        double frame = json_number(state, "pose_frame"), t_page[3], t_sub[3];
        REQUIRE(json_array3(state, "pose_t", t_page));
        char needle[160];
        snprintf(needle, sizeof needle, "\"topic\":\"pose\",\"seq\":%.0f,\"frame\":%.0f,",
                 json_number(state, "pose_seq"), frame);
        const char *line = line_with(sub, needle);
        CHECK_MSG(line != NULL, "the stream has no pose with %s", needle);
        if (line) {
            REQUIRE(json_array3(line, "t", t_sub));
            for (int i = 0; i < 3; i++)
                CHECK_EQ(t_page[i], t_sub[i]);
        }
        /* Its model is a snapshot the stream carried: same number, frame and size. */
        snprintf(needle, sizeof needle,
                 "\"snapshot\":%.0f,\"frame\":%.0f,\"total_points\":%.0f,\"first_point\":0,",
                 json_number(state, "model_snapshot"), json_number(state, "model_frame"), points);
        CHECK_MSG(line_with(sub, needle) != NULL, "the stream has no model chunk with %s", needle);
    }
    struct stat st;
    CHECK_MSG(stat(shot, &st) == 0 && st.st_size > 20000, "no screenshot at %s", shot);
    free(dom);
    free(sub);
}

KR_TEST(view, port_in_use_and_public_address_are_one_clear_line)
{
    char out[4096], args[512];
    if (kr_test_run_tool(NULL, "view --help", out, sizeof out) != 0)
        SKIP("kinreg was built without the live view (libmicrohttpd-dev missing)");
    /* Hold a port, then ask the view to serve on it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    int port = ntohs(a.sin_port);
    snprintf(args, sizeof args, "view --http 127.0.0.1:%d ipc://%s/none.sock", port,
             kr_test_tmpdir());
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    char expect[128];
    snprintf(expect, sizeof expect, "the view's HTTP port 127.0.0.1:%d is already in use", port);
    CHECK_CONTAINS(out, expect);
    CHECK_CONTAINS(out, "choose another port");
    CHECK_EQ(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    close(fd);
    /* Beyond loopback only when asked for. */
    snprintf(args, sizeof args, "run synthetic -n 5 -q --view 0.0.0.0:0");
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "add --view-public to allow it");
    snprintf(args, sizeof args, "view --http nowhere:80 ipc://%s/none.sock", kr_test_tmpdir());
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "is not an IPv4 address");
}

/* The README's own example, `kinreg run --view PORT` without -p: the view
 * subscribes to a private ipc:// socket whose name lived in a block that had
 * ended before the pipeline read it (ASan: stack-use-after-scope in
 * kr_publisher_create; issue 30 item 4). Run under the sanitizer pass. */
KR_TEST(view, run_view_without_publish_uses_a_private_socket)
{
    char out[8192];
    if (kr_test_run_tool(NULL, "view --help", out, sizeof out) != 0)
        SKIP("kinreg was built without the live view (libmicrohttpd-dev missing)");
    int rc =
        kr_test_run_tool(NULL, "run synthetic -n 10 -b cpu -q --view 127.0.0.1:0", out, sizeof out);
    CHECK_MSG(rc == 0, "kinreg run --view exited with %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "live view at http://127.0.0.1:");
    CHECK_CONTAINS(out, "of ipc://");
    CHECK_CONTAINS(out, "/kinreg-view-");
    CHECK(strstr(out, "AddressSanitizer") == NULL);
}
