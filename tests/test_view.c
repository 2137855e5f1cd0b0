/* The live view: the fan-out's bounded per-page buffers (a slow page drops
 * and counts, never holds up the stream or another page), the trajectory
 * sent to late joiners, and the whole view in a real browser: a replay with
 * --view, headless Chromium loading the page, the page's own state checked
 * against what `kinreg sub` received from the same stream. */
#include "kr_test.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
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

static void count_wake(void *arg)
{
    (*(int *)arg)++;
}

/* Issue 30, item 5: at most max_clients pages; a page that stopped reading
 * (an event dropped, nothing read since) gives its place and its buffer to
 * a new page, else the new one is refused; both counted. A page that reads
 * without blocking sleeps when it has nothing and is woken once per sleep,
 * by data or by the hub closing, never while it is still falling asleep. */
KR_TEST(view, hub_bounds_pages_and_wakes_sleeping_ones)
{
    kr_view_hub *h = kr_view_hub_create(1000, 16);
    REQUIRE(h);
    kr_view_hub_limit(h, 2);
    kr_view_client *a = kr_view_hub_join(h), *b = kr_view_hub_join(h);
    REQUIRE(a && b);
    static char got[100000];
    drain(h, a, got, sizeof got);
    drain(h, b, got, sizeof got);
    bool full = false;
    CHECK(kr_view_hub_join_full(h, &full) == NULL);
    CHECK(full); /* both read: neither gives way */
    char data[100];
    snprintf(data, sizeof data, "{\"pad\":\"%0*d\"}", 70, 0);
    for (int i = 0; i < 30; i++) {
        kr_view_hub_broadcast(h, "pose", data, strlen(data));
        drain(h, a, got, sizeof got);
    }
    CHECK_GT(kr_view_client_dropped(h, b), 0);
    kr_view_client *c = kr_view_hub_join_full(h, &full);
    CHECK(c != NULL && !full); /* b stopped reading: evicted */
    kr_view_hub_stats_t st;
    kr_view_hub_stats(h, &st);
    CHECK_EQ(st.clients, 2);
    CHECK_EQ(st.evicted, 1);
    CHECK_EQ(st.refused, 1);
    CHECK_EQ(kr_view_client_read(h, b, got, sizeof got, 0), -1);
    CHECK_EQ(kr_view_client_take(h, b, got, sizeof got), -1);
    kr_view_hub_tick(h);
    drain(h, c, got, sizeof got);
    CHECK_CONTAINS(got, "\"evicted\":1,\"refused\":1");

    /* Sleeping: a takes what it has, then 0 (falling asleep). */
    int woken = 0;
    kr_view_client_on_wake(h, a, count_wake, &woken);
    while (kr_view_client_take(h, a, got, sizeof got) > 0) {
    }
    CHECK(kr_view_client_sleep(h, a)); /* nothing came meanwhile: asleep */
    kr_view_hub_broadcast(h, "pose", data, strlen(data));
    kr_view_hub_broadcast(h, "pose", data, strlen(data));
    CHECK_EQ(woken, 1); /* once per sleep */
    CHECK_GT(kr_view_client_take(h, a, got, sizeof got), 0);
    CHECK_EQ(kr_view_client_take(h, a, got, sizeof got), 0);
    kr_view_hub_broadcast(h, "pose", data, strlen(data)); /* while falling asleep */
    CHECK_EQ(woken, 1);
    CHECK(!kr_view_client_sleep(h, a)); /* the caller resumes itself */
    while (kr_view_client_take(h, a, got, sizeof got) > 0) {
    }
    CHECK(kr_view_client_sleep(h, a));
    kr_view_hub_close(h); /* closing wakes it, and its stream ends */
    CHECK_EQ(woken, 2);
    CHECK_EQ(kr_view_client_take(h, a, got, sizeof got), -1);
    kr_view_hub_leave(h, a);
    kr_view_hub_leave(h, b);
    kr_view_hub_leave(h, c);
    kr_view_hub_stats(h, &st);
    CHECK_EQ(st.clients, 0);
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
    /* A replay at recorded speed with the view on any free port and the
     * surface built (coarse, so it costs the 2-core machine little), and a
     * subscriber recording the same stream (poses, model and mesh headers). */
    snprintf(cmd, sizeof cmd,
             "cd '%s' || exit 1; timeout 330 '%s' run synthetic --duration 300 --rate 1 -q "
             "--progress 0 -p "
             "ipc://%s/view.sock "
             "--model-period 0.5 --mesh view.ply --mesh-voxel 0.02 --mesh-period 1 "
             "--view 127.0.0.1:0 > run.log 2>&1 & echo $! > '%s/run.pid'; "
             "timeout 330 '%s' sub --format json --topics pose,status,model,mesh --follow "
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
        /* ?still=60&mesh: the page stops listening after 60 poses, a whole
         * model and a whole surface, so the headless browser sees the network go quiet, runs
         * its timers on and then dumps the DOM and takes the screenshot.
         * That takes Chromium about 10 s on an idle 2-core machine and went
         * past 60 s under ASan beside two other jobs: it gets 240 s, and the
         * replay streams for 300 s (both are stopped as soon as it is done). */
        snprintf(cmd, sizeof cmd,
                 "timeout 240 '%s' --headless --no-sandbox --disable-dev-shm-usage "
                 "--enable-unsafe-swiftshader "
                 "--virtual-time-budget=2000 --window-size=1280,800 --screenshot='%s' --dump-dom "
                 "'%s?still=60&follow&mesh' "
                 "> '%s/dom.html' 2> '%s/chromium.log'",
                 browser, shot, url, tmp, tmp);
        rc = kr_test_shell(cmd, out, sizeof out);
        CHECK_MSG(rc == 0, "chromium exited with %d (see %s/chromium.log)", rc, tmp);
    }
    snprintf(
        cmd, sizeof cmd,
        "for f in sub run; do kill $(cat \"%s/$f.pid\"); done; "
        "for i in $(seq 50); do kill -0 $(cat '%s/run.pid') 2>/dev/null || exit 0; sleep 0.1; done",
        tmp, tmp);
    kr_test_shell(cmd, out, sizeof out);
    if (!url[0]) return;

    char path[512];
    snprintf(path, sizeof path, "%s/dom.html", tmp);
    char *dom = read_all(path);
    snprintf(path, sizeof path, "%s/sub.jsonl", tmp);
    char *sub = read_all(path);
    bool both = dom && sub;
    if (!both) {
        free(dom);
        free(sub);
        REQUIRE(both);
    }
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
        /* The model is coloured by height on a blue-to-white ramp, off the
         * green, amber, red and magenta that mean tracking states (it was
         * coloured by normal: red and green), and the plot has its axes. */
        CHECK_MSG(strstr(state, "\"model_colours\":\"height\"") != NULL,
                  "the model's colours are not the height ramp: %.300s", state);
        CHECK(json_true(state, "plot_axes"));
        /* ?follow: the view's centre followed the sensor, pose after pose. */
        CHECK(json_true(state, "follow"));
        CHECK_GE(json_number(state, "follow_moves"), 30);
        /* Source progress: the replay's length (300 s at 30 frames/s) from
         * the status records, and how much of it was read. */
        CHECK_EQ(json_number(state, "frames_total"), 9000);
        CHECK_GT(json_number(state, "source_progress"), 0);
        CHECK_LT(json_number(state, "source_progress"), 1);
        /* The latest depth frame, from the stream's `depth` topic: a 640x480
         * frame subsampled by 4, mostly valid, at the synthetic room's
         * depths (the scene spans about 0.5 to 6 m). */
        CHECK_GE(json_number(state, "depth_frames"), 1);
        CHECK_MSG(strstr(state, "\"depth_size\":\"160x120\"") != NULL, "no 160x120 depth frame: %.300s",
                  state);
        CHECK_GT(json_number(state, "depth_valid"), 0.5);
        CHECK_LE(points, 100000);
        /* The last pose it shows is the stream's pose of that frame, to the bit. */
        double frame = json_number(state, "pose_frame"), t_page[3], t_sub[3];
        bool page_has_t = json_array3(state, "pose_t", t_page);
        CHECK_MSG(page_has_t, "the page's state has no pose_t");
        char needle[160];
        snprintf(needle, sizeof needle, "\"topic\":\"pose\",\"seq\":%.0f,\"frame\":%.0f,",
                 json_number(state, "pose_seq"), frame);
        const char *line = line_with(sub, needle);
        CHECK_MSG(line != NULL, "the stream has no pose with %s", needle);
        /* Checks, not requirements: the buffers are freed below either way. */
        if (line && page_has_t) {
            bool sub_has_t = json_array3(line, "t", t_sub);
            CHECK_MSG(sub_has_t, "the stream's pose has no t: %.80s", line);
            for (int i = 0; sub_has_t && i < 3; i++)
                CHECK_EQ(t_page[i], t_sub[i]);
        }
        /* Its model is a snapshot the stream carried: same number, frame and size. */
        snprintf(needle, sizeof needle,
                 "\"snapshot\":%.0f,\"frame\":%.0f,\"total_points\":%.0f,\"first_point\":0,",
                 json_number(state, "model_snapshot"), json_number(state, "model_frame"), points);
        CHECK_MSG(line_with(sub, needle) != NULL, "the stream has no model chunk with %s", needle);
        /* And the surface, drawn instead of the model's points: a refresh
         * the stream carried, every one of its triangles put together from
         * the chunks. */
        double faces = json_number(state, "mesh_faces");
        CHECK_GE(json_number(state, "mesh_snapshots"), 1);
        CHECK_GT(faces, 1000);
        CHECK(json_true(state, "mesh_shown"));
        CHECK(json_true(state, "mesh_coloured")); /* the synthetic scene has colours */
        snprintf(needle, sizeof needle,
                 "\"snapshot\":%.0f,\"frame\":%.0f,\"total_faces\":%.0f,\"first_face\":0,",
                 json_number(state, "mesh_snapshot"), json_number(state, "mesh_frame"), faces);
        CHECK_MSG(line_with(sub, needle) != NULL, "the stream has no mesh chunk with %s", needle);
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
    CHECK_CONTAINS(out, "(--http [ADDR:]PORT"); /* view's option: it named run's --view */
    CHECK_EQ(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    snprintf(args, sizeof args, "run synthetic -n 5 -q --view 127.0.0.1:%d", port);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "(--view [ADDR:]PORT");
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

/* ---- hostile clients (issue 30, item 5) ----------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A TCP connection to 127.0.0.1:port (receive buffer `rcvbuf` when > 0),
 * with `request` sent; -1 on failure. */
static int connect_view(int port, int rcvbuf, const char *request, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    for (size_t sent = 0; sent < len;) {
        ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
        if (n <= 0) break; /* the server may answer before it has read all */
        sent += (size_t)n;
    }
    return fd;
}

/* Reads what fd sends until `needle` shows up, the peer closes or the
 * deadline passes; the text (NUL-terminated, at most cap - 1 bytes). */
static size_t read_until(int fd, const char *needle, char *out, size_t cap, double seconds)
{
    size_t n = 0;
    out[0] = '\0';
    double until = now_s() + seconds;
    while (n + 1 < cap && now_s() < until && !(needle && strstr(out, needle))) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0) continue;
        ssize_t k = recv(fd, out + n, cap - 1 - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
        out[n] = '\0';
    }
    return n;
}

/* kinreg's resident memory in MiB (its /proc status), NaN when gone. */
static double rss_mib(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    double v = NAN;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = strtod(line + 6, NULL) / 1024.0;
    if (f) fclose(f);
    return v;
}

/* The view bounds what clients can take, and a real viewer is served while
 * they hold on: 40 event-stream clients that never read (each one used to
 * cost a thread and up to 8 MiB of buffer: 150 of them took RSS from 252 to
 * 1,538 MiB), 200 connections that send nothing (they held a thread each
 * forever), a header of 64 KiB, and a page of another host (DNS rebinding:
 * it used to be served). Asserted: the foreign Host gets 421, the huge
 * header 431, a real client is served a page and an event stream within a
 * generous deadline (it retries a 503, as the page does), and RSS grows by
 * less than the 16 pages' buffers allow plus slack, measured after the
 * viewer has received 24 MiB of the stream with the hostile clients
 * connected (data-driven, not timed). bench/view_hostile.sh runs the full
 * 150 + 1000 for 60 s. */
KR_TEST(view, hostile_clients_are_bounded_and_a_viewer_is_served)
{
    char out[1 << 14], cmd[4096];
    if (kr_test_run_tool(NULL, "view --help", out, sizeof out) != 0)
        SKIP("kinreg was built without the live view (libmicrohttpd-dev missing)");
    const char *tmp = kr_test_tmpdir();
    snprintf(cmd, sizeof cmd,
             "cd '%s' || exit 1; '%s' run synthetic --duration 300 --rate 1 -q "
             "--progress 0 -b cpu --model-period 0.5 --view 127.0.0.1:0 > hostile.log 2>&1 & "
             "echo $! > '%s/hostile.pid'",
             tmp, kr_test_tool(), tmp);
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 300); do grep -o 'http://127.0.0.1:[0-9]*/' '%s/hostile.log' && "
             "exit 0; sleep 0.1; done; cat '%s/hostile.log'; exit 1",
             tmp, tmp);
    int port = 0;
    if (kr_test_shell(cmd, out, sizeof out) == 0) sscanf(out, "http://127.0.0.1:%d/", &port);
    snprintf(cmd, sizeof cmd, "cat '%s/hostile.pid'", tmp);
    kr_test_shell(cmd, out, sizeof out);
    long pid = strtol(out, NULL, 10);
    CHECK_MSG(port > 0 && pid > 0, "the view did not start: %s", out);
    if (kr_test_failed()) {
        if (pid > 0) kill((pid_t)pid, SIGKILL);
        return;
    }

    char host[64], req[512];
    snprintf(host, sizeof host, "127.0.0.1:%d", port);
    /* The real viewer's stream, from before the hostile clients: it counts
     * model snapshots, so that "enough data went by" is measured. */
    int len = snprintf(req, sizeof req, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", host);
    int viewer = connect_view(port, 0, req, (size_t)len);
    CHECK(viewer >= 0);
    if (viewer < 0) {
        kill((pid_t)pid, SIGKILL);
        return;
    }
    static char stream[1 << 16];
    read_until(viewer, "event: model", stream, sizeof stream, 120);
    CHECK_CONTAINS(stream, "HTTP/1.1 200");
    double rss0 = rss_mib(pid);

    enum { EVENTS = 40, IDLE = 200 };
    int hostile[EVENTS + IDLE];
    len = snprintf(req, sizeof req, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", host);
    for (int i = 0; i < EVENTS; i++)
        hostile[i] = connect_view(port, 4096, req, (size_t)len);
    for (int i = EVENTS; i < EVENTS + IDLE; i++)
        hostile[i] = connect_view(port, 0, "", 0);

    /* DNS rebinding: a page of another name. */
    len = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: evil.example.com:%d\r\n\r\n", port);
    int fd = connect_view(port, 0, req, (size_t)len);
    CHECK(fd >= 0);
    read_until(fd, "\r\n", out, sizeof out, 60);
    CHECK_MSG(!strncmp(out, "HTTP/1.1 421", 12), "a foreign Host was answered: %.80s", out);
    close(fd);
    /* A 64 KiB header. */
    static char big[70000];
    len = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: %s\r\nX-Pad: ", host);
    memset(big + len, 'a', 65536);
    memcpy(big + len + 65536, "\r\n\r\n", 5);
    fd = connect_view(port, 0, big, strlen(big));
    CHECK(fd >= 0);
    read_until(fd, "\r\n", out, sizeof out, 60);
    CHECK_MSG(strncmp(out, "HTTP/1.1 200", 12) != 0, "a 64 KiB header was served: %.80s", out);
    CHECK_MSG(!strncmp(out, "HTTP/1.1 431", 12) || !out[0], "a 64 KiB header: %.80s", out);
    close(fd);

    /* The real viewer goes on receiving: 24 MiB more of the stream, which
     * every hostile page was offered too (more than its buffer and its
     * socket's hold, then or before this fix). */
    size_t got = 0;
    for (double until = now_s() + 240; got < (24u << 20) && now_s() < until;)
        got += read_until(viewer, NULL, stream, sizeof stream, 1);
    CHECK_MSG(got >= (24u << 20), "the viewer got %zu bytes with hostile clients on", got);
    double rss1 = rss_mib(pid);
    /* A new page and a new stream are served too (a 503 is retried, as the
     * page's script does, while hostile pages hold every place and have
     * not yet stopped reading). */
    len = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", port);
    fd = connect_view(port, 0, req, (size_t)len);
    CHECK(fd >= 0);
    read_until(fd, "</html>", out, sizeof out, 60);
    CHECK_MSG(!strncmp(out, "HTTP/1.1 200", 12) && strstr(out, "</html>"),
              "the page was not served: %.80s", out);
    close(fd);
    bool streamed = false;
    for (double until = now_s() + 120; !streamed && now_s() < until;) {
        len = snprintf(req, sizeof req, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", host);
        fd = connect_view(port, 0, req, (size_t)len);
        if (fd < 0) break;
        read_until(fd, "event: ", out, sizeof out, 30);
        streamed = !strncmp(out, "HTTP/1.1 200", 12) && strstr(out, "event: ");
        close(fd);
        if (!streamed) usleep(500000);
    }
    CHECK_MSG(streamed, "a new event stream was not served: %.80s", out);

    for (int i = 0; i < EVENTS + IDLE; i++)
        if (hostile[i] >= 0) close(hostile[i]);
    close(viewer);
    snprintf(cmd, sizeof cmd,
             "kill -INT %ld; for i in $(seq 300); do kill -0 %ld 2>/dev/null || exit 0; sleep "
             "0.1; done; exit 1",
             pid, pid);
    CHECK_MSG(kr_test_shell(cmd, out, sizeof out) == 0, "kinreg run did not end after SIGINT");
    snprintf(cmd, sizeof cmd, "cat '%s/hostile.log'", tmp);
    kr_test_shell(cmd, out, sizeof out);
    CHECK_CONTAINS(out, "refused 1 requests naming another host");
    printf("    RSS %.1f MiB before the hostile clients, %.1f MiB after 24 MiB of stream with "
           "them\n",
           rss0, rss1);
#ifndef KINREG_SANITIZED
    /* 16 pages' buffers of 4 MiB, plus the model's own growth meanwhile;
     * unbounded, 40 stalled pages held 8 MiB each (320 MiB). */
    CHECK_LT(rss1 - rss0, 64 + 80);
#endif
}
