/* The run's lifecycle (issue 14): faults keep every pose and every run ends
 * with a word. Each test runs the kinreg program as a child process, does to
 * it what a user or the machine would (a full disk, a file-size limit,
 * Ctrl-C or SIGTERM at a bad moment, a replay file deleted under it) and
 * checks the exit status, the time it took, the trajectory file (read back
 * with kinreg's own reader) and what a subscriber received. */
#include "kr_test.h"
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kinreg/recorder.h"
#include "kinreg/source.h"
#include "kinreg/trajectory.h"
#include "kinreg/transport.h"

/* the sensor cases load libfreenect's fakenect */
KR_LABELS("fakenect");

#if defined(KINREG_HAVE_FREENECT) && defined(KINREG_FAKENECT_DIR)
#define FAKENECT_TESTS 1
#endif

static void tmp_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", kr_test_tmpdir(), name);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- the program as a child process --------------------------------------- */

typedef struct {
    const char *fakenect_dump; /* run on libfreenect's fakenect replaying this dump */
    long file_size_limit;      /* RLIMIT_FSIZE in bytes, 0 = none */
} child_setup;

/* Starts `kinreg argv...` with stdout and stderr in `log`. */
static pid_t spawn(char *const argv[], const char *log, const child_setup *setup)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (setup && setup->fakenect_dump) {
#ifdef KINREG_FAKENECT_DIR
        setenv("LD_LIBRARY_PATH", KINREG_FAKENECT_DIR, 1);
#endif
        setenv("FAKENECT_PATH", setup->fakenect_dump, 1);
        setenv("FAKENECT_LOOP", "0", 1);
    }
    if (setup && setup->file_size_limit > 0) {
        struct rlimit rl = {(rlim_t)setup->file_size_limit, (rlim_t)setup->file_size_limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
    }
    if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(127);
    execv(kr_test_tool(), argv);
    _exit(127);
}

/* Waits up to limit_s for the child; one that is still running then is
 * killed (a hang is a failure, not a stuck test). Returns the exit status,
 * or -1 when it ended by a signal (or was killed here); *took = seconds. */
static int wait_exit(pid_t pid, double limit_s, double *took)
{
    double t0 = kr_now();
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (kr_now() - t0 > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        sleep_s(0.02);
    }
    *took = kr_now() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *read_log(const char *path)
{
    static char text[1 << 16];
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return text;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Poses in a trajectory file as kinreg's own reader sees them; -1 when it
 * rejects the file (a cut-off line, say). */
static long poses_in(const char *path)
{
    kr_trajectory t = {0};
    if (kr_trajectory_read_tum(path, &t) != KR_OK) return -1;
    long n = (long)t.count;
    kr_trajectory_free(&t);
    return n;
}

/* ---- a subscriber: every pose, and the status events in order -------------- */

typedef struct {
    char endpoint[512];
    pthread_t thread;
    int poses;
    int events[64], event_count;
    kr_test_run run;
} listener;

static void *listen_main(void *arg)
{
    listener *l = arg;
    kr_subscriber *sub = NULL;
    if (kr_subscriber_create(&sub, l->endpoint, 0) != KR_OK) return NULL;
    kr_message m;
    while (kr_test_receive_during(sub, &l->run, 20000, &m) == KR_OK) {
        if (m.topic == KR_TOPIC_POSE) l->poses++;
        if (m.topic != KR_TOPIC_STATUS || m.status.event == KR_EVENT_PROGRESS) continue;
        if (l->event_count < 64) l->events[l->event_count++] = m.status.event;
        if (m.status.event == KR_EVENT_STOPPED || m.status.event == KR_EVENT_ERROR) break;
    }
    kr_subscriber_destroy(&sub);
    return NULL;
}

static void listen_start(listener *l, const char *name)
{
    memset(l, 0, sizeof *l);
    snprintf(l->endpoint, sizeof l->endpoint, "ipc://%s/%s.ipc", kr_test_tmpdir(), name);
    kr_test_run_init(&l->run);
    pthread_create(&l->thread, NULL, listen_main, l);
}

/* After the kinreg process has ended. */
static void listen_join(listener *l)
{
    kr_test_run_returned(&l->run);
    pthread_join(l->thread, NULL);
}

static int last_event(const listener *l)
{
    return l->event_count ? l->events[l->event_count - 1] : -1;
}

static bool saw_event(const listener *l, int event)
{
    for (int i = 0; i < l->event_count; i++)
        if (l->events[i] == event) return true;
    return false;
}

/* ---- write errors ----------------------------------------------------------- */

/* /dev/full: every write fails with ENOSPC. The run says so with the path and
 * the cause, never claims the trajectory was written, exits 4, and every pose
 * still goes out on the socket, followed by an `error` status. */
KR_TEST(lifecycle, full_disk_is_reported_and_poses_still_published)
{
    char log[512];
    tmp_path(log, sizeof log, "full.log");
    listener l;
    listen_start(&l, "full");
    char *argv[] = {"kinreg", "run", "-q",        "-b", "cpu",      "-n",
                    "6",      "-t",  "/dev/full", "-p", l.endpoint, "--wait-subscriber",
                    "10",     NULL};
    double took;
    int rc = wait_exit(spawn(argv, log, NULL), 60, &took);
    listen_join(&l);
    const char *out = read_log(log);
    CHECK_EQ(rc, 4);
    CHECK_CONTAINS(out, "cannot write the trajectory to /dev/full: No space left on device");
    CHECK_MSG(!strstr(out, "trajectory written"), "claims the trajectory was written: %s", out);
    CHECK_EQ(l.poses, 6);
    CHECK_EQ(last_event(&l), KR_EVENT_ERROR);
}

/* A file-size limit (ulimit -f): the write fails with EFBIG part-way. The file
 * keeps whole lines only, so kinreg's reader (and `kinreg eval`) still read
 * every pose written before the failure; the run says how many of how many. */
KR_TEST(lifecycle, file_size_limit_keeps_whole_lines_and_exits_4)
{
    char log[512], traj[512];
    tmp_path(log, sizeof log, "fsize.log");
    tmp_path(traj, sizeof traj, "fsize_traj.txt");
    char *argv[] = {"kinreg", "run", "-q", "-b", "cpu", "-n", "40", "-t", traj, NULL};
    child_setup setup = {.file_size_limit = 1500}; /* the header and about 14 poses */
    double took;
    int rc = wait_exit(spawn(argv, log, &setup), 120, &took);
    const char *out = read_log(log);
    CHECK_EQ(rc, 4);
    char want[700];
    snprintf(want, sizeof want, "cannot write the trajectory to %s: File too large", traj);
    CHECK_CONTAINS(out, want);
    CHECK_MSG(!strstr(out, "trajectory written"), "claims the trajectory was written: %s", out);
    long n = poses_in(traj);
    CHECK_GT(n, 0);
    CHECK_LT(n, 40);
    struct stat st;
    REQUIRE(stat(traj, &st) == 0);
    CHECK_LE(st.st_size, 1500);
    snprintf(want, sizeof want, "is incomplete: %ld of 40 poses", n);
    CHECK_CONTAINS(out, want);
}

/* ---- signals ------------------------------------------------------------------ */

/* A TUM sequence of 6 synthetic frames whose last 3 come `gap` seconds later. */
static bool tum_with_gap(const char *dir, double gap)
{
    char args[1024], out[4096], path[700];
    snprintf(args, sizeof args, "record -q -f tum -n 6 '%s' synthetic", dir);
    if (kr_test_run_tool(NULL, args, out, sizeof out) != 0) return false;
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    /* kinreg record names each frame by its timestamp at 30 fps */
    for (int i = 0; i < 6; i++)
        fprintf(f, "%.6f depth/%.6f.png\n", i / 30.0 + (i >= 3 ? gap : 0), i / 30.0);
    return fclose(f) == 0;
}

/* A paced replay (-r 1) inside a 60 s timestamp gap: Ctrl-C ends it at once,
 * with the poses before the gap written. */
KR_TEST(lifecycle, ctrl_c_in_a_paced_gap_ends_the_run_promptly)
{
    char dir[512], log[512], traj[512];
    tmp_path(dir, sizeof dir, "gap_seq");
    tmp_path(log, sizeof log, "gap.log");
    tmp_path(traj, sizeof traj, "gap_traj.txt");
    REQUIRE(tum_with_gap(dir, 60));
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    char *argv[] = {"kinreg", "run",          "-q",      "-b", "cpu", "-r", "1",
                    uri,      "--intrinsics", "default", "-t", traj,  NULL};
    pid_t pid = spawn(argv, log, NULL);
    REQUIRE(pid > 0);
    sleep_s(3); /* the 3 frames before the gap take well under a second */
    double t0 = kr_now();
    kill(pid, SIGINT);
    double took;
    int rc = wait_exit(pid, 30, &took);
    took = kr_now() - t0;
    CHECK_EQ(rc, 0);
    CHECK_LT(took, 3.0);
    CHECK_EQ(poses_in(traj), 3);
    CHECK_CONTAINS(read_log(log), "trajectory written");
}

/* A frame file that is a named pipe nobody writes: the run does not hang on
 * it (opening a FIFO waits for a writer) but stops with an error naming it,
 * the poses before it written. */
KR_TEST(lifecycle, named_pipe_frame_is_refused_not_waited_for)
{
    char dir[512], log[512], traj[512], fifo[700];
    tmp_path(dir, sizeof dir, "fifo_seq");
    tmp_path(log, sizeof log, "fifo.log");
    tmp_path(traj, sizeof traj, "fifo_traj.txt");
    REQUIRE(tum_with_gap(dir, 0));
    snprintf(fifo, sizeof fifo, "%s/depth/%.6f.png", dir, 4 / 30.0);
    REQUIRE(unlink(fifo) == 0);
    REQUIRE(mkfifo(fifo, 0600) == 0);
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    char *argv[] = {"kinreg",       "run",     "-q", "-b", "cpu", uri,
                    "--intrinsics", "default", "-t", traj, NULL};
    pid_t pid = spawn(argv, log, NULL);
    REQUIRE(pid > 0);
    double took;
    int rc = wait_exit(pid, 20, &took);
    const char *out = read_log(log);
    CHECK_EQ(rc, 1);
    CHECK_LT(took, 15.0);
    CHECK_CONTAINS(out, fifo);
    CHECK_CONTAINS(out, "named pipe");
    CHECK_EQ(poses_in(traj), 4);

    /* depth.txt itself a FIFO: refused at start, no hang either. */
    char index[700];
    snprintf(index, sizeof index, "%s/depth.txt", dir);
    REQUIRE(unlink(index) == 0);
    REQUIRE(mkfifo(index, 0600) == 0);
    pid = spawn(argv, log, NULL);
    rc = wait_exit(pid, 20, &took);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(read_log(log), "named pipe");
}

/* Whether `pid` has SIGTERM blocked (/proc/PID/status SigBlk): kinreg run
 * blocks it first thing in main(), so from then on a signal is its to take. */
static bool blocks_sigterm(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long mask = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &mask) == 1) break;
    fclose(f);
    return mask & (1ULL << (SIGTERM - 1));
}

/* SIGTERM while a day-long synthetic sequence is still being set up (about
 * 3 s): handled like a later one (clean end, exit 0, trajectory file
 * written), not the default action that kills the process with no
 * trajectory. The delays count from main() (seen through SigBlk, at most 1 s
 * of waiting): before main() no program can take a signal, and on a loaded
 * machine loading the CUDA build's libraries takes a few tenths of a second. */
KR_TEST(lifecycle, signal_during_start_up_is_handled_like_a_later_one)
{
    char log[512], traj[512];
    tmp_path(log, sizeof log, "startup.log");
    tmp_path(traj, sizeof traj, "startup_traj.txt");
    char *argv[] = {"kinreg", "run", "-q", "-b", "cpu", "--duration", "86400", "-t", traj, NULL};
    const double delays[] = {0.3, 1.0};
    for (int i = 0; i < 2; i++) {
        unlink(traj);
        pid_t pid = spawn(argv, log, NULL);
        if (pid <= 0) { /* not REQUIRE: it also stops after an earlier failed check */
            CHECK(pid > 0);
            return;
        }
        double t0 = kr_now();
        while (!blocks_sigterm(pid) && kr_now() - t0 < 1.0)
            sleep_s(0.005);
        sleep_s(delays[i]);
        kill(pid, SIGTERM);
        double took;
        int rc = wait_exit(pid, 60, &took);
        CHECK_MSG(rc == 0, "SIGTERM %.2f s into start-up: exit %d (-1: killed by the signal)",
                  delays[i], rc);
        CHECK_GE(poses_in(traj), 0);
    }
}

/* Waiting for a subscriber (--wait-subscriber 120, nobody comes): Ctrl-C ends
 * the wait and the run at once, not after the two minutes. */
KR_TEST(lifecycle, ctrl_c_while_waiting_for_a_subscriber_ends_promptly)
{
    char log[512], traj[512], endpoint[600];
    tmp_path(log, sizeof log, "waitsub.log");
    tmp_path(traj, sizeof traj, "waitsub_traj.txt");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/waitsub.ipc", kr_test_tmpdir());
    char *argv[] = {"kinreg", "run", "-q", "-b", "cpu",    "-n",
                    "5",      "-t",  traj, "-p", endpoint, "--wait-subscriber",
                    "120",    NULL};
    pid_t pid = spawn(argv, log, NULL);
    REQUIRE(pid > 0);
    sleep_s(2);
    double t0 = kr_now();
    kill(pid, SIGINT);
    double took;
    int rc = wait_exit(pid, 150, &took);
    took = kr_now() - t0;
    CHECK_EQ(rc, 0);
    CHECK_LT(took, 3.0);
    CHECK_EQ(poses_in(traj), 0);
}

/* ---- fakenect: a stalled sensor and a vanished file ------------------------------ */

#ifdef FAKENECT_TESTS

/* A fakenect dump of `n` synthetic frames at 30 Hz; frames from `gap_at` on
 * come `gap` seconds later. */
static bool dump_with_gap(const char *dir, int n, int gap_at, double gap)
{
    kr_recorder_config rc;
    kr_recorder_config_default(&rc);
    kr_recorder *rec = NULL;
    if (kr_recorder_create(&rec, dir, &rc) != KR_OK) return false;
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.max_frames = n;
    kr_source *src = NULL;
    bool ok = kr_source_create(&src, &sc) == KR_OK;
    kr_frame f;
    for (int i = 0; ok && i < n; i++) {
        ok = kr_source_read(src, &f) == KR_OK;
        if (!ok) break;
        f.timestamp = 100.0 + i / 30.0 + (i >= gap_at ? gap : 0.0);
        ok = kr_recorder_write(rec, &f) == KR_OK;
        kr_frame_release(&f);
    }
    kr_source_destroy(&src);
    kr_recorder_destroy(&rec);
    return ok;
}

/* A sensor that goes quiet (a 30 s pause in the replay) with a 1 s stall
 * timeout: `stalled` is announced, the last message is `error`, exit 3, and
 * shutdown does not wait out the pause (libfreenect's fakenect sleeps
 * through it inside its event call). */
KR_TEST(lifecycle, stall_ends_with_error_without_waiting_out_the_gap)
{
    char dump[512], log[512], traj[512];
    tmp_path(dump, sizeof dump, "stall30_dump");
    tmp_path(log, sizeof log, "stall30.log");
    tmp_path(traj, sizeof traj, "stall30_traj.txt");
    REQUIRE(dump_with_gap(dump, 10, 8, 30.0));
    listener l;
    listen_start(&l, "stall30");
    char *argv[] = {"kinreg",
                    "run",
                    "-q",
                    "-b",
                    "cpu",
                    "kinect",
                    "--intrinsics",
                    "default",
                    "--stall-timeout",
                    "1",
                    "-t",
                    traj,
                    "-p",
                    l.endpoint,
                    "--wait-subscriber",
                    "10",
                    NULL};
    child_setup setup = {.fakenect_dump = dump};
    double took;
    int rc = wait_exit(spawn(argv, log, &setup), 60, &took);
    listen_join(&l);
    CHECK_EQ(rc, 3);
    CHECK_LT(took, 12.0); /* start-up, 8 frames, 1 s timeout: not the 30 s pause */
    CHECK(saw_event(&l, KR_EVENT_STALLED));
    CHECK_EQ(last_event(&l), KR_EVENT_ERROR);
    CHECK_GT(poses_in(traj), 0);
    CHECK_EQ(l.poses, poses_in(traj));
}

/* Ctrl-C while the replay pauses (no stall timeout reached): a prompt clean
 * end with `stopped` last, not a wait for fakenect's sleep to finish. */
KR_TEST(lifecycle, ctrl_c_during_a_sensor_pause_ends_promptly)
{
    char dump[512], log[512], traj[512];
    tmp_path(dump, sizeof dump, "pause_dump");
    tmp_path(log, sizeof log, "pause.log");
    tmp_path(traj, sizeof traj, "pause_traj.txt");
    REQUIRE(dump_with_gap(dump, 10, 8, 60.0));
    listener l;
    listen_start(&l, "pause");
    char *argv[] = {"kinreg",       "run",      "-q",
                    "-b",           "cpu",      "kinect",
                    "--intrinsics", "default",  "--stall-timeout",
                    "120",          "-t",       traj,
                    "-p",           l.endpoint, "--wait-subscriber",
                    "10",           NULL};
    child_setup setup = {.fakenect_dump = dump};
    pid_t pid = spawn(argv, log, &setup);
    REQUIRE(pid > 0);
    sleep_s(5); /* start-up and the 8 frames before the pause */
    double t0 = kr_now();
    kill(pid, SIGINT);
    double took;
    int rc = wait_exit(pid, 90, &took);
    took = kr_now() - t0;
    listen_join(&l);
    CHECK_EQ(rc, 0);
    CHECK_LT(took, 5.0);
    CHECK_EQ(last_event(&l), KR_EVENT_STOPPED);
    CHECK_GT(poses_in(traj), 0);
}

/* A dump file deleted mid-replay: libfreenect's fakenect would call exit(1)
 * (no summary, no final status, no model). kinreg reports it, keeps every
 * pose, saves the model and ends with `error`. */
KR_TEST(lifecycle, fakenect_file_deleted_mid_replay_is_an_error_not_an_exit)
{
    char dump[512], log[512], traj[512], model[512], victim[800];
    tmp_path(dump, sizeof dump, "vanish_dump");
    tmp_path(log, sizeof log, "vanish.log");
    tmp_path(traj, sizeof traj, "vanish_traj.txt");
    tmp_path(model, sizeof model, "vanish_model.ply");
    REQUIRE(dump_with_gap(dump, 20, 12, 3.0)); /* frames 12.. wait 3 s: time to delete one */
    /* The 16th INDEX.txt line's file. */
    char index[700], line[256];
    snprintf(index, sizeof index, "%s/INDEX.txt", dump);
    FILE *f = fopen(index, "r");
    REQUIRE(f != NULL);
    for (int i = 0; i < 16 && fgets(line, sizeof line, f); i++) {
    }
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    snprintf(victim, sizeof victim, "%s/%s", dump, line);
    listener l;
    listen_start(&l, "vanish");
    char *argv[] = {"kinreg",
                    "run",
                    "-q",
                    "-b",
                    "cpu",
                    "kinect",
                    "--intrinsics",
                    "default",
                    "--stall-timeout",
                    "30",
                    "-t",
                    traj,
                    "-m",
                    model,
                    "-p",
                    l.endpoint,
                    "--wait-subscriber",
                    "10",
                    NULL};
    child_setup setup = {.fakenect_dump = dump};
    pid_t pid = spawn(argv, log, &setup);
    REQUIRE(pid > 0);
    /* Wait for the first poses, then delete while the replay pauses. */
    double t0 = kr_now();
    while (poses_in(traj) < 1 && kr_now() - t0 < 20)
        sleep_s(0.02);
    CHECK(unlink(victim) == 0);
    double took;
    int rc = wait_exit(pid, 60, &took);
    listen_join(&l);
    const char *out = read_log(log);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(out, victim);
    CHECK_CONTAINS(out, "vanished");
    long n = poses_in(traj);
    CHECK_GE(n, 1);
    CHECK_LT(n, 16);
    CHECK_EQ(l.poses, n);
    CHECK_EQ(last_event(&l), KR_EVENT_ERROR);
    struct stat st;
    CHECK(stat(model, &st) == 0 && st.st_size > 0);
}

#endif /* FAKENECT_TESTS */
