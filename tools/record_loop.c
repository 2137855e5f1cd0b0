/* record/convert: source → recorder, with a status line and clean Ctrl-C.
 *
 * Signals: the handler only sets a flag and posts a semaphore (both
 * async-signal-safe). A watcher thread waiting on the semaphore calls
 * kr_source_interrupt(), which wakes a read blocked on a live sensor; file
 * sources never block, so the loop also checks the flag between frames. */
#include "record_loop.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"

static volatile sig_atomic_t stop_requested;
static sem_t wake;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
    sem_post(&wake);
}

typedef struct {
    kr_source *src;
    pthread_t thread;
    bool running;
} watcher;

static void *watch(void *arg)
{
    watcher *w = arg;
    while (sem_wait(&wake) != 0) {
        /* EINTR: a signal landed; its post follows */
    }
    if (stop_requested) kr_source_interrupt(w->src);
    return NULL;
}

static void signals_start(watcher *w, kr_source *src)
{
    stop_requested = 0;
    sem_init(&wake, 0, 0);
    w->src = src;
    w->running = pthread_create(&w->thread, NULL, watch, w) == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void signals_stop(watcher *w)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sem_post(&wake); /* lets the watcher finish when no signal came */
    if (w->running) pthread_join(w->thread, NULL);
    sem_destroy(&wake);
}

typedef struct {
    bool enabled;
    double start, last_print;
    unsigned total;
} progress;

static void progress_show(progress *p, const kr_recorder *rec, const kr_source *src)
{
    double now = kr_now();
    if (!p->enabled || now - p->last_print < 0.2) return;
    p->last_print = now;
    uint64_t n = kr_recorder_frames(rec);
    char total[32] = "";
    if (p->total) snprintf(total, sizeof total, "/%u", p->total);
    double dt = now - p->start;
    fprintf(stderr, "\r\033[K %llu%s frames written | %.1f fps | dropped %llu | skipped %u",
            (unsigned long long)n, total, dt > 0 ? (double)n / dt : 0.0,
            (unsigned long long)kr_source_dropped(src), kr_source_skipped(src));
    fflush(stderr);
}

/* The sidecars first, so that a recording cut short still has them. */
static kr_status write_sidecars(kr_recorder *rec, const kr_source *src)
{
    kr_intrinsics k = kr_source_intrinsics(src);
    kr_status st = kr_recorder_write_intrinsics(rec, &k);
    const kr_trajectory *gt = kr_source_groundtruth(src);
    if (st == KR_OK && gt) st = kr_recorder_write_groundtruth(rec, gt);
    return st;
}

/* Reads and writes until the end; returns the status that ended it (KR_OK
 * for the end of the source or a stop request). *write_failed tells a
 * recorder error from a source error. */
static kr_status copy_frames(kr_source *src, kr_recorder *rec, progress *p, bool *write_failed)
{
    *write_failed = false;
    for (;;) {
        if (stop_requested) return KR_OK;
        kr_frame f;
        kr_status st = kr_source_read(src, &f);
        if (st == KR_END || st == KR_ERR_INTERRUPTED) return KR_OK;
        if (st != KR_OK) return st;
        st = kr_recorder_write(rec, &f);
        kr_frame_release(&f);
        if (st != KR_OK) {
            *write_failed = true;
            return st;
        }
        progress_show(p, rec, src);
    }
}

int kr_record_source(kr_source *src, const kr_record_job *job)
{
    const char *format = kr_record_format_name(job->recorder.format);
    kr_recorder *rec = NULL;
    kr_status st = kr_recorder_create(&rec, job->dir, &job->recorder);
    bool sidecar_failed = false;
    if (st == KR_OK) sidecar_failed = (st = write_sidecars(rec, src)) != KR_OK;
    if (st != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", job->who, kr_strerror(st), kr_last_error());
        kr_recorder_destroy(&rec);
        /* A file that could not be written (full disk, file-size limit) is
         * status 4, as in every command; a refused directory stays 1. */
        return sidecar_failed && st == KR_ERR_IO ? KR_EXIT_OUTPUT : KR_EXIT_FAILURE;
    }
    fprintf(stderr, "%s: %s -> %s (%s)\n", job->who, kr_source_describe(src), job->dir, format);
    fprintf(stderr, "%s: %s\n", job->who, kr_source_settings(src));

    progress p = {!job->quiet && isatty(STDERR_FILENO), kr_now(), 0, kr_source_length(src)};
    watcher w;
    bool write_failed;
    signals_start(&w, src);
    st = copy_frames(src, rec, &p, &write_failed);
    bool stopped = stop_requested;
    signals_stop(&w);

    if (p.enabled) fprintf(stderr, "\r\033[K");
    if (st != KR_OK)
        fprintf(stderr, "%s: %s%s: %s\n", job->who, write_failed ? "cannot write: " : "",
                kr_strerror(st), kr_last_error());
    if (stopped)
        fprintf(stderr, "%s: stopped by a signal; every frame read was written\n", job->who);
    if (kr_source_skipped(src))
        fprintf(stderr, "%s: %u corrupt input frames skipped\n", job->who, kr_source_skipped(src));
    if (kr_source_dropped(src))
        fprintf(stderr, "%s: %llu frames dropped by the sensor queue (writing fell behind)\n",
                job->who, (unsigned long long)kr_source_dropped(src));
    fprintf(stderr, "%s: %llu frames written to %s (%s)\n", job->who,
            (unsigned long long)kr_recorder_frames(rec), job->dir, format);
    kr_recorder_destroy(&rec);
    if (write_failed) return st == KR_ERR_IO ? KR_EXIT_OUTPUT : KR_EXIT_FAILURE;
    return kr_exit_code(st);
}
