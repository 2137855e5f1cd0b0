/* Ctrl-C and SIGTERM taken by one thread with sigwait() (stop_signals.h). */
#include "stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kr_pipeline *running; /* under lock */
static bool caught;          /* under lock */
static bool started;         /* under lock */

static void *wait_signals(void *arg)
{
    const sigset_t *set = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(set, &sig) != 0) continue;
        /* Not a signal handler: the lock keeps `running` alive while it is
         * stopped, and kr_stop_signals_attach sees a signal that came first. */
        pthread_mutex_lock(&lock);
        caught = true;
        if (running) kr_pipeline_stop(running);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void kr_stop_signals_block(void)
{
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

bool kr_stop_signals_start(void)
{
    static sigset_t set;
    pthread_mutex_lock(&lock);
    bool ok = started;
    if (!started) {
        signal(SIGXFSZ, SIG_IGN);
        /* A trajectory pipe whose reader went away is an output error, said
         * and counted like a full disk, not the end of the tracker. */
        signal(SIGPIPE, SIG_IGN);
        stop_set(&set);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        int rc = pthread_create(&thread, &attr, wait_signals, &set);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
            started = ok = true;
        } else {
            pthread_sigmask(SIG_UNBLOCK, &set,
                            NULL); /* main() blocked them too: default actions again */
            fprintf(stderr,
                    "kinreg: cannot start the signal thread (%s): Ctrl-C will end the program "
                    "without writing its outputs\n",
                    strerror(rc));
        }
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

void kr_stop_signals_attach(kr_pipeline *p)
{
    pthread_mutex_lock(&lock);
    running = p;
    if (p && caught) kr_pipeline_stop(p);
    pthread_mutex_unlock(&lock);
}

bool kr_stop_signals_caught(void)
{
    pthread_mutex_lock(&lock);
    bool c = caught;
    pthread_mutex_unlock(&lock);
    return c;
}
