/* Live Kinect v1 through libfreenect (DESIGN.md §2): libfreenect's event loop
 * runs on its own thread and delivers each depth frame to a callback, which
 * copies it into a bounded queue that drops the oldest frame when the reader
 * is behind (and counts it). kr_source_read takes frames from that queue; a
 * sensor that goes quiet for stall_timeout_s is KR_ERR_STALLED.
 *
 * Timestamps: the Kinect stamps each frame with a 32-bit 60 MHz counter.
 * kinreg unwraps it and anchors it to the host's wall clock at the first
 * frame, so inter-frame times are the sensor's (free of USB jitter) and
 * trajectories carry Unix time like the TUM RGB-D files. */
#include "capture/fakenect_format.h"
#include "capture/fakenect_guard.h"
#include "capture/freenect_context.h"
#include "capture/source_impl.h"

#include <ctype.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kinreg/queue.h"

/* The sensor gets this much longer than the stall timeout for its first frame:
 * the Kinect's projector takes about a second to come up. */
#define KINECT_STARTUP_GRACE_S 3.0

typedef struct {
    freenect_context *ctx;
    freenect_device *dev;
    kr_queue *queue;
    kr_depth_encoding encoding;
    float depth_scale;
    int width, height;
    bool fakenect;
    double stall_timeout_s;

    pthread_t events;
    bool events_running;
    atomic_bool stop;        /* event thread: leave the loop */
    atomic_bool interrupted; /* reads return KR_END */
    atomic_int events_result;   /* 0 running or ended cleanly, else libusb's error code */
    atomic_bool events_done;    /* the event thread has left its loop */
    /* fakenect: the file each call will open is checked first; a vanished
     * one ends the replay with guard_error (written before the queue closes). */
    kr_fakenect_guard guard;
    bool guard_failed;
    char guard_error[1024];
    atomic_ullong failed_copies; /* frames lost to an allocation failure */

    /* Callback-thread state for timestamps. */
    bool have_ticks;
    uint32_t last_ticks;
    uint64_t ticks;
    double epoch;

    bool first_read_done;
    char name[96]; /* for messages: "Kinect 0" or "fakenect replay of DIR" */
} kinect_source;

static double wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_depth(freenect_device *dev, void *depth, uint32_t ticks)
{
    kinect_source *k = freenect_get_user(dev);
    if (!k->have_ticks) {
        k->have_ticks = true;
        k->epoch = wall_clock();
    } else {
        k->ticks += (uint32_t)(ticks - k->last_ticks); /* unsigned difference unwraps */
    }
    k->last_ticks = ticks;

    size_t n = (size_t)k->width * (size_t)k->height;
    kr_frame f = {0};
    f.raw = malloc(n * sizeof *f.raw);
    if (!f.raw) {
        atomic_fetch_add(&k->failed_copies, 1);
        return;
    }
    memcpy(f.raw, depth, n * sizeof *f.raw);
    f.width = k->width;
    f.height = k->height;
    f.encoding = k->encoding;
    f.depth_scale = k->depth_scale;
    f.timestamp = k->epoch + (double)k->ticks / KR_KINECT_TICKS_PER_S;
    f.capture_time = kr_now();
    if (kr_queue_push(k->queue, &f) != KR_OK) kr_frame_release(&f); /* closed: shutting down */
}

/* libfreenect's event loop. The real library returns after each USB event or
 * the timeout; fakenect sleeps to the recording's pace and returns < 0 at the
 * end of the dump. */
static void *event_loop(void *arg)
{
    kinect_source *k = arg;
    if (k->fakenect) { /* the wake-up signal (stop_event_thread) must reach this thread */
        sigset_t urg;
        sigemptyset(&urg);
        sigaddset(&urg, SIGURG);
        pthread_sigmask(SIG_UNBLOCK, &urg, NULL);
    }
    while (!atomic_load(&k->stop)) {
        if (k->fakenect && kr_fakenect_guard_check(&k->guard) != KR_OK) {
            snprintf(k->guard_error, sizeof k->guard_error, "%s", kr_last_error());
            k->guard_failed = true; /* published to readers by the queue's close */
            break;
        }
        struct timeval tv = {0, 100 * 1000};
        int r = freenect_process_events_timeout(k->ctx, &tv);
        if (k->fakenect && r >= 0) kr_fakenect_guard_advance(&k->guard);
        if (r >= 0) continue;
        if (k->fakenect) break;     /* end of the recording */
        if (r == -10) continue;     /* LIBUSB_ERROR_INTERRUPTED: a signal arrived */
        atomic_store(&k->events_result, r);
        break;
    }
    atomic_store(&k->events_done, true);
    kr_queue_close(k->queue); /* reads drain what arrived, then see the end */
    return NULL;
}

/* fakenect sleeps inside freenect_process_events() to keep the recording's
 * pace (sleep(), then usleep()), through any gap in the timestamps: minutes,
 * if the recording paused. A signal with a handler cuts such a sleep short, so
 * at shutdown the event thread is sent SIGURG (a no-op handler here, installed
 * only where SIGURG had its default action, which ignores it) until it
 * leaves, instead of waiting out the gap. */
static void wake_noop(int sig)
{
    (void)sig;
}

static bool wake_signal_ready(void)
{
    static atomic_int ready; /* 0 unknown, 1 ours, -1 someone else's handler */
    int r = atomic_load(&ready);
    if (r) return r > 0;
    struct sigaction old, sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wake_noop; /* no SA_RESTART: sleeps return early */
    sigemptyset(&sa.sa_mask);
    bool ours = sigaction(SIGURG, NULL, &old) == 0 &&
                (old.sa_handler == SIG_DFL || old.sa_handler == wake_noop) &&
                !(old.sa_flags & SA_SIGINFO) && sigaction(SIGURG, &sa, NULL) == 0;
    atomic_store(&ready, ours ? 1 : -1);
    return ours;
}

static void stop_event_thread(kinect_source *k)
{
    atomic_store(&k->stop, true);
    if (k->fakenect && wake_signal_ready()) {
        while (!atomic_load(&k->events_done)) {
            pthread_kill(k->events, SIGURG);
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_join(k->events, NULL);
}

static kr_status kinect_read(kr_source *src, kr_frame *frame)
{
    kinect_source *k = src->impl;
    double wait = k->stall_timeout_s + (k->first_read_done ? 0 : KINECT_STARTUP_GRACE_S);
    double deadline = kr_now() + wait;
    for (;;) {
        if (atomic_load(&k->interrupted)) return KR_END;
        double left = deadline - kr_now();
        if (left <= 0) break;
        int slice = left > 0.1 ? 100 : (int)(left * 1000) + 1;
        kr_status st = kr_queue_pop(k->queue, frame, slice);
        if (st == KR_OK) {
            k->first_read_done = true;
            return KR_OK;
        }
        if (st == KR_END) {
            if (k->guard_failed && !atomic_load(&k->interrupted))
                return kr_error(KR_ERR_IO, "%s", k->guard_error);
            int r = atomic_load(&k->events_result);
            if (r != 0 && !atomic_load(&k->interrupted))
                return kr_error(KR_ERR_STALLED,
                                "%s stopped: libfreenect's event loop failed (libusb error %d); "
                                "the sensor was probably unplugged or lost power",
                                k->name, r);
            return KR_END;
        }
    }
    return kr_error(KR_ERR_STALLED,
                    "%s delivered no depth frame for %.1f s: %s; on a slow machine raise "
                    "--stall-timeout",
                    k->name, wait,
                    k->fakenect ? "the recording pauses longer than that"
                                : "check the USB cable and the Kinect's power adapter");
}

static void kinect_interrupt(kr_source *src)
{
    kinect_source *k = src->impl;
    atomic_store(&k->interrupted, true);
    kr_queue_close(k->queue);
}

static uint64_t kinect_dropped(const kr_source *src)
{
    const kinect_source *k = src->impl;
    return kr_queue_dropped(k->queue) + atomic_load(&k->failed_copies);
}

static void kinect_free(kinect_source *k)
{
    if (!k) return;
    if (k->events_running) stop_event_thread(k);
    if (k->dev) {
        freenect_stop_depth(k->dev);
        freenect_close_device(k->dev);
    }
    if (k->ctx) freenect_shutdown(k->ctx);
    kr_fakenect_guard_free(&k->guard);
    kr_queue_destroy(&k->queue);
    free(k);
}

static void kinect_close(kr_source *src)
{
    kinect_free(src->impl);
    src->impl = NULL;
}

static const kr_source_ops kinect_ops = {.name = "kinect",
                                         .read = kinect_read,
                                         .close = kinect_close,
                                         .interrupt = kinect_interrupt,
                                         .dropped = kinect_dropped};

static bool all_digits(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

static kr_status open_device(kinect_source *k, const char *device)
{
    int count = freenect_num_devices(k->ctx);
    if (count <= 0) return kr_error(KR_ERR_NO_SENSOR, "no Kinect found: %s", KR_KINECT_HINT);
    if (!device || !*device) device = "0";
    if (all_digits(device)) {
        long index = strtol(device, NULL, 10);
        if (index >= count)
            return kr_error(KR_ERR_NO_SENSOR,
                            "there is no Kinect %ld: %d attached (0..%d); `kinreg devices` lists them",
                            index, count, count - 1);
        snprintf(k->name, sizeof k->name, "Kinect %ld", index);
        if (freenect_open_device(k->ctx, &k->dev, (int)index) < 0) k->dev = NULL;
    } else {
        snprintf(k->name, sizeof k->name, "Kinect %.60s", device);
        if (freenect_open_device_by_camera_serial(k->ctx, &k->dev, device) < 0) {
            k->dev = NULL;
            return kr_error(KR_ERR_NO_SENSOR,
                            "no Kinect with camera serial %s: `kinreg devices` lists the attached ones",
                            device);
        }
    }
    if (!k->dev)
        return kr_error(KR_ERR_NO_SENSOR,
                        "%s is attached but cannot be opened: another program may be using it, or "
                        "permissions are missing; %s",
                        k->name, KR_KINECT_HINT);
    return KR_OK;
}

static kr_status start_depth(kinect_source *k, kr_kinect_depth_mode mode)
{
    static const freenect_depth_format formats[] = {FREENECT_DEPTH_11BIT, FREENECT_DEPTH_MM,
                                                    FREENECT_DEPTH_REGISTERED};
    if ((unsigned)mode > KR_KINECT_DEPTH_REGISTERED)
        return kr_error(KR_ERR_INVALID_ARG, "unknown Kinect depth mode %d", (int)mode);
    /* fakenect of libfreenect 0.5 asserts (aborts) on anything but raw 11-bit. */
    if (k->fakenect && mode != KR_KINECT_DEPTH_11BIT)
        return kr_error(KR_ERR_UNSUPPORTED,
                        "fakenect replays raw 11-bit depth only: use depth mode 11bit (kinreg "
                        "converts disparity to metres itself)");
    freenect_frame_mode m = freenect_find_depth_mode(FREENECT_RESOLUTION_MEDIUM, formats[mode]);
    if (!m.is_valid || freenect_set_depth_mode(k->dev, m) < 0)
        return kr_error(KR_ERR_UNSUPPORTED, "%s does not offer %s depth at 640x480", k->name,
                        kr_kinect_depth_mode_name(mode));
    k->width = m.width;
    k->height = m.height;
    k->encoding = mode == KR_KINECT_DEPTH_11BIT ? KR_DEPTH_DISPARITY11 : KR_DEPTH_SCALED;
    k->depth_scale = mode == KR_KINECT_DEPTH_11BIT ? 1.0f : 1000.0f;
    freenect_set_user(k->dev, k);
    freenect_set_depth_callback(k->dev, on_depth);
    if (freenect_start_depth(k->dev) < 0)
        return kr_error(KR_ERR_NO_SENSOR, "%s refused to start its depth stream: replug it; %s",
                        k->name, KR_KINECT_HINT);
    if (pthread_create(&k->events, NULL, event_loop, k) != 0)
        return kr_error(KR_ERR_NOMEM, "cannot start libfreenect's event thread");
    k->events_running = true;
    return KR_OK;
}

kr_status kr_kinect_open(kr_source *src, const char *device, const kr_source_config *cfg,
                         const kr_intrinsics *want)
{
    if (!(cfg->stall_timeout_s > 0))
        return kr_error(KR_ERR_INVALID_ARG, "stall timeout %g s is invalid: give seconds > 0",
                        cfg->stall_timeout_s);
    kinect_source *k = calloc(1, sizeof *k);
    if (!k) return kr_error(KR_ERR_NOMEM, "out of memory opening the Kinect");
    k->stall_timeout_s = cfg->stall_timeout_s;
    atomic_init(&k->stop, false);
    atomic_init(&k->interrupted, false);
    atomic_init(&k->events_result, 0);
    atomic_init(&k->events_done, false);
    atomic_init(&k->failed_copies, 0);
    k->fakenect = kr_freenect_is_fakenect();

    kr_queue_config qc;
    kr_queue_config_default(&qc);
    qc.capacity = cfg->live_queue > 0 ? cfg->live_queue : 4;
    qc.policy = KR_QUEUE_DROP_OLDEST;
    unsigned replay_frames = 0;
    char replay_path[512] = "";
    kr_status st = kr_queue_create(&k->queue, &qc);
    if (st == KR_OK) st = kr_freenect_context_open(&k->ctx, replay_path, sizeof replay_path, &replay_frames);
    if (st == KR_OK) st = open_device(k, device);
    if (st == KR_OK && k->fakenect) snprintf(k->name, sizeof k->name, "fakenect replay of %.70s", replay_path);
    if (st == KR_OK && k->fakenect)
        st = kr_fakenect_guard_open(&k->guard, replay_path, getenv("FAKENECT_LOOP"));
    if (st == KR_OK) st = start_depth(k, cfg->depth_mode);
    if (st != KR_OK) {
        kinect_free(k);
        return st;
    }

    if (want)
        src->intrinsics = *want;
    else { /* raw and millimetre depth come from the IR camera; registered from the colour one */
        bool registered = cfg->depth_mode == KR_KINECT_DEPTH_REGISTERED;
        kr_intrinsics_preset(registered ? "default" : "kinect", &src->intrinsics);
        snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin, "preset %s, the sensor default for %s depth",
                 registered ? "default" : "kinect", kr_kinect_depth_mode_name(cfg->depth_mode));
    }
    snprintf(src->depth_origin, sizeof src->depth_origin, "%s",
             cfg->depth_mode == KR_KINECT_DEPTH_11BIT ? "raw 11-bit Kinect v1 disparity" : "millimetres");
    src->intrinsics.width = k->width;
    src->intrinsics.height = k->height;
    src->ops = &kinect_ops;
    src->impl = k;
    src->live = true;
    src->length = replay_frames; /* known only for a replay */
    snprintf(src->description, sizeof src->description, "kinect:%s (%s, %s depth)",
             device && *device ? device : "0", k->name, kr_kinect_depth_mode_name(cfg->depth_mode));
    return KR_OK;
}
